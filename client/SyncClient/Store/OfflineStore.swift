public import ContractRuntime
import Crypto
import Foundation
import GRDB
import SyncProtocol

/// The device's offline database: one SQLite file (GRDB `DatabasePool`, WAL) holding the
/// generated contract tables, the client's own (`outbox`, `conflicts`, `sync_state`,
/// `metadata`, …) and those of the app's ``StoreExtension``s.
///
/// Reads come from SQLite; writes change the local row and append to the outbox in one
/// transaction. The sync engine (``SyncEngine``) drains the outbox and applies server rows
/// through the store's `package` methods (`nextPushRequest(limit:)`, `applyPushResponse(_:)`,
/// `applyServerChanges(_:)`), which an app cannot call.
///
/// ```swift
/// let store = try OfflineStore(
///     OfflineStoreConfiguration(databaseURL: url, tenantId: "acme", userId: "u-1", keyProvider: FileKeyProvider(directory: keys)),
///     contracts: ContractRegistry.self
/// )
/// try store.patch(Incident.self, id: "inc-1", [.state(.inProgress)])
/// let open = try store.incidents(teamId: "t-1")
/// ```
///
/// Every method is synchronous and thread-safe (reads run concurrently, writes one at a time);
/// call it from any thread or actor. Every failure is an ``OfflineStoreError``.
public final class OfflineStore: Sendable {
    /// What the store was opened with.
    public let configuration: OfflineStoreConfiguration
    /// Tenant, user, device and push client id.
    public let identity: StoreIdentity
    /// The contracts whose tables the store holds.
    public let contracts: ContractCatalog
    /// The app's tables beside the contracts'.
    public let extensions: [any StoreExtension]
    /// What the store and its engine count of their syncing (``OfflineStoreConfiguration/telemetry``).
    public var telemetry: SyncTelemetry { configuration.telemetry }

    let pool: DatabasePool
    let crypto: StoreCrypto
    let codec: RowCodec
    let ulids: ULIDGenerator
    /// The download order of the store's contracts.
    package let priorities: PullPriorities
    private let closed: Locked<Bool>
    /// The files imported in this run that no committed write recorded yet.
    let fileStaging = FileStaging()
    /// The entities whose table this store's housekeeping purged of rows below their oldest
    /// supported schema version, with no such row stored since (``purgeUnsupportedRows(_:onlyWhereNeeded:)``):
    /// their table is not read again at every sync.
    let purgedEntities = Locked<Set<String>>([])
    /// The outbox states already verified under the current key (``OutboxSeal/Memo``).
    let outboxSealMemo = OutboxSeal.Memo()
    /// Pulled rows stored since the write-ahead log was last copied (``checkpointLater(rows:)``).
    private let rowsSinceCheckpoint = Locked(0)

    /// Opens (creating or migrating) the database of `configuration` for the contracts of a
    /// generated registry (`contracts: ContractRegistry.self`).
    public convenience init(
        _ configuration: OfflineStoreConfiguration, contracts: any ContractSchema.Type, extensions: [any StoreExtension] = []
    ) throws(OfflineStoreError) {
        try self.init(configuration, contracts: ContractCatalog(contracts), extensions: extensions)
    }

