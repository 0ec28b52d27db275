import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncClient

/// A transport to the real server whose live channel the test drives: each `poke()` is a
/// `change` event as the server sends it. Counts what the engine asks for.
final class PokeableTransport: SyncTransport, @unchecked Sendable {
    let inner: any SyncTransport
    private let lock = NSLock()
    private var continuation: AsyncThrowingStream<LiveEvent, any Error>.Continuation?
    private var pushes: [PushRequest] = []
    private var pages = 0
    private var urgent = 0

    init(_ inner: any SyncTransport) { self.inner = inner }

    var pushRequests: [PushRequest] { lock.withLock { pushes } }
    var pulls: Int { lock.withLock { pages } }
    var urgentRequests: Int { lock.withLock { urgent } }
    var channelOpen: Bool { lock.withLock { continuation != nil } }

    /// The server says `scope` changed.
    func poke(_ scope: String = "workspace:team:team-1") {
        _ = lock.withLock { continuation }?.yield(.change(scope: scope, sequence: 1))
    }

    func liveEvents() async throws(TransportError) -> AsyncThrowingStream<LiveEvent, any Error>? {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: LiveEvent.self)
        lock.withLock { self.continuation = continuation }
        continuation.yield(.hello(heartbeatMilliseconds: 15_000))
        return stream
    }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        lock.withLock { pushes.append(request) }
        return try await inner.push(request)
    }

    func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError) -> Data {
        try await pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: nil)
    }

    func pull(
        scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String, contracts: [String]?
    ) async throws(TransportError) -> Data {
        lock.withLock { pages += 1 }
        return try await inner.pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: contracts)
    }

    var filtersPullsByContract: Bool { inner.filtersPullsByContract }

    func urgentChanges(scope: String, cursor: String, schema: [String: Int], clientID: String) async throws(TransportError) -> Data? {
        lock.withLock { urgent += 1 }
        return try await inner.urgentChanges(scope: scope, cursor: cursor, schema: schema, clientID: clientID)
    }

    func pullSubscriptions(
        _ request: SubscriptionPullRequest, schema: [String: Int], clientID: String
    ) async throws(TransportError) -> SubscriptionPullResponse {
        try await inner.pullSubscriptions(request, schema: schema, clientID: clientID)
    }

    func health() async -> Bool { await inner.health() }
}

/// Power and radio: writes and pokes coalesced into one request, low-power mode holding
/// automatic syncs for its slower timer except urgent changes, the interval's presets, and the
/// status saying why a sync waits. Simulated time, the real server on both storages.
@Suite("Power and coalescing", .serialized)
struct PowerAndCoalescingTests {
    struct Device {
        let directory: TemporaryDirectory
        let clock: ManualClock
        let sleeper: ManualSleeper
        let store: OfflineStore
        let transport: PokeableTransport
        let engine: SyncEngine
    }

    func device(_ server: LiveServer, pushDebounce: TimeInterval = 3, livePokeDebounce: TimeInterval = 1, live: Bool = false) throws -> Device {
        let directory = try TemporaryDirectory()
        let clock = ManualClock(Date())
        let sleeper = ManualSleeper(clock: clock)
        let store = try makeEngineDeviceStore(directory, device: "d-1", clock: clock)
        let transport = PokeableTransport(server.transport("d-1"))
        let engine = SyncEngine(
            store: store, transport: transport,
            configuration: SyncEngineConfiguration(
                scopes: ["team"], retriesAutomatically: false, pushDebounce: pushDebounce, sleeper: sleeper, usesLiveChannel: live,
                livePokeDebounce: livePokeDebounce
            )
        )
        return Device(directory: directory, clock: clock, sleeper: sleeper, store: store, transport: transport, engine: engine)
    }

    static func card(_ id: String) -> Card {
        Card(id: id, teamId: "team-1", boardId: "board-1", title: "Card \(id)", revision: 0)
    }

    /// Waits until the engine's timer (and nothing else) sleeps, after the sync on going online.
    func started(_ d: Device) async {
        await eventually("the sync on going online") { await d.engine.currentStatus.lastSuccess != nil && d.sleeper.sleeping == 1 }
    }

