import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

/// The contracts' `priority` on a fresh device, against the real server: the scopes holding
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
        try await LiveServer.run { server in
            // Another device fills the team scope: critical tasks and incidents, normal assets.
            let writerDirectory = try TemporaryDirectory()
            let writer = try makeDeviceStore(writerDirectory, device: "d-writer")
            for i in 0..<3 {
                try writer.create(FieldTask(id: "task-\(i)", teamId: "team-1", title: "Task \(i)", taskKind: .inspection, revision: 0))
                try writer.create(Samples.incident("inc-\(i)", priority: .high, openedAt: Int64(i)))
                try writer.create(
                    ServiceAsset(
                        id: "sa-\(i)", teamId: "team-1", assetTag: "S-\(i)", displayName: "Asset \(i)", category: .tool, updatedAt: Samples.t0)
                )
            }
            let writerEngine = engine(writer, server.transport("d-writer"), scopes: ["team"])
            guard case .succeeded = await writerEngine.syncNow() else { Issue.record("writer sync"); return }

            let directory = try TemporaryDirectory()
            let store = try makeDeviceStore(directory, device: "d-fresh")
            let transport = ObservedTransport(server.transport("d-fresh"))
            let fresh = engine(store, transport, scopes: ["content", "team"])

            // The normal tier's first page is asked for while the critical tier's last pages are
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
            try #require(declaredTiers.count == 2, "the team scope has critical and normal contracts")
            let (criticalTier, normalTier) = (declaredTiers[0], declaredTiers[1])
            #expect(Set(criticalTier).isSuperset(of: ["Incident", "Task"]) && Set(normalTier).isSuperset(of: ["IssueLogged", "ServiceAsset"]))
            let changed = LockedValues<Bool>()
            let available = LockedValues<Set<String>>()
            transport.beforePull = { scope, contracts in
                guard contracts == normalTier, changed.values.isEmpty else { return }
                changed.append(true)
                for _ in 0..<500 where await !fresh.currentStatus.availableContracts.isSuperset(of: ["Incident", "Task"]) {
                    try? await Task.sleep(for: .milliseconds(10))
                }
                available.append(await fresh.currentStatus.availableContracts)
                #expect((try? store.all(FieldTask.self).count) == 3)
                #expect((try? store.all(ServiceAsset.self).count) == 0)
                _ = try? writer.patch(FieldTask.self, id: "task-1", [.title("Changed during the download")])
                _ = await writerEngine.syncNow()
            }
            guard case .succeeded = await fresh.syncNow() else { Issue.record("fresh sync"); return }

            // Team (critical contracts) before content (high at most); tiers in order, then the
            // whole scope from the end of the first tier.
            let requests = transport.lock.withLock { transport.requests }
            #expect(requests.first?.scope == "team")
            let teamFilters = requests.filter { $0.scope == "team" }.map(\.contracts)
            let tiers = teamFilters.reduce(into: [[String]?]()) { if $0.last != $1 { $0.append($1) } }
            #expect(tiers == [criticalTier, normalTier, nil])
            #expect(available.values.first?.isSuperset(of: ["Incident", "Task"]) == true)
            #expect(available.values.first?.contains("ServiceAsset") == false)
            #expect(await fresh.currentStatus.availableContracts.isSuperset(of: ["Task", "Incident", "ServiceAsset", "Unit", "Lesson"]))

            // Everything arrived, the change made during the download included.
            #expect(try store.all(FieldTask.self).count == 3)
            #expect(try store.all(Incident.self).count == 3)
            #expect(try store.all(ServiceAsset.self).count == 3)
            #expect(try store.fetch(FieldTask.self, id: "task-1")?.title == "Changed during the download")

            // The next sync pulls the scope as usual, with no filter.
            transport.lock.withLock { transport.requests = [] }
            guard case .succeeded = await fresh.syncNow() else { Issue.record("second sync"); return }
            #expect(transport.lock.withLock { transport.requests.allSatisfy { $0.contracts == nil } })
        }
    }

    @Test func theServerRefusesAFilterNamingAContractTheScopeDoesNotDeliver() async throws {
        try await LiveServer.run { server in
            let transport = server.transport("d-1")
            await #expect(throws: TransportError.self) {
                _ = try await transport.pull(scope: "team", cursor: nil, limit: nil, schema: [:], clientID: "c-1", contracts: ["Unit"])
            }
            do {
                _ = try await transport.pull(scope: "team", cursor: nil, limit: nil, schema: [:], clientID: "c-1", contracts: ["Nope"])
                Issue.record("an unknown contract must be refused")
            } catch let error as TransportError {
                guard case .http(400, let body?, _) = error else { Issue.record("\(error)"); return }
                #expect(body.error.code == .malformedRequest)
            }
            let page = try PullResponse(
                json: try await transport.pull(scope: "team", cursor: nil, limit: nil, schema: [:], clientID: "c-1", contracts: ["Incident"])
            )
            #expect(page.upserts.keys.allSatisfy { $0 == "Incident" })
        }
    }
}
