import ContractRuntime
import Contracts
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
        var unitPages = 0
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
    /// Pages of the units route fetched so far.
    var unitPages: Int { state.value.unitPages }

    func unitsSync(since: String?, limit: Int?, schema: [String: Int]) async throws(TransportError) -> UnitsSyncResponse {
        if offline { throw .network("offline") }
        state.mutate { $0.unitPages += 1 }
        return try await inner.unitsSync(since: since, limit: limit, schema: schema)
    }

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

/// Serves units and files from memory, as the server would (ranges, `ETag` = checksum,
/// `If-Range`), for cache tests that need many downloaded units quickly.
final class InMemoryAssetTransport: AssetTransport {
    private let units: LockedBox<[SyncedUnit]>
    private let files: LockedBox<[String: Data]>
    let folder: URL

    init(folder: URL) {
        self.folder = folder
        units = LockedBox([])
        files = LockedBox([:])
    }

    /// Adds a unit of one lesson with one file per entry of `fileSizes` (`<unit>-file-<n>`).
    func addUnit(_ id: String, fileSizes: [Int]) {
        var assets: [ContentAssetMetadata] = []
        for (index, size) in fileSizes.enumerated() {
            let assetId = "\(id)-file-\(index)"
            let data = sampleBytes(size, seed: index)
            files.mutate { $0[assetId] = data }
            assets.append(
                ContentAssetMetadata(
                    id: assetId, lessonId: "\(id)-lesson", type: "document", contentType: "application/octet-stream",
                    sizeBytes: Int64(size), checksum: AssetStore.checksum(of: data), durationMs: nil, updatedAt: Samples.t0,
                    downloadURL: "memory://files/\(assetId)"
                ))
        }
        let lesson = SyncedLesson(
            fields: [
                "id": .string("\(id)-lesson"), "unit_id": .string(id), "title": .string("Lesson of \(id)"), "sort_index": .int(0),
                "lesson_kind": .string("reading"), "updated_at": .string(Samples.t0.iso8601),
            ],
            schemaVersion: Lesson.descriptor.currentVersion, assets: assets
        )
        let unit = SyncedUnit(
            fields: [
                "id": .string(id), "title": .string("Unit \(id)"), "learner_level": .string("beginner"),
                "updated_at": .string(Samples.t0.iso8601),
            ],
            schemaVersion: Unit.descriptor.currentVersion, lessons: [lesson]
        )
        units.mutate { $0.append(unit) }
    }

    func unitsSync(since: String?, limit: Int?, schema: [String: Int]) async throws(TransportError) -> UnitsSyncResponse {
        UnitsSyncResponse(units: units.value, tombstones: [], nextSince: "end", hasMore: false)
    }

    func assetURL(id: String) -> URL { URL(string: "memory://files/\(id)")! }

    func downloadAssetRange(_ request: AssetRangeRequest) async throws(TransportError) -> AssetRangeResponse {
        guard let data = files.value[request.url.lastPathComponent] else {
            throw .http(status: 404, body: nil, retryAfter: nil)
        }
        let etag = "\"\(AssetStore.checksum(of: data))\""
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
