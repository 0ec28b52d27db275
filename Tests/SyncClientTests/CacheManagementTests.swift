import ContractRuntime
import Contracts
import Foundation
import GRDB
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import LearningClient
@testable import SyncClient

@Suite("Cache management: listing, deleting, the byte budget", .blockingWork)
struct CacheManagementTests {
    let test: TestStore
    let server: InMemoryAssetTransport
    var store: OfflineStore { test.store }

    init() throws {
        test = try TestStore()
        server = InMemoryAssetTransport(folder: test.directory.url.appendingPathComponent("bodies"))
    }

    func downloader(budget: CacheBudget = .standard, transport: (any AssetTransport)? = nil) -> AssetDownloader {
        AssetDownloader(
            store: store, transport: transport ?? server, configuration: AssetDownloaderConfiguration(rangeSize: 1_024, cacheBudget: budget)
        )
    }

    /// Moves the clock to `days` after the start.
    func at(day days: Double) {
        test.clock.set(TestStore.start.addingTimeInterval(days * 86_400))
    }

    func date(day days: Double) -> Date { TestStore.start.addingTimeInterval(days * 86_400) }

    /// Downloads a unit of one 1 000-byte file on `day`.
    func downloadUnit(_ id: String, day: Double, with downloader: AssetDownloader? = nil) async throws -> UnitDownloadResult {
        server.addUnit(id, fileSizes: [1_000])
        at(day: day)
        return try await (downloader ?? self.downloader()).downloadUnit(id: id) { _ in }
    }

    @Test("units are listed with their status and size; totals add them up")
    func listingAndTotals() async throws {
        server.addUnit("unit-a", fileSizes: [1_000, 2_000])
        server.addUnit("unit-c", fileSizes: [3_000, 100])
        _ = try await downloader().downloadUnit(id: "unit-a") { _ in }
        // unit-b is only in the catalogue.
        try store.applyServerChanges(
            ServerChanges(upserts: [
                "Unit": [Samples.wire(Unit(id: "unit-b", title: "Unit unit-b", learnerLevel: .beginner, updatedAt: Samples.t0))]
            ]))
        // unit-c: the connection drops after the first range.
        let dropping = ScriptedAssetTransport(server)
        dropping.dropConnection(afterRanges: 1)
        await #expect(throws: AssetError.notAvailableOffline(id: "unit-c-file-0")) {
            try await downloader(transport: dropping).downloadUnit(id: "unit-c") { _ in }
        }

        let units = try store.cachedUnits()
        #expect(units.map(\.id) == ["unit-a", "unit-b", "unit-c"])
        #expect(units.map(\.status) == [.downloaded, .notDownloaded, .partial])
        #expect(units.map(\.bytesOnDisk) == [3_000, 0, 1_024])
        #expect(units.map(\.bytesTotal) == [3_000, 0, 3_100])
        #expect(units.map(\.fileCount) == [2, 0, 2])
        #expect(units.map(\.downloadedFileCount) == [2, 0, 0])
        #expect(units[0].downloadedAt == test.clock.now() && units[0].title == "Unit unit-a")
        #expect(units[2].downloadedAt == nil && units[2].addedAt == test.clock.now())

