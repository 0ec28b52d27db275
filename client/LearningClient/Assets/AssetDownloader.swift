import ContractRuntime
import Contracts
public import Foundation
import LearningAPI
public import SyncClient
import SyncProtocol

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Settings of an ``AssetDownloader``.
public struct AssetDownloaderConfiguration: Hashable, Sendable {
    /// Bytes asked for per request: the most an interruption can lose, and the step progress
    /// advances by. A file no larger than this is fetched whole in one request.
    public var rangeSize: Int64
    /// The budget enforced after each unit download (``OfflineStore/enforceCacheBudget(_:keeping:)``).
    public var cacheBudget: CacheBudget

    public init(rangeSize: Int64 = 2 * 1024 * 1024, cacheBudget: CacheBudget = .standard) {
        self.rangeSize = max(1, rangeSize)
        self.cacheBudget = cacheBudget
    }
}

/// Gives asset files as `file://` URLs, downloading them when they are not on the device, and
/// downloads whole units for offline use.
///
/// ```swift
/// let downloader = AssetDownloader(engine: engine, transport: transport)
/// for try await progress in downloader.downloadUnit(id: "unit-1") {
///     bar.progress = progress.fraction
/// }
/// let audio = try await downloader.resolveAsset(id: "asset-1")   // file:///…
/// ```
///
/// A file is only ever handed out after its SHA-256 matched the asset's checksum. Downloads
/// go by byte ranges (``AssetDownloaderConfiguration/rangeSize``) appended to a partial file
/// whose length and `ETag` are recorded after each range, so an interrupted download (lost
/// connection, app killed) resumes where it stopped, with `Range` and `If-Range`: a file that
/// changed on the server meanwhile comes back whole and the download restarts from 0. One
/// download per file at a time: a second request for a file being downloaded waits for it.
public actor AssetDownloader {
    /// The engine whose subscriptions bring the units' rows.
    public nonisolated let engine: SyncEngine
    /// The store whose `assets` records and asset folder this downloader keeps (the engine's).
    public nonisolated let store: OfflineStore
    public nonisolated let configuration: AssetDownloaderConfiguration
    private let transport: any AssetTransport
    /// Downloads under way, by asset id.
    private var downloads: [String: Task<Result<LocalFile, AssetError>, Never>] = [:]
    /// Units being downloaded (kept from eviction), with how many downloads of each.
    private var unitsInProgress: [String: Int] = [:]

    /// - Parameters:
    ///   - engine: the sync engine of the store; units come through its subscriptions.
    ///   - transport: what fetches the files (the engine's own `URLSessionTransport`, usually).
    ///   - configuration: range size, cache budget.
    public init(engine: SyncEngine, transport: any AssetTransport, configuration: AssetDownloaderConfiguration = AssetDownloaderConfiguration()) {
        self.engine = engine
        self.store = engine.store
        self.transport = transport
        self.configuration = configuration
    }

    // MARK: Assets

    /// The `file://` URL of an asset's file, downloaded first when it is not on the device (or
    /// does not match its checksum). Records the access time, for least-recently-used eviction.
    /// After a download, enforces ``AssetDownloaderConfiguration/cacheBudget`` (never evicting
    /// the asset's unit).
    ///
    /// - Parameters:
    ///   - id: the asset's id.
    ///   - progress: told as the bytes of the file arrive.
    /// - Throws: ``AssetError/notAvailableOffline(id:)`` when the file is not on the device and
    ///   the server cannot be reached; ``AssetError/unknownAsset(id:)``,
    ///   ``AssetError/checksumMismatch(id:expected:actual:)``, ``AssetError/http(id:status:)``, …
    public func resolveAsset(id: String, progress: (@Sendable (DownloadProgress) -> Void)? = nil) async throws(AssetError) -> URL {
        guard let record = try fromStore({ () throws(OfflineStoreError) in try store.recordToDownload(assetId: id) }) else {
            throw .unknownAsset(id: id)
        }
        let size = record.sizeBytes
        try ensureSpace(for: [record], id: id, keeping: record.unitId.map { [$0] } ?? [])
        let file = try await file(for: record) { bytes in
            progress?(DownloadProgress(unitId: nil, bytesDone: bytes, bytesTotal: size, filesDone: 0, filesTotal: 1, currentAssetId: id))
        }
        try fromStore { () throws(OfflineStoreError) in try store.touchAsset(id: id) }
        progress?(DownloadProgress(unitId: nil, bytesDone: size, bytesTotal: size, filesDone: 1, filesTotal: 1, currentAssetId: nil))
        if file.wasDownloaded { _ = try enforceBudget(keeping: record.unitId) }
        return file.url
    }

    // MARK: Units

    /// Downloads a unit for offline use, as a stream of its progress that ends when every file
    /// is on the device (or throws the ``AssetError`` that stopped it). Stopping the iteration
    /// cancels the download; what was downloaded is kept. See ``downloadUnit(id:progress:)``.
    public nonisolated func downloadUnit(id: String) -> AsyncThrowingStream<DownloadProgress, any Error> {
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

    /// Downloads a unit for offline use: subscribes to it (the contracts' `unit` subscription,
    /// the unit with its lessons and their `Asset` rows) and, the first time, syncs
    /// (``SyncClient/SyncEngine/syncNow()``) until its rows are on the device, then downloads every file of its `Asset` rows (files already on the device and
    /// matching their checksums are kept), marks the unit downloaded, and enforces
    /// ``AssetDownloaderConfiguration/cacheBudget`` (never evicting this unit or one still
    /// downloading). Lessons and assets the unit no longer has leave the device with the
    /// subscription's sync, and their files with the next download.
    ///
    /// - Parameters:
    ///   - id: the unit's id.
    ///   - progress: told after each range of each file.
    /// - Throws: ``AssetError/unknownUnit(id:)`` when the server has no such unit the device
    ///   may read, ``AssetError/notAvailableOffline(id:)`` when the server cannot be reached, or
    ///   the error of the first file that failed (the unit is then marked `failed`; downloaded
    ///   files and partial ones are kept for the next attempt).
    public func downloadUnit(
        id: String, progress: @escaping @Sendable (DownloadProgress) -> Void
    ) async throws(AssetError) -> UnitDownloadResult {
        try await subscribeToUnit(id: id)
        let records: [AssetRecord]
        do {
            records = try store.recordsForUnitDownload(unitId: id)
        } catch {
            throw .store(error)
        }
        try ensureSpace(for: records, id: id, keeping: Set(unitsInProgress.keys).union([id]))
        unitsInProgress[id, default: 0] += 1
        defer { unitsInProgress[id] = unitsInProgress[id].flatMap { $0 > 1 ? $0 - 1 : nil } }

        let total = records.reduce(0) { $0 + $1.sizeBytes }
        var current = DownloadProgress(
            unitId: id, bytesDone: 0, bytesTotal: total, filesDone: 0, filesTotal: records.count, currentAssetId: records.first?.id
        )
        progress(current)
        do {
            for record in records {
                let before = current
                let size = record.sizeBytes
                _ = try await file(for: record) { bytes in
                    var partial = before
                    partial.bytesDone += min(bytes, size)
                    progress(partial)
                }
                current.bytesDone += size
                current.filesDone += 1
                current.currentAssetId = current.filesDone < records.count ? records[current.filesDone].id : nil
                progress(current)
            }
        } catch {
            // The file's error is the one to report; the unit's state is best effort here.
            try? store.finishUnitDownload(unitId: id, succeeded: false)
            throw error
        }
        try fromStore { () throws(OfflineStoreError) in try store.finishUnitDownload(unitId: id, succeeded: true) }
        let evicted = try enforceBudget(keeping: id)
        return UnitDownloadResult(unitId: id, files: records.count, bytes: total, evictedUnitIds: evicted)
    }

    /// Subscribes to the unit and, until its subscription has synced once, syncs; returns once
    /// its rows are on the device. A unit kept before downloads from the rows the device has
    /// (the engine's syncs keep them current). A subscription the server refuses (no such unit
    /// the token may read) is let go.
    private func subscribeToUnit(id: String) async throws(AssetError) {
        let unit: SubscriptionHandle
        let synced: Bool
        do {
            unit = try await engine.subscribe(Subscriptions.unit(id: id))
            synced = try unit.status?.hasSynced == true
        } catch {
            // Not an identifier, or contracts without units: no unit the server could list.
            throw .unknownUnit(id: id)
        }
        if !synced {
            switch await engine.syncNow() {
            case .succeeded: break
            case .failed(let error, _): throw Self.assetError(error, id: id)
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
                let reason = status.lastFailure?.message ?? "its subscription did not sync"
                throw AssetError.invalidResponse(id: id, reason: reason)
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

    // MARK: - Internals

    /// A file on the device, and whether it was downloaded just now.
    private struct LocalFile: Sendable {
        var url: URL
        var wasDownloaded: Bool
    }

    /// Checks that the volume has ``StorageLimits/downloadSpaceFactor`` times what is left to
    /// download of `records` free, evicting downloaded units (not those in `kept`) when it has
    /// not; throws ``AssetError/insufficientSpace(id:neededBytes:availableBytes:)`` when even
    /// that is not enough. Files already verified on the device count for nothing.
    private func ensureSpace(for records: [AssetRecord], id: String, keeping kept: Set<String>) throws(AssetError) {
        let left = records.filter { $0.status != .downloaded }.reduce(Int64(0)) { $0 + max(0, $1.sizeBytes - $1.downloadedBytes) }
        guard left > 0 else { return }
        let needed = Int64((Double(left) * store.configuration.storageLimits.downloadSpaceFactor).rounded(.up))
        guard let free = store.freeBytes(), free < needed else { return }
        // Evict only when that makes room: a refusal costs the device nothing.
        let reclaimable = try fromStore { () throws(OfflineStoreError) in try store.reclaimableBytes(keeping: kept) }
        guard free + reclaimable >= needed else { throw .insufficientSpace(id: id, neededBytes: needed, availableBytes: free) }
        _ = try fromStore { () throws(OfflineStoreError) in try store.reclaimUnitSpace(toFree: needed, keeping: kept) }
        let after = store.freeBytes() ?? free
        if after < needed { throw .insufficientSpace(id: id, neededBytes: needed, availableBytes: after) }
    }

    /// ``OfflineStore/enforceCacheBudget(_:keeping:)`` with the configured budget, keeping `unitId`
    /// and the units still downloading.
    private func enforceBudget(keeping unitId: String?) throws(AssetError) -> [String] {
        let kept = Set(unitsInProgress.keys).union(unitId.map { [$0] } ?? [])
        return try fromStore { () throws(OfflineStoreError) in try store.enforceCacheBudget(configuration.cacheBudget, keeping: kept) }
    }

    /// The file of a record, from the device or downloaded, one download per file at a time.
    private func file(for record: AssetRecord, onBytes: @escaping @Sendable (Int64) -> Void) async throws(AssetError) -> LocalFile {
        if let running = downloads[record.id] { return try await running.value.get() }
        let task = Task { await self.fetchFile(record, onBytes: onBytes) }
        downloads[record.id] = task
        let result = await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            task.cancel()
        }
        downloads[record.id] = nil
        return try result.get()
    }

    private func fetchFile(_ record: AssetRecord, onBytes: @Sendable (Int64) -> Void) async -> Result<LocalFile, AssetError> {
        do {
            return .success(try await fileThrowing(record, onBytes: onBytes))
        } catch {
            return .failure(error)
        }
    }

    private func fileThrowing(_ record: AssetRecord, onBytes: @Sendable (Int64) -> Void) async throws(AssetError) -> LocalFile {
        let id = record.id
        guard AssetFiles.isChecksum(record.checksum) else {
            throw .invalidResponse(id: id, reason: "its checksum is not a lowercase hex SHA-256")
        }
        let files = AssetFiles.urls(assetId: id, in: store.assetsDirectory)
        if let size = AssetFiles.size(of: files.final) {
            if try Self.checksum(of: files.final) == record.checksum {
                if record.status != .downloaded || record.localPath != files.final.lastPathComponent {
                    try recordDownloaded(record, file: files.final, bytes: size, etag: nil)
                }
                onBytes(size)
                return LocalFile(url: files.final, wasDownloaded: false)
            }
            // Damaged or replaced on disk: downloaded again below.
            try Self.remove(files.final)
        }
        return LocalFile(url: try await download(record, files: files, onBytes: onBytes), wasDownloaded: true)
    }

    /// Downloads a file range by range into its partial file, resuming a recorded partial
    /// download, then verifies it and puts it in place.
    private func download(
        _ record: AssetRecord, files: (final: URL, partial: URL), onBytes: @Sendable (Int64) -> Void
    ) async throws(AssetError) -> URL {
        let id = record.id
        let url = record.remoteURL.flatMap { URL(string: $0) } ?? transport.assetURL(id: id)
        do {
            try FileManager.default.createDirectory(at: store.assetsDirectory, withIntermediateDirectories: true)
        } catch {
            throw .store(.fileSystem(path: store.assetsDirectory.path, reason: error.localizedDescription))
        }
        // Range bodies go to a folder of the store's (made by the transport when a body comes),
        // which the first download of a process clears of what a killed one left there.
        let bodies = store.assetsDirectory.appendingPathComponent("ranges-in-flight", isDirectory: true)
        FileDownload.removeLeftovers(in: bodies)
        // Gone again once no download uses it (`rmdir` leaves a folder another one writes in).
        defer { _ = bodies.withUnsafeFileSystemRepresentation { $0.map(rmdir) } }
        var (offset, etag) = try resumePoint(record, partial: files.partial)
        var total = record.sizeBytes
        var fetched = false
        var restarted = false
        while !fetched || offset < total {
            if Task.isCancelled {
                try recordPartial(id, files.partial, bytes: offset, etag: etag, error: "cancelled")
                throw .cancelled(id: id)
            }
            let whole = offset == 0 && total <= configuration.rangeSize
            let request = AssetRangeRequest(
                url: url, offset: offset, length: whole ? nil : configuration.rangeSize, ifRange: offset > 0 ? etag : nil, bodyDirectory: bodies
            )
            let response: AssetRangeResponse
            do {
                response = try await transport.downloadAssetRange(request)
            } catch {
                if case .http(status: 416, _, _) = error, offset > 0 {
                    // The range starts at or past the end of the same file: complete already,
                    // or longer than the file (then start again, once).
                    fetched = true
                    if offset == total { continue }
                    guard !restarted else { throw .http(id: id, status: 416) }
                    restarted = true
                    (offset, etag) = (0, nil)
                    try Self.remove(files.partial)
                    try recordPartial(id, files.partial, bytes: 0, etag: nil, error: nil)
                    fetched = false
                    continue
                }
                let failure = Self.assetError(error, id: id)
                try recordPartial(id, files.partial, bytes: offset, etag: etag, error: failure.description)
                throw failure
            }
            defer { try? AssetFiles.removeIfPresent(response.bodyFile) }
            guard response.isWholeFile || (response.offset == offset && response.length > 0) else {
                throw .invalidResponse(id: id, reason: "asked for bytes from \(offset), received \(response.length) from \(response.offset)")
            }
            do {
                if response.isWholeFile {
                    try AssetFiles.replace(files.partial, with: response.bodyFile)
                    offset = response.length
                } else {
                    try AssetFiles.append(response.bodyFile, to: files.partial)
                    offset += response.length
                }
            } catch {
                throw .store(.fileSystem(path: files.partial.path, reason: error.localizedDescription))
            }
            total = response.totalSize ?? total
            etag = response.etag ?? etag
            fetched = true
            try recordPartial(id, files.partial, bytes: offset, etag: etag, error: nil)
            onBytes(offset)
        }

        let actual = try Self.checksum(of: files.partial)
        guard actual == record.checksum else {
            try Self.remove(files.partial)
            try fromStore { () throws(OfflineStoreError) in
                try store.recordFailedDownload(assetId: id, error: "checksum mismatch: \(actual)")
            }
            throw .checksumMismatch(id: id, expected: record.checksum, actual: actual)
        }
        do {
            try AssetFiles.replace(files.final, with: files.partial)
        } catch {
            throw .store(.fileSystem(path: files.final.path, reason: error.localizedDescription))
        }
        try recordDownloaded(record, file: files.final, bytes: offset, etag: etag)
        return files.final
    }

    /// Where a recorded partial download resumes: its recorded length (bytes written after
    /// the last record are cut off) and `ETag`; from 0 when there is none or its file is shorter.
    private func resumePoint(_ record: AssetRecord, partial: URL) throws(AssetError) -> (offset: Int64, etag: String?) {
        if record.downloadedBytes > 0, let etag = record.etag, let size = AssetFiles.size(of: partial), size >= record.downloadedBytes {
            if size > record.downloadedBytes {
                do {
                    try AssetFiles.truncate(partial, to: record.downloadedBytes)
                } catch {
                    throw .store(.fileSystem(path: partial.path, reason: error.localizedDescription))
                }
            }
            return (record.downloadedBytes, etag)
        }
        try Self.remove(partial)
        return (0, nil)
    }

    /// Records a partial download; when its record is gone (the unit was deleted meanwhile),
    /// deletes the partial file and throws ``AssetError/unknownAsset(id:)``.
    private func recordPartial(_ id: String, _ partial: URL, bytes: Int64, etag: String?, error: String?) throws(AssetError) {
        let kept = try fromStore { () throws(OfflineStoreError) in
            try store.recordPartialDownload(assetId: id, bytes: bytes, etag: etag, error: error)
        }
        guard kept else {
            try Self.remove(partial)
            throw .unknownAsset(id: id)
        }
    }

    private func recordDownloaded(_ record: AssetRecord, file: URL, bytes: Int64, etag: String?) throws(AssetError) {
        let kept = try fromStore { () throws(OfflineStoreError) in
            try store.recordDownloadedFile(assetId: record.id, fileName: file.lastPathComponent, bytes: bytes, etag: etag)
        }
        guard kept else {
            try Self.remove(file)
            throw .unknownAsset(id: record.id)
        }
    }

    private func fromStore<T>(_ body: () throws(OfflineStoreError) -> T) throws(AssetError) -> T {
        do {
            return try body()
        } catch {
            throw .store(error)
        }
    }

    private static func checksum(of url: URL) throws(AssetError) -> String {
        do {
            return try AssetFiles.sha256(of: url)
        } catch {
            throw .store(.fileSystem(path: url.path, reason: error.localizedDescription))
        }
    }

    private static func remove(_ url: URL) throws(AssetError) {
        do {
            try OfflineStore.removeFile(url)
        } catch {
            throw .store(error)
        }
    }

    /// The ``AssetError`` of a failed request about `id`.
    static func assetError(_ error: TransportError, id: String) -> AssetError {
        switch error {
        case .network: return Task.isCancelled ? .cancelled(id: id) : .notAvailableOffline(id: id)
        case .http(let status, _, _): return .http(id: id, status: status)
        case .updateRequired: return .http(id: id, status: 426)
        case .decoding(let message): return .invalidResponse(id: id, reason: message)
        case .publicKeyPinMismatch: return .invalidResponse(id: id, reason: error.pinMismatchMessage ?? "public key pin mismatch")
        }
    }
}
