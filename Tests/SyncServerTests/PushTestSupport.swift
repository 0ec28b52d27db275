import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SampleServerApps
import SyncProtocol
import Testing

@testable import SyncServer

/// A server clock that always reads the same time.
struct PushFixedClock: ServerClock {
    var time = Timestamp(millisecondsSince1970: 1_767_225_600_000)  // 2026-01-01T00:00:00Z
    func now() -> Timestamp { time }
}

/// A push service on a fresh storage of a kind (SQLite in a temporary folder, or a PostgreSQL
/// schema of its own).
struct PushHarness {
    let folder: URL
    let storage: any SyncStorage
    let service: PushService

    static let tenant = "t1"
    static let alice = DeviceIdentity(tenant: tenant, userID: "alice", deviceID: "alice-phone", teams: ["red"], expiresAt: .max)
    static let aliceTablet = DeviceIdentity(tenant: tenant, userID: "alice", deviceID: "alice-tablet", teams: ["red"], expiresAt: .max)
    static let bob = DeviceIdentity(tenant: tenant, userID: "bob", deviceID: "bob-phone", teams: ["red", "blue"], expiresAt: .max)
    static let admin = DeviceIdentity(tenant: tenant, userID: "admin", deviceID: "console", isAdmin: true, expiresAt: .max)

    init(_ kind: StorageKind) async throws {
        try await self.init(kind, contracts: ContractRegistry.self, reducers: SampleServerApps.reducers)
    }

    /// A push service on a fresh storage of `contracts` (the engine suites pass the engines' own,
    /// ``engine(_:)``), running `reducers`.
    init(_ kind: StorageKind, contracts: any ContractSchema.Type, reducers: [any Reducer]) async throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("push-\(UUID().uuidString)")
        storage = try await kind.makeStorage(in: folder, contracts: contracts)
        service = PushService(storage: storage, clock: PushFixedClock(), reducers: reducers)
    }

    func remove() { try? FileManager.default.removeItem(at: folder) }

    /// Pushes and returns the response, failing the test on a whole-request refusal.
    @discardableResult
    func push(
        _ mutations: [Mutation], as identity: DeviceIdentity = alice, client: String? = nil, schema: [String: Int] = [:]
    ) async throws -> PushResponse {
        try await service.push(PushRequest(clientId: client ?? identity.deviceID, schema: schema, mutations: mutations), identity: identity)
    }

    /// The whole-request refusal of a push.
    func refusal(
        _ mutations: [Mutation], as identity: DeviceIdentity = alice, client: String? = nil, schema: [String: Int] = [:]
    ) async -> ServiceError? {
        do {
            _ = try await service.push(PushRequest(clientId: client ?? identity.deviceID, schema: schema, mutations: mutations), identity: identity)
            return nil
        } catch {
            return error
        }
    }

    func row(_ entity: EntityDescriptor, _ id: String) async throws -> StoredRow? {
        try await storage.read { reader in try await reader.row(in: ContractTable(entity), tenant: Self.tenant, id: id) }
    }

    func eventRow(_ event: EventDescriptor, _ id: String) async throws -> StoredRow? {
        try await storage.read { reader in try await reader.row(in: ContractTable(event), tenant: Self.tenant, id: id) }
    }

    func value<Value: ContractEntity>(_ type: Value.Type, _ id: String) async throws -> Value? {
        guard let row = try await row(Value.descriptor, id) else { return nil }
        return try ReducerContext.decode(Value.self, row: row)
    }

    /// The audit log, details in clear (``AuditChain/readableDetail(of:in:key:)``; erased: empty).
    func audit() async throws -> [AuditEntry] {
        let key = storage.auditKey
        return try await storage.read { reader in
            var entries = try await reader.auditEntries(after: 0, limit: 100_000)
            for index in entries.indices {
                entries[index].detail = try await AuditChain.readableDetail(of: entries[index], in: reader, key: key) ?? ""
            }
            return entries
        }
    }

    /// Every change the audit log records, in order, each as an entry of its own (a push's entry
    /// lists its mutations and reducer writes): the entry's id, identity and time, the change's
    /// entity, row, operation and outcome, and its detail with the client stream.
    func auditedChanges() async throws -> [AuditEntry] {
        try await audit().flatMap { entry in
            try AuditedChange.changes(of: entry, readableDetail: entry.detail).map { change in
                var single = entry
                (single.entity, single.rowID, single.operation, single.outcome) = (change.entity, change.rowID, change.operation, change.outcome)
                single.detail = CanonicalJSON.text(.object(change.detail))
                return single
            }
        }
    }

    /// Stores a row the way the server does (as content would be published), bypassing push.
    /// Stores an assessment with its server-only answer key (which its DTO does not carry).
    func seed(_ assessment: Assessment, answerKey: JSONValue) async throws {
        try await seed(assessment)
        let tenant = Self.admin.tenant
        try await storage.write { transaction in
            let table = ContractTable(Assessment.descriptor)
            guard var row = try await transaction.row(in: table, tenant: tenant, id: assessment.id) else { return }
            row["answer_key"] = .text(CanonicalJSON.text(answerKey))
            try await transaction.upsert(row, in: table)
        }
    }

    func seed<Value: ContractEntity>(_ value: Value) async throws {
        try await storage.write { transaction in
            let context = ReducerContext(
                writer: PushWriter(
                    transaction: transaction, identity: Self.admin, contracts: ServerContracts(storage.contracts), now: PushFixedClock().now()))
            let scopeKey = try context.scopeKey(for: value, fallback: "content:global")
            _ = try await context.store(value, previous: nil, scopeKey: scopeKey, summary: [:])
        }
    }
}

