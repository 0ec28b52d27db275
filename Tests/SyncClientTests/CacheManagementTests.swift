import ContractRuntime
import Contracts
import Foundation
import GRDB
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import LearningClient
@testable import SyncClient

/// Units kept for offline use (each a `unit` subscription, its files in the engine's file
/// cache), against the real server on loopback: listing, opening, completing, deleting.
@Suite("Cache management: listing, opening, completing, deleting", .blockingWork)
struct CacheManagementTests {
    /// A device on a store with a manual clock, and the server its units come from.
    struct Device {
        let test: TestStore
        let server: LiveServer
        let engine: SyncEngine
        var store: OfflineStore { test.store }

        init(_ server: LiveServer, test: TestStore? = nil) throws {
            self.server = server
            self.test = try test ?? TestStore()
            engine = SyncEngine(store: self.test.store, transport: server.transport("device-1"), configuration: .init(scopes: ["user"]))
        }

        /// Moves the clock to `days` after the start.
        func at(day days: Double) {
            test.clock.set(TestStore.start.addingTimeInterval(days * 86_400))
        }

        func date(day days: Double) -> Date { TestStore.start.addingTimeInterval(days * 86_400) }

        /// Publishes a unit of one lesson (`<unit>-lesson-0`) with one file per size (`<unit>-file-<n>`).
        func publish(_ id: String, fileSizes: [Int] = [1_000]) async throws {
            try await server.publishUnit(
                id, lessons: [fileSizes.enumerated().map { ("\(id)-file-\($0.offset)", sampleBytes($0.element, seed: $0.offset)) }])
        }

        /// Publishes and downloads a unit of one 1 000-byte file on `day`.
        @discardableResult
        func downloadUnit(_ id: String, day: Double) async throws -> UnitDownloadResult {
            try await publish(id)
            at(day: day)
            return try await engine.downloadUnit(id: id)
        }
    }

    @Test("units are listed with their status and size; totals add them up")
    func listingAndTotals() async throws {
        try await LiveServer.run { server in
            let device = try Device(server)
            let store = device.store
            try await device.publish("unit-a", fileSizes: [1_000, 2_000])
            try await device.publish("unit-c", fileSizes: [3_000, 100])
            try await device.engine.downloadUnit(id: "unit-a")
            // unit-b is only in the catalogue.
            try store.applyServerChanges(
                ServerChanges(upserts: [
                    "Unit": [Samples.wire(Unit(id: "unit-b", title: "Unit unit-b", learnerLevel: .beginner, updatedAt: Samples.t0))]
                ]))
            // unit-c: downloaded, then the server replaces its second file; once synced the device lacks it.
            try await device.engine.downloadUnit(id: "unit-c")
            try await server.upload("unit-c-file-1", sampleBytes(200, seed: 9))
            guard case .succeeded = await device.engine.syncNow() else { Issue.record("the sync failed"); return }

            let units = try store.cachedUnits()
            #expect(units.map(\.id) == ["unit-a", "unit-b", "unit-c"])
            #expect(units.map(\.status) == [.downloaded, .notDownloaded, .partial])
            #expect(units.map(\.bytesOnDisk) == [3_000, 0, 3_000])
            #expect(units.map(\.bytesTotal) == [3_000, 0, 3_200])
            #expect(units.map(\.fileCount) == [2, 0, 2])
            #expect(units.map(\.downloadedFileCount) == [2, 0, 1])
            #expect(units[0].downloadedAt == device.test.clock.now() && units[0].title == "Unit unit-a")
            #expect(units[2].addedAt == device.test.clock.now())
            // Only the unit subscribed to is on the device: not its neighbour on the server.
            #expect(try store.fetch(Lesson.self, id: "unit-a-lesson-0") != nil)

            let totals = try store.cacheTotals()
            #expect(totals.units == 3 && totals.downloadedUnits == 1)
            #expect(totals.bytesOnDisk == 6_000 && totals.files == 3)
            #expect(totals.databaseBytes > 0)
        }
    }

