import ContractRuntime
import Foundation
package import SyncProtocol

/// `POST /sync/v1/subscriptions/pull`: a page of each subscription a device holds, after its
/// own cursor.
///
/// A subscription (``SubscriptionDescriptor``) selects the rows of its root entity that meet its
/// filter, and the rows its includes reach from them, all in one scope key the token may read.
/// The server keeps nothing per subscription: each pull works out the subscription's rows from
/// the derived indexes (their keys and `_seq` only, at most
/// ``IdentityStateLimits/rowsPerSubscription``), so its cost does not depend on how many
/// subscriptions other devices hold. A subscription none of whose tables changed since its
/// cursor is answered from the scope's head alone (see `unchangedPage(of:heads:)`).
///
/// Cursors count in the scope's sequence. A row's place in that order is its *entry sequence*:
/// its own `_seq`, or the entry sequence of the row it was reached through when that is later,
/// so a row taken along by a parent that just entered the subscription comes with it however
/// old the row itself is. Rows that stopped matching since the cursor (their filter field or
/// foreign key changed, which ``RowMoves`` records) come as `leaves`, with the rows they took
/// along; deletes come as deletes. A page never ends inside a run of rows with one entry
/// sequence, so none is skipped.
package struct SubscriptionService: Sendable {
    let storage: any SyncStorage
    let pages: PullService
    let subscriptionsPerDevice: Int
    let rowsPerSubscription: Int

    package init(storage: any ServerStorage, pages: PullService, limits: IdentityStateLimits = IdentityStateLimits()) {
        self.storage = storage.engine
        self.pages = pages
        subscriptionsPerDevice = max(1, limits.subscriptionsPerDevice)
        rowsPerSubscription = max(1, limits.rowsPerSubscription)
    }

    /// One page of each subscription in `request`, in its order. A subscription that cannot be
    /// answered has an `error` in its entry instead of rows; the others are answered all the same.
    ///
    /// - Throws: ``ServiceError``: 400 `too_many_subscriptions` past the per-device limit, 400
    ///   for a malformed entry id or a repeated one, a limit below 1; 403 `client_not_owned`;
    ///   426 when `schema` names a version below a contract's oldest supported one.
    package func pull(
        _ request: SubscriptionPullRequest, schema: [String: Int], clientID: String?, identity: DeviceIdentity
    ) async throws(ServiceError) -> SubscriptionPullResponse {
        guard request.subscriptions.count <= subscriptionsPerDevice else {
            throw ServiceError(
                status: 400, .tooManySubscriptions,
                "a device pulls at most \(subscriptionsPerDevice) subscriptions at once; this request names \(request.subscriptions.count)",
                details: .object(["limit": .int(Int64(subscriptionsPerDevice))]))
        }
        try RowShaping.requireSupported(schema, contracts: storage.contracts)
        var ids: Set<String> = []
        for entry in request.subscriptions {
            try Identifier.require(entry.id, as: "subscription id")
            guard ids.insert(entry.id).inserted else { throw .malformed("the subscription id '\(entry.id)' is named twice") }
        }
        let pageSize = try pages.pageSize(request.limit)
        if let clientID { try Identifier.require(clientID, as: ProtocolHeaders.clientID) }
        var answered: [SubscriptionPullResponse.Page] = []
        // The whole answer weighs about one pull page: once the pages so far fill it, the
        // subscriptions left keep their cursor and say they have more.
        var bytesLeft = pages.pageBytes
        var prepared: [Result<Prepared, ServiceError>] = []
        for entry in request.subscriptions {
            do throws(ServiceError) {
                prepared.append(.success(try prepare(entry, identity: identity)))
            } catch {
                prepared.append(.failure(error))
            }
        }
        let (lastSeq, heads) = try await start(of: prepared.compactMap { try? $0.get() }, clientID: clientID, identity: identity)
        for (entry, preparation) in zip(request.subscriptions, prepared) {
            guard bytesLeft > 0 else {
                answered.append(.init(id: entry.id, cursor: entry.cursor, hasMore: true))
                continue
            }
            do throws(ServiceError) {
                let subscription = try preparation.get()
                if let page = try unchangedPage(of: subscription, heads: heads) {
                    answered.append(page)
                    continue
                }
                let (page, bytes) = try await page(of: subscription, pageSize: pageSize, pageBytes: bytesLeft, schema: schema, identity: identity)
                answered.append(page)
                bytesLeft -= bytes
            } catch {
                // A storage failure fails the request; a refusal of one subscription is its own.
                guard error.status < 500 else { throw error }
                answered.append(.init(id: entry.id, cursor: nil, hasMore: false, error: error.detail))
            }
        }
        return SubscriptionPullResponse(subscriptions: answered, lastSeq: lastSeq)
    }

    /// A request's entry, checked and planned: what its pull reads, before any of it is read.
    struct Prepared: Sendable {
        let entry: SubscriptionPullRequest.Entry
        let subscription: SubscriptionDescriptor
        let plan: SubscriptionPlan
        let scopeKey: String
        /// The entry's cursor; `nil` on its first pull.
        let position: SyncCursor?
    }

    /// Plans `entry` for `identity`, without reading storage.
    private func prepare(_ entry: SubscriptionPullRequest.Entry, identity: DeviceIdentity) throws(ServiceError) -> Prepared {
        let contracts = storage.contracts
        guard let subscription = contracts.subscription(named: entry.name) else {
            let known = contracts.subscriptions.map(\.name).sorted().joined(separator: ", ")
            throw ServiceError(status: 400, .unknownSubscription, "the contracts declare no subscription '\(entry.name)'; they declare \(known)")
        }
        let plan = try SubscriptionPlan(subscription, parameters: entry.parameters, identity: identity, contracts: contracts)
        let scopeKey: String
        if let named = entry.scope {
            try Identifier.require(named, as: "scope")
            let (scope, key) = try PullService.resolve(named, identity: identity, contracts: contracts)
            guard scope.name == plan.scope.name else {
                throw .malformed("the subscription '\(subscription.name)' reads the scope '\(plan.scope.name)', not '\(scope.name)'")
            }
            scopeKey = key
        } else {
            scopeKey = try PullService.resolve(plan.scope.name, identity: identity, contracts: contracts).1
        }
        guard ScopeAccess.canRead(scopeKey, in: plan.scope, identity: identity) else {
            throw .forbidden("this token does not grant the scope '\(scopeKey)'")
        }
        let position = try PullService.position(of: entry.cursor, scopeKey: scopeKey)
        return Prepared(entry: entry, subscription: subscription, plan: plan, scopeKey: scopeKey, position: position)
    }

    /// Where the scopes of a request's subscriptions stand, read once for all of them: each
    /// scope key's compacted sequence and head, and the last `_seq` of each table its
    /// subscriptions read. Only for entries with a cursor (a first pull always reads its rows).
    struct ScopeHead: Sendable {
        var compacted: Int64
        var head: Int64
        /// The highest `_seq` of the scope's rows (tombstones included) by table; absent: none.
        var lastSequence: [String: Int64] = [:]
    }

    /// What a request reads before its pages, in one read: the stream's last applied `seq` for
    /// its owner (0 without a client id or a stream), and the heads of its subscriptions' scopes.
    private func start(
        of subscriptions: [Prepared], clientID: String?, identity: DeviceIdentity
    ) async throws(ServiceError) -> (lastSeq: Int64, heads: [String: ScopeHead]) {
        var tables: [String: Set<String>] = [:]
        for subscription in subscriptions where subscription.position != nil {
            tables[subscription.scopeKey, default: []].formUnion(subscription.plan.levels.map(\.entity.table))
        }
        let wanted = tables
        let tenant = identity.tenant
        return try await ServiceError.catchingStorageFailures {
            try await storage.read { reader in
                var lastSeq: Int64 = 0
                if let clientID {
                    if let owner = try await reader.clientOwner(tenant: tenant, clientID: clientID), owner != identity.clientOwner {
                        throw ServiceError.clientNotOwned()
                    }
                    try await PushSession.refuseErasedStream(clientID, identity: identity, in: reader)
                    lastSeq = try await reader.lastSequence(tenant: tenant, clientID: clientID)
                }
                var heads: [String: ScopeHead] = [:]
                for (scopeKey, names) in wanted.sorted(by: { $0.key < $1.key }) {
                    let compacted = try await reader.compactedSequence(tenant: tenant, scopeKey: scopeKey)
                    // Read before the tables: every change at or below it is committed and seen below.
                    var head = ScopeHead(compacted: compacted, head: try await reader.scopeSequence(tenant: tenant, scopeKey: scopeKey))
                    for table in names.sorted() {
                        let sql =
                            "SELECT \"_seq\" AS \"s\" FROM \(SubscriptionPlan.quoted(table)) WHERE \"_tenant_id\" = ? AND \"_scope_key\" = ? "
                            + "ORDER BY \"_seq\" DESC LIMIT 1"
                        if let last = try await reader.serverTableQuery(sql, [.text(tenant), .text(scopeKey)]).first?.integer("s") {
                            head.lastSequence[table] = last
                        }
                    }
                    heads[scopeKey] = head
                }
                return (lastSeq, heads)
            }
        }
    }

    /// The page of a subscription none of whose tables changed since its cursor: no rows, no
    /// leaves (a row that leaves is written, so its table's last `_seq` moves), and the cursor
    /// moved to the scope's head. `nil` when it has no cursor or a table changed.
    ///
    /// Why: a poke makes each device subscribed in the scope pull all its subscriptions, and
    /// most of them are of rows the commit did not touch; this answers those from one read of
    /// the scope's head per request instead of working out their rows each time.
    ///
    /// - Throws: ``ServiceError`` 410 `cursor_expired` when the cursor is below the horizon.
    private func unchangedPage(of subscription: Prepared, heads: [String: ScopeHead]) throws(ServiceError) -> SubscriptionPullResponse.Page? {
        guard let position = subscription.position, let scope = heads[subscription.scopeKey] else { return nil }
        try PullService.checkHorizon(position, compacted: scope.compacted)
        let after = position.sequence
        for level in subscription.plan.levels where (scope.lastSequence[level.entity.table] ?? 0) > after { return nil }
        let cut = max(scope.head, after)
        let cursor = SyncCursor(scopeKey: subscription.scopeKey, sequence: cut, horizon: scope.compacted).encoded
        return .init(id: subscription.entry.id, cursor: cursor, hasMore: false)
    }

    /// One subscription's page.
    private func page(
        of prepared: Prepared, pageSize: Int, pageBytes: Int, schema: [String: Int], identity: DeviceIdentity
    ) async throws(ServiceError) -> (SubscriptionPullResponse.Page, bytes: Int) {
        let contracts = storage.contracts
        let (entry, subscription, plan) = (prepared.entry, prepared.subscription, prepared.plan)
        let (scopeKey, position) = (prepared.scopeKey, prepared.position)
        let after = position?.sequence ?? 0
        let (tenant, cap) = (identity.tenant, rowsPerSubscription)

        let read = try await ServiceError.catchingStorageFailures {
            try await storage.read { reader in
                let compacted = try await reader.compactedSequence(tenant: tenant, scopeKey: scopeKey)
                if let position { try PullService.checkHorizon(position, compacted: compacted) }
                // Read before the rows: every change at or below it is committed and seen below.
                let head = try await reader.scopeSequence(tenant: tenant, scopeKey: scopeKey)
                let members = try await plan.members(in: reader, tenant: tenant, scopeKey: scopeKey, cap: cap)
                if position == nil, members.roots == 0,
                    let refusal = try await plan.readElsewhere(in: reader, tenant: tenant, scopeKey: scopeKey, identity: identity)
                {
                    throw refusal
                }
                let window = SubscriptionWindow(members: members.all, after: after, pageSize: pageSize)
                let (rows, hasMore, last) = try await window.rows(in: reader, plan: plan, tenant: tenant, pageBytes: pageBytes)
                let cut = hasMore ? last : max(head, after)
                let leaves =
                    after == 0
                    ? [:]
                    : try await plan.leaves(
                        in: reader, members: members.all, tenant: tenant, scopeKey: scopeKey, after: after, through: cut, cap: cap)
                return (rows, hasMore, cut, compacted, leaves)
            }
        }
        let (rows, hasMore, cut, compacted, leaves) = read
        let pulled = PullService.PulledContracts(scope: plan.scope.name, only: Set(subscription.entities), contracts: contracts)
        let assembled = PullService.assemble(
            rows[...], contracts: pulled, schema: schema,
            into: PullPage(cursor: SyncCursor(scopeKey: scopeKey, sequence: cut, horizon: compacted).encoded, hasMore: hasMore, lastSeq: 0))
        let response: PullResponse
        let json = assembled.json()
        do {
            response = try PullResponse(json: Data(json))
        } catch {
            throw ServiceError(status: 500, .internalError, "the server wrote a subscription page it cannot read back: \(error)")
        }
        let page = SubscriptionPullResponse.Page(
            id: entry.id, cursor: response.cursor, hasMore: hasMore, upserts: response.upserts, deletes: response.deletes,
            leaves: leaves.mapValues { $0.sorted() })
        return (page, json.count)
    }
}

