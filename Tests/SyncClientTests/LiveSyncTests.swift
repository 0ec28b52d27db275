import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncClient
import SyncProtocol
import SyncServer
import Testing

/// The live channel end to end on a real server on loopback: the transport's event stream, the
/// engine pulling on pokes, reconnecting, and falling back to its timer.
@Suite struct LiveSyncTests {
    static func card(_ id: String) -> Card {
        Card(id: id, teamId: "team-1", boardId: "board-1", title: "Card \(id)", revision: 0)
    }

    static func server(heartbeat: Duration = .seconds(15), perDevice: Int = 2) -> ServerConfiguration {
        var configuration = ServerConfiguration(port: 0, rateLimit: nil)
        configuration.live = LiveChannelConfiguration(heartbeat: heartbeat, connectionsPerDevice: perDevice)
        return configuration
    }

    /// An engine that would sync on its timer only after an hour: whatever arrives sooner came
    /// through the live channel.
    static func engine(_ store: OfflineStore, _ transport: any SyncTransport) -> SyncEngine {
        SyncEngine(
            store: store, transport: transport,
            configuration: SyncEngineConfiguration(scopes: ["team"], retry: RetryPolicy(jitter: 0), periodicInterval: 3600)
        )
    }

    static func waitForLive(_ engine: SyncEngine, _ state: LiveChannelState = .connected) async {
        await eventually("the engine's live channel is \(state)", within: 30) { await engine.currentStatus.live == state }
    }

    @Test("a card one device syncs is in the other device's store moments later, without it asking for a sync")
    func changeArrivesLive() async throws {
        try await LiveServer.engine { server in
            let dirA = try TemporaryDirectory(), dirB = try TemporaryDirectory()
            let storeA = try makeEngineDeviceStore(dirA, device: "d-1"), storeB = try makeEngineDeviceStore(dirB, device: "d-2")
            let engineA = Self.engine(storeA, server.transport("d-1")), engineB = Self.engine(storeB, server.transport("d-2"))
            await engineB.start(connectivity: ManualConnectivityMonitor(online: true))
            await Self.waitForLive(engineB)

            try storeA.create(Self.card("live-1"))
            guard case .succeeded(1, _) = await engineA.syncNow() else { Issue.record("device A's push failed"); return }
            await eventually("device B has the card", within: 20) { (try? storeB.fetch(Card.self, id: "live-1")) != nil }
            try storeA.patch(Card.self, id: "live-1", [.title("Renamed")])
            _ = await engineA.syncNow()
            await eventually("device B has the new title", within: 20) { (try? storeB.fetch(Card.self, id: "live-1"))?.title == "Renamed" }
            await engineB.stop()
            #expect(await engineB.currentStatus.live == .off)
        }
    }

    @Test("the transport reads hello, pokes and heartbeats; a device's third channel closes its oldest with bye")
    func transportEvents() async throws {
        try await LiveServer.engine(configuration: Self.server(heartbeat: .seconds(2))) { server in
            let transport = server.transport("d-1")
            guard let first = try await transport.liveEvents() else { Issue.record("the server has a live channel"); return }
            var events = first.makeAsyncIterator()
            #expect(try await events.next() == .hello(heartbeatMilliseconds: 2000))
            try await server.storage.write { _ = try await $0.nextScopeSequence(tenant: "acme", scopeKey: "workspace:team:team-1") }
            #expect(try await events.next() == .change(scope: "workspace:team:team-1", sequence: 1))
            // Heartbeats keep it open well past the silence limit of 2.5 heartbeats (5 s). Two-second
            // heartbeats rather than one: a loaded machine can stall a connection's reads for
            // three seconds, which a 2.5 s limit took for silence.
            try await Task.sleep(nanoseconds: 7_000_000_000)
            try await server.storage.write { _ = try await $0.nextScopeSequence(tenant: "acme", scopeKey: "workspace:team:team-1") }
            #expect(try await events.next() == .change(scope: "workspace:team:team-1", sequence: 2))

            let second = try await transport.liveEvents(), third = try await transport.liveEvents()
            #expect(try await events.next() == .bye(reason: .replaced))
            #expect(try await events.next() == nil, "the server closes the channel after bye")
            var thirdEvents = third?.makeAsyncIterator()
            #expect(try await thirdEvents?.next() == .hello(heartbeatMilliseconds: 2000))
            _ = second
        }
    }

    @Test("a channel without a valid token gets the typed 401 of every route")
    func unauthorized() async throws {
        try await LiveServer.engine { server in
            let transport = URLSessionTransport(baseURL: server.url, timeout: 10) { "not-a-token" }
            let error = await #expect(throws: TransportError.self) { _ = try await transport.liveEvents() }
            #expect(error?.status == 401)
        }
    }

    @Test("a channel the server replaces is opened again, and pokes still arrive")
    func reconnects() async throws {
        try await LiveServer.engine(configuration: Self.server(perDevice: 1)) { server in
            let dirB = try TemporaryDirectory()
            let storeB = try makeEngineDeviceStore(dirB, device: "d-2")
            let engineB = Self.engine(storeB, server.transport("d-2"))
            await engineB.start(connectivity: ManualConnectivityMonitor(online: true))
            await Self.waitForLive(engineB)
            // Another channel of the same device replaces the engine's, which reconnects (and
            // replaces this one in turn).
            guard let intruder = try await server.transport("d-2").liveEvents() else { Issue.record("no live channel"); return }
            var events = intruder.makeAsyncIterator()
            #expect(try await events.next() == .hello(heartbeatMilliseconds: 15_000))
            #expect(try await events.next() == .bye(reason: .replaced), "the engine opened its channel again")
            await Self.waitForLive(engineB)

            // Held until the end: the folder is deleted when it is released, under the open store.
            let storeAFolder = try TemporaryDirectory()
            defer { withExtendedLifetime(storeAFolder) {} }
            let storeA = try makeEngineDeviceStore(storeAFolder, device: "d-1")
            try storeA.create(Self.card("after-reconnect"))
            _ = await Self.engine(storeA, server.transport("d-1")).syncNow()
            await eventually("device B has the card", within: 20) { (try? storeB.fetch(Card.self, id: "after-reconnect")) != nil }
            await engineB.stop()
        }
    }

    @Test("without a live channel the engine says so and keeps to its timer")
    func fallsBackToTheTimer() async throws {
        try await LiveServer.engine { server in
            // Held until the end: the folder is deleted when it is released, under the open store.
            let storeFolder = try TemporaryDirectory()
            defer { withExtendedLifetime(storeFolder) {} }
            let store = try makeEngineDeviceStore(storeFolder, device: "d-1")
            let engine = Self.engine(store, TimerOnlyTransport(server.transport("d-1")))
            await engine.start(connectivity: ManualConnectivityMonitor(online: true))
            await Self.waitForLive(engine, .unavailable)
            await engine.stop()
        }
    }
}

/// A transport as one written before the live channel: `liveEvents()` is the protocol's default.
struct TimerOnlyTransport: SyncTransport {
    let inner: URLSessionTransport
    init(_ inner: URLSessionTransport) { self.inner = inner }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse { try await inner.push(request) }
    func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError) -> Data {
        try await inner.pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID)
    }
    func health() async -> Bool { await inner.health() }
}
