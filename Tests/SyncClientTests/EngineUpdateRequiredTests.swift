import ContractRuntime
import Contracts
import Foundation
import GRDB
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

/// A server that no longer supports this build's version of one contract (426): that contract
/// is held, nothing of it is lost, and every other contract keeps syncing.
@Suite struct EngineUpdateRequiredTests {
    @Test func aRefusedContractIsHeldWhileTheOthersSync() async throws {
        try await LiveServer.run { server in
            // Device B, on a supported build, puts a task on the server.
            let directoryB = try TemporaryDirectory()
            let storeB = try makeDeviceStore(directoryB, device: "d-b")
            let engineB = SyncEngine(store: storeB, transport: server.transport("d-b"), configuration: .init(scopes: ["team"]))
            try storeB.create(FieldTask(id: "task-b", teamId: "team-1", title: "From B", taskKind: .repair, revision: 0))
            guard case .succeeded = await engineB.syncNow() else { Issue.record("device B"); return }

            // Device A's build is too old for Task.
            let directoryA = try TemporaryDirectory()
            var storeA = try makeDeviceStore(directoryA, device: "d-a")
            let oldest = FieldTask.descriptor.currentVersion + 1
            let upgraded = RecordingTransport(UpgradedServerTransport(server.transport("d-a"), refusing: "Task", oldestSupported: oldest))
            let engineA = SyncEngine(
                store: storeA, transport: upgraded, configuration: .init(scopes: ["team"], retriesAutomatically: false)
            )
            try storeA.create(Samples.incident("inc-1", priority: .high, openedAt: 1_000))
            try storeA.create(FieldTask(id: "task-a", teamId: "team-1", title: "From A", taskKind: .inspection, revision: 0))
            try storeA.create(
                ServiceAsset(id: "sa-1", teamId: "team-1", assetTag: "S-1", displayName: "Scooter", category: .vehicle, updatedAt: Samples.t0))
            try storeA.patch(Incident.self, id: "inc-1", [.priority(.critical)])

            let result = await engineA.syncNow()
            guard case .succeeded(let pushed, _) = result else { Issue.record("A's sync: \(result)"); return }
            #expect(pushed == 3)
            // The refused push held seqs 1-4; the next one numbered the three others 1-3.
            #expect(upgraded.pushRequests.map { $0.mutations.map(\.seq) } == [[1, 2, 3, 4], [1, 2, 3]])
            #expect(upgraded.pushRequests.last?.schema["Task"] == nil)

            let status = await engineA.currentStatus
            #expect(status.updateRequired == [UpdateRequired(entity: "Task", oldestSupported: oldest, current: oldest)])
            #expect(status.pending == 1, "the held task write waits, it is not dropped")
            #expect(try storeA.fetch(FieldTask.self, id: "task-b") == nil, "rows of a held contract are not pulled")
            #expect(try storeA.fetch(FieldTask.self, id: "task-a")?.title == "From A", "the device keeps its own write")

            // Later syncs go on without the held contract and without sequence trouble.
            try storeA.patch(ServiceAsset.self, id: "sa-1", [.displayName("Scooter 1")])
            guard case .succeeded(1, _) = await engineA.syncNow() else { Issue.record("A's second sync"); return }

            // The others reached the server once.
            guard case .succeeded = await engineB.syncNow() else { Issue.record("device B again"); return }
            #expect(try storeB.fetch(Incident.self, id: "inc-1")?.priority == .critical)
            #expect(try storeB.fetch(ServiceAsset.self, id: "sa-1")?.displayName == "Scooter 1")
            #expect(try storeB.all(FieldTask.self).map(\.id) == ["task-b"])

            // The app is updated (a build that satisfies the requirement): reopening lifts the
            // hold, the held write goes out once, and the held rows arrive.
            try storeA.close()
            let satisfied = try JSONEncoder().encode([
                UpdateRequired(entity: "Task", oldestSupported: FieldTask.descriptor.currentVersion, current: oldest)
            ])
            let queue = try DatabaseQueue(path: directoryA.databaseURL.path)
            try await queue.write { db in
                try db.execute(
                    sql: #"UPDATE "metadata" SET "value" = ? WHERE "key" = 'update_required'"#,
                    arguments: [String(decoding: satisfied, as: UTF8.self)]
                )
            }
            try queue.close()
            storeA = try makeDeviceStore(directoryA, device: "d-a")
            #expect(try storeA.updateRequirements().isEmpty)
            #expect(try storeA.cursor(forScope: "team") == nil, "every scope is pulled again from the start")
            let updated = SyncEngine(store: storeA, transport: server.transport("d-a"), configuration: .init(scopes: ["team"]))
            guard case .succeeded(1, _) = await updated.syncNow() else { Issue.record("A after the update"); return }
            #expect(try storeA.fetch(FieldTask.self, id: "task-b")?.title == "From B")
            #expect(await updated.currentStatus.updateRequired.isEmpty)

            guard case .succeeded = await engineB.syncNow() else { Issue.record("device B last"); return }
            #expect(try storeB.all(FieldTask.self).map(\.id).sorted() == ["task-a", "task-b"])
        }
    }
}
