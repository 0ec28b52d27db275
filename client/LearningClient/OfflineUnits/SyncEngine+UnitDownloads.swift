import ContractRuntime
import Contracts
public import Foundation
import GRDB
public import SyncClient

/// Where a unit's download stands, told as each of its files arrives.
public struct UnitDownloadProgress: Hashable, Sendable {
    public var unitId: String
    /// Bytes of the unit's files on the device so far, of all of them.
    public var bytesDone: Int64
    public var bytesTotal: Int64
    public var filesDone: Int
    public var filesTotal: Int
    /// The asset whose file comes next; `nil` once every file is there.
    public var currentAssetId: String?

    public init(unitId: String, bytesDone: Int64, bytesTotal: Int64, filesDone: Int, filesTotal: Int, currentAssetId: String?) {
        self.unitId = unitId
        self.bytesDone = bytesDone
        self.bytesTotal = bytesTotal
        self.filesDone = filesDone
        self.filesTotal = filesTotal
        self.currentAssetId = currentAssetId
    }

    /// 0…1, by bytes (by files when the unit has no bytes).
    public var fraction: Double {
        if bytesTotal > 0 { return min(1, Double(bytesDone) / Double(bytesTotal)) }
        return filesTotal > 0 ? Double(filesDone) / Double(filesTotal) : 1
    }
}

/// What a finished unit download did.
public struct UnitDownloadResult: Hashable, Sendable {
    public var unitId: String
    /// The unit's files (one per `Asset` row naming a file), all on the device now.
    public var files: Int
    public var bytes: Int64

    public init(unitId: String, files: Int, bytes: Int64) {
        self.unitId = unitId
        self.files = files
        self.bytes = bytes
    }
}

/// The learning app's files are the engine's: each `Asset` row (version 2) names its file in
/// `file`, and ``SyncClient/SyncEngine/file(for:)`` downloads it (resumable ranges, checked
/// against its SHA-256) into the store's files folder, whose cache the engine keeps within
/// ``SyncClient/StorageLimits/fileCacheBytes`` (least recently used first; never a file an
/// unsynced write names).
extension SyncEngine {
    /// The `file://` URL of an asset's file: at once when the device holds it, else downloaded.
    ///
    /// - Throws: ``AssetError/unknownAsset(id:)`` when the device has no such `Asset` row,
    ///   ``AssetError/notPublished(id:)`` when the row names no file,
    ///   ``AssetError/notAvailableOffline(id:)`` when the file is not on the device and the
    ///   server cannot be reached, ``AssetError/checksumMismatch(id:expected:actual:)``, …
    public func assetFile(id: String) async throws(AssetError) -> URL {
        let asset: Asset?
        do {
            asset = try store.fetch(Asset.self, id: id)
        } catch {
            throw .store(error)
        }
        guard let asset else { throw .unknownAsset(id: id) }
        guard let file = asset.file else { throw .notPublished(id: id) }
        do {
            return try await self.file(for: file)
        } catch {
            throw AssetError.download(error, id: id)
        }
    }

