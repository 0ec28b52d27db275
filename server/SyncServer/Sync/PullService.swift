import ContractRuntime
import Foundation
package import SyncProtocol

/// `GET /sync/v1/pull`: one page of the changes in a scope after a cursor.
///
/// Every contract row carries its scope key and the scope's Lamport sequence number at its last
/// write (`_scope_key`, `_seq`). A page is the rows of the scope with `_seq` above the cursor, in
/// `_seq` order: each row once, in its latest state (a table holds one row per id), tombstones
/// as `deletes`. The cursor of the page is the `_seq` of its last row, so the next page starts
/// exactly after it and no row is skipped or repeated.
///
/// ```swift
/// let pull = PullService(storage: storage)
/// var page = try await pull.pull(scope: "user", cursor: nil, limit: 500, schema: ["Unit": 3], clientID: "c-1", identity: identity)
/// while page.hasMore { page = try await pull.pull(scope: "user", cursor: page.cursor, …) }
/// ```
package struct PullService: Sendable {
    let storage: any SyncStorage
    let defaultLimit: Int
    let maximumLimit: Int
    /// The bytes of rows a page holds at most (``StoredRow/storedBytes``), whatever its `limit`:
    /// a page ends with the first row that takes it past this, so it weighs at most this plus one
    /// row, and a row larger than this comes alone.
    let pageBytes: Int

    /// The default `pageBytes` of ``init(storage:defaultLimit:maximumLimit:pageBytes:)``: 4 MiB.
    package static let defaultPageBytes = 4 * 1024 * 1024

    package init(storage: any ServerStorage, defaultLimit: Int = 500, maximumLimit: Int = 1000, pageBytes: Int = defaultPageBytes) {
        self.storage = storage.engine
        self.maximumLimit = max(1, maximumLimit)
        self.defaultLimit = min(max(1, defaultLimit), self.maximumLimit)
        self.pageBytes = max(1, pageBytes)
    }

    /// What a scope delivers to devices: its entities that travel down (`down`, `both`) and its
    /// events that travel both ways. `up` contracts are never pulled.
    struct PulledContracts: Sendable {
        var entities: [String: EntityDescriptor] = [:]
        var events: [String: EventDescriptor] = [:]
        /// The primary-key field of each entity table, for the ids of deletes.
        var primaryKeys: [String: FieldDescriptor] = [:]
        var tables: [ContractTable] = []

        /// The contracts of `scope` devices pull, all of them or only those named in `only`.
        init(scope: String, only: Set<String>? = nil, contracts: ContractCatalog) {
            for entity in contracts.entities where entity.scope == scope && entity.direction != .up {
                if let only, !only.contains(entity.name) { continue }
                entities[entity.table] = entity
                primaryKeys[entity.table] = entity.field(named: entity.primaryKey) ?? FieldDescriptor(name: entity.primaryKey, kind: .id)
                tables.append(ContractTable(entity))
            }
            for event in contracts.events where event.scope == scope && event.direction != .up {
                if let only, !only.contains(event.name) { continue }
                events[event.table] = event
                tables.append(ContractTable(event))
            }
        }
    }

    /// One page of changes.
    ///
    /// - Parameters:
    ///   - scope: a scope name the token fills (`user`, `content`, or `team` when the token
    ///     grants exactly one team) or a full key (`ops:team:t-1`).
    ///   - cursor: the `cursor` of the previous page; `nil` to start from the beginning.
    ///   - limit: rows at most; `nil` for the default, clamped to the maximum.
    ///   - schema: the device's schema version per contract; rows are shaped for it.
    ///   - clientID: the device's push client id, for `last_seq`; `nil` answers 0.
    ///   - identity: the caller, whose token decides the scopes it may read and fills their keys.
    ///   - contracts: only these contracts' rows (a fresh device downloads its contracts by
    ///     priority, one tier at a time); `nil` for every contract the scope delivers. The
    ///     cursor still counts in the scope's sequence, so a filtered page's cursor may be used
    ///     without the filter only by a device that knows what it skipped.
    /// - Throws: ``ServiceError``: 400 for a malformed cursor, a cursor of another scope, a
    ///   limit below 1, a scope name that is ambiguous for the token, or a contract the scope
    ///   does not deliver; 403 when the token does not grant the scope; 404 for an unknown
    ///   scope; 410 `cursor_expired` for a cursor below the scope's compacted sequence
    ///   (``ServerHousekeeping``; pull again without a cursor); 426 when `schema` names a version below a contract's oldest supported one.
    ///   - changedFields: the device merges rows sent with only their changed fields (`fields=changed`):
    ///     an entity row it holds as of `cursor` comes as its primary key, `_base_version` (its
    ///     version at the cursor), the fields changed since and `_server_version`, whenever the
    ///     server can name them (``FieldSeqs``); any other row goes whole.
    package func pull(
        scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String?, identity: DeviceIdentity,
        contracts: [String]? = nil, changedFields: Bool = false
    ) async throws(ServiceError) -> PullResponse {
        let json = try await page(
            scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, identity: identity, contracts: contracts,
            changedFields: changedFields
        ).json()
        do {
            return try PullResponse(json: Data(json))
        } catch {
            throw ServiceError(status: 500, .internalError, "the server wrote a pull page it cannot read back: \(error)")
        }
    }

    /// The same page as ``pull(scope:cursor:limit:schema:clientID:identity:)``, its rows still as
    /// storage holds them, for the route to write (``PullPage/json()``): the bytes devices get
    /// and the value ``pull(scope:cursor:limit:schema:clientID:identity:)`` answers come from one
    /// writer.
    package func page(
        scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String?, identity: DeviceIdentity,
        contracts only: [String]? = nil, changedFields: Bool = false
    ) async throws(ServiceError) -> PullPage {
        try RowShaping.requireSupported(schema, contracts: storage.contracts)
        let (descriptor, key) = try Self.resolve(scope, identity: identity, contracts: storage.contracts)
        guard ScopeAccess.canRead(key, in: descriptor, identity: identity) else {
            throw .forbidden("this token does not grant the scope '\(key)'")
        }
        let position = try Self.position(of: cursor, scopeKey: key)
        let after = position?.sequence ?? 0
        let pageSize = try pageSize(limit)
        let contracts = PulledContracts(scope: descriptor.name, only: only.map(Set.init), contracts: storage.contracts)
        if let only {
            let delivered = Set(contracts.entities.values.map(\.name)).union(contracts.events.values.map(\.name))
            if let stranger = only.first(where: { !delivered.contains($0) }) {
                let all = PulledContracts(scope: descriptor.name, contracts: storage.contracts)
                let names = (all.entities.values.map(\.name) + all.events.values.map(\.name)).sorted().joined(separator: ", ")
                throw .malformed("the scope '\(descriptor.name)' delivers no contract '\(stranger)'; it delivers \(names)")
            }
            if only.isEmpty { throw .malformed("`contracts` names no contract; leave it out to pull them all") }
        }
        let tenant = identity.tenant

        let filtered = only != nil
        let pageBytes = pageBytes
        let (head, changes, lastSeq, compacted) = try await ServiceError.catchingStorageFailures {
            try await storage.read { reader in
                // In the same snapshot as the rows: a compaction either committed before it or is
                // not seen at all. It expires a cursor below it that was issued before it.
                let state = try await reader.pullState(tenant: tenant, scopeKey: key, clientID: clientID)
                if let position { try Self.checkHorizon(position, compacted: state.compactedSequence) }
                // Only the stream's owner learns its last seq; a stream no one pushed with yet is at 0.
                if let clientID {
                    if let owner = state.owner, owner != identity.clientOwner { throw ServiceError.clientNotOwned() }
                    try await PushSession.refuseErasedStream(clientID, identity: identity, in: reader)
                }
                // Read before the rows: every row at or below it is committed and read below.
                let head = filtered ? try await reader.scopeSequence(tenant: tenant, scopeKey: key) : nil
                let changes = try await reader.changes(
                    in: contracts.tables, tenant: tenant, scopeKey: key, after: after, limit: pageSize + 1, byteBudget: pageBytes,
                    pageColumnsOnly: true
                )
                return (head, changes, clientID == nil ? 0 : state.lastSequence, state.compactedSequence)
            }
        }

        // More after this page: a row past the limit, or rows the byte budget stopped short of
        // (a page that ends on the budget says so even when its last row was the scope's last:
        // the next page is then empty).
        let rows = changes.prefix(pageSize)
        let hasMore = changes.count > pageSize || rows.reduce(0, { $0 + $1.row.storedBytes }) > pageBytes
        var next = rows.last?.row.integer("_seq") ?? after
        // The last page of a filtered pull ends at the scope's head: the contracts asked for
        // hold nothing more up to it, so the device resumes them from there, not from their
        // last row (which may be long before the other contracts' changes).
        if let head, !hasMore { next = max(next, head) }
        // Only the changed fields of rows the device holds as of its cursor: never without a
        // cursor, nor past a compaction (the device may be missing rows it should hold).
        let changesAfter = changedFields && after > 0 && after >= compacted ? after : nil
        return Self.assemble(
            rows, contracts: contracts, schema: schema, changesAfter: changesAfter,
            into: PullPage(
                cursor: SyncCursor(scopeKey: key, sequence: next, horizon: compacted).encoded, hasMore: hasMore, lastSeq: lastSeq
            )
        )
    }

    /// The changes the operator marked urgent in a scope after the device's cursor (a withdrawn
    /// unit, a revoked licence's terms), each row in its latest state, for the device to store
    /// before it pulls any page. The page's cursor is the one the device sent, unchanged: the
    /// rows come again, in order, with the scope's pages. At most `maximumLimit` rows, and up to
    /// ``pageBytes`` as a page; urgent marks beyond either arrive with the pages as any change.
    ///
    /// - Throws: ``ServiceError`` as ``pull(scope:cursor:limit:schema:clientID:identity:contracts:)``;
    ///   400 without a cursor (a device without one pulls the whole scope anyway).
    package func urgentPage(
        scope: String, cursor: String?, schema: [String: Int], identity: DeviceIdentity
    ) async throws(ServiceError) -> PullPage {
        try RowShaping.requireSupported(schema, contracts: storage.contracts)
        let (descriptor, key) = try Self.resolve(scope, identity: identity, contracts: storage.contracts)
        guard ScopeAccess.canRead(key, in: descriptor, identity: identity) else {
            throw .forbidden("this token does not grant the scope '\(key)'")
        }
        guard let cursor, !cursor.isEmpty else {
            throw .malformed("urgent changes are asked for after a cursor; without one, pull the scope")
        }
        let after = try Self.sequence(of: cursor, scopeKey: key)
        let contracts = PulledContracts(scope: descriptor.name, contracts: storage.contracts)
        let tables = Dictionary(contracts.tables.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let tenant = identity.tenant
        let (limit, pageBytes) = (maximumLimit, pageBytes)
        let rows = try await ServiceError.catchingStorageFailures {
            try await storage.read { reader in
                var rows: [(table: ContractTable, row: StoredRow)] = []
                var bytes = 0
                for change in try await reader.urgentChanges(tenant: tenant, scopeKey: key, after: after, limit: limit) {
                    // Bounded like any page; the urgent rows past it come with the scope's pages.
                    guard bytes <= pageBytes else { break }
                    guard let table = tables[change.table],
                        let row = try await reader.row(in: table, tenant: tenant, id: change.rowID),
                        row["_scope_key"] == .text(key), (row.integer("_seq") ?? 0) > after
                    else { continue }
                    rows.append((table, row))
                    bytes += row.storedBytes
                }
                return rows
            }
        }
        return Self.assemble(rows[...], contracts: contracts, schema: schema, into: PullPage(cursor: cursor, hasMore: false, lastSeq: 0))
    }

    /// Fills a page with rows of the scope's contracts, each shaped for the device's schema
    /// version of its contract, tombstones as deletes. With `changesAfter` (the device's cursor,
    /// when it merges changed fields), an entity row whose changes since then the row's
    /// ``FieldSeqs`` name goes with only those, when the device runs the contract's current
    /// version (a row shaped for an older one goes whole).
    static func assemble(
        _ rows: ArraySlice<(table: ContractTable, row: StoredRow)>, contracts: PulledContracts, schema: [String: Int],
        changesAfter: Int64? = nil, into page: PullPage
    ) -> PullPage {
        var page = page
        var shapings: [String: PullPage.Shaping] = [:]
        var partial: Set<String> = []
        for (table, entity) in contracts.entities {
            let version = RowShaping.schemaVersion(of: entity.name, current: entity.currentVersion, in: schema)
            shapings[table] = .entity(RowShaping.Plan(entity, version: version))
            if changesAfter != nil, version == entity.currentVersion { partial.insert(table) }
        }
        for (table, event) in contracts.events {
            let version = RowShaping.schemaVersion(of: event.name, current: event.currentVersion, in: schema)
            shapings[table] = .event(event, version: version, plan: RowShaping.Plan(event, version: version))
        }
        for (table, row) in rows {
            guard let shaping = shapings[table.name] else { continue }
            if let entity = contracts.entities[table.name] {
                if row.integer("_deleted") == 1 {
                    if case .string(let id) = RowCodec.wireValue(row[entity.primaryKey], for: contracts.primaryKeys[table.name]!) {
                        page.deletes[entity.name, default: []].append(id)
                    }
                    continue
                }
                var changes: PullPage.Changes?
                if let after = changesAfter, partial.contains(table.name), let record = FieldSeqs(of: row),
                    let since = record.changes(after: after)
                {
                    changes = PullPage.Changes(baseVersion: since.baseVersion, fields: since.fields, primaryKey: entity.primaryKey)
                }
                page.upserts[entity.name, default: PullPage.Upserts(shaping: shaping)].append(row, changes: changes)
            } else if let event = contracts.events[table.name] {
                page.upserts[event.name, default: PullPage.Upserts(shaping: shaping)].rows.append(row)
            }
        }
        return page
    }

    /// The page size for a requested limit: the default when absent, at most the maximum.
    func pageSize(_ limit: Int?) throws(ServiceError) -> Int {
        guard let limit else { return defaultLimit }
        guard limit >= 1 else { throw .malformed("limit must be at least 1") }
        return min(limit, maximumLimit)
    }

    /// The scope and key a request names.
    static func resolve(
        _ requested: String, identity: DeviceIdentity, contracts: ContractCatalog
    ) throws(ServiceError) -> (ScopeDescriptor, String) {
        if let scope = contracts.scope(named: requested) {
            let keys = ScopeAccess.readableKeys(in: scope, identity: identity)
            if keys.isEmpty {
                throw .forbidden("this token grants no '\(requested)' scope; name a key such as \(scope.keyTemplate)")
            }
            if keys.count > 1 {
                throw .malformed("'\(requested)' names \(keys.count) scopes for this token; ask for one of \(keys.joined(separator: ", "))")
            }
        }
        guard let resolved = ScopeAccess.resolve(requested, identity: identity, contracts: contracts) else {
            let known = contracts.scopes.map { "\($0.name) (\($0.keyTemplate))" }.joined(separator: ", ")
            throw .notFound("unknown scope '\(requested)'; the scopes are \(known)")
        }
        return resolved
    }

    /// 410 `cursor_expired` for a cursor below the scope's compacted sequence when a compaction
    /// ran since it was issued: deletes after it may be gone. A cursor issued after the last
    /// compaction (a pull from scratch paging through old rows) is still good.
    package static func checkHorizon(_ position: SyncCursor, compacted: Int64) throws(ServiceError) {
        if position.sequence < compacted, position.horizon < compacted { throw .cursorExpired(scopeKey: position.scopeKey) }
    }

    /// The sequence a cursor stands for; 0 without one.
    static func sequence(of cursor: String?, scopeKey: String) throws(ServiceError) -> Int64 {
        try position(of: cursor, scopeKey: scopeKey)?.sequence ?? 0
    }

    /// The cursor a request sends; `nil` without one.
    package static func position(of cursor: String?, scopeKey: String) throws(ServiceError) -> SyncCursor? {
        guard let cursor, !cursor.isEmpty else { return nil }
        let decoded: SyncCursor
        do {
            decoded = try SyncCursor(encoded: cursor)
        } catch .unsupportedVersion(let version) {
            throw .malformed("the cursor has format version \(version), which this server does not read; pull again without a cursor")
        } catch {
            throw .malformed("the cursor is not one this server issued")
        }
        guard decoded.scopeKey == scopeKey else {
            throw .malformed("the cursor belongs to the scope '\(decoded.scopeKey)', not '\(scopeKey)'")
        }
        return decoded
    }
}