    /// Opens (creating or migrating) the database of `configuration` for `contracts`, with the
    /// tables of `extensions`.
    ///
    /// - Throws: ``OfflineStoreError/createdByNewerBuild(unknownMigrations:)`` (file untouched),
    ///   ``OfflineStoreError/notADatabase(path:)``, ``OfflineStoreError/cannotOpen(path:reason:)``,
    ///   ``OfflineStoreError/belongsToAnotherAccount(tenantId:userId:)``,
    ///   ``OfflineStoreError/keyUnavailable(tenantId:reason:)``, ``OfflineStoreError/keyMismatch(tenantId:)``,
    ///   ``OfflineStoreError/invalidExtension(name:reason:)``,
    ///   ``OfflineStoreError/databaseEncryptionUnavailable(reason:)``.
    ///
    /// A data key rotation a previous run left unfinished (``rotateDataKey(batchSize:)``) is
    /// finished here, before the store is returned.
    public init(
        _ configuration: OfflineStoreConfiguration, contracts: ContractCatalog, extensions: [any StoreExtension] = []
    ) throws(OfflineStoreError) {
        try Self.validate(extensions, contracts: contracts)
        #if !SQLITE_HAS_CODEC
            if configuration.databasePassphrase != nil {
                throw .databaseEncryptionUnavailable(
                    reason: "this build's SQLite has no encryption (GRDB is not built with SQLCipher): the passphrase would be ignored"
                )
            }
        #endif
        self.configuration = configuration
        self.contracts = contracts
        self.extensions = extensions
        priorities = PullPriorities(contracts)
        let url = configuration.databaseURL
        let path = url.path
        do {
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        } catch {
            throw .cannotOpen(path: path, reason: error.localizedDescription)
        }
        var keyVersions = StoredKeyVersions(current: 1, previous: nil)
        if FileManager.default.fileExists(atPath: path) {
            keyVersions = try Self.refuseNewerBuild(path: path, configuration: configuration, contracts: contracts, extensions: extensions)
        } else {
            try Self.createProtected(url, configuration.fileProtection)
        }

        let crypto = StoreCrypto(tenantKey: try Self.tenantKey(configuration, version: keyVersions.current), version: keyVersions.current)
        if let previous = keyVersions.previous {
            crypto.keyRing.previous = StoreCrypto.VersionKeys(version: previous, tenantKey: try Self.tenantKey(configuration, version: previous))
        }
        self.crypto = crypto
        codec = RowCodec(crypto: crypto, columns: ColumnCodec(codec: contracts.codec))
        ulids = ULIDGenerator(clock: configuration.clock, random: configuration.random)
        closed = Locked(false)

        var databaseConfiguration = Self.databaseConfiguration(configuration)
        databaseConfiguration.label = "OutpostOfflineStore"
        databaseConfiguration.busyMode = .timeout(10)
        databaseConfiguration.prepareDatabase { db in
            // The log is copied into the database every few thousand pages rather than every
            // 1 000: a pull's pages, then the sync's own bookkeeping, do not stop for it; the
            // sync asks for the copy once it is done (checkpointLater(rows:)).
            try db.execute(sql: "PRAGMA wal_autocheckpoint = \(Self.refetchableCheckpointPages)")
        }
        do {
            pool = try DatabasePool(path: path, configuration: databaseConfiguration)
        } catch {
            throw Self.openingError(error, path: path)
        }
        Self.protectFiles(url, configuration.fileProtection)

        let migrator = ClientSchema.migrator(contracts: contracts, extensions: extensions)
        do {
            // Checked again here, for a database that became newer between the check and the open.
            let unknown = try pool.read { db in try Self.unknownMigrations(db, contracts: contracts, extensions: extensions) }
            guard unknown.isEmpty else {
                try? pool.close()
                throw OfflineStoreError.createdByNewerBuild(unknownMigrations: unknown)
            }
            try migrator.migrate(pool)
        } catch {
            throw Self.openingError(error, path: path)
        }

        let configured = configuration
        let keyRing = crypto.keyRing
        let ulids = self.ulids
        let now = configuration.clock.timestamp().millisecondsSince1970
        do {
            let (prepared, unsentTelemetry) = try pool.write { db in
                let identity = try Self.prepareMetadata(
                    db, configuration: configured, contracts: contracts, extensions: extensions, keyRing: keyRing, now: now, ulids: ulids
                )
                // The counts an earlier run of the app kept for the server, to go with the next request.
                return (identity, try Metadata.get(db, .telemetryUnsent))
            }
            identity = prepared
            if let unsentTelemetry, let counts = TelemetryHeader.decode(unsentTelemetry) { configuration.telemetry.giveBack(counts) }
        } catch {
            try? pool.close()
            throw Self.map(error)
        }
        // Rows past their retention or below the oldest supported schema (an app update may
        // have raised it), and old acknowledged outbox entries, go before the app reads; a key
        // rotation a killed run left half done is finished first.
        do {
            if crypto.keyRing.previous != nil { _ = try continueKeyRotation(batchSize: Self.keyRotationBatchSize) }
            // Copies of files whose write never committed (a killed run) go.
            try removeOrphanFiles()
            try runHousekeeping()
        } catch {
            try? pool.close()
            throw error
        }
        // Once a request carried the counts, the store forgets them at once: a run that ends
        // right after does not send them again.
        configuration.telemetry.whenSent { [weak self] in try? self?.saveUnsentTelemetry() }
    }

