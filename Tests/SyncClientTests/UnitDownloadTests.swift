import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import SyncServer
import Testing

@testable import LearningClient
@testable import SyncClient

/// The learning app's downloads on the engine's files, against the real server on loopback: a
/// unit's `Asset` rows name their files (version 2's `file`), which `SyncEngine.file(for:)`
/// downloads from the files route into the store's file cache. Ranges, resumption, the hash
/// check and the cache's budget are the engine's, tested in `FileTransferTests` and
/// `FileStoreTests`.
@Suite("Unit downloads: the assets' files through the engine's files", .blockingWork)
struct UnitDownloadTests {
    /// Progress reports, collected across the engine's task.
    final class Reports: @unchecked Sendable {
        private let lock = NSLock()
        private var all: [UnitDownloadProgress] = []
        func add(_ progress: UnitDownloadProgress) { lock.withLock { all.append(progress) } }
        var values: [UnitDownloadProgress] { lock.withLock { all } }
    }

    /// An engine whose server cannot be reached (nothing listens on port 1).
    static func unreachable(_ store: OfflineStore) -> SyncEngine {
        SyncEngine(
            store: store, transport: URLSessionTransport(baseURL: URL(string: "http://127.0.0.1:1")!, timeout: 5) { "token" },
            configuration: SyncEngineConfiguration(scopes: ["user"], retriesAutomatically: false))
    }

    static func engine(_ server: LiveServer, _ store: OfflineStore) -> SyncEngine {
        SyncEngine(
            store: store, transport: server.transport("device-1"),
            configuration: SyncEngineConfiguration(scopes: ["user"], retriesAutomatically: false))
    }

    @Test("a unit's download subscribes to it, syncs, gets each asset's file by its reference, and reports progress to the total")
    func downloadsAUnit() async throws {
        try await LiveServer.run { server in
            let first = sampleBytes(3_000, seed: 1), second = sampleBytes(1_000, seed: 2)
            try await server.publishUnit("unit-1", lessons: [[("asset-1", first)], [("asset-2", second)]])
            let test = try TestStore()
            let engine = Self.engine(server, test.store)

            let reports = Reports()
            let result = try await engine.downloadUnit(id: "unit-1") { reports.add($0) }
            #expect(result == UnitDownloadResult(unitId: "unit-1", files: 2, bytes: 4_000))
            #expect(reports.values.first?.bytesDone == 0 && reports.values.first?.currentAssetId == "asset-1")
            #expect(reports.values.map(\.filesDone) == [0, 1, 2])
            #expect(reports.values.last?.fraction == 1 && reports.values.last?.currentAssetId == nil)

            // The rows name the files; the engine's cache holds them, checked.
            let asset = try #require(try test.store.fetch(Asset.self, id: "asset-1"))
            let file = try #require(asset.file)
            #expect(file.sha256 == asset.checksum && file.byteCount == 3_000 && file.name == "asset-1")
            #expect(try test.store.storedFile(sha256: file.sha256)?.state == .cached)
            let detail = try #require(try test.store.unitDetail(id: "unit-1"))
            let local = try #require(detail.lessons[0].localFiles["asset-1"])
            #expect(try Data(contentsOf: local) == first)
            #expect(detail.lessons[1].localFiles["asset-2"] != nil && detail.downloadedBytes == 4_000)
            #expect(try test.store.cachedUnits().map { "\($0.id) \($0.status) \($0.bytesOnDisk)" } == ["unit-1 downloaded 4000"])
            #expect(try test.store.localState(Contracts.Unit.self, id: "unit-1")?.downloadStatus == .downloaded)

            // Offline, the files come from the device; a file not there is not available offline.
            let offline = Self.unreachable(test.store)
            #expect(try Data(contentsOf: try await offline.assetFile(id: "asset-2")) == second)
            let secondFile = try #require(try test.store.storedFile(sha256: Hex.sha256(second)))
            try FileManager.default.removeItem(at: secondFile.url)
            await #expect(throws: AssetError.notAvailableOffline(id: "asset-2")) { _ = try await offline.assetFile(id: "asset-2") }
            await #expect(throws: AssetError.unknownAsset(id: "nope")) { _ = try await offline.assetFile(id: "nope") }
            // Online again, it is downloaded again on demand.
            #expect(try Data(contentsOf: try await engine.assetFile(id: "asset-2")) == second)
        }
    }

    @Test("a file replaced on the server is the row's new file after a sync; the unit is partial until downloaded again")
    func replacedFile() async throws {
        try await LiveServer.run { server in
            try await server.publishUnit("unit-1", lessons: [[("asset-1", sampleBytes(2_000, seed: 1))]])
            let test = try TestStore()
            let engine = Self.engine(server, test.store)
            try await engine.downloadUnit(id: "unit-1")

            let replaced = sampleBytes(2_500, seed: 7)
            try await server.upload("asset-1", replaced)
            guard case .succeeded = await engine.syncNow() else { Issue.record("the sync failed"); return }
            #expect(try test.store.fetch(Asset.self, id: "asset-1")?.file?.sha256 == Hex.sha256(replaced))
            #expect(try test.store.cachedUnits().first?.status == .partial)
            let reports = Reports()
            try await engine.downloadUnit(id: "unit-1") { reports.add($0) }
            #expect(reports.values.last?.bytesTotal == 2_500)
            #expect(try Data(contentsOf: try await engine.assetFile(id: "asset-1")) == replaced)
            #expect(try test.store.cachedUnits().first?.status == .downloaded)
        }
    }

    @Test("an asset whose row names no file yet is not published; a unit download leaves it out")
    func unpublishedAsset() async throws {
        try await LiveServer.run { server in
            try await server.publishUnit("unit-1", lessons: [[("asset-1", sampleBytes(500, seed: 1))]])
            _ = try await server.content.publish(
                entity: "Asset",
                row: .object([
                    "id": .string("asset-later"), "lesson_id": .string("unit-1-lesson-0"), "asset_kind": .string("video"),
                    "content_type": .string("video/mp4"), "size_bytes": .int(0), "checksum": .string(""), "storage_key": .string(""),
                ]), identity: LiveServer.admin)
            let test = try TestStore()
            let engine = Self.engine(server, test.store)
            #expect(try await engine.downloadUnit(id: "unit-1").files == 1)
            await #expect(throws: AssetError.notPublished(id: "asset-later")) { _ = try await engine.assetFile(id: "asset-later") }
        }
    }
}
