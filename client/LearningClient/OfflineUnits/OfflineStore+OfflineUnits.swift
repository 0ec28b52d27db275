import ContractRuntime
import Contracts
import Foundation
import GRDB
public import SyncClient

/// Units kept for offline use: each is a `unit` subscription of the store (the contracts'
/// subscription of a unit with its lessons and their `Asset` rows, which
/// ``SyncClient/SyncEngine/downloadUnit(id:progress:)`` makes), plus the files its `Asset` rows
/// name, in the engine's file cache. What the device knows of a unit's use is its
/// subscription's: when it was made (added), last used (opened), ended (completed, kept a
/// while, then its rows go).
///
/// The files are the engine's (``SyncClient/OfflineStore/storedFiles()``): kept within
/// ``SyncClient/StorageLimits/fileCacheBytes``, the least recently used evicted first (a file
/// read through ``SyncClient/SyncEngine/file(for:)`` or ``SyncClient/SyncEngine/assetFile(id:)``
/// counts as used), never a file an unsynced write names; an evicted file is downloaded again
/// when asked for, and its unit shows as `partial` meanwhile.
///
/// Deleting a unit ends its subscription now: its rows leave the device unless a scope synced
/// whole (the catalogue) or a waiting write holds them; its files stay in the engine's cache
/// until it evicts them. Writes in the outbox are never touched: a queued progress event of a
/// deleted unit is still sent.
extension OfflineStore {
    /// Every unit on the device (the catalogue when the content scope is synced, and units
    /// kept for offline use), and units still subscribed after the server deleted them, with
    /// their offline status and the bytes of their files in the engine's cache; in catalogue
    /// order (`sort_index`, title), the deleted ones last.
    public func cachedUnits() throws(OfflineStoreError) -> [CachedUnit] {
        let now = now()
        let subscriptions = try unitSubscriptions()
        let held = try heldFiles()
        return try readTables(withReader: { reader, db in try cachedUnits(reader, db, subscriptions: subscriptions, held: held, now: now) })
    }

    /// The storage the learning app's content uses: the files of the content's `Asset` rows the
    /// engine's cache holds, and the database.
    public func cacheTotals() throws(OfflineStoreError) -> CacheTotals {
        let now = now()
        let subscriptions = try unitSubscriptions()
        let held = try heldFiles()
        let (units, named) = try readTables(withReader: { reader, db in
            (
                try cachedUnits(reader, db, subscriptions: subscriptions, held: held, now: now),
                try UnitContent.assetFiles(db).map(\.file.sha256)
            )
        })
        let files = Set(named).compactMap { held[$0] }
        let database = configuration.databaseURL.path
        let databaseBytes = [database, database + "-wal", database + "-shm"]
            .compactMap { (try? FileManager.default.attributesOfItem(atPath: $0)[.size] as? NSNumber)?.int64Value }.reduce(0, +)
        return CacheTotals(
            units: units.count, downloadedUnits: units.filter { $0.status == .downloaded }.count,
            bytesOnDisk: files.reduce(0) { $0 + $1 }, files: files.count, databaseBytes: databaseBytes
        )
    }

    /// Deletes a unit kept for offline use: ends its subscription now (its rows go unless
    /// something else holds them), even while writes that refer to it wait in the outbox (they
    /// stay there and are still sent). Its files stay in the engine's cache until it evicts them.
    ///
    /// - Throws: ``OfflineStoreError/rowNotFound(contract:id:)`` when the device keeps nothing
    ///   of the unit for offline use.
    public func deleteCachedUnit(id: String) throws(OfflineStoreError) {
        guard try deleteUnitContent(id, unlessUnsynced: false) == .deleted else {
            throw .rowNotFound(contract: Contracts.Unit.descriptor.name, id: id)
        }
    }