    @Test("writes made within the debounce go in one push; with coalescing off each write is a push", arguments: StorageKind.allCases)
    func writesCoalesce(_ kind: StorageKind) async throws {
        try await LiveServer.engine(kind) { server in
            let d = try device(server, pushDebounce: 3)
            await d.engine.start(connectivity: ManualConnectivityMonitor(online: true))
            await started(d)
            // Three writes a second apart, all within 3 s of the first.
            for index in 0..<3 {
                try d.store.create(Self.card("t-\(index)"))
                if index == 0 {
                    await eventually("the push is scheduled") { d.sleeper.sleeping == 2 }
                    guard case .coalescingWrites(let until)? = await d.engine.currentStatus.deferred else {
                        Issue.record("the status says the writes are being gathered")
                        return
                    }
                    #expect(abs(until.timeIntervalSince(d.clock.now()) - 3) < 0.01)
                }
                // The write reaches the engine (the outbox's observation) before time moves on.
                try await Task.sleep(nanoseconds: 30_000_000)
                d.sleeper.advance(by: 1)
                if index < 2 {
                    try await Task.sleep(nanoseconds: 20_000_000)
                    #expect(d.transport.pushRequests.isEmpty, "nothing is sent before the debounce")
                }
            }
            await eventually("the writes are pushed") { (try? d.store.outboxCounts().unsent) == 0 }
            #expect(d.transport.pushRequests.count == 1)
            #expect(d.transport.pushRequests.first?.mutations.count == 3)
            await eventually("nothing waits") { await d.engine.currentStatus.deferred == nil }
            await d.engine.stop()

            // Coalescing off: each write is its own push.
            let off = try device(server, pushDebounce: 0)
            await off.engine.start(connectivity: ManualConnectivityMonitor(online: true))
            await started(off)
            for index in 0..<4 {
                try off.store.create(Self.card("u-\(index)"))
                await eventually("write \(index) pushed") { off.transport.pushRequests.count == index + 1 }
                await eventually("the outbox empty") { (try? off.store.outboxCounts().unsent) == 0 }
            }
            #expect(off.transport.pushRequests.map(\.mutations.count) == [1, 1, 1, 1])
            await off.engine.stop()
        }
    }

    @Test("pokes that arrive together start one pull", arguments: StorageKind.allCases)
    func pokesCoalesce(_ kind: StorageKind) async throws {
        try await LiveServer.engine(kind) { server in
            let d = try device(server, livePokeDebounce: 1, live: true)
            guard case .succeeded = await d.engine.syncNow() else { Issue.record("first sync"); return }
            await d.engine.start(connectivity: ManualConnectivityMonitor(online: true))
            // Going online syncs; the channel's hello is a poke of its own (a catch-up sync).
            await eventually("the channel is open") { await d.engine.currentStatus.live == .connected }
            await eventually("the poke debounce sleeps") { d.sleeper.sleeping == 2 }
            d.sleeper.advance(by: 1)
            await eventually("caught up") {
                let status = await d.engine.currentStatus
                return d.sleeper.sleeping == 1 && status.phase == .idle && status.deferred == nil
            }
            try await Task.sleep(nanoseconds: 50_000_000)
            let pulls = d.transport.pulls

            for _ in 0..<5 { d.transport.poke() }
            await eventually("the pokes are gathered") {
                if case .coalescingPokes? = await d.engine.currentStatus.deferred { return true }
                return false
            }
            try await Task.sleep(nanoseconds: 50_000_000)
            #expect(d.transport.pulls == pulls, "nothing is pulled before the debounce")
            d.sleeper.advance(by: 1)
            await eventually("one pull") { d.transport.pulls == pulls + 1 }
            try await Task.sleep(nanoseconds: 100_000_000)
            #expect(d.transport.pulls == pulls + 1, "five pokes, one pull")
            await d.engine.stop()
        }
    }

