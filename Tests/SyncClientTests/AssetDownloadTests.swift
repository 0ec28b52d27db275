import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import SyncServer
import Testing

@testable import LearningClient
@testable import SyncClient

@Suite("Assets: resolved from disk, downloaded, resumed", .blockingWork)
struct AssetDownloadTests {
    /// Small ranges, so that a file of a few dozen kilobytes takes several requests.
    static let rangeSize: Int64 = 16_384

    func downloader(_ engine: SyncEngine, _ transport: any AssetTransport) -> AssetDownloader {
        AssetDownloader(engine: engine, transport: transport, configuration: AssetDownloaderConfiguration(rangeSize: Self.rangeSize))
    }

    /// Runs `body` with a server publishing `unit-1` with the file `asset-1`, and a device that
    /// knows the file only by its `Asset` row.
    func withOneAsset(
        _ data: Data, _ body: @Sendable (TestStore, ScriptedAssetTransport, AssetDownloader) async throws -> Void
    ) async throws {
        try await LiveServer.run { server in
            try await server.publishUnit("unit-1", lessons: [[("asset-1", data)]])
            let test = try TestStore()
            try test.store.storeAssetRow(unitId: "unit-1", lessonId: "unit-1-lesson-0", assetId: "asset-1", data: data)
            let transport = ScriptedAssetTransport(server.transport("device-1"))
            try await body(test, transport, downloader(server.engine(test.store), transport))
        }
    }

    @Test("a file on disk whose checksum matches is resolved without the network, and the access is recorded")
    func resolvesFromDisk() async throws {
        let data = sampleBytes(40_000)
        try await withOneAsset(data) { test, transport, downloader in

            // Known only by its `Asset` row: downloaded from `/assets/asset-1` in three ranges.
            let url = try await downloader.resolveAsset(id: "asset-1")
            #expect(url.isFileURL)
            #expect(try Data(contentsOf: url) == data)
            #expect(transport.exchanges.map(\.request.offset) == [0, 16_384, 32_768])

            transport.offline = true
            test.clock.advance(by: 3600)
            let again = try await downloader.resolveAsset(id: "asset-1")
            #expect(again == url)
            #expect(transport.exchanges.count == 3)
            let record = try #require(try test.store.assetRecord(id: "asset-1"))
            #expect(record.status == .downloaded)
            #expect(record.lastAccessedAt == Timestamp(test.clock.now()))
            #expect(test.store.fileURL(of: record) == url)
        }
    }

    @Test("a damaged file on disk is downloaded again")
    func damagedFileDownloadedAgain() async throws {
        let data = sampleBytes(20_000)
        try await withOneAsset(data) { test, transport, downloader in
            let url = try await downloader.resolveAsset(id: "asset-1")
            let requests = transport.exchanges.count

            try Data(repeating: 0, count: data.count).write(to: url)
            let again = try await downloader.resolveAsset(id: "asset-1")
            #expect(try Data(contentsOf: again) == data)
            #expect(transport.exchanges.count == requests * 2)
        }
    }

    @Test("offline with no file on the device: not available offline, and nothing is written; a unit download waits for the network")
    func offlineIsNotAvailable() async throws {
        let data = sampleBytes(1_000)
        let test = try TestStore()
        try test.store.storeAssetRow(unitId: "unit-1", lessonId: "unit-1-lesson-0", assetId: "asset-1", data: data)
        let sleeper = ManualSleeper(clock: test.clock)
        let downloader = downloader(unreachableEngine(test.store, sleeper: sleeper), unreachableTransport())
        await #expect(throws: AssetError.notAvailableOffline(id: "asset-1")) {
            try await downloader.resolveAsset(id: "asset-1")
        }
        let record = try #require(try test.store.assetRecord(id: "asset-1"))
        #expect(record.status == .remote && record.downloadedBytes == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: test.store.assetsDirectory.path).isEmpty)

