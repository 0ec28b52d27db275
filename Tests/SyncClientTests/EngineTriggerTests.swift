import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

/// What makes the engine sync (a trigger while syncing, connectivity, the foreground, the
/// 15-minute timer, a retry) and what it tells observers, against the real server on loopback.
@Suite struct EngineTriggerTests {
    static func card(_ id: String) -> Card {
        Card(id: id, teamId: "team-1", boardId: "board-1", title: "Card \(id)", revision: 0)
    }

    /// The triggers without the live channel (LiveChannelTests covers it): each sync these
    /// tests count comes from the trigger under test.
    static func configuration(sleeper: any Sleeper = TaskSleeper(), retries: Bool = false) -> SyncEngineConfiguration {
        SyncEngineConfiguration(scopes: ["team"], pushBatchSize: 50, retriesAutomatically: retries, sleeper: sleeper, usesLiveChannel: false)
    }

    /// A device on a real SQLite file whose engine talks to `server` through a recording transport.
    struct Device {
        let directory: TemporaryDirectory
        let store: OfflineStore
        let transport: RecordingTransport
        let engine: SyncEngine

        init(_ server: LiveServer, clock: ManualClock? = nil, sleeper: any Sleeper = TaskSleeper()) throws {
            directory = try TemporaryDirectory()
            store = try makeEngineDeviceStore(directory, device: "d-1", clock: clock ?? SystemClock())
            transport = RecordingTransport(server.transport("d-1"))
            engine = SyncEngine(store: store, transport: transport, configuration: EngineTriggerTests.configuration(sleeper: sleeper))
        }
    }

    @Test func triggersDuringASyncCoalesceIntoOneMore() async throws {
        try await LiveServer.engine { server in
            let device = try Device(server)
            let (store, transport, engine) = (device.store, device.transport, device.engine)

            try store.create(Self.card("c-1"))
            transport.hold()
            let first = Task { await engine.syncNow() }
            await eventually("the first sync's push is in flight") { transport.heldPushes == 1 }

            // Written while the first sync is on the wire: the push loop takes it in the same sync.
            try store.create(Self.card("c-2"))
            let triggers = (0..<5).map { _ in Task { await engine.syncNow() } }
            await eventually("the five triggers wait for one queued sync") { await engine.coalescedTriggers == 5 }
            transport.release()

            let firstResult = await first.value
            guard case .succeeded(2, _) = firstResult else { Issue.record("first sync: \(firstResult)"); return }
            var results: [SyncResult] = []
            for trigger in triggers { results.append(await trigger.value) }
            #expect(results.allSatisfy { $0 == results[0] }, "every coalesced trigger shares one sync's result")
            guard case .succeeded(0, _) = results[0] else { Issue.record("queued sync: \(results[0])"); return }
            #expect(transport.pushRequests.map { $0.mutations.map(\.id) } == [["c-1"], ["c-2"]])
            #expect(transport.pulls == 2, "one sync, then exactly one more")
            #expect(await engine.currentStatus.pending == 0)
        }
    }

    @Test func statusStreamFollowsASync() async throws {
        try await LiveServer.engine { server in
            let device = try Device(server)
            let (store, engine) = (device.store, device.engine)
            for index in 0..<3 { try store.create(Self.card("s-\(index)")) }

            let stream = await engine.status
            let collector = Task {
                var seen: [SyncStatus] = []
                for await status in stream {
                    seen.append(status)
                    if status.phase == .idle, status.lastSuccess != nil { break }
                }
                return seen
            }
            await eventually("the observer got the first status") { await engine.currentStatus.pending == 3 }
            guard case .succeeded(3, _) = await engine.syncNow() else { Issue.record("sync"); return }
            let seen = await collector.value

            #expect(seen.first?.pending == 3)
            #expect(seen.first?.lastSuccess == nil)
            #expect(seen.contains { $0.phase == .pushing && $0.progress.total == 3 && $0.progress.currentEntity == "Card" })
            #expect(seen.contains { $0.phase == .pulling(scope: "team") })
            let last = try #require(seen.last)
            #expect(last.phase == .idle)
            #expect(last.connectivity == .online)
            #expect(last.pending == 0)
            #expect(last.failed == 0)
            #expect(last.conflicts == 0)
            #expect(last.lastError == nil)
            #expect(last.freshness["team"] != nil)
        }
    }

    @Test func reconnectingSyncsAndOfflineDoesNot() async throws {
        try await LiveServer.engine { server in
            let device = try Device(server)
            let (store, transport, engine) = (device.store, device.transport, device.engine)
            let monitor = ManualConnectivityMonitor(online: false)
            await engine.start(connectivity: monitor)
            defer { Task { await engine.stop() } }

            await eventually("the engine knows it is offline") { await engine.currentStatus.connectivity == .offline }
            try store.create(Self.card("r-1"))
            #expect(transport.pushRequests.isEmpty)

            monitor.setOnline(true)
            await eventually("reconnecting pushed the write") { await engine.currentStatus.pending == 0 }
            #expect(transport.pushRequests.count == 1)
            #expect(await engine.currentStatus.connectivity == .online)

            monitor.setOnline(false)
            await eventually("the engine heard it went offline") { await engine.currentStatus.connectivity == .offline }
            #expect(transport.pulls == 1, "going offline does not sync")
        }
    }

