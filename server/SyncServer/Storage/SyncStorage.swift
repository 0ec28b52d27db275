public import Contracts
import Foundation

/// Where the server keeps everything. The sync logic (push, conflict policies, reducers, pull,
/// audit) is written against ``StorageReader`` and ``StorageTransaction`` only, so a second
/// implementation (PostgreSQL) plugs in without touching routes or logic.
///
/// Transactions are synchronous closures: the logic reads and writes step by step inside one
/// atomic unit, and an implementation decides how to run it (GRDB's writer queue for SQLite).
public protocol SyncStorage: Sendable {
    /// Runs `body` in one write transaction: everything it writes commits together, or nothing
    /// does when it throws. Write transactions never interleave for the same rows.
    func write<T: Sendable>(_ body: @escaping @Sendable (any StorageTransaction) throws -> T) async throws -> T

    /// Runs `body` against a consistent snapshot.
    func read<T: Sendable>(_ body: @escaping @Sendable (any StorageReader) throws -> T) async throws -> T
}

/// A table of a contract, as storage needs to address it.
public struct ContractTable: Hashable, Sendable {
    public var name: String
    /// The primary-key column of the contract (`id`, or `event_id` for events).
    public var primaryKey: String

    public init(name: String, primaryKey: String) {
        self.name = name
        self.primaryKey = primaryKey
    }

    public init(_ entity: EntityDescriptor) {
        self.init(name: entity.table, primaryKey: entity.primaryKey)
    }

    public init(_ event: EventDescriptor) {
        self.init(name: event.table, primaryKey: "event_id")
    }
}

/// One entry of the append-only audit log.
public struct AuditEntry: Hashable, Sendable {
    public var id: Int64
    public var tenant: String
    /// Server clock, milliseconds since 1970.
    public var recordedAt: Int64
    public var userID: String
    public var deviceID: String
    public var entity: String
    public var rowID: String
    public var operation: String
    /// `applied`, `duplicate`, `conflicted`, `rejected`, `merged`, `published`, `deleted`, …
    public var outcome: String
    /// Canonical JSON with what happened (the mutation, the resolution).
    public var detail: String
    public var previousHash: String
    public var hash: String

    public init(
        id: Int64 = 0, tenant: String, recordedAt: Int64, userID: String, deviceID: String, entity: String, rowID: String,
        operation: String, outcome: String, detail: String, previousHash: String = "", hash: String = ""
    ) {
        self.id = id
        self.tenant = tenant
        self.recordedAt = recordedAt
        self.userID = userID
        self.deviceID = deviceID
        self.entity = entity
        self.rowID = rowID
        self.operation = operation
        self.outcome = outcome
        self.detail = detail
        self.previousHash = previousHash
        self.hash = hash
    }
}

/// Reads, inside a transaction or a snapshot.
public protocol StorageReader {
    /// The row with this primary key in a tenant, tombstones included.
    func row(in table: ContractTable, tenant: String, id: String) throws -> StoredRow?

    /// Rows of the tables whose `_scope_key` is `scopeKey` and `_seq` is above `after`, in `_seq`
    /// order, at most `limit`; tombstones included.
    func changes(in tables: [ContractTable], tenant: String, scopeKey: String, after: Int64, limit: Int) throws -> [(table: ContractTable, row: StoredRow)]

    /// Rows of one table in a tenant matching equality conditions on columns, in primary-key order.
    func rows(in table: ContractTable, tenant: String, where conditions: [String: SQLValue], limit: Int) throws -> [StoredRow]

    /// The last `seq` done for a client (0 when it never pushed).
    func lastSequence(tenant: String, clientID: String) throws -> Int64

    /// The stored result (canonical JSON) of a client's mutation.
    func pushResult(tenant: String, clientID: String, seq: Int64) throws -> String?

    /// The scope's current Lamport sequence (0 when nothing was written).
    func scopeSequence(tenant: String, scopeKey: String) throws -> Int64

    /// Audit entries in order, starting after `afterID`, at most `limit`.
    func auditEntries(after afterID: Int64, limit: Int) throws -> [AuditEntry]
}

/// Writes, inside one transaction.
public protocol StorageTransaction: StorageReader {
    /// Increments and returns the scope's Lamport sequence.
    func nextScopeSequence(tenant: String, scopeKey: String) throws -> Int64

    /// Inserts or replaces a row (all its columns, sync metadata included).
    func upsert(_ row: StoredRow, in table: ContractTable) throws

    /// Inserts an event row; returns `false` when the event id is already stored (a duplicate).
    func insertIfAbsent(_ row: StoredRow, in table: ContractTable) throws -> Bool

    /// Records a client's mutation as done with its result, and moves the client's last `seq`.
    func recordPushResult(tenant: String, clientID: String, seq: Int64, clientMutationID: String, result: String) throws

    /// Appends to the audit log, chaining the hash; returns the entry as stored.
    @discardableResult
    func appendAudit(_ entry: AuditEntry) throws -> AuditEntry
}
