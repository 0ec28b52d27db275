import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

/// Two devices writing the same rows, one conflict policy at a time, against the real server on
/// loopback. Each device has its own manual clock, so which write is later is decided by the test.
@Suite struct EngineConflictPolicyTests {
    struct Device {
        let directory: TemporaryDirectory
        let clock: ManualClock
        let store: OfflineStore
        let engine: SyncEngine

        init(_ server: LiveServer, _ name: String, clock: ManualClock) throws {
            directory = try TemporaryDirectory()
            self.clock = clock
            store = try makeDeviceStore(directory, device: name, clock: clock)
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
        try await LiveServer.run { server in
            let (a, b) = try Self.devices(server)
            try a.store.create(
                ServiceAsset(id: "sa-1", teamId: "team-1", assetTag: "S-1", displayName: "Scooter", category: .vehicle, updatedAt: Samples.t0))
            await a.sync()
            await b.sync()
            #expect(try b.store.fetch(ServiceAsset.self, id: "sa-1")?.displayName == "Scooter")

            // Both edit offline; A's edit is later (its clock is ahead) but B pushes second.
            try a.store.patch(ServiceAsset.self, id: "sa-1", [.displayName("From A")])
            try b.store.patch(ServiceAsset.self, id: "sa-1", [.displayName("From B")])
            await a.sync()
            await b.sync()

            // B lost: settled at once by taking the server's row, and recorded.
            #expect(try b.store.fetch(ServiceAsset.self, id: "sa-1")?.displayName == "From A")
            #expect(try b.store.conflicts().isEmpty)
            let settled = try b.store.conflicts(includeResolved: true)
            #expect(settled.map(\.rowId) == ["sa-1"])
            #expect(settled.first?.resolution == .takeTheirs)
            #expect(settled.first?.serverResolution == "lost")
            await a.sync()
            #expect(try a.store.fetch(ServiceAsset.self, id: "sa-1")?.displayName == "From A")
            #expect(await b.engine.currentStatus.pending == 0)
        }
    }

    @Test func fieldMergeKeepsBothDevicesFieldsAndSettlesTheSameField() async throws {
        try await LiveServer.run { server in
            let (a, b) = try Self.devices(server)
            try a.store.create(Samples.incident("inc-1", priority: .low, openedAt: 1_000))
            await a.sync()
            await b.sync()

            // Different fields: both kept.
            try a.store.patch(Incident.self, id: "inc-1", [.state(.inProgress)])
            try b.store.patch(Incident.self, id: "inc-1", [.priority(.critical)])
            await a.sync()
            await b.sync()
            await a.sync()
            for device in [a, b] {
                let incident = try #require(try device.store.fetch(Incident.self, id: "inc-1"))
                #expect(incident.state == .inProgress)
                #expect(incident.priority == .critical)
                #expect(try device.store.conflicts(includeResolved: true).isEmpty)
            }

            // The same field: the later write (A's) wins on the server, B's change is settled.
            try a.store.patch(Incident.self, id: "inc-1", [.shortDescription("Pump A")])
            try b.store.patch(Incident.self, id: "inc-1", [.shortDescription("Pump B"), .assigneeId("u-2")])
            await a.sync()
            await b.sync()
            await a.sync()
            for device in [a, b] {
                let incident = try #require(try device.store.fetch(Incident.self, id: "inc-1"))
                #expect(incident.shortDescription == "Pump A")
                #expect(incident.assigneeId == "u-2", "B's other field is merged in")
                #expect(try device.store.conflicts().isEmpty)
            }
        }
    }

    @Test func versionCheckConflictsUntilTheUserChooses() async throws {
        try await LiveServer.run { server in
            let (a, b) = try Self.devices(server)
            try a.store.create(FieldTask(id: "task-v", teamId: "team-1", title: "Original", taskKind: .repair, revision: 0))
            await a.sync()
            await b.sync()

            try b.store.patch(FieldTask.self, id: "task-v", [.title("From B")])
            await b.sync()
            try a.store.patch(FieldTask.self, id: "task-v", [.title("From A")])
            await a.sync()

            let conflict = try #require(try a.store.conflicts().first)
            #expect(conflict.rowId == "task-v")
            #expect(conflict.localRow?["title"] == .string("From A"))
            #expect(conflict.serverRow?["title"] == .string("From B"))
            #expect(await a.engine.currentStatus.conflicts == 1)
            // Until resolved, A shows its own edit.
            #expect(try a.store.fetch(FieldTask.self, id: "task-v")?.title == "From A")

            // Keep mine: resubmitted on the server's version, applied.
            try a.store.resolveConflict(conflict.id, with: .keepMine)
            await a.sync()
            #expect(try a.store.conflicts().isEmpty)
            await b.sync()
            #expect(try b.store.fetch(FieldTask.self, id: "task-v")?.title == "From A")

            // Take theirs: the server's row replaces the device's, nothing is sent.
            try a.store.patch(FieldTask.self, id: "task-v", [.title("A again")])
            try b.store.patch(FieldTask.self, id: "task-v", [.title("B again")])
            await b.sync()
            await a.sync()
            let second = try #require(try a.store.conflicts().first)
            try a.store.resolveConflict(second.id, with: .takeTheirs)
            #expect(try a.store.fetch(FieldTask.self, id: "task-v")?.title == "B again")
            await a.sync()
            #expect(await a.engine.currentStatus.pending == 0)
            #expect(await a.engine.currentStatus.conflicts == 0)
        }
    }

    @Test func appendOnlyNeverConflicts() async throws {
        try await LiveServer.run { server in
            let (a, b) = try Self.devices(server)
            let stated = Timestamp(millisecondsSince1970: 1_790_000_000_000)
            try a.store.create(Statement(id: "st-a", verb: .experienced, objectId: "lesson-1", statedAt: stated))
            try b.store.create(Statement(id: "st-b", verb: .completed, objectId: "lesson-1", statedAt: stated))
            await a.sync()
            await b.sync()
            for device in [a, b] {
                #expect(try device.store.conflicts(includeResolved: true).isEmpty)
                #expect(try device.store.outboxCounts().unsent == 0)
                #expect(try device.store.outboxCounts()[.failed] == 0)
            }
            // Append-only rows are never changed: refused on the device, before the outbox.
            #expect(throws: OfflineStoreError.self) {
                try a.store.update(Statement(id: "st-a", verb: .completed, objectId: "lesson-1", statedAt: stated))
            }
        }
    }
}
