public import ContractRuntime
import ContractRuntimeGRDB
import Crypto
public import Foundation
import GRDB

/// The embedded default: one SQLite database (WAL) in the data folder, through GRDB.
public final class SQLiteStorage: ServerStorage, SyncStorage {
    private let pool: DatabasePool
    /// The key the audit log is sealed with.
    public let auditKey: AuditKey
    /// The contracts the database holds tables for.
    public let contracts: ContractCatalog
    /// The storage as the services use it.
    public var backend: StorageBackend { StorageBackend(self) }
    private let commitObservers = CommitObservers()
    /// The data folder: `server.sqlite`, and the `files` folder of the blob store.
    let directory: URL

    /// Opens (creating if needed) `server.sqlite` in `directory` and runs the server's own
    /// migrations and those of `contracts` (a generated registry: `ContractRegistry.self`).
    /// - Parameters:
    ///   - directory: the data folder; created if needed.
    ///   - contracts: the generated registry whose tables the storage holds.
    ///   - auditKey: the key the audit log is sealed with; `nil` resolves it as
    ///     ``AuditKey/resolve(file:dataDirectory:environment:)`` does for `directory`
    ///     (`OUTPOST_AUDIT_KEY`, else `directory/audit.key`).
    /// - Throws: ``AuditKeyError/mismatch(expected:actual:)`` when the log is sealed with another key.
    public convenience init(directory: URL, contracts: any ContractSchema.Type, auditKey: AuditKey? = nil) throws {
        try self.init(directory: directory, contracts: ContractCatalog(contracts), auditKey: auditKey)
    }

    /// Opens (creating if needed) `server.sqlite` in `directory` for the contracts of `contracts`.
    public convenience init(directory: URL, contracts: ContractCatalog, auditKey: AuditKey? = nil) throws {
        try self.init(directory: directory, contracts: contracts, auditKey: auditKey, busyTimeout: 10)
    }

    /// As ``init(directory:contracts:auditKey:)``, waiting at most `busyTimeout` seconds for a
    /// lock another process holds before the request is answered 503 `storage_unavailable`.
    package init(directory: URL, contracts: ContractCatalog, auditKey: AuditKey?, busyTimeout: TimeInterval) throws {
        self.contracts = contracts
        self.directory = directory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var configuration = Configuration()
        configuration.busyMode = .timeout(busyTimeout)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        pool = try DatabasePool(path: directory.appendingPathComponent("server.sqlite").path, configuration: configuration)
        let key = try auditKey ?? AuditKey.resolve(file: nil, dataDirectory: directory)
        self.auditKey = key
        try Self.migrator(contracts: contracts).migrate(pool)
        try pool.write { db in
            try Self.claimAuditHead(db, key: key)
            try Self.installRowMoveTriggers(db, contracts: contracts)
            // The record of when each field last changed (``FieldSeqs``), on tables made before it.
            let withColumn = try Set(
                String.fetchAll(
                    db, sql: "SELECT m.name FROM sqlite_master m JOIN pragma_table_info(m.name) c WHERE m.type = 'table' AND c.name = ?",
                    arguments: [FieldSeqs.column]
                ))
            for statement in FieldSeqs.addColumnStatements(contracts: contracts, dialect: .sqlite, existing: withColumn) {
                try db.execute(sql: statement)
            }
        }
    }

    /// Records the key's fingerprint and seals the head the first time a keyed storage opens the
    /// log; refuses a key of another fingerprint afterwards.
    private static func claimAuditHead(_ db: Database, key: AuditKey) throws {
        guard let head = try Row.fetchOne(db, sql: "SELECT last_id, last_hash, keyed_from, key_fingerprint FROM audit_head") else { return }
        if let fingerprint: String = head["key_fingerprint"] {
            guard fingerprint == key.fingerprint else { throw AuditKeyError.mismatch(expected: fingerprint, actual: key.fingerprint) }
            return
        }
        let seal = AuditChain.seal(lastID: head["last_id"], lastHash: head["last_hash"], keyedFrom: head["keyed_from"], key: key)
        try db.execute(sql: "UPDATE audit_head SET key_fingerprint = ?, seal = ?", arguments: [key.fingerprint, seal])
    }

    /// The triggers that record rows moving off a subscription's values (``RowMoves``), derived
    /// from `contracts` again at each open.
    private static func installRowMoveTriggers(_ db: Database, contracts: ContractCatalog) throws {
        let existing = try Row.fetchAll(db, sql: RowMoves.existingTriggersSQL(.sqlite)).map { ($0["trigger"] as String, $0["table"] as String) }
        for statement in RowMoves.statements(for: contracts, dialect: .sqlite, existing: existing) {
            try db.execute(sql: statement)
        }
        // And those recording which rows name which file (``FileReferenceTriggers``).
        let fileTriggers = try Row.fetchAll(db, sql: FileReferenceTriggers.existingTriggersSQL(.sqlite)).map {
            ($0["trigger"] as String, $0["table"] as String)
        }
        for statement in FileReferenceTriggers.statements(for: contracts, dialect: .sqlite, existing: fileTriggers) {
            try db.execute(sql: statement)
        }
    }

