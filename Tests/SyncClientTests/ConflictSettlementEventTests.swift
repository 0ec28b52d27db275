import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

/// The one conflict settlement still on the sample's contracts: a conflicted event. It needs a
/// server reducer that refuses an event applying to a row that moved on (the field operations
/// app's `TaskStatusChanged` on a task); the engines' own contracts have such an event
/// (`CardMoved` on `Card`), but no app on the engine server folds it. The rest of the suite is
/// `ConflictSettlementTests`, on the engines' own contracts.
@Suite struct ConflictSettlementEventTests {
    /// A device of the sample app with its own manual clock, syncing the team and user scopes.
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

    /// Device A's clock runs a minute ahead of device B's.
    static func devices(_ server: LiveServer) throws -> (Device, Device) {
        let start = Date(timeIntervalSince1970: 1_790_000_000)
        return (
            try Device(server, "device-a", clock: ManualClock(start.addingTimeInterval(60))),
            try Device(server, "device-b", clock: ManualClock(start))
        )
    }

    private static func sharedTask(_ a: Device, _ b: Device) async throws {
        try a.store.create(FieldTask(id: "task-1", teamId: "team-1", title: "Original", taskKind: .repair, revision: 0))
        await a.sync()
        await b.sync()
    }

    @Test("a conflicted event is discarded by taking theirs; keeping it is refused")
    func aConflictedEventIsDiscarded() async throws {
        try await LiveServer.run { server in
            let (a, b) = try Self.devices(server)
            try await Self.sharedTask(a, b)
            try b.store.patch(FieldTask.self, id: "task-1", [.status(.inProgress)])
            await b.sync()
            // A still sees the task assigned when it records the change.
            try a.store.record(TaskStatusChanged(teamId: "team-1", taskId: "task-1", fromStatus: .assigned, toStatus: .enRoute, baseRevision: 0))
            await a.sync()
            let conflict = try #require(try a.store.conflicts().first)
            #expect(conflict.entity == TaskStatusChanged.descriptor.name)
            #expect(throws: OfflineStoreError.self) { try a.store.resolveConflict(conflict.id, with: .keepMine) }
            #expect(try a.store.resolveConflict(conflict.id, with: .takeTheirs) == nil)
            #expect(try a.store.conflicts().isEmpty)
            #expect(try a.store.outboxEntries(statuses: OutboxStatus.unsynced).isEmpty)
            await a.sync()
            #expect(try a.store.fetch(FieldTask.self, id: "task-1")?.status == .inProgress)
        }
    }
}