    // MARK: Opening

    /// The tenant key of `version` from the configuration's ``KeyProvider``.
    static func tenantKey(_ configuration: OfflineStoreConfiguration, version: Int) throws(OfflineStoreError) -> SymmetricKey {
        do {
            return try configuration.keyProvider.key(forTenant: configuration.tenantId, version: version)
        } catch PassphraseKeyProviderError.wrongPassphrase {
            throw .keyMismatch(tenantId: configuration.tenantId)
        } catch {
            throw .keyUnavailable(tenantId: configuration.tenantId, reason: String(describing: error))
        }
    }

    /// GRDB's configuration for the store's connections: with the SQLCipher passphrase when
    /// there is one (the initializer refuses one when SQLite has no encryption).
    static func databaseConfiguration(_ configuration: OfflineStoreConfiguration) -> Configuration {
        #if SQLITE_HAS_CODEC
            var databaseConfiguration = Configuration()
            if let passphrase = configuration.databasePassphrase {
                databaseConfiguration.prepareDatabase { db in try db.usePassphrase(passphrase) }
            }
            return databaseConfiguration
        #else
            return Configuration()
        #endif
    }

    /// Refuses a database that holds migrations this build does not know, reading it through a
    /// read-only connection so that nothing is written to it.
    /// - Returns: the key versions the database is sealed with.
    private static func refuseNewerBuild(
        path: String, configuration: OfflineStoreConfiguration, contracts: ContractCatalog, extensions: [any StoreExtension]
    ) throws(OfflineStoreError) -> StoredKeyVersions {
        var readOnly = databaseConfiguration(configuration)
        readOnly.readonly = true
        // A read-only connection to a WAL database creates empty `-wal` and `-shm` files it
        // cannot remove; remove the ones it created, so a refused file is left as it was found.
        let sideFiles = [path + "-wal", path + "-shm"].filter { !FileManager.default.fileExists(atPath: $0) }
        defer {
            for file in sideFiles {
                let size = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? nil
                if file.hasSuffix("-shm") || size == 0 { try? FileManager.default.removeItem(atPath: file) }
            }
        }
        let unknown: [String]
        let keyVersions: StoredKeyVersions
        do {
            let queue = try DatabaseQueue(path: path, configuration: readOnly)
            (unknown, keyVersions) = try queue.read { db in
                (try unknownMigrations(db, contracts: contracts, extensions: extensions), try StoredKeyVersions.read(db))
            }
            try queue.close()
        } catch {
            throw openingError(error, path: path)
        }
        if !unknown.isEmpty { throw .createdByNewerBuild(unknownMigrations: unknown) }
        return keyVersions
    }

    /// Applied migrations this build does not know, in their identifiers' order.
    static func unknownMigrations(_ db: Database, contracts: ContractCatalog, extensions: [any StoreExtension]) throws -> [String] {
        guard try db.tableExists("grdb_migrations") else { return [] }
        let known = Set(ClientSchema.migrationIdentifiers(contracts: contracts, extensions: extensions))
            .union(ClientSchema.migrationsMovedToExtensions)
        return try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY identifier")
            .filter { !known.contains($0) }
    }

    private static func openingError(_ error: any Error, path: String) -> OfflineStoreError {
        if let error = error as? OfflineStoreError { return error }
        if let error = error as? DatabaseError {
            switch error.resultCode {
            case .SQLITE_NOTADB, .SQLITE_CORRUPT: return .notADatabase(path: path)
            case .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_READONLY, .SQLITE_AUTH:
                return .cannotOpen(path: path, reason: error.message ?? "\(error.resultCode)")
            default: break
            }
        }
        return map(error)
    }