    /// The server's tables, then every server migration of `contracts`, in order.
    static func migrator(contracts: ContractCatalog) -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("server.v1.sync_tables") { db in
            for statement in ServerTables.statements {
                try db.execute(sql: statement)
            }
        }
        for migration in contracts.serverMigrations {
            migrator.registerMigration(migration.identifier) { db in
                for statement in migration.statements {
                    try db.execute(sql: statement)
                }
            }
        }
        for upgrade in ServerUpgrade.all {
            migrator.registerMigration(upgrade.identifier) { db in
                for statement in upgrade.sqlite {
                    try db.execute(sql: statement)
                }
            }
        }
        return migrator
    }

    /// One writer at a time (SQLite's own rule): every lock of ``StorageTransaction`` is held by
    /// construction, so `lockClient` and `lockScope` take nothing more.
    package func write<T: Sendable>(_ body: @escaping @Sendable (any StorageTransaction) async throws -> T) async throws -> T {
        let (result, changes) = try await pool.write { db in
            let transaction = SQLiteTransaction(db: db, auditTail: AuditTail(key: self.auditKey))
            let result = try ConnectionThreadExecutor.run { [transaction = UncheckedTransaction(transaction)] in
                try await body(transaction.value)
            }
            // Counters kept in memory during the transaction are written once, before it commits.
            return (result, try transaction.flushCounters())
        }
        if !changes.isEmpty { commitObservers.notify(.changed(changes)) }
        return result
    }

    package func observeCommits(_ observer: @escaping @Sendable (CommitNotice) -> Void) {
        commitObservers.add(observer)
    }

    package func read<T: Sendable>(_ body: @escaping @Sendable (any StorageReader) async throws -> T) async throws -> T {
        try await pool.read { db in
            let reader = UncheckedTransaction(SQLiteTransaction(db: db, auditTail: AuditTail(key: self.auditKey)))
            return try ConnectionThreadExecutor.run { try await body(reader.value) }
        }
    }
}

/// State one write transaction carries in memory instead of re-reading and re-writing it per
/// mutation: the audit chain's last entry, scope sequences and clients' last `seq`, and the
/// writes kept back to go out in multi-row statements (rows, stored results, audit entries).
/// All of it is read inside the transaction (the single writer), so no other writer can change
/// it meanwhile, and all of it is written before the transaction commits (``SQLiteTransaction/flushCounters()``).
final class AuditTail {
    let key: AuditKey
    var loaded = false
    /// Whether entries were appended, so the head must be written and sealed.
    var moved = false
    var id: Int64 = 0
    var hash = AuditChain.genesis
    var keyedFrom: Int64 = 1

    init(key: AuditKey) {
        self.key = key
    }
    /// Scope sequences touched in this transaction: (tenant, scope key) → last value handed out.
    var scopeSequences: [ScopeKey: Int64] = [:]
    /// Clients whose last `seq` moved in this transaction.
    var clientSequences: [ScopeKey: Int64] = [:]
    /// Users' audit data keys read or made in this transaction (tenant, user) → key; never
    /// kept across transactions: another process may erase a user meanwhile.
    var userKeys: [ScopeKey: AuditDetails.DataKey] = [:]
    /// Upserted rows not written yet: the newest version of each, in the order first written.
    var unsentRows: [StoredRowKey: StoredRow] = [:]
    var unsentOrder: [StoredRowKey] = []
    /// Rows read ahead (`prefetchRows`), `nil` for an id known to be absent; an entry is
    /// dropped when the transaction writes its row.
    var knownRows: [StoredRowKey: StoredRow?] = [:]
    /// Push result records not written yet, six values each (the `push_results` columns).
    var pendingResults: [DatabaseValue] = []
    /// Audit entries not chained and written yet, in the order appended.
    var pendingAudit: [AuditEntry] = []

    struct ScopeKey: Hashable {
        var tenant: String
        var key: String
    }

}

/// A transaction handed to the task that runs on its connection's thread
/// (``ConnectionThreadExecutor``): it never leaves that thread, whatever `Sendable` says.
private struct UncheckedTransaction: @unchecked Sendable {
    let value: SQLiteTransaction
    init(_ value: SQLiteTransaction) { self.value = value }
}

extension SQLiteStorage {
    /// The files of the data folder's `files` folder.
    package var defaultBlobStore: any BlobStore {
        FileSystemBlobStore(directory: directory.appendingPathComponent("files", isDirectory: true))
    }
}