// MARK: - Mutations

extension PushHarness {
    func hlc(_ milliseconds: Int64, _ node: String, counter: Int = 0) -> String {
        HybridLogicalClock(milliseconds: milliseconds, counter: counter, node: node).description
    }

    func mutation(
        _ seq: Int64, _ entity: String, _ op: MutationOperation, _ id: String, _ payload: [String: JSONValue]? = nil,
        baseVersion: Int64? = nil, hlc: String? = nil, base: [String: JSONValue]? = nil
    ) -> Mutation {
        Mutation(
            seq: seq, clientMutationId: "cm-\(entity)-\(id)-\(seq)", entity: entity, op: op, id: id, payload: payload.map(JSONValue.object),
            baseVersion: baseVersion, hlc: hlc, base: base
        )
    }

    /// An event mutation whose payload and hash come from the generated type, as a device makes them.
    func eventMutation<Event: ContractEvent>(
        _ seq: Int64, id: String, _ event: Event, at time: Timestamp = Timestamp(millisecondsSince1970: 1_767_225_000_000)
    ) throws -> Mutation {
        let payload = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(event))
        return Mutation(
            seq: seq, clientMutationId: "cm-event-\(id)-\(seq)", entity: Event.descriptor.name, op: .event, id: id, payload: payload,
            occurredAt: time, hash: try EventEnvelope<Event>.hash(of: event)
        )
    }

    /// A valid `Task` (version_check, team scope) row.
    func taskPayload(_ id: String, team: String = "red", title: String = "Swap battery", status: String = "assigned") -> [String: JSONValue] {
        ["id": .string(id), "team_id": .string(team), "title": .string(title), "task_kind": .string("battery_swap"), "status": .string(status)]
    }

    /// A valid `Incident` (field_merge, team scope) row.
    func incidentPayload(_ id: String, number: String = "INC0001") -> [String: JSONValue] {
        [
            "id": .string(id), "team_id": .string("red"), "number": .string(number), "short_description": .string("Flat tyre"),
            "state": .string("new"), "opened_at": .string("2026-01-01T08:00:00.000Z"),
        ]
    }

    /// A valid `ServiceAsset` (last_writer_wins, team scope) row.
    func assetPayload(_ id: String, name: String = "Van 7", tag: String = "VAN-7") -> [String: JSONValue] {
        [
            "id": .string(id), "team_id": .string("red"), "asset_tag": .string(tag), "display_name": .string(name),
            "category": .string("vehicle"),
        ]
    }

    /// A valid `Statement` (append_only, user scope) row.
    func statementPayload(_ id: String, verb: String = "experienced", object: String = "lesson-1", attempt: String? = nil, score: Double? = nil)
        -> [String: JSONValue]
    {
        var payload: [String: JSONValue] = [
            "id": .string(id), "verb": .string(verb), "object_id": .string(object), "stated_at": .string("2026-01-01T07:00:00.000Z"),
        ]
        if let attempt { payload["attempt_id"] = .string(attempt) }
        if let score { payload["score"] = .double(score) }
        return payload
    }
}

// MARK: - A storage that fails half way