        await #expect(throws: AssetError.unknownAsset(id: "missing")) {
            try await downloader.resolveAsset(id: "missing")
        }

        // A unit download whose subscription cannot sync is not available offline either;
        // nothing is written but the subscription, which syncs when the network returns.
        await #expect(throws: AssetError.notAvailableOffline(id: "unit-1")) {
            try await downloader.downloadUnit(id: "unit-1") { _ in }
        }
        let subscription = try #require(try test.store.subscriptions().first)
        #expect(subscription.request == Subscriptions.unit(id: "unit-1") && !subscription.hasSynced)
        #expect(sleeper.sleeping == 0, "it does not wait for the network")
        #expect(try test.store.localState(Unit.self, id: "unit-1")?.downloadStatus == Unit.DownloadStatus.none)
        #expect(try test.store.assetRecord(id: "asset-1") == record)
        #expect(try FileManager.default.contentsOfDirectory(atPath: test.store.assetsDirectory.path).isEmpty)
    }

    @Test("a download interrupted half way resumes with Range for the remaining bytes only")
    func interruptedDownloadResumes() async throws {
        let data = sampleBytes(100_000)
        try await withOneAsset(data) { test, transport, downloader in

            transport.dropConnection(afterRanges: 3)
            await #expect(throws: AssetError.notAvailableOffline(id: "asset-1")) {
                try await downloader.resolveAsset(id: "asset-1")
            }
            let partial = try #require(try test.store.assetRecord(id: "asset-1"))
            #expect(partial.status == .downloading)
            #expect(partial.downloadedBytes == 49_152)
            #expect(partial.etag == "\"\(Hex.sha256(data))\"")
            #expect(partial.localPath == nil)
            let partialFile = test.store.assetsDirectory.appendingPathComponent("asset-asset-1.partial")
            #expect(try Data(contentsOf: partialFile) == data.prefix(49_152))

            transport.dropConnection(afterRanges: nil)
            let before = transport.exchanges.count
            let url = try await downloader.resolveAsset(id: "asset-1")
            let resumed = Array(transport.exchanges.dropFirst(before))
            #expect(resumed.map(\.request.offset) == [49_152, 65_536, 81_920, 98_304])
            #expect(resumed.first?.request.rangeHeader == "bytes=49152-65535")
            #expect(resumed.allSatisfy { $0.request.ifRange == partial.etag })
            #expect(resumed.allSatisfy { !$0.response.isWholeFile && $0.response.offset == $0.request.offset })
            #expect(resumed.reduce(0) { $0 + $1.response.length } == 100_000 - 49_152)
            #expect(try Data(contentsOf: url) == data)
            #expect(!FileManager.default.fileExists(atPath: partialFile.path))
            #expect(try test.store.assetRecord(id: "asset-1")?.status == .downloaded)
        }
    }

    @Test("a file changed on the server between two attempts is downloaded again from the start")
    func changedFileRestarts() async throws {
        try await LiveServer.run { server in
            let first = sampleBytes(100_000), second = sampleBytes(60_000, seed: 5)
            try await server.publishUnit("unit-1", lessons: [[("asset-1", first)]])
            let test = try TestStore()
            let engine = server.engine(test.store)
            let transport = ScriptedAssetTransport(server.transport("device-1"))
            let downloader = downloader(engine, transport)

            transport.dropConnection(afterRanges: 2)
            await #expect(throws: AssetError.notAvailableOffline(id: "asset-1")) {
                try await downloader.downloadUnit(id: "unit-1") { _ in }
            }
            #expect(try test.store.localState(Unit.self, id: "unit-1")?.downloadStatus == .failed)
            let oldTag = try #require(try test.store.assetRecord(id: "asset-1")?.etag)

            // The new file's `Asset` row comes with the next sync of the unit's subscription (a
            // download waits only for its first).
            try await server.upload("asset-1", second)
            guard case .succeeded = await engine.syncNow() else {
                Issue.record("the sync failed")
                return
            }
            #expect(try test.store.fetch(Asset.self, id: "asset-1")?.checksum == Hex.sha256(second))
            transport.dropConnection(afterRanges: nil)
            let before = transport.exchanges.count
            let result = try await downloader.downloadUnit(id: "unit-1") { _ in }
            let resumed = Array(transport.exchanges.dropFirst(before))
            // Asked to resume the old file at 32 768; the server sent the new one whole.
            #expect(resumed.count == 1)
            #expect(resumed.first?.request.offset == 32_768)
            #expect(resumed.first?.request.ifRange == oldTag)
            #expect(resumed.first?.response.isWholeFile == true)
            #expect(resumed.first?.response.etag == "\"\(Hex.sha256(second))\"")
            #expect(result.bytes == 60_000)
            let record = try #require(try test.store.assetRecord(id: "asset-1"))
            #expect(record.checksum == Hex.sha256(second))
            #expect(try Data(contentsOf: try #require(test.store.fileURL(of: record))) == second)
        }
    }

    @Test("a download that does not hash to the checksum is deleted and reported")
    func checksumMismatchDeletesTheFile() async throws {
        try await LiveServer.run { server in
            let stale = sampleBytes(30_000), served = sampleBytes(30_000, seed: 9)
            try await server.publishUnit("unit-1", lessons: [[("asset-1", served)]])
            let test = try TestStore()
            // The device's metadata names other bytes than the server's file.
            try test.store.storeAssetRow(unitId: "unit-1", lessonId: "unit-1-lesson-0", assetId: "asset-1", data: stale)
            let downloader = downloader(server.engine(test.store), server.transport("device-1"))
            await #expect(
                throws: AssetError.checksumMismatch(
                    id: "asset-1", expected: Hex.sha256(stale), actual: Hex.sha256(served)
                )
            ) {
                try await downloader.resolveAsset(id: "asset-1")
            }
            let record = try #require(try test.store.assetRecord(id: "asset-1"))
            #expect(record.status == .failed && record.downloadedBytes == 0 && record.localPath == nil)
            #expect(try FileManager.default.contentsOfDirectory(atPath: test.store.assetsDirectory.path).isEmpty)
        }
    }

    @Test("downloadUnit subscribes to the unit, waits for its lessons and assets, and reports progress up to the total")
    func downloadUnitWithProgress() async throws {
        try await LiveServer.run { server in
            let files = [("audio-a", sampleBytes(40_000)), ("image-b", sampleBytes(500, seed: 1)), ("audio-c", sampleBytes(20_000, seed: 2))]
            try await server.publishUnit("unit-0", lessons: [[("other", sampleBytes(10))]])
            try await server.publishUnit("unit-2", lessons: [[files[0], files[1]], [files[2]]])
            let test = try TestStore()
            // Pages of two rows: the unit's six come in three, and the download waits for them all.
            let engine = server.engine(test.store, pullPageSize: 2)
            let transport = ScriptedAssetTransport(server.transport("device-1"))
            let downloader = downloader(engine, transport)

            var events: [DownloadProgress] = []
            for try await progress in downloader.downloadUnit(id: "unit-2") { events.append(progress) }
            let last = try #require(events.last)
            #expect(last.bytesDone == 60_500 && last.bytesTotal == 60_500)
            #expect(last.filesDone == 3 && last.filesTotal == 3 && last.currentAssetId == nil && last.fraction == 1)
            #expect(events.first?.bytesDone == 0 && events.first?.currentAssetId == "audio-a")
            #expect(zip(events, events.dropFirst()).allSatisfy { $0.bytesDone <= $1.bytesDone && $0.filesDone <= $1.filesDone })
            #expect(events.contains { $0.currentAssetId == "audio-a" && $0.bytesDone == 16_384 })

            // The unit's subscription holds the unit, its lessons and their assets; nothing of unit-0 came.
            let subscriptions = try engine.subscriptions()
            #expect(subscriptions.map(\.request) == [Subscriptions.unit(id: "unit-2")])
            let subscription = try #require(subscriptions.first)
            #expect(
                try test.store.subscriptionRowIDs(id: subscription.id) == [
                    "Asset": ["audio-a", "audio-c", "image-b"], "Lesson": ["unit-2-lesson-0", "unit-2-lesson-1"], "Unit": ["unit-2"],
                ])
            #expect(try test.store.fetch(Unit.self, id: "unit-0") == nil)
            #expect(try test.store.fetch(Asset.self, id: "other") == nil)

            let detail = try #require(try test.store.unitDetail(id: "unit-2"))
            #expect(detail.lessons.map { $0.assets.map(\.id) } == [["audio-a", "image-b"], ["audio-c"]])
            #expect(detail.downloadedBytes == 60_500)
            #expect(detail.local.downloadStatus == .downloaded)
            #expect(detail.local.downloadedAt == Timestamp(test.clock.now()))
            for (id, data) in files {
                let record = try #require(try test.store.assetRecord(id: id))
                #expect(try Data(contentsOf: try #require(test.store.fileURL(of: record))) == data)
            }
            #expect(Set(transport.exchanges.map(\.request.url)) == Set(files.map { transport.assetURL(id: $0.0) }))
            #expect(try test.store.cachedUnits().first { $0.id == "unit-2" }?.status == .downloaded)

            // Again: every file is on disk and verified, so nothing is downloaded.
            let requests = transport.exchanges.count
            let again = try await downloader.downloadUnit(id: "unit-2") { _ in }
            #expect(again.files == 3 && transport.exchanges.count == requests)

            // A unit the server does not have: its subscription brings no unit and is let go.
            await #expect(throws: AssetError.unknownUnit(id: "unit-9")) {
                try await downloader.downloadUnit(id: "unit-9") { _ in }
            }
            #expect(try engine.subscriptions().map(\.request) == [Subscriptions.unit(id: "unit-2")])
            #expect(try test.store.localState(Unit.self, id: "unit-9") == nil)
        }
    }

    @Test("two requests for the same file share one download")
    func concurrentResolvesShareOneDownload() async throws {
        let data = sampleBytes(50_000)
        try await withOneAsset(data) { test, transport, downloader in
            async let first = downloader.resolveAsset(id: "asset-1")
            async let second = downloader.resolveAsset(id: "asset-1")
            let (a, b) = try await (first, second)
            #expect(a == b)
            #expect(try Data(contentsOf: a) == data)
            #expect(transport.exchanges.map(\.request.offset) == [0, 16_384, 32_768, 49_152])
        }
    }

    @Test("range headers, Content-Range, asset URLs and file names")
    func wireDetails() throws {
        let url = URL(string: "https://sync.example.com/assets/a")!
        #expect(AssetRangeRequest(url: url, offset: 0).rangeHeader == nil)
        #expect(AssetRangeRequest(url: url, offset: 10).rangeHeader == "bytes=10-")
        #expect(AssetRangeRequest(url: url, offset: 0, length: 5).rangeHeader == "bytes=0-4")
        #expect(AssetRangeRequest(url: url, offset: 7, length: 3).rangeHeader == "bytes=7-9")
        let range = try #require(URLSessionTransport.parseContentRange("bytes 10-19/100"))
        #expect(range.first == 10 && range.total == 100)
        #expect(URLSessionTransport.parseContentRange("bytes 0-0/*").map { $0.total == nil } == true)
        #expect(URLSessionTransport.parseContentRange("items 1-2/3") == nil)

        let transport = URLSessionTransport(baseURL: URL(string: "https://sync.example.com/")!) { "token" }
        #expect(transport.assetURL(id: "a/b c").absoluteString == "https://sync.example.com/assets/a%2Fb%20c")
        #expect(AssetFiles.fileName(assetId: "..") == "asset-..")
        #expect(AssetFiles.fileName(assetId: "a/b") == "asset-a%2Fb")
        #expect(AssetFiles.fileName(assetId: String(repeating: "x", count: 300)).count == "asset-".count + 64)
    }
}
