import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SampleServerApps
import SyncProtocol
import Testing

@testable import SyncServer

/// The sample `sync-server housekeeping` command, on a data folder of the sample's contracts (the
/// command opens its storage with them). Housekeeping itself is in HousekeepingTests.
@Suite("sync-server housekeeping", .blockingWork)
struct HousekeepingCommandTests {
    @Test("sync-server housekeeping applies the horizons once and prints the counts; bad durations exit 64")
    func command() async throws {
        let folder = CLITests.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        do {
            // Written at the push clock's time (2026-01-01), long past the default 90 days.
            let storage = try SQLiteStorage(directory: folder, contracts: ContractRegistry.self)
            let service = PushService(storage: storage, clock: PushFixedClock(), reducers: SampleServerApps.reducers)
            let alice = PushHarness.alice
            let task: [String: JSONValue] = [
                "id": .string("task-1"), "team_id": .string("red"), "title": .string("Swap"), "task_kind": .string("battery_swap"),
                "status": .string("assigned"),
            ]
            _ = try await service.push(
                PushRequest(
                    clientId: "c-1", schema: [:],
                    mutations: [
                        Mutation(seq: 1, clientMutationId: "m-1", entity: "Task", op: .create, id: "task-1", payload: .object(task)),
                        Mutation(seq: 2, clientMutationId: "m-2", entity: "Task", op: .delete, id: "task-1", baseVersion: 1),
                    ]),
                identity: alice
            )
        }
        let run = try SyncServerCommand.run(["housekeeping", "--data", folder.path])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout == "push results pruned: 0\ntombstones compacted: 1\nscopes compacted: 1\nurgent marks forgotten: 0\n")
        let again = try SyncServerCommand.run(["housekeeping", "--data", folder.path, "--tombstone-horizon", "off", "--push-result-retention", "12h"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains("tombstones compacted: 0"))
        let bad = try SyncServerCommand.run(["housekeeping", "--data", folder.path, "--tombstone-horizon", "soon"])
        #expect(bad.status == 64)
        #expect(bad.stderr.contains("--tombstone-horizon"))
        let badInterval = try SyncServerCommand.run(["serve", "--data", folder.path, "--housekeeping-interval", "often"])
        #expect(badInterval.status == 64)
    }
}
