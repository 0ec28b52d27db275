import ContractRuntime
import EngineTestContracts
import Foundation
import GRDB
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncClient

/// The storage guard's database budget, on the engines' own contracts: over it the lowest
/// priority rows go first, and unsynced writes never. The per-contract limits on rows pulled from
/// the real server are `StorageGuardAssessmentTests`, on the sample's contracts.
@Suite(.blockingWork) struct StorageGuardTests {
    /// A volume of `capacity` bytes holding the files of a folder (and nothing else): evicting
    /// the rows whose files it holds frees space on it, as on a device.
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

    static let day: TimeInterval = 86_400

    func store(_ directory: TemporaryDirectory, clock: ManualClock, limits: StorageLimits, free: FakeFreeSpace) throws -> OfflineStore {
        try OfflineStore(
            OfflineStoreConfiguration(
                databaseURL: directory.databaseURL, tenantId: "acme", userId: "u-1", deviceId: "d-1",
                keyProvider: FileKeyProvider(directory: directory.keysURL), clock: clock, storageLimits: limits, freeSpace: free
            ), contracts: ContractRegistry.self
        )
    }

    @Test func overTheDatabaseBudgetTheLowestPriorityRowsGoFirstAndUnsyncedOnesNever() throws {
        let test = try TestStore.engine()
        let directory = try TemporaryDirectory()
        let free = FakeFreeSpace(capacity: 10_000_000_000)
        func open(budget: Int64?) throws -> OfflineStore {
            try self.store(directory, clock: test.clock, limits: StorageLimits(databaseBudgetBytes: budget), free: free)
        }
        var store = try open(budget: nil)
        let day = CalendarDate(daysSince1970: 20_000)
        var upserts: [String: [JSONValue]] = ["Profile": [], "Card": [], "Note": []]
        for i in 0..<300 {
            upserts["Profile"]!.append(
                EngineSamples.wire(Profile(id: "member-\(i)", displayName: "Member \(i)", lastActiveOn: day, updatedAt: EngineSamples.t0)))
            upserts["Card"]!.append(
                EngineSamples.wire(Card(id: "card-\(i)", teamId: "team-1", boardId: "board-1", title: "Card \(i)", sortIndex: Double(i), revision: 1))
            )
            upserts["Note"]!.append(EngineSamples.wire(EngineSamples.note("note-\(i)")))
        }
        try store.applyServerChanges(ServerChanges(upserts: upserts))
        try store.patch(Note.self, id: "note-7", [.body("Renamed, not sent")])
        let profiles = try store.all(Profile.self).count
        #expect(profiles == 300)

        // A budget a little under what the rows take: profiles (low) go first.
        try store.close()
        let total = try DatabaseQueue(path: directory.databaseURL.path).read { try OfflineStore.rowBytes($0, contracts: store.contracts) }
        store = try open(budget: total - 1_000)
        #expect(try store.all(Profile.self).count < 300)
        #expect(try store.all(Note.self).count == 300, "normal: after low")
        #expect(try store.all(Card.self).count == 300, "critical: last")
        #expect(try store.droppedRows(Profile.self).values.allSatisfy { $0.reason == .evicted })

        // A budget of nothing: every synced row the server can send again goes, low to
        // critical; the note with a write waiting stays.
        try store.close()
        store = try open(budget: 0)
        #expect(try store.all(Profile.self).isEmpty)
        #expect(try store.all(Card.self).isEmpty)
        #expect(try store.all(Note.self).map(\.id) == ["note-7"])
        #expect(try store.outboxCounts().unsent == 1)
    }
}