    @Test func foregroundSyncs() async throws {
        try await LiveServer.engine { server in
            let device = try Device(server)
            let (store, transport, engine) = (device.store, device.transport, device.engine)
            try store.create(Self.card("f-1"))
            await engine.appDidBecomeActive()
            #expect(transport.pushRequests.count == 1)
            #expect(await engine.currentStatus.pending == 0)
        }
    }

    @Test func periodicTimerSyncsEveryFifteenMinutesWhileOnline() async throws {
        try await LiveServer.engine { server in
            let sleeper = ManualSleeper(clock: ManualClock())
            let device = try Device(server, clock: sleeper.clock, sleeper: sleeper)
            let (transport, engine) = (device.transport, device.engine)
            let monitor = ManualConnectivityMonitor(online: true)
            await engine.start(connectivity: monitor)
            defer { Task { await engine.stop() } }

            await eventually("coming online synced once") { transport.pulls == 1 && sleeper.sleeping == 1 }
            sleeper.advance(by: 14 * 60)
            try await Task.sleep(nanoseconds: 20_000_000)
            #expect(transport.pulls == 1, "nothing before 15 minutes")
            sleeper.advance(by: 60)
            await eventually("the timer synced at 15 minutes") { transport.pulls == 2 }
            await eventually("the timer sleeps again") { sleeper.sleeping == 1 }
            sleeper.advance(by: 15 * 60)
            await eventually("and again 15 minutes later") { transport.pulls == 3 }

            monitor.setOnline(false)
            await eventually("offline") { await engine.currentStatus.connectivity == .offline }
            await eventually("the timer sleeps again") { sleeper.sleeping == 1 }
            sleeper.advance(by: 15 * 60)
            await eventually("the timer slept through its tick") { sleeper.sleeping == 1 }
            #expect(transport.pulls == 3, "the timer does not sync while offline")

            await engine.stop()
            #expect(sleeper.sleeping == 0, "stop() cancels the timer")
        }
    }

    @Test func retriesFollowTheScheduleThroughTheInjectedSleeper() async throws {
        try await LiveServer.engine { server in
            let directory = try TemporaryDirectory()
            let clock = ManualClock()
            let sleeper = ManualSleeper(clock: clock)
            let store = try makeEngineDeviceStore(directory, device: "d-1", clock: clock)
            let switchable = SwitchableTransport(server.transport("d-1"))
            let recording = RecordingTransport(switchable)
            let configuration = SyncEngineConfiguration(
                scopes: ["team"], retry: RetryPolicy(jitter: 0), retriesAutomatically: true, sleeper: sleeper, usesLiveChannel: false
            )
            let engine = SyncEngine(store: store, transport: recording, configuration: configuration)
            try store.create(Self.card("x-1"))
            switchable.offline = true

            // Failure 1 retries at once (delay 0), failure 2 waits 5 s, then 30 s.
            guard case .failed(.network, let retryAt?) = await engine.syncNow() else { Issue.record("offline sync"); return }
            #expect(retryAt == clock.now())
            await eventually("the immediate retry ran and failed, then waits 5 s", within: 60) {
                recording.pushRequests.count == 2 && sleeper.sleeping == 1
            }
            guard case .waitingToRetry(let until) = await engine.currentStatus.phase else {
                Issue.record("phase after a retryable failure")
                return
            }
            #expect(until == clock.now().addingTimeInterval(5))
            sleeper.advance(by: 5)
            await eventually("the 5 s retry ran", within: 60) { recording.pushRequests.count == 3 && sleeper.sleeping == 1 }

            switchable.offline = false
            sleeper.advance(by: 30)
            await eventually("the 30 s retry delivered the write", within: 60) {
                let status = await engine.currentStatus
                return status.pending == 0 && status.phase == .idle && status.lastSuccess != nil
            }
            #expect(recording.pushRequests.count == 4)
            #expect(await engine.currentStatus.lastError == nil)
        }
    }

    @Test func healthProbeReportsTheServerAndItsLoss() async throws {
        try await LiveServer.engine { server in
            let sleeper = ManualSleeper()
            let switchable = SwitchableTransport(server.transport("d-1"))
            let probe = HealthProbeMonitor(transport: switchable, interval: 30, sleeper: sleeper)
            var updates = probe.connectivityUpdates().makeAsyncIterator()
            #expect(await updates.next() == true)

            switchable.offline = true
            await eventually("the probe sleeps") { sleeper.sleeping == 1 }
            sleeper.advance(by: 30)
            #expect(await updates.next() == false)

            // No change, no update: the next value is the server coming back.
            await eventually("the probe sleeps") { sleeper.sleeping == 1 }
            sleeper.advance(by: 30)
            await eventually("the probe sleeps") { sleeper.sleeping == 1 }
            switchable.offline = false
            sleeper.advance(by: 30)
            #expect(await updates.next() == true)
        }
    }
}