    @Test("opening and completing a unit are its subscription's use and end, with the store's clock")
    func bookkeeping() async throws {
        try await LiveServer.run { server in
            let device = try Device(server)
            let store = device.store
            try await device.downloadUnit("unit-a", day: 0)
            var subscription = try #require(try store.unitSubscriptions()["unit-a"])
            #expect(subscription.isActive && subscription.hasSynced && subscription.createdAt == device.date(day: 0))

            device.at(day: 1)
            try store.markUnitOpened(id: "unit-a")
            subscription = try #require(try store.unitSubscriptions()["unit-a"])
            #expect(subscription.lastUsedAt == device.date(day: 1))
            #expect(try store.localState(Unit.self, id: "unit-a")?.lastAccessedAt == Timestamp(device.date(day: 1)))

            try store.markUnitCompleted(id: "unit-a")
            var unit = try #require(try store.cachedUnits().first)
            #expect(unit.lastOpenedAt == device.date(day: 1) && unit.isCompleted && unit.expiresAt == device.date(day: 8))
            #expect(unit.status == .downloaded)
            #expect(try store.unitSubscriptions()["unit-a"]?.isActive == false)

            // Opened again, it is kept as any other.
            device.at(day: 2)
            try store.markUnitOpened(id: "unit-a")
            unit = try #require(try store.cachedUnits().first)
            #expect(!unit.isCompleted && unit.expiresAt == nil && unit.lastOpenedAt == device.date(day: 2))

            // Completed and not opened for a week, its subscription expires: rows and subscription go.
            try store.markUnitCompleted(id: "unit-a")
            device.at(day: 9.5)
            try store.runHousekeeping()
            #expect(try store.unitSubscriptions()["unit-a"] == nil)
            #expect(try store.fetch(Unit.self, id: "unit-a") == nil && store.fetch(Lesson.self, id: "unit-a-lesson-0") == nil)
            #expect(try store.cachedUnits().isEmpty)
            #expect(try store.storedFiles().count == 1, "its file stays in the engine's cache until the cache evicts it")

            #expect(throws: OfflineStoreError.rowNotFound(contract: "Unit", id: "nope")) { try store.markUnitOpened(id: "nope") }
            #expect(throws: OfflineStoreError.rowNotFound(contract: "Unit", id: "nope")) { try store.markUnitCompleted(id: "nope") }
        }
    }

    @Test("deleting a unit removes its subscription and rows, and only those; its files are left to the engine's cache")
    func deleteOneUnit() async throws {
        try await LiveServer.run { server in
            let device = try Device(server)
            let store = device.store
            try await device.downloadUnit("unit-a", day: 0)
            try await device.downloadUnit("unit-c", day: 0)
            let fileA = try #require(try store.fetch(Asset.self, id: "unit-a-file-0")?.file)
            // A queued progress event of the unit does not stop an explicit delete, and stays queued.
            _ = try store.record(LessonProgressed(lessonId: "unit-a-lesson-0", unitId: "unit-a", sessionId: UUID(), progress: 0.5))

            try store.deleteCachedUnit(id: "unit-a")
            #expect(try store.unitSubscriptions()["unit-a"] == nil)
            #expect(try store.fetch(Unit.self, id: "unit-a") == nil)
            #expect(try store.fetch(Lesson.self, id: "unit-a-lesson-0") == nil)
            #expect(try store.fetch(Asset.self, id: "unit-a-file-0") == nil)
            #expect(try store.storedFile(sha256: fileA.sha256)?.state == .cached)
            #expect(try store.outboxEntries().count == 1)
            #expect(try store.cachedUnits().map(\.id) == ["unit-c"])
            #expect(try store.unitDetail(id: "unit-c")?.lessons.first?.localFiles["unit-c-file-0"] != nil)
            #expect(try store.fetch(Lesson.self, id: "unit-c-lesson-0") != nil)

            #expect(throws: OfflineStoreError.rowNotFound(contract: "Unit", id: "unit-a")) { try store.deleteCachedUnit(id: "unit-a") }
        }
    }

    @Test("a device that syncs the catalogue whole keeps a deleted unit's rows, listed as no longer downloaded")
    func deleteKeepsTheCatalogue() async throws {
        try await LiveServer.run { server in
            let test = try TestStore()
            let device = try Device(server, test: test)
            let catalogue = SyncEngine(store: test.store, transport: server.transport("device-1"), configuration: .init(scopes: ["user", "content"]))
            try await device.downloadUnit("unit-a", day: 0)
            guard case .succeeded = await catalogue.syncNow() else { Issue.record("the catalogue sync failed"); return }
            try test.store.deleteCachedUnit(id: "unit-a")
            #expect(try test.store.fetch(Lesson.self, id: "unit-a-lesson-0") != nil, "the content scope holds it")
            // Its file stays in the engine's cache until the cache evicts it.
            #expect(try test.store.cachedUnits().map { "\($0.id) \($0.status) \($0.bytesOnDisk)" } == ["unit-a notDownloaded 1000"])
        }
    }