    @Test("low-power mode holds automatic syncs for its slower timer; urgent changes still come", arguments: StorageKind.allCases)
    func lowPowerBacksOff(_ kind: StorageKind) async throws {
        try await LiveServer.engine(kind) { server in
            let d = try device(server, livePokeDebounce: 0.05, live: true)
            guard case .succeeded = await d.engine.syncNow() else { Issue.record("first sync"); return }
            try await d.engine.setPreferences(
                SyncPreferences(syncInterval: SyncInterval.quarterHourly, lowPowerMode: true, lowPowerSyncInterval: SyncInterval.hourly)
            )
            #expect(await d.engine.isLowPowerMode)
            let pullsBefore = d.transport.pulls
            await d.engine.start(connectivity: ManualConnectivityMonitor(online: true))
            // The foreground is held for the timer, an hour away (the slower of 15 min and hourly).
            await d.engine.appDidBecomeActive()
            await eventually("the foreground's sync is deferred") {
                guard case .lowPowerMode(let next?)? = await d.engine.currentStatus.deferred else { return false }
                return abs(next.timeIntervalSince(d.clock.now()) - 3_600) < 0.01
            }
            await eventually("the channel's hello arrived") { await d.engine.currentStatus.live == .connected }
            // The hello's catch-up is a poke: in low-power mode it asks for the urgent changes only.
            await eventually("the hello's catch-up asked for urgent changes") {
                d.sleeper.advance(by: 0.05)
                return d.transport.urgentRequests == 1
            }
            await eventually("idle") {
                let phase = await d.engine.currentStatus.phase
                return d.sleeper.sleeping == 1 && phase == .idle
            }

            // A write is held.
            try d.store.create(Self.card("t-1"))
            await eventually("the push debounce sleeps") { d.sleeper.sleeping == 2 }
            d.sleeper.advance(by: 3)
            await eventually("held") { d.sleeper.sleeping == 1 }
            // A poke asks for the urgent changes only.
            d.transport.poke()
            await eventually("a poke asks for the urgent changes") {
                d.sleeper.advance(by: 0.05)
                return d.transport.urgentRequests == 2
            }
            #expect(d.transport.pulls == pullsBefore, "no page pulled")
            #expect(d.transport.pushRequests.isEmpty, "the write waits")
            await d.engine.appDidBecomeActive()
            #expect(d.transport.pushRequests.isEmpty, "the foreground waits too")
            guard case .lowPowerMode? = await d.engine.currentStatus.deferred else {
                Issue.record("the status says low-power mode holds the sync")
                return
            }

            // 15 minutes is no longer the interval; the hour is.
            d.sleeper.advance(by: 15 * 60)
            try await Task.sleep(nanoseconds: 50_000_000)
            #expect(d.transport.pushRequests.isEmpty)
            d.sleeper.advance(by: 45 * 60)
            await eventually("the hourly sync pushes the write") { (try? d.store.outboxCounts().unsent) == 0 }
            #expect(d.transport.pushRequests.count == 1)
            await eventually("and pulls") {
                let phase = await d.engine.currentStatus.phase
                return d.transport.pulls > pullsBefore && phase == .idle
            }
            await eventually("nothing waits") { await d.engine.currentStatus.deferred == nil }

            // The system's low-power mode (Apple's) counts the same, and leaving it runs what waited at once.
            try await d.engine.setPreferences(SyncPreferences(syncInterval: SyncInterval.quarterHourly))
            await d.engine.setSystemLowPowerMode(true)
            #expect(await d.engine.isLowPowerMode)
            try d.store.create(Self.card("t-2"))
            await eventually("the debounce sleeps") { d.sleeper.sleeping >= 2 }
            d.sleeper.advance(by: 3)
            await eventually("held") {
                if case .lowPowerMode? = await d.engine.currentStatus.deferred { return true }
                return false
            }
            #expect(d.transport.pushRequests.count == 1)
            await d.engine.setSystemLowPowerMode(false)
            await eventually("pushed when low-power mode ends") { (try? d.store.outboxCounts().unsent) == 0 }
            #expect(d.transport.pushRequests.count == 2)

            // syncNow() is the user asking: never held.
            await d.engine.setSystemLowPowerMode(true)
            try d.store.create(Self.card("t-3"))
            guard case .succeeded(pushed: 1, _) = await d.engine.syncNow() else { Issue.record("sync now"); return }
            await d.engine.stop()
        }
    }

    @Test("the interval covers hourly and daily, and preferences saved by an older build keep their values")
    func intervalPresets() async throws {
        try await LiveServer.engine(.sqlite) { server in
            let d = try device(server)
            try await d.engine.setPreferences(SyncPreferences(syncInterval: SyncInterval.daily))
            await d.engine.start(connectivity: ManualConnectivityMonitor(online: true))
            await started(d)
            let pulls = d.transport.pulls
            d.sleeper.advance(by: SyncInterval.hourly * 23)
            try await Task.sleep(nanoseconds: 50_000_000)
            #expect(d.transport.pulls == pulls)
            d.sleeper.advance(by: SyncInterval.hourly)
            await eventually("the daily sync") { d.transport.pulls > pulls }
            await d.engine.stop()

            try await d.engine.setPreferences(SyncPreferences(syncInterval: SyncInterval.hourly))
            await #expect(throws: OfflineStoreError.self) {
                try await d.engine.setPreferences(SyncPreferences(syncInterval: SyncInterval.longest + 1))
            }
            await #expect(throws: OfflineStoreError.self) {
                try await d.engine.setPreferences(SyncPreferences(lowPowerSyncInterval: 30))
            }
            #expect(await d.engine.syncPreferences.syncInterval == SyncInterval.hourly)

            // What an older build saved, without the power keys: read with their defaults.
            let old = #"{"allowsExpensiveNetwork":false,"dailyAutomaticDataBudget":1000,"syncInterval":3600}"#
            let decoded = try JSONDecoder().decode(SyncPreferences.self, from: Data(old.utf8))
            #expect(decoded == SyncPreferences(allowsExpensiveNetwork: false, dailyAutomaticDataBudget: 1000, syncInterval: 3600))
            #expect(decoded.lowPowerSyncInterval == SyncInterval.hourly && !decoded.lowPowerMode)
            #expect(decoded.effectiveSyncInterval(lowPowerMode: true) == 3600)
            #expect(SyncPreferences(syncInterval: 900).effectiveSyncInterval(lowPowerMode: true) == 3600)
            #expect(SyncPreferences(syncInterval: nil).effectiveSyncInterval(lowPowerMode: true) == nil)
        }
    }
}
