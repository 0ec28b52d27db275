import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

/// Syncs the engine starts by itself, against the real server: a push soon after a local
/// write, status counts that follow every write, and the user's preferences (Wi-Fi only, a
/// daily data budget, the interval).
@Suite struct EngineAutomaticSyncTests {
    struct Device {
        let directory: TemporaryDirectory
        let clock: ManualClock
        let sleeper: ManualSleeper
        let store: OfflineStore
        let transport: RecordingTransport
        let engine: SyncEngine
    }

    func device(_ server: LiveServer, _ name: String = "d-1", directory: TemporaryDirectory? = nil, clock: ManualClock? = nil) throws -> Device {
        let directory = try directory ?? TemporaryDirectory()
        let clock = clock ?? ManualClock(Date())
        let sleeper = ManualSleeper(clock: clock)
        let store = try makeEngineDeviceStore(directory, device: name, clock: clock)
        let transport = RecordingTransport(server.transport(name))
        let engine = SyncEngine(
            store: store, transport: transport,
            // Without the live channel (LiveChannelTests covers it): each sync counted here comes
            // from the trigger under test.
            configuration: SyncEngineConfiguration(
                scopes: ["team"], retriesAutomatically: false, pushDebounce: 2, sleeper: sleeper, usesLiveChannel: false
            )
        )
        return Device(directory: directory, clock: clock, sleeper: sleeper, store: store, transport: transport, engine: engine)
    }

    func card(_ id: String) -> Card {
        Card(id: id, teamId: "team-1", boardId: "board-1", title: "Card \(id)", revision: 0)
    }

    @Test func aLocalWriteWhileOnlineIsPushedAfterTheDebounceWithTheWritesMadeMeanwhile() async throws {
        try await LiveServer.engine { server in
            let d = try device(server)
            let monitor = ManualConnectivityMonitor(online: true)
            await d.engine.start(connectivity: monitor)
            // Going online syncs once (nothing to push); then the timer and nothing else sleep.
            await eventually("the sync on going online") { await d.engine.currentStatus.lastSuccess != nil && d.sleeper.sleeping == 1 }
            #expect(d.transport.pushRequests.isEmpty)

            for id in ["c-1", "c-2", "c-3"] { try d.store.create(card(id)) }
            await eventually("the push after the writes is scheduled") { d.sleeper.sleeping == 2 }
            #expect(d.transport.pushRequests.isEmpty, "nothing is sent before the debounce")
            d.sleeper.advance(by: 2)
            await eventually("the three writes are pushed") { (try? d.store.outboxCounts().unsent) == 0 }
            #expect(d.transport.pushRequests.count == 1)
            #expect(d.transport.pushRequests.first?.mutations.count == 3)

            // Offline, a write waits for the connectivity.
            monitor.setOnline(false)
            await eventually("offline") { await d.engine.currentStatus.connectivity == .offline }
            try d.store.create(card("c-4"))
            await eventually("the push is scheduled") { d.sleeper.sleeping == 2 }
            d.sleeper.advance(by: 2)
            try await Task.sleep(nanoseconds: 50_000_000)
            #expect(d.transport.pushRequests.count == 1)
            monitor.setOnline(true)
            await eventually("the write is pushed on reconnect") { (try? d.store.outboxCounts().unsent) == 0 }
            await d.engine.stop()
        }
    }

    @Test func theStatusCountsFollowEveryLocalWrite() async throws {
        try await LiveServer.engine { server in
            let d = try device(server)
            let seen = LockedValues<Int>()
            let statuses = await d.engine.status
            let reader = Task {
                for await status in statuses { seen.append(status.pending) }
            }
            defer { reader.cancel() }
            await eventually("the first status") { seen.values == [0] }
            try d.store.create(card("c-1"))
            await eventually("pending 1") { seen.values.last == 1 }
            try d.store.create(card("c-2"))
            await eventually("pending 2") { seen.values.last == 2 }
            guard case .succeeded = await d.engine.syncNow() else { Issue.record("sync"); return }
            await eventually("pending 0 after the sync") { seen.values.last == 0 }
            let changes = seen.values.reduce(into: [Int]()) { if $0.last != $1 { $0.append($1) } }
            #expect(changes == [0, 1, 2, 0])
        }
    }

