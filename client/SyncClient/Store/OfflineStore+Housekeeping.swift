public import ContractRuntime
public import Foundation
import GRDB

/// What keeps the store bounded (docs/client.md, "Retention, pins and housekeeping" and
/// "Storage guard"): when the store opens and after every sync, rows past their contract's
/// `retention`, over its largest row or over its row limit are dropped, rows stored below the
/// oldest supported schema are purged, outbox entries done long ago are pruned, subscriptions
/// ended longer than their TTL are deleted with the rows nothing else holds, and when the
/// volume runs short of space the store's extensions free what they can
/// (``StoreExtension/reclaimSpace(_:in:)``). Nothing the server has not
/// acknowledged is ever removed: a row with a write still waiting, failed or in conflict, and a
/// row the app pinned, stay.
extension OfflineStore {
    /// The storage limits in force per contract: each contract's own (`max_rows`,
    /// `max_row_bytes`) with the app's (``OfflineStoreConfiguration/storageLimits``) over them.
    public var contractStorageLimits: [String: ContractStorageLimit] {
        configuration.storageLimits.inForce(for: contracts)
    }

    /// Runs every housekeeping task now and says what it removed. The store runs it when it
    /// opens and the sync engine after every sync; an app may call it too.
    @discardableResult
    public func runHousekeeping() throws(OfflineStoreError) -> HousekeepingReport {
        var report = HousekeepingReport()
        let limits = configuration.storageLimits
        let contractLimits = contractStorageLimits
        let now = now().millisecondsSince1970
        try write { db in
            try updateLocalBookkeeping(db)
            report.expiredRows = try dropExpiredRows(db, now: now)
            report.oversizedRows = try dropOversizedRows(db, limits: contractLimits, now: now)
            report.evictedRows = try evictRowsOverLimit(db, limits: contractLimits, now: now)
            if let budget = limits.databaseBudgetBytes {
                for (name, count) in try evictRowsOverBudget(db, budget: budget, now: now) {
                    report.evictedRows[name, default: 0] += count
                }
            }
            try forgetDroppedRowsThatCameBack(db)
            // Subscriptions ended longer than their TTL go, with the rows nothing else holds.
            report.subscriptionEvictions = try expireSubscriptions(db, now: now)
            for (entity, count) in try evictSettledCandidates(db) { report.subscriptionEvictions[entity, default: 0] += count }
            try forgetVanishedSubscriptionRows(db)
            report.unsupportedRows = try purgeUnsupportedRows(db, onlyWhereNeeded: true)
            report.prunedOutboxEntries = try Self.pruneCompletedOutbox(db, before: now - Int64(configuration.completedWriteRetention * 1000))
        }
        // Files (`file` fields) over their cache budget, then, when the volume runs short, the
        // least recently used of those the server holds; never one waiting to upload or named
        // by an unsynced write.
        report.evictedFiles = try enforceFileCacheBudget()
        if let free = freeBytes(), free < limits.minimumFreeBytes {
            report.evictedFiles += try evictFiles(budget: nil, toFree: limits.minimumFreeBytes - free)
        }
        report.reclaimed = try reclaimSpace(toFree: limits.minimumFreeBytes)
        return report
    }

    /// The emergency clean-up: when the volume has less than `wanted` bytes free, asks each
    /// extension in turn to free the difference (``StoreExtension/reclaimSpace(_:in:)``) until
    /// it is free. Returns what each removed, by extension name. Rows are not evicted here:
    /// deleting them frees no space in the database file.
    @discardableResult
    public func reclaimSpace(toFree wanted: Int64) throws(OfflineStoreError) -> [String: [String]] {
        var reclaimed: [String: [String]] = [:]
        for storeExtension in extensions {
            guard let free = freeBytes(), free < wanted else { break }
            let removed = try storeExtension.reclaimSpace(wanted - free, in: self)
            if !removed.isEmpty { reclaimed[storeExtension.name, default: []] += removed }
        }
        return reclaimed
    }

    /// Bytes free on the store's volume, or `nil` when unknown.
    public func freeBytes() -> Int64? {
        configuration.freeSpace.availableBytes(at: configuration.databaseURL.deletingLastPathComponent())
    }

    /// Keeps a row on the device whatever its contract's retention, row limit and largest row
    /// (until ``unpin(_:id:)``). The row need not be on the device yet: a pin taken before it
    /// arrives holds it once it does.
    public func pin<E: ContractEntity>(_ type: E.Type, id: String) throws(OfflineStoreError) {
        let now = now().millisecondsSince1970
        try write { db in try Self.pin(db, E.descriptor, id: id, now: now) }
    }