/// Wraps a storage so that every write transaction throws after `failAfter` writes, as a
/// crash between apply and commit would: nothing of the transaction may survive.
struct PushFailingStorage: SyncStorage {
    var backend: StorageBackend { StorageBackend(self) }
    let base: any SyncStorage
    let failAfter: Int
    var auditKey: AuditKey { base.auditKey }
    var contracts: ContractCatalog { base.contracts }
    var defaultBlobStore: any BlobStore { base.defaultBlobStore }

    struct Crash: Error {}

    func write<T: Sendable>(_ body: @escaping @Sendable (any StorageTransaction) async throws -> T) async throws -> T {
        let failAfter = failAfter
        return try await base.write { transaction in try await body(FailingTransaction(base: transaction, budget: Budget(left: failAfter))) }
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (any StorageReader) async throws -> T) async throws -> T {
        try await base.read(body)
    }

    func observeCommits(_ observer: @escaping @Sendable (CommitNotice) -> Void) {
        base.observeCommits(observer)
    }

    final class Budget {
        var left: Int
        init(left: Int) { self.left = left }
        func spend() throws {
            guard left > 0 else { throw Crash() }
            left -= 1
        }
    }

    struct FailingTransaction: StorageTransaction {
        let base: any StorageTransaction
        let budget: Budget

        func row(in table: ContractTable, tenant: String, id: String) async throws -> StoredRow? {
            try await base.row(in: table, tenant: tenant, id: id)
        }
        func changes(
            in tables: [ContractTable], tenant: String, scopeKey: String, after: Int64, limit: Int, byteBudget: Int, pageColumnsOnly: Bool
        ) async throws -> [(table: ContractTable, row: StoredRow)] {
            try await base.changes(
                in: tables, tenant: tenant, scopeKey: scopeKey, after: after, limit: limit, byteBudget: byteBudget, pageColumnsOnly: pageColumnsOnly)
        }
        func rows(in table: ContractTable, tenant: String, where conditions: [String: ColumnValue], limit: Int) async throws -> [StoredRow] {
            try await base.rows(in: table, tenant: tenant, where: conditions, limit: limit)
        }
        func lastSequence(tenant: String, clientID: String) async throws -> Int64 { try await base.lastSequence(tenant: tenant, clientID: clientID) }
        func pushResults(tenant: String, clientID: String, covering seq: Int64) async throws -> PushResultRecord? {
            try await base.pushResults(tenant: tenant, clientID: clientID, covering: seq)
        }
        func scopeSequence(tenant: String, scopeKey: String) async throws -> Int64 {
            try await base.scopeSequence(tenant: tenant, scopeKey: scopeKey)
        }
        func auditEntries(after afterID: Int64, limit: Int) async throws -> [AuditEntry] { try await base.auditEntries(after: afterID, limit: limit) }
        func auditHead() async throws -> AuditHead? { try await base.auditHead() }
        func auditEntries(tenant: String, after afterID: Int64, limit: Int) async throws -> [AuditEntry] {
            try await base.auditEntries(tenant: tenant, after: afterID, limit: limit)
        }
        func serverTableQuery(_ sql: String, _ arguments: [ColumnValue]) async throws -> [StoredRow] {
            try await base.serverTableQuery(sql, arguments)
        }
        func auditEntries(tenant: String, userID: String, after afterID: Int64, limit: Int) async throws -> [AuditEntry] {
            try await base.auditEntries(tenant: tenant, userID: userID, after: afterID, limit: limit)
        }
        func wrappedAuditUserKey(tenant: String, userID: String) async throws -> String? {
            try await base.wrappedAuditUserKey(tenant: tenant, userID: userID)
        }
        func eraseAuditDetails(tenant: String, userID: String) async throws -> Int {
            try await base.eraseAuditDetails(tenant: tenant, userID: userID)
        }
        func moveAuditBase(from previous: AuditBase, to base: AuditBase) async throws -> Int {
            try await self.base.moveAuditBase(from: previous, to: base)
        }
        func identityState(tenant: String, userID: String, deviceID: String) async throws -> IdentityState {
            try await base.identityState(tenant: tenant, userID: userID, deviceID: deviceID)
        }
        func teamMemberships(tenant: String) async throws -> [(team: String, user: String)] { try await base.teamMemberships(tenant: tenant) }
        func revocations(tenant: String) async throws -> [Revocation] { try await base.revocations(tenant: tenant) }
        func clients(tenant: String, ownedBy userID: String) async throws -> [ClientRecord] {
            try await base.clients(tenant: tenant, ownedBy: userID)
        }
        func urgentChanges(tenant: String, scopeKey: String, after: Int64, limit: Int) async throws -> [UrgentChange] {
            try await base.urgentChanges(tenant: tenant, scopeKey: scopeKey, after: after, limit: limit)
        }
        func deleteRow(in table: ContractTable, tenant: String, id: String) async throws {
            try budget.spend()
            try await base.deleteRow(in: table, tenant: tenant, id: id)
        }
        func deletePushResults(tenant: String, ownedBy userID: String) async throws -> Int {
            try budget.spend()
            return try await base.deletePushResults(tenant: tenant, ownedBy: userID)
        }
        func recordErasure(tenant: String, userID: String, at: Int64) async throws {
            try budget.spend()
            try await base.recordErasure(tenant: tenant, userID: userID, at: at)
        }
        func pruneUrgentChanges(markedBefore: Int64, limit: Int) async throws -> Int {
            try budget.spend()
            return try await base.pruneUrgentChanges(markedBefore: markedBefore, limit: limit)
        }
        func markUrgent(_ change: UrgentChange, tenant: String, scopeKey: String, at: Int64) async throws {
            try budget.spend()
            try await base.markUrgent(change, tenant: tenant, scopeKey: scopeKey, at: at)
        }
        func revoke(tenant: String, kind: RevocationKind, subject: String, at: Int64) async throws {
            try await base.revoke(tenant: tenant, kind: kind, subject: subject, at: at)
        }
        func setTeamMembership(tenant: String, team: String, userID: String, isMember: Bool) async throws -> Bool {
            try await base.setTeamMembership(tenant: tenant, team: team, userID: userID, isMember: isMember)
        }
        func clientOwner(tenant: String, clientID: String) async throws -> ClientOwner? {
            try await base.clientOwner(tenant: tenant, clientID: clientID)
        }
        func lockClient(tenant: String, clientID: String, owner: ClientOwner) async throws -> ClientLock {
            try await base.lockClient(tenant: tenant, clientID: clientID, owner: owner)
        }
        func lockScope(tenant: String, scopeKey: String) async throws { try await base.lockScope(tenant: tenant, scopeKey: scopeKey) }

