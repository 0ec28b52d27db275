import ContractRuntime
import EngineTestContracts
import Foundation
import GRDB
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

/// A server that no longer supports this build's version of one contract (426): that contract
/// is held, nothing of it is lost, and every other contract keeps syncing. On the engines' own
/// contracts: `Card` is refused, `Board` and `Note` go on.
@Suite struct EngineUpdateRequiredTests {
    @Test func aRefusedContractIsHeldWhileTheOthersSync() async throws {
        try await LiveServer.engine { server in
            // Device B, on a supported build, puts a card on the server.
            let directoryB = try TemporaryDirectory()
            let storeB = try makeEngineDeviceStore(directoryB, device: "d-b")
            let engineB = SyncEngine(store: storeB, transport: server.transport("d-b"), configuration: .init(scopes: ["team"]))
            try storeB.create(Card(id: "card-b", teamId: "team-1", boardId: "board-1", title: "From B", revision: 0))
            guard case .succeeded = await engineB.syncNow() else { Issue.record("device B"); return }

            // Device A's build is too old for Card.
            let directoryA = try TemporaryDirectory()
            var storeA = try makeEngineDeviceStore(directoryA, device: "d-a")
            let oldest = Card.descriptor.currentVersion + 1
            let upgraded = RecordingTransport(UpgradedServerTransport(server.transport("d-a"), refusing: "Card", oldestSupported: oldest))
            let engineA = SyncEngine(
                store: storeA, transport: upgraded, configuration: .init(scopes: ["team"], retriesAutomatically: false)
            )
            try storeA.create(EngineSamples.board("board-1"))
            try storeA.create(Card(id: "card-a", teamId: "team-1", boardId: "board-1", title: "From A", revision: 0))
            try storeA.create(EngineSamples.note("note-1"))
            try storeA.patch(Board.self, id: "board-1", [.color(.red)])

            let result = await engineA.syncNow()
            guard case .succeeded(let pushed, _) = result else { Issue.record("A's sync: \(result)"); return }
            #expect(pushed == 3)
            // The refused push held seqs 1-4; the next one numbered the three others 1-3.
            #expect(upgraded.pushRequests.map { $0.mutations.map(\.seq) } == [[1, 2, 3, 4], [1, 2, 3]])
            #expect(upgraded.pushRequests.last?.schema["Card"] == nil)

            let status = await engineA.currentStatus
            #expect(status.updateRequired == [UpdateRequired(entity: "Card", oldestSupported: oldest, current: oldest)])
            #expect(status.pending == 1, "the held card write waits, it is not dropped")
            #expect(try storeA.fetch(Card.self, id: "card-b") == nil, "rows of a held contract are not pulled")
            #expect(try storeA.fetch(Card.self, id: "card-a")?.title == "From A", "the device keeps its own write")

            // Later syncs go on without the held contract and without sequence trouble.
            try storeA.patch(Note.self, id: "note-1", [.body("Note 1")])
            guard case .succeeded(1, _) = await engineA.syncNow() else { Issue.record("A's second sync"); return }

            // The others reached the server once.
            guard case .succeeded = await engineB.syncNow() else { Issue.record("device B again"); return }
            #expect(try storeB.fetch(Board.self, id: "board-1")?.color == .red)
            #expect(try storeB.fetch(Note.self, id: "note-1")?.body == "Note 1")
            #expect(try storeB.all(Card.self).map(\.id) == ["card-b"])

            // The app is updated (a build that satisfies the requirement): reopening lifts the
            // hold, the held write goes out once, and the held rows arrive.
            try storeA.close()
            let satisfied = try JSONEncoder().encode([
                UpdateRequired(entity: "Card", oldestSupported: Card.descriptor.currentVersion, current: oldest)
            ])
            let queue = try DatabaseQueue(path: directoryA.databaseURL.path)
            try await queue.write { db in
                try db.execute(
                    sql: #"UPDATE "metadata" SET "value" = ? WHERE "key" = 'update_required'"#,
                    arguments: [String(decoding: satisfied, as: UTF8.self)]
                )
            }
            try queue.close()
            storeA = try makeEngineDeviceStore(directoryA, device: "d-a")
            #expect(try storeA.updateRequirements().isEmpty)
            #expect(try storeA.cursor(forScope: "team") == nil, "every scope is pulled again from the start")
            let updated = SyncEngine(store: storeA, transport: server.transport("d-a"), configuration: .init(scopes: ["team"]))
            guard case .succeeded(1, _) = await updated.syncNow() else { Issue.record("A after the update"); return }
            #expect(try storeA.fetch(Card.self, id: "card-b")?.title == "From B")
            #expect(await updated.currentStatus.updateRequired.isEmpty)

            guard case .succeeded = await engineB.syncNow() else { Issue.record("device B last"); return }
            #expect(try storeB.all(Card.self).map(\.id).sorted() == ["card-a", "card-b"])
        }
    }
}