    private static func prepareMetadata(
        _ db: Database, configuration: OfflineStoreConfiguration, contracts: ContractCatalog, extensions: [any StoreExtension],
        keyRing: StoreCrypto.KeyRing, now: Int64, ulids: ULIDGenerator
    ) throws -> StoreIdentity {
        if let tenant = try Metadata.get(db, .tenantId) {
            let user = try Metadata.get(db, .userId) ?? ""
            guard tenant == configuration.tenantId, user == configuration.userId else {
                throw OfflineStoreError.belongsToAnotherAccount(tenantId: tenant, userId: user)
            }
            // Each key version in use must be the one the database was sealed with.
            guard try Metadata.get(db, .keyCheck) == keyRing.current.keyCheck,
                try Metadata.get(db, .rotatingFromKeyCheck) == keyRing.previous?.keyCheck
            else {
                throw OfflineStoreError.keyMismatch(tenantId: tenant)
            }
        } else {
            try Metadata.set(db, .tenantId, configuration.tenantId)
            try Metadata.set(db, .userId, configuration.userId)
            try Metadata.set(db, .keyCheck, keyRing.current.keyCheck)
            try Metadata.set(db, .clientId, ulids.nextString())
            try Metadata.set(db, .nextSeq, "1")
            try Metadata.set(db, .lastPushSeq, "0")
            try Metadata.set(db, .telemetryQueuedThrough, "0")
            try Metadata.set(db, .createdAt, String(now))
        }
        var deviceId = try Metadata.get(db, .deviceId)
        if let given = configuration.deviceId, given != deviceId {
            try Metadata.set(db, .deviceId, given)
            deviceId = given
        } else if deviceId == nil {
            let made = ulids.nextString()
            try Metadata.set(db, .deviceId, made)
            deviceId = made
        }
        let clientId = try Metadata.get(db, .clientId) ?? ""
        if try Metadata.get(db, .hlc) == nil {
            try Metadata.set(db, .hlc, HybridLogicalClock(milliseconds: 0, counter: 0, node: clientId).description)
        }
        try liftSatisfiedHolds(db, contracts: contracts)
        for storeExtension in extensions { try storeExtension.storeDidOpen(db) }
        try Metadata.set(db, .schemaVersions, CanonicalJSON.text(.object(contracts.currentVersions.mapValues { .int(Int64($0)) })))
        return StoreIdentity(
            tenantId: configuration.tenantId, userId: configuration.userId, deviceId: deviceId ?? "", clientId: clientId
        )
    }

    // MARK: Schema

    /// The version of every contract this build reads and writes (`schema` of a push, the
    /// `X-Outpost-Schema` header of a pull).
    public var schemaVersions: [String: Int] { contracts.currentVersions }

    /// The identifiers of the migrations this build applies, in order: the client's own
    /// (`client.v1.sync_tables`, …), the extensions', then the contracts' (the catalog's
    /// `clientMigrations`).
    public var migrationIdentifiers: [String] { ClientSchema.migrationIdentifiers(contracts: contracts, extensions: extensions) }