    /// Deletes every unit kept for offline use (as ``deleteCachedUnit(id:)``). Writes waiting
    /// in the outbox stay there and are still sent.
    public func clearCache() throws(OfflineStoreError) {
        let units = try unitSubscriptions()
        for unit in units.keys.sorted() { _ = try deleteUnitContent(unit, unlessUnsynced: false, subscriptions: units) }
        try writeTables { db in try Self.resetDownloadState(db, unitId: nil) }
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

    /// The sizes of the files the engine's cache holds whole, by SHA-256.
    func heldFiles() throws(OfflineStoreError) -> [String: Int64] {
        var held: [String: Int64] = [:]
        for file in try storedFiles() { held[file.reference.sha256] = file.reference.byteCount }
        return held
    }

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

    /// Ends a unit's subscription now (its rows go unless held otherwise) and clears its
    /// download state.
    func deleteUnitContent(
        _ id: String, unlessUnsynced: Bool, subscriptions: [String: SubscriptionStatus]? = nil
    ) throws(OfflineStoreError) -> UnitDeletion {
        if unlessUnsynced, try readTables(withReader: { reader, db in try unitsWithUnsyncedWrites(reader, db) }).contains(id) {
            return .keptForUnsyncedWrites
        }
        let known: [String: SubscriptionStatus]
        if let subscriptions { known = subscriptions } else { known = try unitSubscriptions() }
        guard let subscription = known[id] else { return .notFound }
        _ = try unitSubscriptionCall { () throws(SubscriptionError) in try evictSubscription(id: subscription.id) }
        try writeTables { db in try Self.resetDownloadState(db, unitId: id) }
        return .deleted
    }

    /// Clears the download columns of a unit row that stays (the catalogue holds it), or of every one.
    private static func resetDownloadState(_ db: Database, unitId: String?) throws {
        try db.execute(
            sql: "UPDATE \(UnitContent.unitTable) SET \"download_status\" = 'none', \"downloaded_at\" = NULL"
                + (unitId == nil ? "" : " WHERE \"id\" = ?"),
            arguments: StatementArguments(unitId.map { [$0] } ?? []))
    }

    /// The listing of ``cachedUnits()``: `held` are the engine's cached files (by SHA-256).
    func cachedUnits(
        _ reader: StoreReader, _ db: Database, subscriptions: [String: SubscriptionStatus], held: [String: Int64], now: Timestamp
    ) throws -> [CachedUnit] {
        guard UnitContent.isHeld(by: contracts) else { return [] }
        struct File {
            var size: Int64
            var onDisk: Int64
            var isDownloaded: Bool
        }
        var files: [String: [String: File]] = [:]
        for asset in try UnitContent.assetFiles(db) {
            let onDisk = held[asset.file.sha256]
            files[asset.unit, default: [:]][asset.id] = File(size: asset.file.byteCount, onDisk: onDisk ?? 0, isDownloaded: onDisk != nil)
        }
        let completedByRecord = try String.fetchSet(
            db, sql: "SELECT \"unit_id\" FROM \(UnitContent.completionTable) WHERE \"lesson_id\" IS NULL"
        )
        let unsynced = try unitsWithUnsyncedWrites(reader, db)
        let catalogue = try Row.fetchAll(
            db, sql: "SELECT \"id\", \"title\", \"downloaded_at\" FROM \(UnitContent.unitTable) ORDER BY \"sort_index\", \"title\", \"id\""
        ).map { (id: $0["id"] as String, title: $0["title"] as String?, downloadedAt: $0["downloaded_at"] as Int64?) }
        let listed = Set(catalogue.map(\.id))
        let orphans = Set(subscriptions.keys).subtracting(listed).sorted()
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
            } else if downloadedAt != nil || (subscription != nil && downloadedFiles > 0) {
                // Kept for offline use with files missing (a cut download, files the cache evicted
                // since, or files added since). A unit not kept whose files the cache still holds
                // (another unit shares them, or it was deleted) is not downloaded.
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