    @Test func wifiOnlyHoldsAutomaticSyncsOnAnExpensivePathButNotSyncNow() async throws {
        try await LiveServer.engine { server in
            let d = try device(server)
            try await d.engine.setPreferences(SyncPreferences(allowsExpensiveNetwork: false))
            let monitor = ManualConnectivityMonitor(online: true, expensive: true)
            await d.engine.start(connectivity: monitor)
            await eventually("paused on the expensive path") { await d.engine.currentStatus.automaticSyncsPaused == .expensiveNetwork }
            try d.store.create(card("c-1"))
            await eventually("the push is scheduled") { d.sleeper.sleeping == 2 }
            d.sleeper.advance(by: 2)
            await d.engine.appDidBecomeActive()
            try await Task.sleep(nanoseconds: 50_000_000)
            #expect(d.transport.pulls == 0)
            #expect(d.transport.pushRequests.isEmpty)

            // The user's own "sync now" runs whatever the path.
            guard case .succeeded(pushed: 1, _) = await d.engine.syncNow() else { Issue.record("sync now"); return }

            // On Wi-Fi, automatic syncs come back at once.
            try d.store.create(card("c-2"))
            let pullsBefore = d.transport.pulls
            monitor.setExpensive(false)
            await eventually("a sync when the path is no longer expensive") { d.transport.pulls > pullsBefore }
            await eventually("the write is pushed") { (try? d.store.outboxCounts().unsent) == 0 }
            #expect(await d.engine.currentStatus.automaticSyncsPaused == nil)
            await d.engine.stop()
        }
    }

    @Test func theDailyDataBudgetStopsAutomaticSyncsUntilTheNextDay() async throws {
        try await LiveServer.engine { server in
            let d = try device(server)
            try d.store.create(card("c-1"))
            try await d.engine.setPreferences(SyncPreferences(dailyAutomaticDataBudget: 100))
            await d.engine.appDidBecomeActive()
            let used = try d.store.automaticDataUsage().bytes
            #expect(used > 100, "the push and the pull pages are counted")
            let pullsOfOneSync = d.transport.pulls
            #expect(pullsOfOneSync > 0)

            try d.store.create(card("c-2"))
            await d.engine.appDidBecomeActive()
            #expect(d.transport.pulls == pullsOfOneSync, "over budget: no automatic sync")
            guard case .dataBudgetUsed(let reported, 100) = await d.engine.currentStatus.automaticSyncsPaused else {
                Issue.record("the status says why")
                return
            }
            #expect(reported == used)
            // A manual sync is not counted against the automatic budget.
            guard case .succeeded = await d.engine.syncNow() else { Issue.record("sync now"); return }
            #expect(try d.store.automaticDataUsage().bytes == used)
            let pullsBeforeTomorrow = d.transport.pulls
            #expect(pullsBeforeTomorrow > pullsOfOneSync)

            d.clock.advance(by: 86_400)
            #expect(try d.store.automaticDataUsage().bytes == 0)
            await d.engine.appDidBecomeActive()
            #expect(d.transport.pulls > pullsBeforeTomorrow, "a new day, a new budget")
        }
    }

    @Test func theIntervalIsTheUsersAndOutlivesTheEngine() async throws {
        try await LiveServer.engine { server in
            let d = try device(server)
            try await d.engine.setPreferences(SyncPreferences(syncInterval: 3_600))
            let monitor = ManualConnectivityMonitor(online: true)
            await d.engine.start(connectivity: monitor)
            await eventually("the sync on going online") { await d.engine.currentStatus.lastSuccess != nil && d.sleeper.sleeping == 1 }
            let pulls = d.transport.pulls
            d.sleeper.advance(by: 15 * 60)
            try await Task.sleep(nanoseconds: 50_000_000)
            #expect(d.transport.pulls == pulls, "15 minutes is no longer the interval")
            d.sleeper.advance(by: 45 * 60)
            await eventually("the hourly sync") { d.transport.pulls > pulls }
            await d.engine.stop()

            // A new engine on the same store (the next launch) obeys the saved preferences.
            let next = SyncEngine(store: d.store, transport: d.transport, configuration: SyncEngineConfiguration(scopes: ["team"]))
            #expect(await next.syncPreferences.syncInterval == 3_600)

            await #expect(throws: OfflineStoreError.self) {
                try await next.setPreferences(SyncPreferences(syncInterval: 5))
            }
            await #expect(throws: OfflineStoreError.self) {
                try await next.setPreferences(SyncPreferences(dailyAutomaticDataBudget: -1))
            }
            #expect(await next.syncPreferences.syncInterval == 3_600, "a refused value changes nothing")
        }
    }
}

/// Values appended from a task, read by a test.
final class LockedValues<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [Value] = []

    func append(_ value: Value) { lock.withLock { stored.append(value) } }

    var values: [Value] { lock.withLock { stored } }
}
