import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

@Suite struct EngineLiveServerTests {
    func engine(_ store: OfflineStore, _ transport: any SyncTransport) -> SyncEngine {
        SyncEngine(
            store: store, transport: transport,
            configuration: SyncEngineConfiguration(scopes: ["team"], pushBatchSize: 3, pullPageSize: 2, retriesAutomatically: false)
        )
    }

    @Test func offlineSessionThenReconnectDeliversEveryWriteOnce() async throws {
        try await LiveServer.engine { server in
            let dirA = try TemporaryDirectory(), dirB = try TemporaryDirectory()
            let storeA = try makeEngineDeviceStore(dirA, device: "d-1")
            let live = server.transport("d-1")
            #expect(await live.health())
            let switchable = SwitchableTransport(live)
            switchable.offline = true
            let engineA = engine(storeA, switchable)

            for i in 0..<7 {
                try storeA.create(Card(id: "card-\(i)", teamId: "team-1", boardId: "board-1", title: "Card \(i)", revision: 0))
                if i % 3 == 0 {
                    guard case .failed(.network, let retryAt) = await engineA.syncNow() else {
                        Issue.record("an offline sync must fail with a network error")
                        return
                    }
                    #expect(retryAt != nil)
                }
            }
            try storeA.patch(Card.self, id: "card-1", [.title("Card one")])
            let offlineStatus = await engineA.currentStatus
            #expect(offlineStatus.connectivity == .offline)
            #expect(offlineStatus.pending == 8)

            switchable.offline = false
            let result = await engineA.syncNow()
            guard case .succeeded(let pushed, _) = result else {
                Issue.record("sync after reconnecting: \(result)")
                return
            }
            #expect(pushed == 8)
            #expect(await engineA.currentStatus.pending == 0)
            // A second sync pushes nothing again.
            guard case .succeeded(0, _) = await engineA.syncNow() else { Issue.record("second sync pushed again"); return }

            // A second device sees every card exactly once.
            let storeB = try makeEngineDeviceStore(dirB, device: "d-2")
            let engineB = engine(storeB, server.transport("d-2"))
            guard case .succeeded = await engineB.syncNow() else { Issue.record("device B sync failed"); return }
            let cards = try storeB.all(Card.self)
            #expect(cards.count == 7)
            #expect(Set(cards.map(\.id)).count == 7)
            #expect(try storeB.fetch(Card.self, id: "card-1")?.title == "Card one")
            #expect(await engineB.currentStatus.freshness["team"] != nil)
        }
    }

    @Test func versionCheckConflict() async throws {
        try await LiveServer.engine { server in
            let dirA = try TemporaryDirectory(), dirB = try TemporaryDirectory()
            let storeA = try makeEngineDeviceStore(dirA, device: "d-1"), storeB = try makeEngineDeviceStore(dirB, device: "d-2")
            let engineA = engine(storeA, server.transport("d-1"))
            let engineB = engine(storeB, server.transport("d-2"))

            try storeA.create(Card(id: "card-c", teamId: "team-1", boardId: "board-1", title: "Original", revision: 0))
            guard case .succeeded = await engineA.syncNow() else { Issue.record("A's first sync"); return }
            guard case .succeeded = await engineB.syncNow() else { Issue.record("B's first sync"); return }

            try storeB.patch(Card.self, id: "card-c", [.title("From B")])
            guard case .succeeded = await engineB.syncNow() else { Issue.record("B's push"); return }

            try storeA.patch(Card.self, id: "card-c", [.title("From A")])
            guard case .succeeded = await engineA.syncNow() else { Issue.record("A's push"); return }
            let conflicts = try storeA.conflicts()
            #expect(conflicts.count == 1)
            #expect(conflicts.first?.rowId == "card-c")
            #expect(await engineA.currentStatus.conflicts == 1)
        }
    }
}