    /// The migrations applied to the database, in the order they ran.
    public func appliedMigrations() throws(OfflineStoreError) -> [String] {
        try read { db in try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY rowid") }
    }

    // MARK: Access

    func ensureOpen() throws(OfflineStoreError) {
        if closed.withLock({ $0 }) { throw .signedOut }
    }

    /// Runs `body` against a snapshot.
    func read<T>(_ body: (Database) throws -> T) throws(OfflineStoreError) -> T {
        try ensureOpen()
        do {
            return try pool.read(body)
        } catch {
            throw Self.map(error)
        }
    }

    /// Runs `body` in one write transaction: all or nothing. The outbox is checked against its
    /// seal first (entries changed outside the store are quarantined) and sealed again after
    /// `body` (see ``OutboxSeal``).
    func write<T>(_ body: (Database) throws -> T) throws(OfflineStoreError) -> T {
        try writeCheckingSeal { db, _ in try body(db) }
    }

    /// ``write(_:)``, telling `body` which entries the seal check just quarantined.
    func writeCheckingSeal<T>(_ body: (Database, _ quarantined: [Int64]) throws -> T) throws(OfflineStoreError) -> T {
        try ensureOpen()
        // The files a write named that were imported in this run: kept if it committed, else deleted.
        defer { settleImportedFiles() }
        do {
            return try pool.write { db in
                let quarantined = try OutboxSeal.check(db, crypto: crypto, memo: outboxSealMemo) { db, seq, reason in
                    try quarantine(db, seq: seq, reason: reason, now: now().millisecondsSince1970)
                }
                let result = try body(db, quarantined)
                try OutboxSeal.seal(db, crypto: crypto, memo: outboxSealMemo)
                return result
            }
        } catch {
            throw Self.map(error)
        }
    }

    /// What the outbox seal found changed outside the store (entries removed or added, the seal
    /// rewritten), or `nil`. Entries whose state was changed are quarantined instead
    /// (``quarantinedEntries()``). Cleared by ``acknowledgeOutboxIntegrityProblem()``.
    public func outboxIntegrityProblem() throws(OfflineStoreError) -> String? {
        try read { db in try Metadata.get(db, .outboxIntegrity) }
    }

    /// Clears the problem ``outboxIntegrityProblem()`` reports, once the app has shown it.
    public func acknowledgeOutboxIntegrityProblem() throws(OfflineStoreError) {
        try write { db in try Metadata.remove(db, .outboxIntegrity) }
    }

    /// Runs `body` in one write transaction like ``write(_:)``, but commits it without waiting
    /// for the disk (`PRAGMA synchronous = NORMAL` for this commit only), for what the server
    /// can send again: rows it sent, with the cursor that says they are here. The transaction
    /// is as atomic as any and survives the app being killed; only a power loss or an OS crash
    /// shortly after can roll it back, whole, and the device then asks for it again. Writes made
    /// on the device (the outbox) never go through here.
    func writeRefetchable<T>(_ body: (Database) throws -> T) throws(OfflineStoreError) -> T {
        try ensureOpen()
        do {
            return try pool.writeWithoutTransaction { db in
                // Cached statements: a pull runs these around every group of pages.
                let synchronous = try Int.fetchOne(db.cachedStatement(sql: "PRAGMA synchronous")) ?? 2
                try db.cachedStatement(sql: "PRAGMA synchronous = NORMAL").execute()
                defer { try? db.cachedStatement(sql: "PRAGMA synchronous = \(synchronous)").execute() }
                var result: T?
                try db.inTransaction {
                    result = try body(db)
                    return .commit
                }
                return result!
            }
        } catch {
            throw Self.map(error)
        }
    }

    /// How many pages (4 KiB each) the write-ahead log may hold before a commit copies it into
    /// the database (SQLite's default is 1 000): a long pull copies each database page once per
    /// few pages of rows, not once per page.
    package static let refetchableCheckpointPages = 8_000

    /// Copies the write-ahead log into the database after the writes queued before it, without
    /// waiting for it, once the syncs since the last copy stored at least
    /// ``checkpointRows`` pulled rows (`rows`: what the sync that asks stored): a sync that
    /// stored many rows asks for it when it is done, so the log does not wait for the next
    /// write that fills it, and the sync does not wait for the copy. Small syncs share one copy:
    /// a database page several of them wrote is copied once, with one pair of disk flushes,
    /// instead of once per sync.
    package func checkpointLater(rows: Int) {
        guard (try? ensureOpen()) != nil else { return }
        let due = rowsSinceCheckpoint.withLock { since in
            since += rows
            guard since >= Self.checkpointRows else { return false }
            since = 0
            return true
        }
        guard due else { return }
        pool.asyncWriteWithoutTransaction { db in
            _ = try? db.checkpoint(.passive)
        }
    }

    /// The pulled rows after which a sync copies the write-ahead log into the database
    /// (``checkpointLater(rows:)``): a few megabytes of log at most between copies.
    package static let checkpointRows = 5_000

    /// The ``OfflineStoreError`` of any error thrown inside a transaction.
    static func map(_ error: any Error) -> OfflineStoreError {
        switch error {
        case let error as OfflineStoreError: return error
        case let error as DatabaseError:
            return .database(code: error.extendedResultCode.rawValue, message: error.message ?? "\(error.resultCode)")
        default: return .database(code: -1, message: String(describing: error))
        }
    }

    /// Closes the database. Later calls throw ``OfflineStoreError/signedOut``.
    public func close() throws(OfflineStoreError) {
        guard beginClosing() else { return }
        try closePool()
    }

    /// Stops new operations; `false` when the store was already closed.
    func beginClosing() -> Bool {
        closed.withLock { closed in
            defer { closed = true }
            return !closed
        }
    }

    /// Lets operations run again after ``beginClosing()``.
    func cancelClosing() {
        closed.withLock { $0 = false }
    }

    func closePool() throws(OfflineStoreError) {
        do {
            try pool.close()
        } catch {
            throw Self.map(error)
        }
    }

    /// The store's clock now (``OfflineStoreConfiguration/clock``): what its writes and
    /// housekeeping go by.
    public func now() -> Timestamp { configuration.clock.timestamp() }
}

/// Keys of the `metadata` table.
enum Metadata: String {
    case tenantId = "tenant_id"
    case userId = "user_id"
    case deviceId = "device_id"
    case clientId = "client_id"
    /// The check value of the current key version (`StoreCrypto.VersionKeys.keyCheck`).
    case keyCheck = "key_check"
    /// The key version new values are sealed with; absent in a store that never rotated (1).
    case keyVersion = "key_version"
    /// While a rotation is under way: the version it rotates from, and that version's check value.
    case rotatingFromKeyVersion = "rotating_from_key_version"
    case rotatingFromKeyCheck = "rotating_from_key_check"
    /// The `seq` the next outbox entry gets.
    case nextSeq = "next_seq"
    /// The last `seq` handed to the server (see `push_seq`).
    case lastPushSeq = "last_push_seq"
    /// The hybrid logical clock's last reading.
    case hlc
    /// This build's contract versions (canonical JSON).
    case schemaVersions = "schema_versions"
    case createdAt = "created_at"
    case lastSyncSuccessAt = "last_sync_success_at"
    case lastPushAt = "last_push_at"
    case lastSyncError = "last_sync_error"
    case lastSyncErrorAt = "last_sync_error_at"
    /// Contracts held after a 426 (JSON array of `UpdateRequired`).
    case updateRequired = "update_required"
    /// The outbox's sealed head (``OutboxSeal``).
    case outboxSeal = "outbox_seal"
    /// What the outbox seal found changed outside the store, for the app to see.
    case outboxIntegrity = "outbox_integrity"
    /// The user's ``SyncPreferences`` (JSON).
    case syncPreferences = "sync_preferences"
    /// The UTC day automatic syncs' data is counted for, and the bytes they moved that day.
    case automaticDataDay = "automatic_data_day"
    case automaticDataBytes = "automatic_data_bytes"
    /// Telemetry counted and not sent yet when the engine last saved it (`X-Outpost-Telemetry` text).
    case telemetryUnsent = "telemetry_unsent"
    /// The last outbox `seq` counted in the telemetry's queued writes.
    case telemetryQueuedThrough = "telemetry_queued_through"
    /// The scopes the sync engine pulls whole (JSON array): their rows stay when a subscription lets go of them.
    case wholeScopes = "whole_scopes"
    /// When the server first refused a compressed push (milliseconds since 1970, the store's
    /// clock): the engine's transport sends pushes as they are from then on, in every launch.
    case pushCompressionRefusedAt = "push_compression_refused_at"

    static func get(_ db: Database, _ key: Metadata) throws -> String? {
        try String.fetchOne(db.cachedStatement(sql: #"SELECT "value" FROM "metadata" WHERE "key" = ?"#), arguments: [key.rawValue])
    }

    static func set(_ db: Database, _ key: Metadata, _ value: String) throws {
        try db.cachedStatement(
            sql: #"INSERT INTO "metadata" ("key", "value") VALUES (?, ?) ON CONFLICT ("key") DO UPDATE SET "value" = excluded."value""#
        ).execute(arguments: [key.rawValue, value])
    }

    static func remove(_ db: Database, _ key: Metadata) throws {
        try db.execute(sql: #"DELETE FROM "metadata" WHERE "key" = ?"#, arguments: [key.rawValue])
    }

    static func integer(_ db: Database, _ key: Metadata) throws -> Int64? {
        try get(db, key).flatMap { Int64($0) }
    }
}
