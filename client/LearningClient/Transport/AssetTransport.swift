public import Foundation
public import SyncClient
import SyncProtocol

/// How ``AssetDownloader`` fetches asset files (a unit's rows come through the engine's
/// subscriptions). ``URLSessionTransport`` is the real one; tests can wrap it to fail or record.
public protocol AssetTransport: Sendable {
    /// Where the server serves the file of an asset the device knows only by id
    /// (`<base>/assets/<id>`); used when no `download_url` was recorded for it.
    func assetURL(id: String) -> URL

    /// `GET` of one byte range of a file, its body written to a file so that it never has to
    /// fit in memory.
    ///
    /// - Returns: what the server sent: the range asked for (206), or the whole file (200) when
    ///   the request had no `Range` or the file is no longer the one `ifRange` names. Its
    ///   ``AssetRangeResponse/bodyFile`` now belongs to the caller, to move or delete.
    /// - Throws: ``TransportError/network(_:)`` without an answer; ``TransportError/http(status:body:retryAfter:)``
    ///   for an error status (416 when the range starts past the end of the file).
    func downloadAssetRange(_ request: AssetRangeRequest) async throws(TransportError) -> AssetRangeResponse
}

/// One byte range of an asset file to fetch.
public struct AssetRangeRequest: Hashable, Sendable {
    /// The file's URL.
    public var url: URL
    /// The first byte wanted.
    public var offset: Int64
    /// How many bytes at most; `nil` for everything from ``offset`` to the end.
    public var length: Int64?
    /// The `ETag` of the bytes already on the device: sent as `If-Range`, so a file that changed
    /// since comes back whole (200) instead of as a range of the new file spliced onto the old.
    public var ifRange: String?
    /// The folder the transport writes the body's file in (``AssetDownloader`` gives one in the
    /// store's assets folder, which it clears of what a killed process left); `nil` for the
    /// temporary folder.
    public var bodyDirectory: URL?

    public init(url: URL, offset: Int64, length: Int64? = nil, ifRange: String? = nil, bodyDirectory: URL? = nil) {
        self.url = url
        self.offset = offset
        self.length = length
        self.ifRange = ifRange
        self.bodyDirectory = bodyDirectory
    }

    /// The `Range` header (`bytes=N-` or `bytes=N-M`); `nil` for the whole file.
    public var rangeHeader: String? {
        switch (offset, length) {
        case (0, nil): nil
        case (_, nil): "bytes=\(offset)-"
        case (_, let length?): "bytes=\(offset)-\(offset + max(length, 1) - 1)"
        }
    }
}

/// What a ranged `GET` of an asset file brought back.
public struct AssetRangeResponse: Hashable, Sendable {
    /// A temporary file holding the bytes received; the caller moves or deletes it.
    public var bodyFile: URL
    /// The offset of the first byte received: the requested offset for a range (206), 0 for the
    /// whole file (200).
    public var offset: Int64
    /// How many bytes ``bodyFile`` holds.
    public var length: Int64
    /// The size of the whole file, when the server said (`Content-Range` or `Content-Length` of a 200).
    public var totalSize: Int64?
    /// The file's `ETag` as the server sent it (quotes included), to send back as `If-Range`.
    public var etag: String?
    /// Whether the server sent the whole file rather than a range.
    public var isWholeFile: Bool

    public init(bodyFile: URL, offset: Int64, length: Int64, totalSize: Int64?, etag: String?, isWholeFile: Bool) {
        self.bodyFile = bodyFile
        self.offset = offset
        self.length = length
        self.totalSize = totalSize
        self.etag = etag
        self.isWholeFile = isWholeFile
    }
}
