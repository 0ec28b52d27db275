import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

/// The contracts' `priority` on a fresh device, against the real server, on the engines' own
/// contracts: the scopes holding
/// critical contracts first, and within a scope one priority tier at a time, each usable (in
/// the status) before the next arrives; nothing changed meanwhile is missed.
@Suite struct PullPriorityTests {
    /// Forwards to the real server, noting every pull's scope and contract filter, and running
    /// `beforePull` first (once per request).
    final class ObservedTransport: SyncTransport, @unchecked Sendable {
        let inner: any SyncTransport
        let lock = NSLock()
        var requests: [(scope: String, contracts: [String]?)] = []
        var beforePull: (@Sendable (_ scope: String, _ contracts: [String]?) async -> Void)?

        init(_ inner: any SyncTransport) { self.inner = inner }

        func push(_ request: PushRequest) async throws(TransportError) -> PushResponse { try await inner.push(request) }

        func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError) -> Data {
            try await pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: nil)
        }

        func pull(
            scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String, contracts: [String]?
        ) async throws(TransportError) -> Data {
            let hook = lock.withLock {
                requests.append((scope, contracts))
                return beforePull
            }
            await hook?(scope, contracts)
            return try await inner.pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: contracts)
        }

        var filtersPullsByContract: Bool { inner.filtersPullsByContract }

        func health() async -> Bool { await inner.health() }
    }

    func engine(_ store: OfflineStore, _ transport: any SyncTransport, scopes: [String]) -> SyncEngine {
        SyncEngine(
            store: store, transport: transport,
            configuration: SyncEngineConfiguration(scopes: scopes, pullPageSize: 2, retriesAutomatically: false)
        )
    }

    @Test func aFreshDeviceDownloadsByPriorityAndMissesNothingChangedMeanwhile() async throws {
        try await LiveServer.engine { server in
            // Another device fills the team scope: critical cards, high boards, normal notes.
            let writerDirectory = try TemporaryDirectory()
            let writer = try makeEngineDeviceStore(writerDirectory, device: "d-writer")
            for i in 0..<3 {
                try writer.create(Card(id: "card-\(i)", teamId: "team-1", boardId: "board-\(i)", title: "Card \(i)", revision: 0))
                try writer.create(EngineSamples.board("board-\(i)"))
                try writer.create(EngineSamples.note("note-\(i)", card: "card-\(i)"))
            }
            let writerEngine = engine(writer, server.transport("d-writer"), scopes: ["team"])
            guard case .succeeded = await writerEngine.syncNow() else { Issue.record("writer sync"); return }

            let directory = try TemporaryDirectory()
            let store = try makeEngineDeviceStore(directory, device: "d-fresh")
            let transport = ObservedTransport(server.transport("d-fresh"))
            let fresh = engine(store, transport, scopes: ["catalog", "team"])

            // The high tier's first page is asked for while the critical tier's last pages are
            // stored; before that page arrives, the critical rows are on the device and usable,
            // and the writer changes a critical row the device already pulled.
            // The team scope's tiers as the contracts declare them, highest priority first (its
            // events are `normal`): a contract added to the scope joins its tier.
            var byPriority: [SyncPriority: [String]] = [:]
            for entity in ContractRegistry.entities where entity.scope == "team" && entity.direction != .up {
                byPriority[entity.priority, default: []].append(entity.name)
            }
            for event in ContractRegistry.events where event.scope == "team" && event.direction != .up {
                byPriority[.normal, default: []].append(event.name)
            }
            let declaredTiers = byPriority.keys.sorted().map { byPriority[$0]!.sorted() }
            try #require(declaredTiers.count == 3, "the team scope has critical, high and normal contracts")
            let (criticalTier, highTier, normalTier) = (declaredTiers[0], declaredTiers[1], declaredTiers[2])
            #expect(Set(criticalTier).isSuperset(of: ["Card"]) && Set(highTier).isSuperset(of: ["Board"]))
            #expect(Set(normalTier).isSuperset(of: ["CardCommented", "Note"]))
            let changed = LockedValues<Bool>()
            let available = LockedValues<Set<String>>()
            transport.beforePull = { scope, contracts in
                guard contracts == highTier, changed.values.isEmpty else { return }
                changed.append(true)
                for _ in 0..<500 where await !fresh.currentStatus.availableContracts.isSuperset(of: ["Card"]) {
                    try? await Task.sleep(for: .milliseconds(10))
                }
                available.append(await fresh.currentStatus.availableContracts)
                #expect((try? store.all(Card.self).count) == 3)
                #expect((try? store.all(Board.self).count) == 0)
                #expect((try? store.all(Note.self).count) == 0)
                _ = try? writer.patch(Card.self, id: "card-1", [.title("Changed during the download")])
                _ = await writerEngine.syncNow()
            }
            guard case .succeeded = await fresh.syncNow() else { Issue.record("fresh sync"); return }

            // Team (critical contracts) before the catalog (high at most); tiers in order, then the
            // whole scope from the end of the first tier.
            let requests = transport.lock.withLock { transport.requests }
            #expect(requests.first?.scope == "team")
            let teamFilters = requests.filter { $0.scope == "team" }.map(\.contracts)
            let tiers = teamFilters.reduce(into: [[String]?]()) { if $0.last != $1 { $0.append($1) } }
            #expect(tiers == [criticalTier, highTier, normalTier, nil])
            #expect(available.values.first?.contains("Card") == true)
            #expect(available.values.first?.contains("Board") == false && available.values.first?.contains("Note") == false)
            #expect(await fresh.currentStatus.availableContracts.isSuperset(of: ["Card", "Board", "Note", "Label"]))

            // Everything arrived, the change made during the download included.
            #expect(try store.all(Card.self).count == 3)
            #expect(try store.all(Board.self).count == 3)
            #expect(try store.all(Note.self).count == 3)
            #expect(try store.fetch(Card.self, id: "card-1")?.title == "Changed during the download")

            // The next sync pulls the scope as usual, with no filter.
            transport.lock.withLock { transport.requests = [] }
            guard case .succeeded = await fresh.syncNow() else { Issue.record("second sync"); return }
            #expect(transport.lock.withLock { transport.requests.allSatisfy { $0.contracts == nil } })
        }
    }

    @Test func theServerRefusesAFilterNamingAContractTheScopeDoesNotDeliver() async throws {
        try await LiveServer.engine { server in
            let transport = server.transport("d-1")
            await #expect(throws: TransportError.self) {
                _ = try await transport.pull(scope: "team", cursor: nil, limit: nil, schema: [:], clientID: "c-1", contracts: ["Label"])
            }
            do {
                _ = try await transport.pull(scope: "team", cursor: nil, limit: nil, schema: [:], clientID: "c-1", contracts: ["Nope"])
                Issue.record("an unknown contract must be refused")
            } catch let error as TransportError {
                guard case .http(400, let body?, _) = error else { Issue.record("\(error)"); return }
                #expect(body.error.code == .malformedRequest)
            }
            let page = try PullResponse(
                json: try await transport.pull(scope: "team", cursor: nil, limit: nil, schema: [:], clientID: "c-1", contracts: ["Card"])
            )
            #expect(page.upserts.keys.allSatisfy { $0 == "Card" })
        }
    }
}
