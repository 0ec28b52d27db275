public import SyncClient

/// Why ``AssetDownloader`` could not give an asset file or download a unit, as one type to
/// `catch` and `switch` on.
public enum AssetError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The file (of this asset, or for ``AssetDownloader/downloadUnit(id:progress:)`` this unit)
    /// is not on the device and the server cannot be reached: offline, or the connection failed.
    /// What was downloaded of it is kept, and the next attempt resumes from there.
    case notAvailableOffline(id: String)
    /// The device knows no asset with that id (no download record and no `Asset` row), or its
    /// unit was deleted from the device during the download.
    case unknownAsset(id: String)
    /// The server lists no unit with that id (deleted, or not readable with this token).
    case unknownUnit(id: String)
    /// The downloaded file does not hash to the asset's checksum: it was deleted. The server's
    /// file may have changed since the metadata was synced; sync, then try again.
    case checksumMismatch(id: String, expected: String, actual: String)
    /// The server answered an asset (or unit) request with an HTTP error: 404 when the file is
    /// gone, 403 when the token may not read it, 426 when the app must be updated.
    case http(id: String, status: Int)
    /// The server's answer could not be used (metadata that does not fit its contract, a range
    /// other than the one asked for, a malformed body).
    case invalidResponse(id: String, reason: String)
    /// The task downloading it was cancelled; what was downloaded is kept for the next attempt.
    case cancelled(id: String)
    /// The volume has too little free space for the download (``StorageLimits/downloadSpaceFactor``
    /// times what is left to download), even after evicting downloaded units: nothing was
    /// downloaded. Show the storage screen.
    case insufficientSpace(id: String, neededBytes: Int64, availableBytes: Int64)
    /// The offline store failed (SQLite, or a file of its asset folder).
    case store(OfflineStoreError)

    public var description: String {
        switch self {
        case .notAvailableOffline(let id): return "'\(id)' is not available offline: it is not on the device and the server cannot be reached"
        case .unknownAsset(let id): return "no asset '\(id)' on the device"
        case .unknownUnit(let id): return "the server lists no unit '\(id)'"
        case .checksumMismatch(let id, let expected, let actual):
            return "the download of asset '\(id)' hashes to \(actual), not \(expected); the file was deleted"
        case .http(let id, let status): return "the server answered HTTP \(status) for '\(id)'"
        case .invalidResponse(let id, let reason): return "the server's answer for '\(id)' cannot be used: \(reason)"
        case .cancelled(let id): return "the download of '\(id)' was cancelled"
        case .insufficientSpace(let id, let needed, let available):
            return "not enough free space to download '\(id)': \(needed) bytes needed, \(available) free"
        case .store(let error): return error.description
        }
    }
}