    @Test("clearing the cache removes every unit")
    func clearAll() async throws {
        try await LiveServer.run { server in
            let device = try Device(server)
            let store = device.store
            try await device.downloadUnit("unit-a", day: 0)
            try await device.downloadUnit("unit-c", day: 0)
            try store.clearCache()
            #expect(try store.cachedUnits().isEmpty)
            let totals = try store.cacheTotals()
            #expect(totals.units == 0 && totals.bytesOnDisk == 0 && totals.files == 0)
            #expect(try store.count(Lesson.self) == 0 && store.count(Asset.self) == 0)
            #expect(try store.subscriptions().isEmpty)
        }
    }

    @Test("a unit the server does not have is refused and nothing of it is kept")
    func unknownUnit() async throws {
        try await LiveServer.run { server in
            let device = try Device(server)
            await #expect(throws: AssetError.unknownUnit(id: "unit-none")) {
                try await device.engine.downloadUnit(id: "unit-none")
            }
            #expect(try device.store.subscriptions().isEmpty && device.store.cachedUnits().isEmpty)
        }
    }

    @Test("a unit left downloading by a process that ended is failed when the store opens again, and resumes")
    func interruptedDownloadIsFailedOnOpen() async throws {
        try await LiveServer.run { server in
            let device = try Device(server)
            try await device.downloadUnit("unit-done", day: 0)
            try await device.publish("unit-cut", fileSizes: [5_000])
            // What a kill during the download leaves: the unit marked downloading.
            try await device.engine.downloadUnit(id: "unit-cut")
            try device.test.raw { db in try db.execute(sql: #"UPDATE "units" SET "download_status" = 'downloading' WHERE "id" = 'unit-cut'"#) }
            #expect(try device.store.localState(Unit.self, id: "unit-cut")?.downloadStatus == .downloading)

            let reopened = try Device(server, test: try device.test.reopen())
            #expect(try reopened.store.localState(Unit.self, id: "unit-cut")?.downloadStatus == .failed)
            #expect(try reopened.store.localState(Unit.self, id: "unit-done")?.downloadStatus == .downloaded)
            try await reopened.engine.downloadUnit(id: "unit-cut")
            #expect(try reopened.store.localState(Unit.self, id: "unit-cut")?.downloadStatus == .downloaded)
        }
    }

    @Test("units a build before subscriptions kept become unit subscriptions, with their use and end")
    func migratesUnitCache() throws {
        let directory = try TemporaryDirectory()
        do {
            // A store as a build before `learning.v2.unit_subscriptions` left it.
            let before = try TestStore(directory: directory)
            try before.store.close()
            try before.raw { db in
                try db.execute(sql: #"DELETE FROM "grdb_migrations" WHERE "identifier" = 'learning.v2.unit_subscriptions'"#)
                for statement in LearningStore.unitCacheStatements { try db.execute(sql: statement) }
                let day: Int64 = 86_400_000
                let start = Int64(TestStore.start.timeIntervalSince1970 * 1000)
                try db.execute(
                    sql: """
                        INSERT INTO "unit_cache" ("unit_id", "added_at", "downloaded_at", "last_opened_at", "completed_at", "expires_at") VALUES
                            ('unit-used', ?, ?, ?, NULL, NULL), ('unit-done', ?, ?, ?, ?, NULL), ('unit-licensed', ?, ?, NULL, NULL, ?)
                        """,
                    arguments: [start, start, start + day, start, start, start + day, start + 2 * day, start, start, start + 5 * day])
            }
        }
        let test = try TestStore(directory: directory)
        let units = try test.store.unitSubscriptions()
        #expect(units.keys.sorted() == ["unit-done", "unit-licensed", "unit-used"])
        #expect(units["unit-used"]?.isActive == true && units["unit-used"]?.lastUsedAt == TestStore.start.addingTimeInterval(86_400))
        #expect(units["unit-done"]?.expiresAt == TestStore.start.addingTimeInterval(9 * 86_400), "a week after it was completed")
        #expect(units["unit-licensed"]?.expiresAt == TestStore.start.addingTimeInterval(5 * 86_400))
        #expect(try test.raw { db in try db.tableExists("unit_cache") } == false)
        #expect(try units.values.allSatisfy { try test.store.subscriptionStatus(id: $0.id)?.createdAt == TestStore.start })
    }
}
