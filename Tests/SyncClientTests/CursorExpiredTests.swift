import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncClient
import SyncProtocol
import SyncServer
import Testing

/// A device whose cursor is older than the server's tombstone horizon (410 `cursor_expired`), on the
/// engines' own contracts (the team's cards).
@Suite struct CursorExpiredTests {
    func engine(_ store: OfflineStore, _ transport: any SyncTransport) -> SyncEngine {
        SyncEngine(
            store: store, transport: transport,
            configuration: SyncEngineConfiguration(scopes: ["team"], pushBatchSize: 3, pullPageSize: 2, retriesAutomatically: false)
        )
    }

    /// The ids of the team's live cards on the server.
    func serverCardIDs(_ server: LiveServer) async throws -> Set<String> {
        Set(try await serverCardTitles(server).keys)
    }

    /// The team's live cards on the server: id → title.
    func serverCardTitles(_ server: LiveServer) async throws -> [String: String] {
        let rows = try await server.storage.read { reader in
            try await reader.rows(in: ContractTable(Card.descriptor), tenant: "acme", where: ["_deleted": .integer(0)], limit: 1000)
        }
        return Dictionary(uniqueKeysWithValues: rows.compactMap { row in row.text("id").map { ($0, row.text("title") ?? "") } })
    }

    @Test func expiredCursorPullsTheScopeAgainKeepingPendingWritesAndConflicts() async throws {
        try await LiveServer.engine { server in
            let dirA = try TemporaryDirectory(), dirB = try TemporaryDirectory()
            let storeA = try makeEngineDeviceStore(dirA, device: "d-1"), storeB = try makeEngineDeviceStore(dirB, device: "d-2")
            let engineA = engine(storeA, server.transport("d-1"))
            let engineB = engine(storeB, server.transport("d-2"))

            for i in 1...5 {
                try storeA.create(Card(id: "card-\(i)", teamId: "team-1", boardId: "board-1", title: "Card \(i)", revision: 0))
            }
            guard case .succeeded = await engineA.syncNow() else { Issue.record("A's first sync"); return }
            guard case .succeeded = await engineB.syncNow() else { Issue.record("B's first sync"); return }

            // An open conflict on A for card-4, which B then deletes.
            try storeB.patch(Card.self, id: "card-4", [.title("From B")])
            guard case .succeeded = await engineB.syncNow() else { Issue.record("B's patch"); return }
            try storeA.patch(Card.self, id: "card-4", [.title("From A")])
            guard case .succeeded = await engineA.syncNow() else { Issue.record("A's conflicting patch"); return }
            #expect(try storeA.conflicts().map(\.rowId) == ["card-4"])

            // B deletes three cards and adds one; the server compacts the deletes past A's cursor.
            try storeB.delete(Card.self, id: "card-2")
            try storeB.delete(Card.self, id: "card-3")
            try storeB.delete(Card.self, id: "card-4")
            try storeB.create(Card(id: "card-6", teamId: "team-1", boardId: "board-1", title: "Card 6", lane: .doing, revision: 0))
            guard case .succeeded = await engineB.syncNow() else { Issue.record("B's deletes"); return }
            let counts = try await ServerHousekeeping(storage: server.storage).run(now: Date().addingTimeInterval(91 * 86_400))
            #expect(counts.tombstones == 3)

            // A meanwhile: a new card (pending) and an edit of a card the server no longer has.
            try storeA.create(Card(id: "card-7", teamId: "team-1", boardId: "board-1", title: "Card 7", revision: 0))
            try storeA.patch(Card.self, id: "card-3", [.title("Edited offline")])

            let result = await engineA.syncNow()
            guard case .succeeded = result else { Issue.record("A's sync past the horizon: \(result)"); return }
            let status = await engineA.currentStatus
            #expect(status.repulledScopes == ["team": 1], "card-2 removed; card-3 and card-4 kept")
            #expect(status.lastError == nil)

            // The server's rows, plus the rows with a write or a conflict still open.
            let serverIDs = try await serverCardIDs(server)
            #expect(serverIDs == ["card-1", "card-5", "card-6", "card-7"])
            let local = Set(try storeA.all(Card.self).map(\.id))
            #expect(local == serverIDs.union(["card-3", "card-4"]))
            #expect(try storeA.fetch(Card.self, id: "card-3")?.title == "Edited offline")
            // Every row the server has, as the server has it.
            for (id, title) in try await serverCardTitles(server) {
                #expect(try storeA.fetch(Card.self, id: id)?.title == title, "\(id)")
            }
            #expect(try storeA.fetch(Card.self, id: "card-6")?.title == "Card 6")
            // The edit of card-3, whose tombstone was compacted, is a deletion conflict the user
            // settles like any other (keep the edit, or take the deletion).
            let conflicts = try storeA.conflicts()
            #expect(Set(conflicts.map(\.rowId)) == ["card-3", "card-4"], "the conflict stays open, and the edit of a deleted card is one")
            #expect(conflicts.first { $0.rowId == "card-3" }?.serverResolution == "deleted")
            #expect(try storeA.outboxEntries(statuses: [.failed]).isEmpty)
            #expect(try storeA.syncStates().first { $0.scopeKey == "team" }?.cursor != nil)

            // The next sync is an ordinary one.
            guard case .succeeded = await engineA.syncNow() else { Issue.record("A's next sync"); return }
            #expect(await engineA.currentStatus.repulledScopes.isEmpty)
            #expect(Set(try storeA.all(Card.self).map(\.id)) == local)
        }
    }
}