/// The rows of one subscription with their entry sequences, after a cursor, as a page takes them.
struct SubscriptionWindow {
    /// The members whose entry sequence is after the cursor, in entry order.
    let pending: [SubscriptionPlan.Member]
    let pageSize: Int

    init(members: [SubscriptionPlan.Member], after: Int64, pageSize: Int) {
        pending = members.filter { $0.entry > after }.sorted {
            ($0.entry, $0.level, $0.id) < ($1.entry, $1.level, $1.id)
        }
        self.pageSize = pageSize
    }

    /// The page's rows, whole, in entry order: up to `pageSize` rows or `pageBytes` bytes, then
    /// the rest of the run of rows with the last one's entry sequence; whether rows are left,
    /// and the entry sequence of the last row taken (where the next page starts).
    func rows(
        in reader: any StorageReader, plan: SubscriptionPlan, tenant: String, pageBytes: Int
    ) async throws -> (rows: [(table: ContractTable, row: StoredRow)], hasMore: Bool, last: Int64) {
        var taken: [SubscriptionPlan.Member] = []
        var bytes = 0
        var rows: [(table: ContractTable, row: StoredRow)] = []
        // The page's likely rows read ahead, a few statements per table, rather than one each.
        var ahead: [Int: [String]] = [:]
        for member in pending.prefix(pageSize) { ahead[member.level, default: []].append(member.id) }
        for (level, ids) in ahead.sorted(by: { $0.key < $1.key }) {
            try await reader.prefetchRows(in: plan.tables[level], tenant: tenant, ids: ids)
        }
        var index = 0
        while index < pending.count {
            let member = pending[index]
            if let last = taken.last, last.entry != member.entry, taken.count >= pageSize || bytes > pageBytes { break }
            let table = plan.tables[member.level]
            if let row = try await reader.row(in: table, tenant: tenant, id: member.id) {
                rows.append((table, row))
                bytes += row.storedBytes
            }
            taken.append(member)
            index += 1
        }
        return (rows, index < pending.count, taken.last?.entry ?? 0)
    }
}
