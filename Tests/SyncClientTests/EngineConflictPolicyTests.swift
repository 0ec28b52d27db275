import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

/// Two devices writing the same rows, one conflict policy at a time, against the real server on
/// loopback, on the engines' own contracts (one entity per policy). Each device has its own manual
/// clock, so which write is later is decided by the test.
@Suite struct EngineConflictPolicyTests {
    struct Device {
        let directory: TemporaryDirectory
        let clock: ManualClock
        let store: OfflineStore
        let engine: SyncEngine

        init(_ server: LiveServer, _ name: String, clock: ManualClock) throws {
            directory = try TemporaryDirectory()
            self.clock = clock
            store = try makeEngineDeviceStore(directory, device: name, clock: clock)
            engine = SyncEngine(
                store: store, transport: server.transport(name),
                configuration: SyncEngineConfiguration(scopes: ["team", "user"], retriesAutomatically: false)
            )
        }

        func sync(sourceLocation: SourceLocation = #_sourceLocation) async {
            let result = await engine.syncNow()
            guard case .succeeded = result else {
                Issue.record("sync failed: \(result)", sourceLocation: sourceLocation)
                return
            }
        }
    }

    /// Device A's clock runs `lead` seconds ahead of device B's.
    static func devices(_ server: LiveServer, lead: TimeInterval = 60) throws -> (Device, Device) {
        let start = Date(timeIntervalSince1970: 1_790_000_000)
        return (
            try Device(server, "device-a", clock: ManualClock(start.addingTimeInterval(lead))),
            try Device(server, "device-b", clock: ManualClock(start))
        )
    }

    @Test func lastWriterWinsKeepsTheLaterWriteOnBothDevices() async throws {
        try await LiveServer.engine { server in
            let (a, b) = try Self.devices(server)
            try a.store.create(Note(id: "note-1", teamId: "team-1", cardId: "card-1", authorId: "u-1", body: "Agenda", updatedAt: EngineSamples.t0))
            await a.sync()
            await b.sync()
            #expect(try b.store.fetch(Note.self, id: "note-1")?.body == "Agenda")

            // Both edit offline; A's edit is later (its clock is ahead) but B pushes second.
            try a.store.patch(Note.self, id: "note-1", [.body("From A")])
            try b.store.patch(Note.self, id: "note-1", [.body("From B")])
            await a.sync()
            await b.sync()

            // B lost: settled at once by taking the server's row, and recorded.
            #expect(try b.store.fetch(Note.self, id: "note-1")?.body == "From A")
            #expect(try b.store.conflicts().isEmpty)
            let settled = try b.store.conflicts(includeResolved: true)
            #expect(settled.map(\.rowId) == ["note-1"])
            #expect(settled.first?.resolution == .takeTheirs)
            #expect(settled.first?.serverResolution == "lost")
            await a.sync()
            #expect(try a.store.fetch(Note.self, id: "note-1")?.body == "From A")
            #expect(await b.engine.currentStatus.pending == 0)
        }
    }

    @Test func fieldMergeKeepsBothDevicesFieldsAndSettlesTheSameField() async throws {
        try await LiveServer.engine { server in
            let (a, b) = try Self.devices(server)
            try a.store.create(EngineSamples.board("board-1"))
            await a.sync()
            await b.sync()

            // Different fields: both kept.
            try a.store.patch(Board.self, id: "board-1", [.status(.paused)])
            try b.store.patch(Board.self, id: "board-1", [.color(.red)])
            await a.sync()
            await b.sync()
            await a.sync()
            for device in [a, b] {
                let board = try #require(try device.store.fetch(Board.self, id: "board-1"))
                #expect(board.status == .paused)
                #expect(board.color == .red)
                #expect(try device.store.conflicts(includeResolved: true).isEmpty)
            }

            // The same field: the later write (A's) wins on the server, B's change is settled.
            try a.store.patch(Board.self, id: "board-1", [.name("Board A")])
            try b.store.patch(Board.self, id: "board-1", [.name("Board B"), .ownerId("u-2")])
            await a.sync()
            await b.sync()
            await a.sync()
            for device in [a, b] {
                let board = try #require(try device.store.fetch(Board.self, id: "board-1"))
                #expect(board.name == "Board A")
                #expect(board.ownerId == "u-2", "B's other field is merged in")
                #expect(try device.store.conflicts().isEmpty)
            }
        }
    }

