/// How far a download is: of one asset (``AssetDownloader/resolveAsset(id:progress:)``) or of
/// a unit's files (``AssetDownloader/downloadUnit(id:)``).
///
/// Files already on the device count as done at once; bytes advance by ranges as they are
/// written to disk.
public struct DownloadProgress: Hashable, Sendable {
    /// The unit being downloaded, `nil` for a single asset.
    public var unitId: String?
    /// Bytes on disk of the files to download (verified ones and parts of the current one).
    public var bytesDone: Int64
    /// Bytes of every file to download, from their metadata.
    public var bytesTotal: Int64
    /// Files downloaded and verified.
    public var filesDone: Int
    public var filesTotal: Int
    /// The asset being downloaded, `nil` before the first and after the last.
    public var currentAssetId: String?

    public init(unitId: String?, bytesDone: Int64, bytesTotal: Int64, filesDone: Int, filesTotal: Int, currentAssetId: String?) {
        self.unitId = unitId
        self.bytesDone = bytesDone
        self.bytesTotal = bytesTotal
        self.filesDone = filesDone
        self.filesTotal = filesTotal
        self.currentAssetId = currentAssetId
    }

    /// Bytes done as a share of the total, from 0 to 1 (1 when there is nothing to download).
    public var fraction: Double {
        bytesTotal > 0 ? min(1, Double(bytesDone) / Double(bytesTotal)) : (filesDone == filesTotal ? 1 : 0)
    }

    /// Whether every file is on the device.
    public var isComplete: Bool { filesDone == filesTotal }
}

/// What ``AssetDownloader/downloadUnit(id:progress:)`` did.
public struct UnitDownloadResult: Hashable, Sendable {
    public var unitId: String
    /// The unit's files, all on the device and verified.
    public var files: Int
    public var bytes: Int64
    /// Units evicted afterwards to bring the cache within its budget, in eviction order.
    public var evictedUnitIds: [String]

    public init(unitId: String, files: Int, bytes: Int64, evictedUnitIds: [String]) {
        self.unitId = unitId
        self.files = files
        self.bytes = bytes
        self.evictedUnitIds = evictedUnitIds
    }
}
