import ContractRuntime
import Contracts
import Foundation
import SyncClient
import SyncProtocol
import SyncServer
import Testing

/// A device whose cursor is older than the server's tombstone horizon (410 `cursor_expired`).
@Suite struct CursorExpiredTests {
    func engine(_ store: OfflineStore, _ transport: any SyncTransport) -> SyncEngine {
        SyncEngine(
            store: store, transport: transport,
            configuration: SyncEngineConfiguration(scopes: ["team"], pushBatchSize: 3, pullPageSize: 2, retriesAutomatically: false)
        )
    }

    /// The ids of the team's live tasks on the server.
    func serverTaskIDs(_ server: LiveServer) async throws -> Set<String> {
        let rows = try await server.storage.read { reader in
            try await reader.rows(in: ContractTable(FieldTask.descriptor), tenant: "acme", where: ["_deleted": .integer(0)], limit: 1000)
        }
        return Set(rows.compactMap { $0.text("id") })
    }

    @Test func expiredCursorPullsTheScopeAgainKeepingPendingWritesAndConflicts() async throws {
        try await LiveServer.run { server in
            let dirA = try TemporaryDirectory(), dirB = try TemporaryDirectory()
            let storeA = try makeDeviceStore(dirA, device: "d-1"), storeB = try makeDeviceStore(dirB, device: "d-2")
            let engineA = engine(storeA, server.transport("d-1"))
            let engineB = engine(storeB, server.transport("d-2"))

            for i in 1...5 {
                try storeA.create(FieldTask(id: "task-\(i)", teamId: "team-1", title: "Task \(i)", taskKind: .inspection, revision: 0))
            }
            guard case .succeeded = await engineA.syncNow() else { Issue.record("A's first sync"); return }
            guard case .succeeded = await engineB.syncNow() else { Issue.record("B's first sync"); return }

            // An open conflict on A for task-4, which B then deletes.
            try storeB.patch(FieldTask.self, id: "task-4", [.title("From B")])
            guard case .succeeded = await engineB.syncNow() else { Issue.record("B's patch"); return }
            try storeA.patch(FieldTask.self, id: "task-4", [.title("From A")])
            guard case .succeeded = await engineA.syncNow() else { Issue.record("A's conflicting patch"); return }
            #expect(try storeA.conflicts().map(\.rowId) == ["task-4"])

            // B deletes three tasks and adds one; the server compacts the deletes past A's cursor.
            try storeB.delete(FieldTask.self, id: "task-2")
            try storeB.delete(FieldTask.self, id: "task-3")
            try storeB.delete(FieldTask.self, id: "task-4")
            try storeB.create(FieldTask(id: "task-6", teamId: "team-1", title: "Task 6", taskKind: .repair, revision: 0))
            guard case .succeeded = await engineB.syncNow() else { Issue.record("B's deletes"); return }
            let counts = try await ServerHousekeeping(storage: server.storage).run(now: Date().addingTimeInterval(91 * 86_400))
            #expect(counts.tombstones == 3)

            // A meanwhile: a new task (pending) and an edit of a task the server no longer has.
            try storeA.create(FieldTask(id: "task-7", teamId: "team-1", title: "Task 7", taskKind: .inspection, revision: 0))
            try storeA.patch(FieldTask.self, id: "task-3", [.title("Edited offline")])

            let result = await engineA.syncNow()
            guard case .succeeded = result else { Issue.record("A's sync past the horizon: \(result)"); return }
            let status = await engineA.currentStatus
            #expect(status.repulledScopes == ["team": 1], "task-2 removed; task-3 and task-4 kept")
            #expect(status.lastError == nil)

            // The server's rows, plus the rows with a write or a conflict still open.
            let serverIDs = try await serverTaskIDs(server)
            #expect(serverIDs == ["task-1", "task-5", "task-6", "task-7"])
            let local = Set(try storeA.all(FieldTask.self).map(\.id))
            #expect(local == serverIDs.union(["task-3", "task-4"]))
            #expect(try storeA.fetch(FieldTask.self, id: "task-3")?.title == "Edited offline")
            #expect(try storeA.fetch(FieldTask.self, id: "task-6")?.title == "Task 6")
            let conflicts = try storeA.conflicts()
            #expect(conflicts.map(\.rowId) == ["task-4"], "the conflict stays open")
            #expect(try storeA.outboxEntries(statuses: [.failed]).map(\.rowId) == ["task-3"], "the refused edit waits for the user")
            #expect(try storeA.syncStates().first { $0.scopeKey == "team" }?.cursor != nil)

            // The next sync is an ordinary one.
            guard case .succeeded = await engineA.syncNow() else { Issue.record("A's next sync"); return }
            #expect(await engineA.currentStatus.repulledScopes.isEmpty)
            #expect(Set(try storeA.all(FieldTask.self).map(\.id)) == local)
        }
    }
}
