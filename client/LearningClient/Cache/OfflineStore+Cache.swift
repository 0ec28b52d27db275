import ContractRuntime
import Contracts
public import Foundation
import GRDB
public import SyncClient

/// Cache management: what is on the device, how big it is, and removing it.
///
/// Deleting a unit removes its rows (the unit, its lessons, their `Asset` rows), its download
/// records and its files. Writes in the outbox are never touched: a queued progress event of a
/// deleted unit is still sent. So that the catalogue comes back whole, the cursor of the content
/// scope is forgotten: the next pull lists the unit again (not downloaded).
extension OfflineStore {
    /// Every unit of the catalogue, and units whose files are still on the device after the
    /// server deleted them, with their offline status and size; in catalogue order (`sort_index`,
    /// title), the deleted ones last.
    public func cachedUnits() throws(OfflineStoreError) -> [CachedUnit] {
        let now = now()
        return try readTables(withReader: { reader, db in try cachedUnits(reader, db, now: now) })
    }

    /// The storage the store uses: asset files (partial ones apart) and the database.
    public func cacheTotals() throws(OfflineStoreError) -> CacheTotals {
        let now = now()
        let (units, files) = try readTables(withReader: { reader, db in
            (
                try cachedUnits(reader, db, now: now),
                try Row.fetchOne(
                    db,
                    sql: """
                        SELECT COALESCE(SUM(\(Self.bytesOnDiskSQL)), 0) AS "on_disk",
                            COALESCE(SUM(CASE "status" WHEN 'downloaded' THEN 0 ELSE "downloaded_bytes" END), 0) AS "partial",
                            COUNT(CASE "status" WHEN 'downloaded' THEN 1 END) AS "files"
                        FROM "assets"
                        """
                )
            )
        })
        let database = configuration.databaseURL.path
        let databaseBytes = [database, database + "-wal", database + "-shm"]
            .compactMap { AssetFiles.size(of: URL(fileURLWithPath: $0)) }.reduce(0, +)
        return CacheTotals(
            units: units.count, downloadedUnits: units.filter { $0.status == .downloaded }.count,
            bytesOnDisk: files?["on_disk"] ?? 0, partialBytes: files?["partial"] ?? 0, files: files?["files"] ?? 0,
            databaseBytes: databaseBytes
        )
    }

    /// Deletes a unit from the device: its rows, download records and files, even while writes
    /// that refer to it wait in the outbox (they stay there and are still sent).
    ///
    /// - Throws: ``OfflineStoreError/rowNotFound(contract:id:)`` when the device has nothing of
    ///   the unit; ``OfflineStoreError/fileSystem(path:reason:)`` when a file cannot be deleted.
    public func deleteCachedUnit(id: String) throws(OfflineStoreError) {
        guard try deleteUnitContent(id, unlessUnsynced: false) == .deleted else {
            throw .rowNotFound(contract: Contracts.Unit.descriptor.name, id: id)
        }
    }