        func nextScopeSequence(tenant: String, scopeKey: String) async throws -> Int64 {
            try budget.spend()
            return try await base.nextScopeSequence(tenant: tenant, scopeKey: scopeKey)
        }
        func upsert(_ row: StoredRow, in table: ContractTable) async throws {
            try budget.spend()
            try await base.upsert(row, in: table)
        }
        func insertIfAbsent(_ row: StoredRow, in table: ContractTable) async throws -> Bool {
            try budget.spend()
            return try await base.insertIfAbsent(row, in: table)
        }
        func recordPushResults(tenant: String, clientID: String, _ record: PushResultRecord, recordedAt: Int64) async throws {
            try budget.spend()
            try await base.recordPushResults(tenant: tenant, clientID: clientID, record, recordedAt: recordedAt)
        }
        func appendAudit(_ entry: AuditEntry) async throws {
            try budget.spend()
            try await base.appendAudit(entry)
        }
        func compactedSequence(tenant: String, scopeKey: String) async throws -> Int64 {
            try await base.compactedSequence(tenant: tenant, scopeKey: scopeKey)
        }
        func acknowledgePushResults(tenant: String, clientID: String, through seq: Int64) async throws {
            try await base.acknowledgePushResults(tenant: tenant, clientID: clientID, through: seq)
        }
        func prunePushResults(recordedBefore: Int64, limit: Int) async throws -> Int {
            try await base.prunePushResults(recordedBefore: recordedBefore, limit: limit)
        }
        func tombstones(in table: ContractTable, updatedBefore: Int64, limit: Int) async throws -> [Tombstone] {
            try await base.tombstones(in: table, updatedBefore: updatedBefore, limit: limit)
        }
        func deleteTombstones(_ tombstones: [Tombstone], in table: ContractTable, updatedBefore: Int64) async throws -> [Tombstone] {
            try await base.deleteTombstones(tombstones, in: table, updatedBefore: updatedBefore)
        }
        func raiseCompactedSequence(tenant: String, scopeKey: String, to seq: Int64) async throws {
            try await base.raiseCompactedSequence(tenant: tenant, scopeKey: scopeKey, to: seq)
        }

    }
}