        let totals = try store.cacheTotals()
        #expect(totals.units == 3 && totals.downloadedUnits == 1)
        #expect(totals.bytesOnDisk == 4_024 && totals.partialBytes == 1_024 && totals.files == 2)
        #expect(totals.databaseBytes > 0)
    }

    @Test("opening, completing and expiring a unit are recorded with the store's clock")
    func bookkeeping() async throws {
        _ = try await downloadUnit("unit-a", day: 0)
        at(day: 1)
        try store.markUnitOpened(id: "unit-a")
        try store.markUnitCompleted(id: "unit-a")
        try store.setUnitExpiry(id: "unit-a", expiresAt: date(day: 2))
        var unit = try #require(try store.cachedUnits().first)
        #expect(unit.lastOpenedAt == date(day: 1) && unit.isCompleted && unit.expiresAt == date(day: 2))
        #expect(unit.status == .downloaded)
        #expect(try store.localState(Unit.self, id: "unit-a")?.lastAccessedAt == Timestamp(date(day: 1)))

        at(day: 2)
        unit = try #require(try store.cachedUnits().first)
        #expect(unit.status == .expired)
        try store.markUnitCompleted(id: "unit-a", completed: false)
        #expect(try store.cachedUnits().first?.isCompleted == false)
        #expect(throws: OfflineStoreError.rowNotFound(contract: "Unit", id: "nope")) { try store.markUnitOpened(id: "nope") }
    }

    @Test("deleting a unit removes its rows, records and files, and only those")
    func deleteOneUnit() async throws {
        _ = try await downloadUnit("unit-a", day: 0)
        _ = try await downloadUnit("unit-c", day: 0)
        try store.applyServerChanges(ServerChanges(scopeKey: "content", cursor: "cursor-1"))
        let fileA = try #require(try store.assetRecord(id: "unit-a-file-0").flatMap(store.fileURL(of:)))
        // A queued progress event of the unit does not stop an explicit delete, and stays queued.
        _ = try store.record(LessonProgressed(lessonId: "unit-a-lesson", unitId: "unit-a", sessionId: UUID(), progress: 0.5))

        try store.deleteCachedUnit(id: "unit-a")
        #expect(try store.fetch(Unit.self, id: "unit-a") == nil)
        #expect(try store.fetch(Lesson.self, id: "unit-a-lesson") == nil)
        #expect(try store.fetch(Asset.self, id: "unit-a-file-0") == nil)
        #expect(try store.assetRecord(id: "unit-a-file-0") == nil)
        #expect(!FileManager.default.fileExists(atPath: fileA.path))
        #expect(try store.outboxEntries().count == 1)
        #expect(try store.cachedUnits().map(\.id) == ["unit-c"])
        #expect(try store.assetRecord(id: "unit-c-file-0")?.status == .downloaded)
        // The next pull lists the catalogue again, so the unit comes back, not downloaded.
        #expect(try store.cursor(forScope: "content") == nil)

        #expect(throws: OfflineStoreError.rowNotFound(contract: "Unit", id: "unit-a")) { try store.deleteCachedUnit(id: "unit-a") }
    }

    @Test("clearing the cache removes every unit and file")
    func clearAll() async throws {
        _ = try await downloadUnit("unit-a", day: 0)
        _ = try await downloadUnit("unit-c", day: 0)
        try store.clearCache()
        #expect(try store.cachedUnits().isEmpty)
        let totals = try store.cacheTotals()
        #expect(totals.units == 0 && totals.bytesOnDisk == 0 && totals.files == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.assetsDirectory.path).isEmpty)
        #expect(try store.count(Lesson.self) == 0 && store.count(Asset.self) == 0)
    }

    @Test("over budget, units are evicted in docs/client.md's eviction order; units with unsynced writes never are")
    func evictionOrder() async throws {
        _ = try await downloadUnit("expired", day: 0)
        _ = try await downloadUnit("completed-old", day: 0)
        _ = try await downloadUnit("pending", day: 0)
        _ = try await downloadUnit("statement-chain", day: 0)
        _ = try await downloadUnit("lru-1", day: 1)
        _ = try await downloadUnit("lru-2", day: 1)
        _ = try await downloadUnit("completed-recent", day: 1)
        _ = try await downloadUnit("never-opened-old", day: 6)
        _ = try await downloadUnit("never-opened-new", day: 8.5)
        try store.setUnitExpiry(id: "expired", expiresAt: date(day: 9))
        try store.setUnitExpiry(id: "pending", expiresAt: date(day: 1))
        for (id, day) in [("completed-old", 2.0), ("lru-1", 8), ("lru-2", 9), ("expired", 9.5), ("completed-recent", 9.2)] {
            at(day: day)
            try store.markUnitOpened(id: id)
        }
        try store.markUnitCompleted(id: "completed-old")
        try store.markUnitCompleted(id: "completed-recent")
        // An unsynced write that names the unit…
        _ = try store.record(LessonProgressed(lessonId: "pending-lesson", unitId: "pending", sessionId: UUID(), progress: 1))
        // …and one that leads to it through other rows: statement → attempt → assessment → unit.
        try store.applyServerChanges(
            ServerChanges(upserts: [
                "Assessment": [
                    Samples.wire(
                        Assessment(
                            id: "quiz-s", unitId: "statement-chain", title: "Quiz", questions: .array([]), questionCount: 0, updatedAt: Samples.t0
                        ))
                ],
                "Attempt": [Samples.wire(Attempt(id: "att-s", assessmentId: "quiz-s", state: .open, startedAt: Samples.t0, updatedAt: Samples.t0))],
            ]))
        _ = try store.create(Statement(id: "st-1", verb: .attempted, objectId: "quiz-s", attemptId: "att-s", statedAt: Samples.t0))

        at(day: 10)
        let units = Dictionary(uniqueKeysWithValues: try store.cachedUnits().map { ($0.id, $0) })
        #expect(units["pending"]?.hasUnsyncedWrites == true && units["statement-chain"]?.hasUnsyncedWrites == true)
        #expect(units["lru-1"]?.hasUnsyncedWrites == false)
        #expect(try store.cacheTotals().bytesOnDisk == 9_000)

        #expect(try store.enforceCacheBudget(CacheBudget(maxBytes: 8_000)) == ["expired"])
        #expect(try store.enforceCacheBudget(CacheBudget(maxBytes: 100_000)).isEmpty)
        let evicted = try store.enforceCacheBudget(CacheBudget(maxBytes: 1_000))
        #expect(evicted == ["completed-old", "never-opened-old", "lru-1", "never-opened-new", "lru-2", "completed-recent"])
        #expect(try store.cachedUnits().map(\.id).sorted() == ["pending", "statement-chain"])
        #expect(try store.cacheTotals().bytesOnDisk == 2_000)
    }

    @Test("downloadUnit enforces the budget afterwards, never evicting the unit it downloaded")
    func budgetAfterDownloads() async throws {
        let downloader = downloader(budget: CacheBudget(maxBytes: 2_500))
        #expect(try await downloadUnit("unit-x", day: 0, with: downloader).evictedUnitIds.isEmpty)
        #expect(try await downloadUnit("unit-y", day: 1, with: downloader).evictedUnitIds.isEmpty)
        #expect(try await downloadUnit("unit-z", day: 2, with: downloader).evictedUnitIds == ["unit-x"])

        let small = self.downloader(budget: CacheBudget(maxBytes: 500))
        let big = try await downloadUnit("unit-w", day: 3, with: small)
        #expect(big.evictedUnitIds == ["unit-y", "unit-z"])
        #expect(try store.cachedUnits().map { "\($0.id) \($0.status)" } == ["unit-w downloaded"])

        // Resolving a file downloads it too, and enforces the budget, keeping the file's unit.
        server.addUnit("unit-v", fileSizes: [1_000])
        try store.storeAssetRow(unitId: "unit-v", lessonId: "unit-v-lesson", assetId: "unit-v-file-0", data: sampleBytes(1_000))
        at(day: 4)
        _ = try await small.resolveAsset(id: "unit-v-file-0")
        #expect(try store.cachedUnits().map { "\($0.id) \($0.bytesOnDisk)" } == ["unit-v 1000"])
    }

    @Test("a unit left downloading by a process that ended is failed when the store opens again, and resumes")
    func interruptedDownloadIsFailedOnOpen() async throws {
        _ = try await downloadUnit("unit-done", day: 0)
        server.addUnit("unit-cut", fileSizes: [5_000])
        let cut = try #require(try await server.unitsSync(since: nil, limit: nil, schema: [:]).units.first { $0.id == "unit-cut" })
        // What a kill right after the download began leaves: the unit marked downloading.
        _ = try store.storeUnitForDownload(cut)
        #expect(try store.localState(Unit.self, id: "unit-cut")?.downloadStatus == .downloading)

        let reopened = try test.reopen()
        #expect(try reopened.store.localState(Unit.self, id: "unit-cut")?.downloadStatus == .failed)
        #expect(try reopened.store.localState(Unit.self, id: "unit-done")?.downloadStatus == .downloaded)
        let downloader = AssetDownloader(
            store: reopened.store, transport: server, configuration: AssetDownloaderConfiguration(rangeSize: 1_024)
        )
        _ = try await downloader.downloadUnit(id: "unit-cut") { _ in }
        #expect(try reopened.store.localState(Unit.self, id: "unit-cut")?.downloadStatus == .downloaded)
    }

    @Test("a database from before the cache bookkeeping gets it on open")
    func migratesOlderDatabase() throws {
        let directory = try TemporaryDirectory()
        do {
            let queue = try DatabaseQueue(path: directory.databaseURL.path)
            var migrator = DatabaseMigrator()
            // What a build before `client.v2.unit_cache` applied.
            var migrations = Array(ClientSchema.migrations.prefix(1))
            migrations += ContractRegistry.clientMigrations.map { (identifier: $0.identifier, statements: $0.statements) }
            for migration in migrations {
                migrator.registerMigration(migration.identifier) { db in
                    for statement in migration.statements { try db.execute(sql: statement) }
                }
            }
            try migrator.migrate(queue)
            try queue.close()
        }
        let test = try TestStore(directory: directory)
        #expect(try test.store.appliedMigrations().contains("client.v2.unit_cache"))
        try test.store.applyServerChanges(ServerChanges(upserts: ["Unit": [Samples.wire(Samples.units[0])]]))
        try test.store.markUnitOpened(id: "unit-2")
        #expect(try test.store.cachedUnits().first?.lastOpenedAt == TestStore.start)
    }
}
