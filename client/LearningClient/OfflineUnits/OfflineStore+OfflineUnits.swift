import ContractRuntime
import Contracts
import Foundation
import GRDB
public import SyncClient

/// Units kept for offline use: each is a `unit` subscription of the store (the contracts'
/// subscription of a unit with its lessons and their `Asset` rows, ``AssetDownloader/downloadUnit(id:progress:)``
/// makes it), plus the download records and files of its assets. What the device knows of a
/// unit's use is its subscription's: when it was made (added), last used (opened), ended
/// (completed, kept a while). Space is reclaimed in the subscriptions' eviction order
/// (``OfflineStore/subscriptionsInEvictionOrder(neverUsedAge:)``), which is the order the
/// learning app asks for:
///
/// 1. expired units: the server deleted the unit while its files were still on the device;
/// 2. completed units (their subscription ended when the learner completed them and stays
///    7 days by default, unless the unit is opened again), soonest to expire first;
/// 3. units never opened, downloaded more than ``CacheBudget/neverOpenedAge`` ago (3 days);
/// 4. the rest, least recently opened first.
///
/// A unit that writes not yet on the server lead to is never evicted (``CachedUnit/hasUnsyncedWrites``).
/// Deleting a unit ends its subscription now: its rows leave the device unless a scope synced
/// whole (the catalogue) or a waiting write holds them; its download records and files go.
/// Writes in the outbox are never touched: a queued progress event of a deleted unit is still sent.
extension OfflineStore {
    /// Every unit on the device (the catalogue when the content scope is synced, and units
    /// kept for offline use), and units whose files are still on the device after the server
    /// deleted them, with their offline status and size; in catalogue order (`sort_index`,
    /// title), the deleted ones last.
    public func cachedUnits() throws(OfflineStoreError) -> [CachedUnit] {
        let now = now()
        let subscriptions = try unitSubscriptions()
        return try readTables(withReader: { reader, db in try cachedUnits(reader, db, subscriptions: subscriptions, now: now) })
    }

