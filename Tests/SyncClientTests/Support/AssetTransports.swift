import Foundation
import LearningAPI
import LearningClient
import SyncClient
import SyncProtocol
import SyncServer

/// Forwards to a real asset transport, records every range asked for and what came back, and
/// fails like a lost connection when told to: offline, or after a number of ranges (a download
/// interrupted half way).
final class ScriptedAssetTransport: AssetTransport {
    struct Exchange: Hashable {
        var request: AssetRangeRequest
        var response: AssetRangeResponse
    }

    private struct State {
        var offline = false
        var rangesBeforeDrop: Int?
        var exchanges: [Exchange] = []
    }

    let inner: any AssetTransport
    private let state = LockedBox(State())

    init(_ inner: any AssetTransport) {
        self.inner = inner
    }

    /// Every call fails with a network error.
    var offline: Bool {
        get { state.value.offline }
        set { state.mutate { $0.offline = newValue } }
    }

    /// Lets `count` more ranges through, then fails every range request (until cleared).
    func dropConnection(afterRanges count: Int?) {
        state.mutate { $0.rangesBeforeDrop = count }
    }

    /// The ranges answered so far, oldest first.
    var exchanges: [Exchange] { state.value.exchanges }

    func assetURL(id: String) -> URL { inner.assetURL(id: id) }

    func downloadAssetRange(_ request: AssetRangeRequest) async throws(TransportError) -> AssetRangeResponse {
        let dropped = state.value.offline || state.value.rangesBeforeDrop == 0
        if dropped { throw .network("the connection was lost") }
        let response = try await inner.downloadAssetRange(request)
        state.mutate { state in
            state.exchanges.append(Exchange(request: request, response: response))
            state.rangesBeforeDrop = state.rangesBeforeDrop.map { $0 - 1 }
        }
        return response
    }
}

/// Serves files from memory, as the server would (ranges, `ETag` = checksum, `If-Range`), for
/// tests that need many downloads quickly. The units and their `Asset` rows come from a server
/// through the engine's subscriptions (``UnitShelf``); only the bytes are served here.
final class InMemoryAssetTransport: AssetTransport {
    private let files: LockedBox<[String: Data]>
    let folder: URL

    init(folder: URL) {
        self.folder = folder
        files = LockedBox([:])
    }

    /// Serves `data` as the file of `assetId` (replacing the one served before).
    func add(_ assetId: String, _ data: Data) {
        files.mutate { $0[assetId] = data }
    }

    func assetURL(id: String) -> URL { URL(string: "memory://files/\(id)")! }

    func downloadAssetRange(_ request: AssetRangeRequest) async throws(TransportError) -> AssetRangeResponse {
        guard let data = files.value[request.url.lastPathComponent] else {
            throw .http(status: 404, body: nil, retryAfter: nil)
        }
        let etag = "\"\(Hex.sha256(data))\""
        let whole = request.rangeHeader == nil || (request.ifRange != nil && request.ifRange != etag)
        let start = whole ? 0 : Int(request.offset)
        guard start < data.count || (whole && data.isEmpty) else { throw .http(status: 416, body: nil, retryAfter: nil) }
        let end = whole ? data.count : min(data.count, start + Int(request.length ?? Int64(data.count)))
        let body = folder.appendingPathComponent(UUID().uuidString)
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try data[start..<end].write(to: body)
        } catch {
            throw .network("cannot write the body: \(error)")
        }
        return AssetRangeResponse(
            bodyFile: body, offset: Int64(start), length: Int64(end - start), totalSize: Int64(data.count), etag: etag,
            isWholeFile: whole
        )
    }
}