    /// Lets a pinned row go again: the next housekeeping drops it if it is past its retention.
    public func unpin<E: ContractEntity>(_ type: E.Type, id: String) throws(OfflineStoreError) {
        try write { db in try Self.unpin(db, E.descriptor, id: id) }
    }

    /// The ids of the rows of `type` the app pinned.
    public func pinnedIds<E: ContractEntity>(_ type: E.Type) throws(OfflineStoreError) -> [String] {
        try read { db in
            try String.fetchAll(db, sql: #"SELECT "row_id" FROM "pinned_rows" WHERE "entity" = ? ORDER BY "row_id""#, arguments: [E.descriptor.name])
        }
    }

    /// The rows of `type` the device dropped while the server still has them and has not sent
    /// again, by id. A read-through (``fetch(_:id:from:)``) brings one back; a pull does when
    /// the server changes it.
    public func droppedRows<E: ContractEntity>(_ type: E.Type) throws(OfflineStoreError) -> [String: DroppedRow] {
        let entity = E.descriptor
        return try read { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT "row_id", "server_version", "reason", "dropped_at" FROM "dropped_rows" WHERE "entity" = ?
                    AND "row_id" NOT IN (SELECT CAST(\(entity.primaryKey.quotedDatabaseIdentifier) AS TEXT) FROM \(entity.table.quotedDatabaseIdentifier))
                    """,
                arguments: [entity.name]
            )
            return Dictionary(
                uniqueKeysWithValues: rows.map { row in
                    (
                        row["row_id"] as String,
                        DroppedRow(
                            serverVersion: row["server_version"], reason: DropReason(rawValue: row["reason"]) ?? .expired,
                            droppedAt: Timestamp(millisecondsSince1970: row["dropped_at"]).date
                        )
                    )
                }
            )
        }
    }

    /// Notes that the app opened a row now (its local `last_accessed_at`): retention and the row
    /// limit count from it.
    ///
    /// - Throws: ``OfflineStoreError/unknownField(contract:field:)`` when the contract has no local
    ///   `last_accessed_at`; ``OfflineStoreError/rowNotFound(contract:id:)``.
    public func markAccessed<E: ContractEntity>(_ type: E.Type, id: String) throws(OfflineStoreError) {
        try setLocalBookkeeping(E.descriptor, id: id, field: "last_accessed_at", to: now().millisecondsSince1970)
    }

    /// Notes that the learner completed a row (its local `is_completed`, `Assessment`'s): over
    /// the row limit, completed rows go first.
    ///
    /// - Throws: ``OfflineStoreError/unknownField(contract:field:)`` when the contract has no local
    ///   `is_completed`; ``OfflineStoreError/rowNotFound(contract:id:)``.
    public func markCompleted<E: ContractEntity>(_ type: E.Type, id: String, completed: Bool = true) throws(OfflineStoreError) {
        try setLocalBookkeeping(E.descriptor, id: id, field: "is_completed", to: completed ? 1 : 0)
    }

    private func setLocalBookkeeping(_ entity: EntityDescriptor, id: String, field: String, to value: Int64) throws(OfflineStoreError) {
        try write { db in try Self.setLocalBookkeeping(db, entity, id: id, field: field, to: value) }
    }

    /// Sets a local bookkeeping column (`last_accessed_at`, `is_completed`) inside the caller's transaction.
    static func setLocalBookkeeping(_ db: Database, _ entity: EntityDescriptor, id: String, field: String, to value: Int64) throws {
        guard entity.localFields.contains(where: { $0.name == field }) else {
            throw OfflineStoreError.unknownField(contract: entity.name, field: field)
        }
        try db.execute(
            sql: "UPDATE \(entity.table.quotedDatabaseIdentifier) SET \(field.quotedDatabaseIdentifier) = ? "
                + "WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = ?",
            arguments: [value, id]
        )
        guard db.changesCount > 0 else { throw OfflineStoreError.rowNotFound(contract: entity.name, id: id) }
    }

    static func pin(_ db: Database, _ entity: EntityDescriptor, id: String, now: Int64) throws {
        try db.execute(
            sql: #"INSERT INTO "pinned_rows" ("entity", "row_id", "pinned_at") VALUES (?, ?, ?) ON CONFLICT DO NOTHING"#,
            arguments: [entity.name, id, now]
        )
    }

    static func unpin(_ db: Database, _ entity: EntityDescriptor, id: String) throws {
        try db.execute(sql: #"DELETE FROM "pinned_rows" WHERE "entity" = ? AND "row_id" = ?"#, arguments: [entity.name, id])
    }

    // MARK: - Internals

    /// What may be dropped: acknowledged by the server, no write waiting, failed or in conflict,
    /// no open conflict, not pinned, and no event the server has not acknowledged applying to
    /// it (an event whose contract says `applies_to` this one, naming the row by its `ref`)
    /// (named parameter `:entity`).
    private func droppable(_ entity: EntityDescriptor) -> String {
        let key = "CAST(\(entity.primaryKey.quotedDatabaseIdentifier) AS TEXT)"
        var conditions = [
            #""_synced_at" IS NOT NULL"#,
            #"\#(key) NOT IN (SELECT "row_id" FROM "outbox" WHERE "entity" = :entity AND "status" <> \#(OutboxStatus.done.sql))"#,
            #"\#(key) NOT IN (SELECT "row_id" FROM "conflicts" WHERE "entity" = :entity AND "resolution" IS NULL)"#,
            #"\#(key) NOT IN (SELECT "row_id" FROM "pinned_rows" WHERE "entity" = :entity)"#,
        ]
        for event in contracts.events where event.appliesTo == entity.name {
            for field in event.fields where field.kind == .ref(entity.name) {
                conditions.append(
                    """
                    \(key) NOT IN (SELECT CAST(e.\(field.name.quotedDatabaseIdentifier) AS TEXT) FROM \(event.table.quotedDatabaseIdentifier) AS e
                        JOIN "outbox" AS o ON o."entity" = '\(event.name)' AND o."row_id" = e."event_id" AND o."status" <> \(OutboxStatus.done.sql)
                        WHERE e.\(field.name.quotedDatabaseIdentifier) IS NOT NULL)
                    """
                )
            }
        }
        return conditions.joined(separator: "\nAND ")
    }

    /// Deletes the rows of `entity` that `condition` selects among the droppable ones (ordered
    /// and limited when asked), recording each in `dropped_rows`; returns how many.
    private func drop(
        _ db: Database, _ entity: EntityDescriptor, reason: DropReason, where condition: String, orderBy order: String? = nil,
        limit: Int? = nil, arguments: StatementArguments = [:], now: Int64
    ) throws -> Int {
        let table = entity.table.quotedDatabaseIdentifier
        let key = "CAST(\(entity.primaryKey.quotedDatabaseIdentifier) AS TEXT)"
        let sql =
            "SELECT \(key) FROM \(table) WHERE \(droppable(entity)) AND (\(condition))"
            + (order.map { " ORDER BY \($0)" } ?? "") + (limit.map { " LIMIT \($0)" } ?? "")
        // Cached without a limit: the housekeeping after every sync asks each contract with a
        // retention or a row size limit, with the same text each time.
        let ids = try String.fetchAll(
            limit == nil ? db.cachedStatement(sql: sql) : db.makeStatement(sql: sql), arguments: arguments + ["entity": entity.name])
        guard !ids.isEmpty else { return 0 }
        try drop(db, entity, ids: ids, reason: reason, now: now)
        return ids.count
    }

    /// Deletes the rows of `entity` with these ids (chosen droppable), recording each in
    /// `dropped_rows`.
    private func drop(_ db: Database, _ entity: EntityDescriptor, ids: [String], reason: DropReason, now: Int64) throws {
        let table = entity.table.quotedDatabaseIdentifier
        let key = "CAST(\(entity.primaryKey.quotedDatabaseIdentifier) AS TEXT)"
        // By id, in chunks under SQLite's limit on bound values.
        for start in stride(from: 0, to: ids.count, by: 500) {
            let chunk = Array(ids[start..<min(start + 500, ids.count)])
            let marks = databaseQuestionMarks(count: chunk.count)
            try db.execute(
                sql: """
                    INSERT INTO "dropped_rows" ("entity", "row_id", "server_version", "reason", "dropped_at")
                    SELECT ?, \(key), "_server_version", ?, ? FROM \(table) WHERE \(key) IN (\(marks))
                    ON CONFLICT ("entity", "row_id") DO UPDATE SET "server_version" = excluded."server_version",
                        "reason" = excluded."reason", "dropped_at" = excluded."dropped_at"
                    """,
                arguments: StatementArguments([entity.name, reason.rawValue] as [any DatabaseValueConvertible] + [now] + chunk)
            )
            try db.execute(sql: "DELETE FROM \(table) WHERE \(key) IN (\(marks))", arguments: StatementArguments(chunk))
        }
    }

    /// The moment a row's age counts from: its last arrival from the server, or its last use
    /// when the contract has a local `last_accessed_at` the app sets (an assessment opened again
    /// is kept another 30 days).
    private func lastUsedSQL(_ entity: EntityDescriptor) -> String {
        Self.has(entity, "last_accessed_at") ? #"MAX("_synced_at", COALESCE("last_accessed_at", 0))"# : #""_synced_at""#
    }

    private static func has(_ entity: EntityDescriptor, _ local: String) -> Bool {
        entity.localFields.contains { $0.name == local }
    }

    /// The bytes a row takes as stored: the sum of its contract fields' lengths.
    private static func rowBytesSQL(_ entity: EntityDescriptor) -> String {
        entity.fields.map { "COALESCE(length(\($0.name.quotedDatabaseIdentifier)), 0)" }.joined(separator: " + ")
    }

    /// Sets the local `downloaded_at` (first arrival) and `size_bytes` (as stored) of the
    /// contracts whose row is the download itself: those declaring both local columns (an
    /// entity downloaded with files records them itself, with a local `download_status`). For
    /// the app's storage screens; only rows whose values change are written.
    private func updateLocalBookkeeping(_ db: Database) throws {
        for entity in contracts.entities
        where Self.has(entity, "downloaded_at") && Self.has(entity, "size_bytes") && !Self.has(entity, "download_status") {
            let size = Self.rowBytesSQL(entity)
            try db.cachedStatement(
                sql: """
                    UPDATE \(entity.table.quotedDatabaseIdentifier) SET "downloaded_at" = COALESCE("downloaded_at", "_synced_at"), "size_bytes" = \(size)
                    WHERE "_synced_at" IS NOT NULL AND ("downloaded_at" IS NULL OR "size_bytes" <> \(size))
                    """
            ).execute()
        }
    }

    private func dropExpiredRows(_ db: Database, now: Int64) throws -> [String: Int] {
        var dropped: [String: Int] = [:]
        for entity in contracts.entities {
            guard let seconds = entity.retentionSeconds else { continue }
            let count = try drop(
                db, entity, reason: .expired, where: "\(lastUsedSQL(entity)) < :cutoff",
                arguments: ["cutoff": now - Int64(seconds) * 1000], now: now
            )
            if count > 0 { dropped[entity.name] = count }
        }
        return dropped
    }

    private func dropOversizedRows(_ db: Database, limits: [String: ContractStorageLimit], now: Int64) throws -> [String: Int] {
        var dropped: [String: Int] = [:]
        for entity in contracts.entities {
            guard let most = limits[entity.name]?.maxRowBytes else { continue }
            let count = try drop(db, entity, reason: .tooLarge, where: "\(Self.rowBytesSQL(entity)) > :most", arguments: ["most": most], now: now)
            if count > 0 { dropped[entity.name] = count }
        }
        return dropped
    }

    /// Over a contract's row limit: completed rows first, then the least recently used.
    private func evictRowsOverLimit(_ db: Database, limits: [String: ContractStorageLimit], now: Int64) throws -> [String: Int] {
        var evicted: [String: Int] = [:]
        for entity in contracts.entities {
            guard let most = limits[entity.name]?.maxRows else { continue }
            let count = try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM \(entity.table.quotedDatabaseIdentifier)")) ?? 0
            guard count > most else { continue }
            let order = (Self.has(entity, "is_completed") ? #""is_completed" DESC, "# : "") + "\(lastUsedSQL(entity)) ASC"
            let done = try drop(db, entity, reason: .evicted, where: "1", orderBy: order, limit: count - most, now: now)
            if done > 0 { evicted[entity.name] = done }
        }
        return evicted
    }

    /// The bytes of rows the contracts' tables hold (their fields as stored, without SQLite's
    /// overhead): what ``StorageLimits/databaseBudgetBytes`` bounds.
    static func rowBytes(_ db: Database, contracts: ContractCatalog) throws -> Int64 {
        try contracts.entities.reduce(Int64(0)) { total, entity in
            total
                + (try Int64.fetchOne(db, sql: "SELECT COALESCE(SUM(\(Self.rowBytesSQL(entity))), 0) FROM \(entity.table.quotedDatabaseIdentifier)")
                    ?? 0)
        }
    }

    /// Over the database budget: synced rows of contracts devices pull (the server can send
    /// them again), the lowest priority first, within a contract completed rows first, then
    /// the least recently used, until the rows fit or nothing more may go.
    private func evictRowsOverBudget(_ db: Database, budget: Int64, now: Int64) throws -> [String: Int] {
        var excess = try Self.rowBytes(db, contracts: contracts) - budget
        guard excess > 0 else { return [:] }
        var evicted: [String: Int] = [:]
        let candidates = contracts.entities.filter { $0.direction != .up }.sorted { ($0.priority, $0.name) > ($1.priority, $1.name) }
        for entity in candidates where excess > 0 {
            let order = (Self.has(entity, "is_completed") ? #""is_completed" DESC, "# : "") + "\(lastUsedSQL(entity)) ASC"
            // Read to the rows needed, then the cursor is released before anything is deleted.
            let ids: [String] = try {
                let rows = try Row.fetchCursor(
                    db,
                    sql: """
                        SELECT CAST(\(entity.primaryKey.quotedDatabaseIdentifier) AS TEXT) AS "id", \(Self.rowBytesSQL(entity)) AS "bytes"
                        FROM \(entity.table.quotedDatabaseIdentifier) WHERE \(droppable(entity)) ORDER BY \(order)
                        """,
                    arguments: ["entity": entity.name]
                )
                var ids: [String] = []
                while excess > 0, let row = try rows.next() {
                    ids.append(row["id"])
                    excess -= row["bytes"] as Int64
                }
                return ids
            }()
            guard !ids.isEmpty else { continue }
            try drop(db, entity, ids: ids, reason: .evicted, now: now)
            evicted[entity.name] = ids.count
        }
        return evicted
    }

    /// Rows that came back since they were dropped are no longer dropped (looked up by primary
    /// key, entry by entry: usually there are none).
    private func forgetDroppedRowsThatCameBack(_ db: Database) throws {
        let entities = try Set(String.fetchAll(db.cachedStatement(sql: #"SELECT DISTINCT "entity" FROM "dropped_rows""#)))
        for entity in contracts.entities where entities.contains(entity.name) {
            try db.execute(
                sql: """
                    DELETE FROM "dropped_rows" WHERE "entity" = ? AND EXISTS (
                        SELECT 1 FROM \(entity.table.quotedDatabaseIdentifier) WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = "dropped_rows"."row_id")
                    """,
                arguments: [entity.name]
            )
        }
    }
}

/// Why the device dropped a row the server still has.
public enum DropReason: String, Hashable, Sendable {
    /// Older than its contract's `retention`.
    case expired
    /// Over its contract's row limit (``ContractStorageLimit/maxRows``).
    case evicted
    /// Larger than its contract's largest row (``ContractStorageLimit/maxRowBytes``).
    case tooLarge = "too_large"
}

/// A row the device dropped (``OfflineStore/droppedRows(_:)``).
public struct DroppedRow: Hashable, Sendable {
    /// The server version the device had; the server changing the row brings it back.
    public var serverVersion: Int64?
    /// Why the device dropped it.
    public var reason: DropReason
    /// When the device dropped it.
    public var droppedAt: Date
}

/// What one ``OfflineStore/runHousekeeping()`` removed.
public struct HousekeepingReport: Hashable, Sendable {
    /// Rows dropped at the end of their contract's `retention`, per contract.
    public var expiredRows: [String: Int] = [:]
    /// Rows larger than their contract's largest row, per contract.
    public var oversizedRows: [String: Int] = [:]
    /// Rows evicted over their contract's row limit, per contract.
    public var evictedRows: [String: Int] = [:]
    /// Rows stored below their contract's oldest supported schema, per contract (pulled again).
    public var unsupportedRows: [String: Int] = [:]
    /// Outbox entries the server acknowledged longer than
    /// ``OfflineStoreConfiguration/completedWriteRetention`` ago.
    public var prunedOutboxEntries = 0
    /// Rows evicted because the subscriptions holding them expired (their TTL passed after
    /// they ended) and nothing else holds them, per contract.
    public var subscriptionEvictions: [String: Int] = [:]
    /// What the store's extensions removed because the volume was short of space, by
    /// extension name (``StoreExtension/reclaimSpace(_:in:)``).
    public var reclaimed: [String: [String]] = [:]
    /// The SHA-256 of each file evicted from the files folder (``StorageLimits/fileCacheBytes``,
    /// or the volume short of ``StorageLimits/minimumFreeBytes``).
    public var evictedFiles: [String] = []

    /// An empty report: nothing removed.
    public init() {}
}