    /// Deletes every unit, lesson and `Asset` row, every download record and every asset file.
    /// Writes waiting in the outbox stay there and are still sent.
    public func clearCache() throws(OfflineStoreError) {
        try writeTables(withTransaction: { transaction, db in
            for table in [UnitContent.assetTable, UnitContent.lessonTable, UnitContent.unitTable, #""assets""#, #""unit_cache""#] {
                try db.execute(sql: "DELETE FROM \(table)")
            }
            try transaction.forgetCursors(ofScopes: UnitContent.contentScopes)
        })
        let directory = assetsDirectory
        let files = (try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)) ?? []
        for file in files { try Self.removeFile(file) }
    }

    /// Notes that the app opened a unit now: its last use, for eviction (and the unit's
    /// `last_accessed_at`). Call it whenever the learner opens the unit.
    ///
    /// - Throws: ``OfflineStoreError/rowNotFound(contract:id:)`` when the device has no such unit.
    public func markUnitOpened(id: String) throws(OfflineStoreError) {
        try setCacheBookkeeping(id, column: "last_opened_at", to: now().millisecondsSince1970, unitColumn: "last_accessed_at")
    }

    /// Notes that the learner completed a unit (or no longer has, with `completed: false`):
    /// completed units not opened for a week are evicted early. A `CompletionRecord` of the
    /// whole unit from the server counts as completed too.
    public func markUnitCompleted(id: String, completed: Bool = true) throws(OfflineStoreError) {
        try setCacheBookkeeping(id, column: "completed_at", to: completed ? now().millisecondsSince1970 : nil)
    }

    /// Sets (or, with `nil`, removes) the date after which a unit's offline copy is expired and
    /// evicted first, for content licensed for a while.
    public func setUnitExpiry(id: String, expiresAt: Date?) throws(OfflineStoreError) {
        try setCacheBookkeeping(id, column: "expires_at", to: expiresAt.map { Timestamp($0).millisecondsSince1970 })
    }

    // MARK: - Internals

    /// Bytes a download record holds on disk: the file once verified, else the partial bytes.
    static let bytesOnDiskSQL = #"CASE "status" WHEN 'downloaded' THEN "size_bytes" ELSE "downloaded_bytes" END"#

    enum UnitDeletion: Equatable {
        case deleted
        /// Nothing of the unit was on the device.
        case notFound
        /// Kept: writes not yet on the server involve it.
        case keptForUnsyncedWrites
    }

    /// Deletes a unit's rows, download records and cache bookkeeping in one transaction, then
    /// its files.
    func deleteUnitContent(_ id: String, unlessUnsynced: Bool) throws(OfflineStoreError) -> UnitDeletion {
        let directory = assetsDirectory
        let outcome: (UnitDeletion, [URL]) = try writeTables(withTransaction: { transaction, db in
            if unlessUnsynced, try unitsWithUnsyncedWrites(transaction.reader, db).contains(id) { return (.keptForUnsyncedWrites, []) }
            let records = try UnitContent.recordIds(db, unitId: id)
            let before = db.totalChangesCount
            try db.execute(
                sql:
                    "DELETE FROM \(UnitContent.assetTable) WHERE \"lesson_id\" IN (SELECT \"id\" FROM \(UnitContent.lessonTable) WHERE \"unit_id\" = ?)",
                arguments: [id]
            )
            try db.execute(sql: "DELETE FROM \(UnitContent.lessonTable) WHERE \"unit_id\" = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM \(UnitContent.unitTable) WHERE \"id\" = ?", arguments: [id])
            let deletedContent = db.totalChangesCount > before
            if deletedContent { try transaction.forgetCursors(ofScopes: UnitContent.contentScopes) }
            try db.execute(sql: #"DELETE FROM "unit_cache" WHERE "unit_id" = ?"#, arguments: [id])
            let found = deletedContent || db.changesCount > 0 || !records.isEmpty
            return (found ? .deleted : .notFound, try UnitContent.deleteRecords(db, ids: records, directory: directory))
        })
        for file in outcome.1 { try Self.removeFile(file) }
        return outcome.0
    }

    /// Sets a column of a unit's cache bookkeeping (created if missing), and optionally the
    /// same time in a local column of the unit's row.
    private func setCacheBookkeeping(_ id: String, column: String, to value: Int64?, unitColumn: String? = nil) throws(OfflineStoreError) {
        let now = now().millisecondsSince1970
        try writeTables { db in
            let known =
                try Bool.fetchOne(
                    db,
                    sql:
                        "SELECT EXISTS (SELECT 1 FROM \(UnitContent.unitTable) WHERE \"id\" = ?) OR EXISTS (SELECT 1 FROM \"unit_cache\" WHERE \"unit_id\" = ?)",
                    arguments: [id, id]
                ) ?? false
            guard known else { throw OfflineStoreError.rowNotFound(contract: Contracts.Unit.descriptor.name, id: id) }
            let name = column.quotedDatabaseIdentifier
            try db.execute(
                sql: #"INSERT INTO "unit_cache" ("unit_id", "added_at", "# + name + ") VALUES (?, ?, ?) "
                    + #"ON CONFLICT ("unit_id") DO UPDATE SET "# + name + " = excluded." + name,
                arguments: [id, now, value]
            )
            if let unitColumn {
                try db.execute(
                    sql: "UPDATE \(UnitContent.unitTable) SET \(unitColumn.quotedDatabaseIdentifier) = ? WHERE \"id\" = ?",
                    arguments: [value, id]
                )
            }
        }
    }

    /// The listing of ``cachedUnits()``.
    func cachedUnits(_ reader: StoreReader, _ db: Database, now: Timestamp) throws -> [CachedUnit] {
        guard UnitContent.isHeld(by: contracts) else { return [] }
        struct File {
            var size: Int64
            var onDisk: Int64
            var isDownloaded: Bool
        }
        var files: [String: [String: File]] = [:]
        var unitOfAsset: [String: String] = [:]
        let contentFiles = try Row.fetchAll(
            db,
            sql: """
                SELECT l."unit_id", a."id", a."size_bytes" FROM \(UnitContent.assetTable) a
                JOIN \(UnitContent.lessonTable) l ON l."id" = a."lesson_id"
                """
        )
        for row in contentFiles {
            let (unit, asset): (String, String) = (row[0], row[1])
            unitOfAsset[asset] = unit
            files[unit, default: [:]][asset] = File(size: row[2], onDisk: 0, isDownloaded: false)
        }
        var recordedUnits: Set<String> = []
        let records = try Row.fetchAll(
            db, sql: #"SELECT "asset_id", "unit_id", "size_bytes", "status", "# + Self.bytesOnDiskSQL + #" AS "on_disk" FROM "assets""#
        )
        for row in records {
            let asset: String = row["asset_id"]
            guard let unit = unitOfAsset[asset] ?? row["unit_id"] else { continue }
            recordedUnits.insert(unit)
            files[unit, default: [:]][asset] = File(
                size: row["size_bytes"], onDisk: row["on_disk"], isDownloaded: row["status"] == AssetStatus.downloaded.rawValue
            )
        }
        let bookkeeping = Dictionary(
            try Row.fetchAll(db, sql: #"SELECT * FROM "unit_cache""#).map { ($0["unit_id"] as String, $0) },
            uniquingKeysWith: { first, _ in first }
        )
        let completedByRecord = try String.fetchSet(
            db, sql: "SELECT \"unit_id\" FROM \(UnitContent.completionTable) WHERE \"lesson_id\" IS NULL"
        )
        let unsynced = try unitsWithUnsyncedWrites(reader, db)
        let catalogue = try Row.fetchAll(
            db, sql: "SELECT \"id\", \"title\" FROM \(UnitContent.unitTable) ORDER BY \"sort_index\", \"title\", \"id\""
        ).map { (id: $0["id"] as String, title: $0["title"] as String?) }
        let listed = Set(catalogue.map(\.id))
        let orphans = Set(bookkeeping.keys).union(recordedUnits).subtracting(listed).sorted().map { (id: $0, title: String?.none) }

        func date(_ row: Row?, _ column: String) -> Date? {
            (row?[column] as Int64?).map { Timestamp(millisecondsSince1970: $0).date }
        }
        return (catalogue + orphans).map { entry in
            let unitFiles = files[entry.id]?.values.map { $0 } ?? []
            let cache = bookkeeping[entry.id]
            let downloadedFiles = unitFiles.filter(\.isDownloaded).count
            let bytesOnDisk = unitFiles.reduce(0) { $0 + $1.onDisk }
            let downloadedAt = date(cache, "downloaded_at")
            let expiresAt = date(cache, "expires_at")
            let status: UnitCacheStatus
            if !listed.contains(entry.id) || expiresAt.map({ $0 <= now.date }) == true {
                status = .expired
            } else if downloadedAt != nil && downloadedFiles == unitFiles.count {
                status = .downloaded
            } else if bytesOnDisk > 0 || downloadedFiles > 0 || downloadedAt != nil {
                status = .partial
            } else {
                status = .notDownloaded
            }
            return CachedUnit(
                id: entry.id, title: entry.title, status: status, bytesOnDisk: bytesOnDisk,
                bytesTotal: unitFiles.reduce(0) { $0 + $1.size }, fileCount: unitFiles.count, downloadedFileCount: downloadedFiles,
                addedAt: date(cache, "added_at"), downloadedAt: downloadedAt, lastOpenedAt: date(cache, "last_opened_at"),
                isCompleted: cache?["completed_at"] as Int64? != nil || completedByRecord.contains(entry.id), expiresAt: expiresAt,
                hasUnsyncedWrites: unsynced.contains(entry.id)
            )
        }
    }

    /// The units that writes not yet on the server (any outbox entry not `done`) lead to: a
    /// written unit, lesson or asset, or a written row that refers to one through its `ref<…>`
    /// fields, followed from row to row (a progress event names its lesson; an attempt its
    /// assessment, which names its unit).
    func unitsWithUnsyncedWrites(_ reader: StoreReader, _ db: Database) throws -> Set<String> {
        var units: Set<String> = []
        var visited: Set<String> = []
        func follow(_ contract: String, _ id: String) throws {
            guard visited.insert(contract + "\u{0}" + id).inserted else { return }
            if contract == Contracts.Unit.descriptor.name {
                units.insert(id)
                return
            }
            let table: String, key: String, fields: [FieldDescriptor]
            if let entity = contracts.entity(named: contract) {
                (table, key, fields) = (entity.table, entity.primaryKey, entity.fields)
            } else if let event = contracts.event(named: contract) {
                (table, key, fields) = (event.table, "event_id", event.fields)
            } else {
                return
            }
            let references: [(column: String, target: String)] = fields.compactMap { field in
                guard !field.isEncrypted, case .ref(let target) = field.kind else { return nil }
                return (field.name, target)
            }
            guard !references.isEmpty,
                let row = try Row.fetchOne(
                    db,
                    sql: "SELECT \(references.map(\.column.quotedDatabaseIdentifier).joined(separator: ", ")) FROM "
                        + "\(table.quotedDatabaseIdentifier) WHERE \(key.quotedDatabaseIdentifier) = ?",
                    arguments: [id]
                )
            else { return }
            for (index, reference) in references.enumerated() {
                if let value = row[index] as String? { try follow(reference.target, value) }
            }
        }
        for row in try reader.unsyncedRows() { try follow(row.contract, row.id) }
        return units
    }
}