extension CursorExpiredTests {
    @Test func aRepullCutShortResumesAtTheNextSync() async throws {
        try await LiveServer.engine { server in
            let dirA = try TemporaryDirectory(), dirB = try TemporaryDirectory()
            let storeA = try makeEngineDeviceStore(dirA, device: "d-1"), storeB = try makeEngineDeviceStore(dirB, device: "d-2")
            let engineB = engine(storeB, server.transport("d-2"))
            for i in 1...8 {
                try storeB.create(Card(id: "card-\(i)", teamId: "team-1", boardId: "board-1", title: "Card \(i)", revision: 0))
            }
            guard case .succeeded = await engineB.syncNow() else { Issue.record("B's first sync"); return }
            guard case .succeeded = await engine(storeA, server.transport("d-1")).syncNow() else { Issue.record("A's first sync"); return }
            try storeB.delete(Card.self, id: "card-2")
            try storeB.delete(Card.self, id: "card-8")
            guard case .succeeded = await engineB.syncNow() else { Issue.record("B's deletes"); return }
            #expect(try await ServerHousekeeping(storage: server.storage).run(now: Date().addingTimeInterval(91 * 86_400)).tombstones == 2)

            // The re-pull gets one page, then the connection drops.
            let cut = CuttingTransport(server.transport("d-1"), pagesAfterExpiry: 1)
            guard case .failed(.network, _) = await engine(storeA, cut).syncNow() else { Issue.record("the cut sync must fail"); return }
            #expect(cut.expired)
            #expect(try storeA.fetch(Card.self, id: "card-2") != nil, "nothing is swept before the re-pull ends")

            // A new engine (as after a crash) finishes the re-pull where it stopped.
            let engineA = engine(storeA, server.transport("d-1"))
            guard case .succeeded = await engineA.syncNow() else { Issue.record("A's resumed sync"); return }
            #expect(await engineA.currentStatus.repulledScopes == ["team": 2])
            #expect(Set(try storeA.all(Card.self).map(\.id)) == (try await serverCardIDs(server)))
            #expect(try storeA.fetch(Card.self, id: "card-8") == nil)
        }
    }
}

