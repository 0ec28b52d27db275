public import SyncClient

/// Why an asset's file could not be given or a unit downloaded
/// (``SyncClient/SyncEngine/assetFile(id:)``, ``SyncClient/SyncEngine/downloadUnit(id:progress:)``),
/// as one type to `catch` and `switch` on.
public enum AssetError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The file (of this asset, or for a unit one of its files) is not on the device and the
    /// server cannot be reached: offline, or the connection failed. What was downloaded of it is
    /// kept, and the next attempt resumes from there.
    case notAvailableOffline(id: String)
    /// The device has no `Asset` row with that id.
    case unknownAsset(id: String)
    /// The server lists no unit with that id (deleted, or not readable with this token).
    case unknownUnit(id: String)
    /// The asset's row names no file (its `file` is empty: the server has not published it yet).
    case notPublished(id: String)
    /// The downloaded file does not hash to the asset's file reference: it was deleted.
    case checksumMismatch(id: String, expected: String, actual: String)
    /// The server answered with an HTTP error: 404 when it does not hold the file or this user
    /// may not read it, 426 when the app must be updated.
    case http(id: String, status: Int)
    /// The server's answer could not be used.
    case invalidResponse(id: String, reason: String)
    /// The task downloading it was cancelled; what was downloaded is kept for the next attempt.
    case cancelled(id: String)
    /// The volume has too little free space for the file, even after the engine evicted what it
    /// may of its cache: nothing was downloaded. Show the storage screen.
    case insufficientSpace(id: String, neededBytes: Int64, availableBytes: Int64)
    /// The offline store failed.
    case store(OfflineStoreError)

    public var description: String {
        switch self {
        case .notAvailableOffline(let id): return "'\(id)' is not available offline: it is not on the device and the server cannot be reached"
        case .unknownAsset(let id): return "no asset '\(id)' on the device"
        case .unknownUnit(let id): return "the server lists no unit '\(id)'"
        case .notPublished(let id): return "asset '\(id)' names no file yet"
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

    /// A transport failure for `id`.
    static func transport(_ error: TransportError, id: String) -> AssetError {
        switch error {
        case .network: return Task.isCancelled ? .cancelled(id: id) : .notAvailableOffline(id: id)
        case .http(let status, _, _): return .http(id: id, status: status)
        case .updateRequired: return .http(id: id, status: 426)
        case .decoding(let message): return .invalidResponse(id: id, reason: message)
        default: return .invalidResponse(id: id, reason: error.detail.message)
        }
    }

    /// A failure of ``SyncClient/SyncEngine/file(for:)`` for the file of `id`.
    static func download(_ error: FileDownloadError, id: String) -> AssetError {
        switch error {
        case .transport(let transport): return .transport(transport, id: id)
        case .hashMismatch(let expected, let received): return .checksumMismatch(id: id, expected: expected, actual: received)
        case .store(.file(.insufficientSpace(let needed, let available))):
            return .insufficientSpace(id: id, neededBytes: needed, availableBytes: available)
        case .store(let store): return .store(store)
        }
    }
}