    @Test func versionCheckConflictsUntilTheUserChooses() async throws {
        try await LiveServer.engine { server in
            let (a, b) = try Self.devices(server)
            try a.store.create(Card(id: "card-v", teamId: "team-1", boardId: "board-1", title: "Original", revision: 0))
            await a.sync()
            await b.sync()

            try b.store.patch(Card.self, id: "card-v", [.title("From B")])
            await b.sync()
            try a.store.patch(Card.self, id: "card-v", [.title("From A")])
            await a.sync()

            let conflict = try #require(try a.store.conflicts().first)
            #expect(conflict.rowId == "card-v")
            #expect(conflict.localRow?["title"] == .string("From A"))
            #expect(conflict.serverRow?["title"] == .string("From B"))
            #expect(await a.engine.currentStatus.conflicts == 1)
            // Until resolved, A shows its own edit.
            #expect(try a.store.fetch(Card.self, id: "card-v")?.title == "From A")

            // Keep mine: resubmitted on the server's version, applied.
            try a.store.resolveConflict(conflict.id, with: .keepMine)
            await a.sync()
            #expect(try a.store.conflicts().isEmpty)
            await b.sync()
            #expect(try b.store.fetch(Card.self, id: "card-v")?.title == "From A")

            // Take theirs: the server's row replaces the device's, nothing is sent.
            try a.store.patch(Card.self, id: "card-v", [.title("A again")])
            try b.store.patch(Card.self, id: "card-v", [.title("B again")])
            await b.sync()
            await a.sync()
            let second = try #require(try a.store.conflicts().first)
            try a.store.resolveConflict(second.id, with: .takeTheirs)
            #expect(try a.store.fetch(Card.self, id: "card-v")?.title == "B again")
            await a.sync()
            #expect(await a.engine.currentStatus.pending == 0)
            #expect(await a.engine.currentStatus.conflicts == 0)
        }
    }

    static let activityA = UUID(uuidString: "6f1c2a8e-4b5d-4e7f-9a0b-1c2d3e4f5a6b")!
    static let activityB = UUID(uuidString: "0a9b8c7d-6e5f-4a3b-8c1d-2e3f4a5b6c7d")!

    static func activity(_ id: UUID, verb: ActivityRecord.Verb, at time: Timestamp) -> ActivityRecord {
        ActivityRecord(id: id, verb: verb, subjectId: "card-1", happenedAt: time, happenedOn: CalendarDate(year: 2026, month: 9, day: 21))
    }

    @Test func appendOnlyNeverConflicts() async throws {
        try await LiveServer.engine { server in
            let (a, b) = try Self.devices(server)
            let stated = Timestamp(millisecondsSince1970: 1_790_000_000_000)
            try a.store.create(Self.activity(Self.activityA, verb: .viewed, at: stated))
            try b.store.create(Self.activity(Self.activityB, verb: .edited, at: stated))
            await a.sync()
            await b.sync()
            for device in [a, b] {
                #expect(try device.store.conflicts(includeResolved: true).isEmpty)
                #expect(try device.store.outboxCounts().unsent == 0)
                #expect(try device.store.outboxCounts()[.failed] == 0)
            }
            // Append-only rows are never changed: refused on the device, before the outbox.
            #expect(throws: OfflineStoreError.self) {
                try a.store.update(Self.activity(Self.activityA, verb: .edited, at: stated))
            }
        }
    }
}