    /// The storage the store uses: asset files (partial ones apart) and the database.
    public func cacheTotals() throws(OfflineStoreError) -> CacheTotals {
        let now = now()
        let subscriptions = try unitSubscriptions()
        let (units, files) = try readTables(withReader: { reader, db in
            (
                try cachedUnits(reader, db, subscriptions: subscriptions, now: now),
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

    /// Deletes a unit kept for offline use: ends its subscription now (its rows go unless
    /// something else holds them) and deletes its download records and files, even while writes
    /// that refer to it wait in the outbox (they stay there and are still sent).
    ///
    /// - Throws: ``OfflineStoreError/rowNotFound(contract:id:)`` when the device keeps nothing
    ///   of the unit for offline use; ``OfflineStoreError/fileSystem(path:reason:)`` when a file
    ///   cannot be deleted.
    public func deleteCachedUnit(id: String) throws(OfflineStoreError) {
        guard try deleteUnitContent(id, unlessUnsynced: false) == .deleted else {
            throw .rowNotFound(contract: Contracts.Unit.descriptor.name, id: id)
        }
    }

    /// Deletes every unit kept for offline use (as ``deleteCachedUnit(id:)``), every download
    /// record and every asset file. Writes waiting in the outbox stay there and are still sent.
    public func clearCache() throws(OfflineStoreError) {
        let units = try unitSubscriptions()
        for unit in units.keys.sorted() { _ = try deleteUnitContent(unit, unlessUnsynced: false, subscriptions: units) }
        try writeTables { db in
            try db.execute(sql: #"DELETE FROM "assets""#)
            try Self.resetDownloadState(db, unitId: nil)
        }
        let directory = assetsDirectory
        let files = (try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)) ?? []
        for file in files { try Self.removeFile(file) }
    }

    /// Notes that the app opened a unit now: its subscription's last use (for eviction), and
    /// the unit's `last_accessed_at`. A unit not kept yet is kept from now on (subscribed: its
    /// lessons come with the next sync); a completed one is kept again as any other.
    ///
    /// - Throws: ``OfflineStoreError/rowNotFound(contract:id:)`` when the device has no such unit.
    public func markUnitOpened(id: String) throws(OfflineStoreError) {
        let known = try readTables { db in
            try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM \(UnitContent.unitTable) WHERE \"id\" = ?)", arguments: [id]) ?? false
        }
        let kept = try unitSubscriptions()[id] != nil
        guard known || kept else { throw .rowNotFound(contract: Contracts.Unit.descriptor.name, id: id) }
        let subscription = try subscribeToUnit(id)
        try unitSubscriptionCall { () throws(SubscriptionError) in try markSubscriptionUsed(id: subscription.id) }
        let now = now().millisecondsSince1970
        try writeTables { db in
            try db.execute(sql: "UPDATE \(UnitContent.unitTable) SET \"last_accessed_at\" = ? WHERE \"id\" = ?", arguments: [now, id])
        }
    }

    /// Notes that the learner completed a unit: its subscription ends, its rows and files stay
    /// `keepingFor` (a week) unless it is opened again, and it goes before units still in use
    /// when space is short. With `completed: false` it is kept as before. A `CompletionRecord`
    /// of the whole unit from the server counts as completed in ``cachedUnits()`` too.
    ///
    /// - Throws: ``OfflineStoreError/rowNotFound(contract:id:)`` when the device keeps nothing
    ///   of the unit for offline use.
    public func markUnitCompleted(id: String, completed: Bool = true, keepingFor: Duration = .seconds(7 * 86_400)) throws(OfflineStoreError) {
        guard let subscription = try unitSubscriptions()[id] else { throw .rowNotFound(contract: Contracts.Unit.descriptor.name, id: id) }
        if completed {
            try unitSubscriptionCall { () throws(SubscriptionError) in try unsubscribeSubscription(id: subscription.id, keepingFor: keepingFor) }
        } else if !subscription.isActive {
            _ = try subscribeToUnit(id)
        }
    }

    // MARK: - Internals

    /// Bytes a download record holds on disk: the file once verified, else the partial bytes.
    static let bytesOnDiskSQL = #"CASE "status" WHEN 'downloaded' THEN "size_bytes" ELSE "downloaded_bytes" END"#

    /// The `unit` subscriptions the store holds (active or ended), by unit id.
    func unitSubscriptions() throws(OfflineStoreError) -> [String: SubscriptionStatus] {
        var units: [String: SubscriptionStatus] = [:]
        for subscription in try subscriptions() where subscription.error == nil {
            if let unit = Self.unitId(of: subscription.request) { units[unit] = subscription }
        }
        return units
    }

    /// The unit a request keeps, when it is the contracts' `unit` subscription of one.
    static func unitId(of request: SubscriptionRequest) -> String? {
        guard case .string(let id)? = request.parameters["id"], request == Subscriptions.unit(id: id) else { return nil }
        return id
    }

    /// Subscribes to a unit (or makes its subscription active again).
    private func subscribeToUnit(_ id: String) throws(OfflineStoreError) -> SubscriptionStatus {
        try unitSubscriptionCall { () throws(SubscriptionError) in try subscribe(Subscriptions.unit(id: id)) }
    }

    /// A subscription call, its error as the store's: a unit id that is no identifier is no unit.
    private func unitSubscriptionCall<T>(_ body: () throws(SubscriptionError) -> T) throws(OfflineStoreError) -> T {
        do {
            return try body()
        } catch .invalidParameter(_, let reason) {
            throw .invalidValue(contract: Contracts.Unit.descriptor.name, field: "id", reason: reason)
        } catch .unknownSubscription(let name, _) {
            // A store opened with another app's contracts: it keeps no unit.
            throw .unknownContract("subscription \(name)")
        } catch {
            throw .database(code: -1, message: error.description)
        }
    }

    enum UnitDeletion: Equatable {
        case deleted
        /// Nothing of the unit was kept for offline use.
        case notFound
        /// Kept: writes not yet on the server involve it.
        case keptForUnsyncedWrites
    }

    /// Ends a unit's subscription now (its rows go unless held otherwise) and deletes its
    /// download records, then its files.
    func deleteUnitContent(
        _ id: String, unlessUnsynced: Bool, subscriptions: [String: SubscriptionStatus]? = nil
    ) throws(OfflineStoreError) -> UnitDeletion {
        if unlessUnsynced, try readTables(withReader: { reader, db in try unitsWithUnsyncedWrites(reader, db) }).contains(id) {
            return .keptForUnsyncedWrites
        }
        let known: [String: SubscriptionStatus]
        if let subscriptions { known = subscriptions } else { known = try unitSubscriptions() }
        let subscription = known[id]
        if let subscription {
            _ = try unitSubscriptionCall { () throws(SubscriptionError) in try evictSubscription(id: subscription.id) }
        }
        let directory = assetsDirectory
        let files: [URL] = try writeTables { db in
            let records = try UnitContent.recordIds(db, unitId: id)
            try Self.resetDownloadState(db, unitId: id)
            return try UnitContent.deleteRecords(db, ids: records, directory: directory)
        }
        for file in files { try Self.removeFile(file) }
        return subscription != nil || !files.isEmpty ? .deleted : .notFound
    }

    /// Clears the download columns of a unit row that stays (the catalogue holds it), or of every one.
    private static func resetDownloadState(_ db: Database, unitId: String?) throws {
        try db.execute(
            sql: "UPDATE \(UnitContent.unitTable) SET \"download_status\" = 'none', \"downloaded_at\" = NULL"
                + (unitId == nil ? "" : " WHERE \"id\" = ?"),
            arguments: StatementArguments(unitId.map { [$0] } ?? []))
    }

    /// The listing of ``cachedUnits()``.
    func cachedUnits(_ reader: StoreReader, _ db: Database, subscriptions: [String: SubscriptionStatus], now: Timestamp) throws -> [CachedUnit] {
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
        let completedByRecord = try String.fetchSet(
            db, sql: "SELECT \"unit_id\" FROM \(UnitContent.completionTable) WHERE \"lesson_id\" IS NULL"
        )
        let unsynced = try unitsWithUnsyncedWrites(reader, db)
        let catalogue = try Row.fetchAll(
            db, sql: "SELECT \"id\", \"title\", \"downloaded_at\" FROM \(UnitContent.unitTable) ORDER BY \"sort_index\", \"title\", \"id\""
        ).map { (id: $0["id"] as String, title: $0["title"] as String?, downloadedAt: $0["downloaded_at"] as Int64?) }
        let listed = Set(catalogue.map(\.id))
        let orphans = Set(subscriptions.keys).union(recordedUnits).subtracting(listed).sorted()
            .map { (id: $0, title: String?.none, downloadedAt: Int64?.none) }

        return (catalogue + orphans).map { entry in
            let unitFiles = files[entry.id]?.values.map { $0 } ?? []
            let subscription = subscriptions[entry.id]
            let downloadedFiles = unitFiles.filter(\.isDownloaded).count
            let bytesOnDisk = unitFiles.reduce(0) { $0 + $1.onDisk }
            let downloadedAt = entry.downloadedAt.map { Timestamp(millisecondsSince1970: $0).date }
            let expiresAt = subscription?.expiresAt
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
                addedAt: subscription?.createdAt, downloadedAt: downloadedAt, lastOpenedAt: subscription?.lastUsedAt,
                isCompleted: subscription?.isActive == false || completedByRecord.contains(entry.id), expiresAt: expiresAt,
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

extension OfflineStore {
    /// Evicts units until asset files take at most `budget.maxBytes`, in the eviction order
    /// above; returns the evicted units' ids in that order. The clock is the store's
    /// (``OfflineStoreConfiguration/clock``).
    ///
    /// - Parameters:
    ///   - budget: the most bytes of asset files to keep.
    ///   - kept: units not to evict now (one being downloaded, or just downloaded).
    @discardableResult
    public func enforceCacheBudget(_ budget: CacheBudget = .standard, keeping kept: Set<String> = []) throws(OfflineStoreError) -> [String] {
        let now = now()
        let subscriptions = try unitSubscriptions()
        let order = try subscriptionsInEvictionOrder(neverUsedAge: .seconds(Int64(budget.neverOpenedAge)))
        let (units, total) = try readTables(withReader: { reader, db in
            (
                try cachedUnits(reader, db, subscriptions: subscriptions, now: now),
                try Int64.fetchOne(db, sql: "SELECT COALESCE(SUM(\(Self.bytesOnDiskSQL)), 0) FROM \"assets\"") ?? 0
            )
        })
        var remaining = total
        var evicted: [String] = []
        for unit in Self.evictionOrder(units, subscriptions: order) where !kept.contains(unit.id) {
            guard remaining > budget.maxBytes else { break }
            // Checked again as it goes: a write may have been queued since.
            guard try deleteUnitContent(unit.id, unlessUnsynced: true, subscriptions: subscriptions) == .deleted else { continue }
            remaining -= unit.bytesOnDisk
            evicted.append(unit.id)
        }
        return evicted
    }

    /// The emergency clean-up: evicts downloaded units in the eviction order (never one a
    /// waiting write leads to, nor those in `kept`) until the volume has `bytes` free, or
    /// nothing more may go. Returns the evicted units' ids. The store's housekeeping runs it
    /// (``LearningStore/reclaimSpace(_:in:)``); a download makes room with it first.
    @discardableResult
    public func reclaimUnitSpace(toFree wanted: Int64, keeping kept: Set<String> = []) throws(OfflineStoreError) -> [String] {
        guard let free = freeBytes(), free < wanted else { return [] }
        return try evictUnits(freeing: wanted - free, keeping: kept)
    }

    /// Bytes of files ``reclaimUnitSpace(toFree:keeping:)`` could free: units without a waiting
    /// write that leads to them, other than `kept`.
    public func reclaimableBytes(keeping kept: Set<String> = []) throws(OfflineStoreError) -> Int64 {
        try cachedUnits().filter { !$0.hasUnsyncedWrites && !kept.contains($0.id) }.reduce(0) { $0 + $1.bytesOnDisk }
    }

    /// Evicts units until `bytes` more are free on the volume.
    func evictUnits(freeing bytes: Int64, keeping kept: Set<String>) throws(OfflineStoreError) -> [String] {
        let files = try cacheTotals().bytesOnDisk
        return try enforceCacheBudget(CacheBudget(maxBytes: max(0, files - bytes)), keeping: kept)
    }

    /// The units with files that may be evicted (no unsynced writes), in eviction order: those
    /// the server deleted or no subscription keeps first, then in the subscriptions' order.
    static func evictionOrder(_ units: [CachedUnit], subscriptions order: [SubscriptionStatus]) -> [CachedUnit] {
        let candidates = units.filter { $0.bytesOnDisk > 0 && !$0.hasUnsyncedWrites }
        let byId = Dictionary(candidates.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let subscribed = order.compactMap { unitId(of: $0.request) }
        let ranked = Set(subscribed)
        let first = candidates.filter { $0.status == .expired || !ranked.contains($0.id) }
        let firstIds = Set(first.map(\.id))
        return first + subscribed.filter { !firstIds.contains($0) }.compactMap { byId[$0] }
    }
}
