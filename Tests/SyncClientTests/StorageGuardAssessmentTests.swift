import ContractRuntime
import Contracts
import Foundation
import LearningClient
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncClient

/// The storage guard's per-contract limits (most rows, largest row) on assessments pulled from
/// the real server, with the local bookkeeping they rely on. It stays on the sample's contracts:
/// it checks the bookkeeping a contract gets from its local `size_bytes` and `downloaded_at`
/// fields, which no contract of the engines' own declares. The database budget is
/// `StorageGuardTests`, on the engines' own contracts.
@Suite(.blockingWork) struct StorageGuardAssessmentTests {
    /// A volume of `capacity` bytes holding the files of a folder (and nothing else): evicting a
    /// unit frees space on it, as on a device.
    final class FakeFreeSpace: FreeSpaceProvider, @unchecked Sendable {
        private let lock = NSLock()
        private var bytes: Int64
        let folder: URL?

        init(capacity: Int64, holding folder: URL? = nil) {
            bytes = capacity
            self.folder = folder
        }

        var capacity: Int64 {
            get { lock.withLock { bytes } }
            set { lock.withLock { bytes = newValue } }
        }

        func availableBytes(at url: URL) -> Int64? {
            guard let folder, let files = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: [.fileSizeKey]) else {
                return capacity
            }
            var used: Int64 = 0
            for case let file as URL in files {
                used += Int64((try? file.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0)
            }
            return capacity - used
        }
    }

    func store(_ directory: TemporaryDirectory, clock: ManualClock, limits: StorageLimits, free: FakeFreeSpace) throws -> OfflineStore {
        try OfflineStore(
            OfflineStoreConfiguration(
                databaseURL: directory.databaseURL, tenantId: "acme", userId: "u-1", deviceId: "d-1",
                keyProvider: FileKeyProvider(directory: directory.keysURL), clock: clock, storageLimits: limits, freeSpace: free
            ), contracts: ContractRegistry.self, extensions: [LearningStore()]
        )
    }

    func publishAssessment(_ server: LiveServer, _ id: String, questions: Int = 1) async throws {
        _ = try await server.content.publish(
            entity: "Assessment",
            row: .object([
                "id": .string(id), "title": .string("Assessment \(id)"),
                "questions": .array(
                    (0..<questions).map { .object(["id": .string("q\($0)"), "prompt": .string(String(repeating: "x", count: 100))]) }),
                "question_count": .int(Int64(questions)),
            ]),
            identity: LiveServer.admin
        )
    }

    @Test func assessmentsOverTheirLimitsAreDroppedCompletedAndLeastUsedFirstPinnedNever() async throws {
        try await LiveServer.run { server in
            for i in 1...5 { try await publishAssessment(server, "quiz-\(i)") }
            try await publishAssessment(server, "quiz-huge", questions: 60)
            let directory = try TemporaryDirectory()
            let clock = ManualClock(Date())
            let limits = StorageLimits(contracts: ["Assessment": ContractStorageLimit(maxRows: 3, maxRowBytes: 4_000)])
            let store = try store(directory, clock: clock, limits: limits, free: FakeFreeSpace(capacity: 10_000_000_000))
            let engine = SyncEngine(store: store, transport: server.transport("d-1"), configuration: .init(scopes: ["content"]))

            // The first sync brings six; housekeeping keeps three, never the huge one.
            try store.pin(Assessment.self, id: "quiz-1")
            guard case .succeeded = await engine.syncNow() else { Issue.record("sync"); return }
            let kept = Set(try store.all(Assessment.self).map(\.id))
            #expect(kept.count == 3)
            #expect(kept.contains("quiz-1"), "pinned")
            #expect(!kept.contains("quiz-huge"))
            let dropped = try store.droppedRows(Assessment.self)
            #expect(dropped["quiz-huge"]?.reason == .tooLarge)
            #expect(dropped.values.filter { $0.reason == .evicted }.count == 2)
            // The local bookkeeping is written: size and first download.
            let local = try #require(try store.localState(Assessment.self, id: "quiz-1"))
            #expect(local.sizeBytes > 0)
            #expect(local.downloadedAt != nil)

            // The learner opens one and completes another: over the limit, the completed one
            // goes first, then the least recently opened.
            let others = kept.subtracting(["quiz-1"]).sorted()
            clock.advance(by: 60)
            try store.markAccessed(Assessment.self, id: others[0])
            try store.markCompleted(Assessment.self, id: others[1])
            try store.unpin(Assessment.self, id: "quiz-1")
            let report = try store.runHousekeeping()
            #expect(report.evictedRows.isEmpty, "three rows: within the limit")

            // A read-through brings a dropped one back; the next housekeeping makes room again.
            let fetcher = ScopeFetcher(store: store, transport: server.transport("d-1"), scope: "content")
            let back = dropped.keys.first { dropped[$0]?.reason == .evicted }!
            guard case .fetched = try await store.fetch(Assessment.self, id: back, from: fetcher) else {
                Issue.record("read-through")
                return
            }
            let after = try store.runHousekeeping()
            #expect(after.evictedRows == ["Assessment": 1])
            #expect(try store.fetch(Assessment.self, id: others[1]) == nil, "the completed one went first")
            #expect(try store.fetch(Assessment.self, id: others[0]) != nil)
            #expect(try store.fetch(Assessment.self, id: back) != nil)

            // A contract without the field has no completion to mark.
            #expect(throws: OfflineStoreError.self) { try store.markCompleted(Unit.self, id: "unit-1") }
        }
    }
}