    /// Downloads a unit for offline use, as a stream of its progress that ends when every file
    /// is on the device (or throws the ``AssetError`` that stopped it). Stopping the iteration
    /// cancels the download; what was downloaded is kept. See ``downloadUnit(id:progress:)``.
    public nonisolated func downloadUnit(id: String) -> AsyncThrowingStream<UnitDownloadProgress, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    _ = try await self.downloadUnit(id: id) { continuation.yield($0) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Downloads a unit for offline use: subscribes to it (the contracts' `unit` subscription:
    /// the unit with its lessons and their `Asset` rows) and, the first time, syncs until its
    /// rows are on the device; then gets the file of each of its `Asset` rows through
    /// ``SyncClient/SyncEngine/file(for:)`` (files on the device already count as done), and marks the
    /// unit downloaded. Its files are the engine's cache's: evicted least recently used first
    /// when the cache is full, downloaded again when asked for.
    ///
    /// - Throws: ``AssetError/unknownUnit(id:)`` when the server has no such unit the device may
    ///   read, ``AssetError/notAvailableOffline(id:)`` when the server cannot be reached, or the
    ///   error of the first file that failed (the unit is then marked `failed`; the files and
    ///   partial downloads are kept for the next attempt).
    @discardableResult
    public func downloadUnit(
        id: String, progress: @escaping @Sendable (UnitDownloadProgress) -> Void = { _ in }
    ) async throws(AssetError) -> UnitDownloadResult {
        try await subscribeToUnit(id: id)
        let files: [(asset: String, file: FileReference)]
        do {
            files = try store.unitFiles(unitId: id)
            try store.noteUnitDownload(unitId: id, status: .downloading)
        } catch {
            throw .store(error)
        }
        let total = files.reduce(0) { $0 + $1.file.byteCount }
        var current = UnitDownloadProgress(
            unitId: id, bytesDone: 0, bytesTotal: total, filesDone: 0, filesTotal: files.count, currentAssetId: files.first?.asset)
        progress(current)
        for (index, entry) in files.enumerated() {
            do {
                _ = try await file(for: entry.file)
            } catch {
                try? store.noteUnitDownload(unitId: id, status: .failed)
                throw AssetError.download(error, id: entry.asset)
            }
            current.bytesDone += entry.file.byteCount
            current.filesDone += 1
            current.currentAssetId = index + 1 < files.count ? files[index + 1].asset : nil
            progress(current)
        }
        do {
            try store.noteUnitDownload(unitId: id, status: .downloaded)
        } catch {
            throw .store(error)
        }
        return UnitDownloadResult(unitId: id, files: files.count, bytes: total)
    }

    /// Subscribes to the unit and, until its subscription has synced once, syncs; returns once
    /// its rows are on the device. A subscription the server refuses (no such unit the token
    /// may read) is let go.
    private func subscribeToUnit(id: String) async throws(AssetError) {
        let unit: SubscriptionHandle
        let synced: Bool
        do {
            unit = try subscribe(Subscriptions.unit(id: id))
            synced = try unit.status?.hasSynced == true
        } catch {
            // Not an identifier, or contracts without units: no unit the server could list.
            throw .unknownUnit(id: id)
        }
        if !synced {
            switch await syncNow() {
            case .succeeded: break
            case .failed(let error, _): throw AssetError.transport(error, id: id)
            case .storeFailed(let reason): throw .invalidResponse(id: id, reason: reason)
            }
        }
        do {
            guard let status = try unit.status else { throw AssetError.unknownUnit(id: id) }
            if status.error != nil {
                try await unit.evict()
                throw AssetError.unknownUnit(id: id)
            }
            guard status.hasSynced else {
                throw AssetError.invalidResponse(id: id, reason: status.lastFailure?.message ?? "its subscription did not sync")
            }
            guard try store.fetch(Contracts.Unit.self, id: id) != nil else {
                // The server has no such unit (or deleted it): nothing to keep.
                try await unit.evict()
                throw AssetError.unknownUnit(id: id)
            }
        } catch let error as AssetError {
            throw error
        } catch let error as OfflineStoreError {
            throw .store(error)
        } catch {
            throw .invalidResponse(id: id, reason: String(describing: error))
        }
    }
}

extension OfflineStore {
    /// The files of a unit's `Asset` rows on the device, in lesson order (rows naming no file
    /// are left out: nothing to download).
    func unitFiles(unitId: String) throws(OfflineStoreError) -> [(asset: String, file: FileReference)] {
        try readTables { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT a."id", a."file" FROM \(UnitContent.assetTable) a
                    JOIN \(UnitContent.lessonTable) l ON l."id" = a."lesson_id" WHERE l."unit_id" = ? AND a."file" IS NOT NULL
                    ORDER BY l."sort_index", l."id", a."id"
                    """,
                arguments: [unitId]
            ).compactMap { row in UnitContent.fileReference(row["file"]).map { (row["id"], $0) } }
        }
    }

    /// Writes a unit's download state to the unit's local columns (``Contracts/Unit/LocalState``,
    /// which lists show); a finished download sets `downloaded_at`.
    func noteUnitDownload(unitId: String, status: Contracts.Unit.DownloadStatus) throws(OfflineStoreError) {
        let finished: Int64? = status == .downloaded ? now().millisecondsSince1970 : nil
        try writeTables { db in
            try db.execute(
                sql:
                    "UPDATE \(UnitContent.unitTable) SET \"download_status\" = ?, \"downloaded_at\" = COALESCE(?, \"downloaded_at\") WHERE \"id\" = ?",
                arguments: [status.rawValue, finished, unitId]
            )
        }
    }

    /// Marks `failed` every unit still `queued` or `downloading` when the store opens: its
    /// download was cut off with the process that ran it (killed, crashed, quit), and would
    /// otherwise show as running forever. Its files and partial downloads are the engine's, and
    /// the next ``SyncClient/SyncEngine/downloadUnit(id:progress:)`` resumes them.
    static func markInterruptedDownloads(_ db: Database) throws {
        let unit = Contracts.Unit.DownloadStatus.self
        try db.execute(
            sql: "UPDATE \(UnitContent.unitTable) SET \"download_status\" = ? WHERE \"download_status\" IN (?, ?)",
            arguments: [unit.failed.rawValue, unit.queued.rawValue, unit.downloading.rawValue]
        )
    }
}