extension CursorExpiredTests {
    /// A fresh device pushes its own rows, its first download is cut short, and the server then
    /// deletes one of them and compacts the tombstone: the device never had a cursor, so it is
    /// never told `cursor_expired`, yet the next download from scratch must not keep the row.
    @Test func aFirstDownloadCutShortIsReconciledLikeARepull() async throws {
        try await LiveServer.engine { server in
            let dirA = try TemporaryDirectory(), dirB = try TemporaryDirectory()
            let storeA = try makeEngineDeviceStore(dirA, device: "d-1"), storeB = try makeEngineDeviceStore(dirB, device: "d-2")
            let engineB = engine(storeB, server.transport("d-2"))
            for i in 1...3 {
                try storeA.create(Card(id: "card-\(i)", teamId: "team-1", boardId: "board-1", title: "Card \(i)", revision: 0))
            }
            let cut = PullFailingTransport(server.transport("d-1"))
            guard case .failed(.network, _) = await engine(storeA, cut).syncNow() else { Issue.record("A's cut sync must fail"); return }
            #expect(try storeA.outboxEntries(statuses: [.pending, .sending]).isEmpty, "the push went through")
            #expect(try storeA.syncStates().first { $0.scopeKey == "team" }?.cursor == nil)

            guard case .succeeded = await engineB.syncNow() else { Issue.record("B's first sync"); return }
            try storeB.delete(Card.self, id: "card-2")
            guard case .succeeded = await engineB.syncNow() else { Issue.record("B's delete"); return }
            #expect(try await ServerHousekeeping(storage: server.storage).run(now: Date().addingTimeInterval(91 * 86_400)).tombstones == 1)

            let engineA = engine(storeA, server.transport("d-1"))
            guard case .succeeded = await engineA.syncNow() else { Issue.record("A's next sync"); return }
            #expect(await engineA.currentStatus.repulledScopes == ["team": 1])
            #expect(Set(try storeA.all(Card.self).map(\.id)) == ["card-1", "card-3"])
            #expect(Set(try storeA.all(Card.self).map(\.id)) == (try await serverCardIDs(server)))

            // Once a download has ended, a later one from scratch (a new device's) is plain.
            guard case .succeeded = await engineA.syncNow() else { Issue.record("A's third sync"); return }
            #expect(await engineA.currentStatus.repulledScopes.isEmpty)
        }
    }
}

/// Pushes go through; every pull fails as if the connection dropped.
final class PullFailingTransport: SyncTransport, Sendable {
    let inner: any SyncTransport

    init(_ inner: any SyncTransport) { self.inner = inner }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse { try await inner.push(request) }

    func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError) -> Data {
        throw .network("the connection dropped")
    }

    var filtersPullsByContract: Bool { inner.filtersPullsByContract }

    func health() async -> Bool { await inner.health() }
}

/// Passes everything through until the server answers a pull 410 `cursor_expired`; then lets
/// `pagesAfterExpiry` pulls through and fails every later one as if the connection dropped.
final class CuttingTransport: SyncTransport, @unchecked Sendable {
    let inner: any SyncTransport
    private let lock = NSLock()
    private var left: Int
    private var sawExpiry = false

    init(_ inner: any SyncTransport, pagesAfterExpiry: Int) {
        self.inner = inner
        left = pagesAfterExpiry
    }

    var expired: Bool { lock.withLock { sawExpiry } }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse { try await inner.push(request) }

    func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError) -> Data {
        try await pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: nil)
    }

    func pull(
        scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String, contracts: [String]?
    ) async throws(TransportError) -> Data {
        let allowed = lock.withLock { () -> Bool in
            guard sawExpiry else { return true }
            left -= 1
            return left >= 0
        }
        guard allowed else { throw .network("the connection dropped") }
        do {
            return try await inner.pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: contracts)
        } catch {
            if case .http(410, _, _) = error { lock.withLock { sawExpiry = true } }
            throw error
        }
    }

    var filtersPullsByContract: Bool { inner.filtersPullsByContract }

    func health() async -> Bool { await inner.health() }
}
