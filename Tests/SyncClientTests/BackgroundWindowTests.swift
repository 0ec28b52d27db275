import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SampleServerApps
import SyncClient
import SyncProtocol
import SyncServer
import Testing

/// A transport whose every request takes `cost` seconds of simulated time (it moves the
/// device's sleeper and clock after the real server answered), and that records what was
/// asked: each push's writes, each page's cursor.
final class SimulatedCostTransport: SyncTransport, @unchecked Sendable {
    let inner: any SyncTransport
    let sleeper: ManualSleeper
    let cost: TimeInterval
    private let lock = NSLock()
    private var pushedIDs: [String] = []
    private var pageCursors: [String?] = []
    private var subscriptionCursors: [String?] = []
    private var requestCount = 0
    /// Set: the pull request of this number (counted from 1) waits until its task is cancelled
    /// (the OS ending the window).
    private var hangAtPull: Int?
    private var pullNumber = 0
    private var hanging: CheckedContinuation<Void, Never>?

    init(_ inner: any SyncTransport, sleeper: ManualSleeper, cost: TimeInterval) {
        self.inner = inner
        self.sleeper = sleeper
        self.cost = cost
    }

    var mutationIDs: [String] { lock.withLock { pushedIDs } }
    var cursors: [String?] { lock.withLock { pageCursors } }
    /// The cursor of each subscription page asked for.
    var subscriptionPageCursors: [String?] { lock.withLock { subscriptionCursors } }
    var requests: Int { lock.withLock { requestCount } }
    var isHanging: Bool { lock.withLock { hanging != nil } }

    /// The `number`th pull from now hangs until it is cancelled.
    func hang(atPull number: Int) {
        lock.withLock {
            pullNumber = 0
            hangAtPull = number
        }
    }

    private func spend() {
        lock.withLock { requestCount += 1 }
        sleeper.advance(by: cost)
    }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        let response = try await inner.push(request)
        lock.withLock { pushedIDs += request.mutations.map(\.clientMutationId) }
        spend()
        return response
    }

    func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError) -> Data {
        try await pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: nil)
    }

    func pull(
        scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String, contracts: [String]?
    ) async throws(TransportError) -> Data {
        let hangs = lock.withLock { () -> Bool in
            pullNumber += 1
            return pullNumber == hangAtPull
        }
        if hangs {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let cancelled = lock.withLock { () -> Bool in
                        if Task.isCancelled { return true }
                        hanging = continuation
                        return false
                    }
                    if cancelled { continuation.resume() }
                }
            } onCancel: {
                let waiting = lock.withLock { () -> CheckedContinuation<Void, Never>? in
                    defer { hanging = nil }; return hanging
                }
                waiting?.resume()
            }
            throw .network("cancelled")
        }
        let body = try await inner.pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: contracts)
        lock.withLock { pageCursors.append(cursor) }
        spend()
        return body
    }

    var filtersPullsByContract: Bool { inner.filtersPullsByContract }

    func urgentChanges(scope: String, cursor: String, schema: [String: Int], clientID: String) async throws(TransportError) -> Data? {
        let body = try await inner.urgentChanges(scope: scope, cursor: cursor, schema: schema, clientID: clientID)
        spend()
        return body
    }

    func pullSubscriptions(
        _ request: SubscriptionPullRequest, schema: [String: Int], clientID: String
    ) async throws(TransportError) -> SubscriptionPullResponse {
        let response = try await inner.pullSubscriptions(request, schema: schema, clientID: clientID)
        lock.withLock { subscriptionCursors += request.subscriptions.map(\.cursor) }
        spend()
        return response
    }

    func liveEvents() async throws(TransportError) -> AsyncThrowingStream<LiveEvent, any Error>? { nil }

    func health() async -> Bool { await inner.health() }
}

/// Background windows (`SyncEngine.syncInBackgroundWindow(until:)`) under the simulated clock,
/// against the real server on both storages: the work goes in the order of a sync, each window
/// stops before its deadline, and a device killed at a window's end loses nothing and redoes no
/// committed page or push.
@Suite("Background windows", .serialized)
struct BackgroundWindowTests {
    /// Each request costs a second; a window is 10 s with a 1 s margin and a 1 s estimate, so a
    /// request may start until 8 s in: 9 requests a window.
    static let window: TimeInterval = 10
    static let settings = BackgroundWindowSettings(safetyMargin: 1, minimumRequestEstimate: 1)
    static let requestsPerWindow = 9

    static func configuration(_ sleeper: ManualSleeper, scopes: [String] = ["team"]) -> SyncEngineConfiguration {
        var configuration = SyncEngineConfiguration(
            scopes: scopes, pushBatchSize: 2, pullPageSize: 5, pullCommitRows: 5, retriesAutomatically: false, sleeper: sleeper,
            usesLiveChannel: false
        )
        configuration.backgroundWindow = settings
        return configuration
    }

    static func card(_ id: String) -> Card {
        Card(id: id, teamId: "team-1", boardId: "board-1", title: "Card \(id)", revision: 0)
    }

    /// A device's store, reopened on the same file after a kill.
    final class Device: @unchecked Sendable {
        let directory: TemporaryDirectory
        let clock: ManualClock
        let sleeper: ManualSleeper
        let transport: SimulatedCostTransport
        let scopes: [String]
        var store: OfflineStore
        var engine: SyncEngine

        init(server: LiveServer, name: String, scopes: [String] = ["team"]) throws {
            directory = try TemporaryDirectory()
            clock = ManualClock(Date())
            sleeper = ManualSleeper(clock: clock)
            transport = SimulatedCostTransport(server.transport(name), sleeper: sleeper, cost: 1)
            self.scopes = scopes
            store = try makeEngineDeviceStore(directory, device: name, clock: clock)
            engine = SyncEngine(store: store, transport: transport, configuration: BackgroundWindowTests.configuration(sleeper, scopes: scopes))
        }

        /// The process dies: the engine goes, the store is closed; a new process opens both again.
        func killAndRelaunch(_ name: String) async throws {
            await engine.stop()
            try store.close()
            store = try makeEngineDeviceStore(directory, device: name, clock: clock)
            engine = SyncEngine(store: store, transport: transport, configuration: BackgroundWindowTests.configuration(sleeper, scopes: scopes))
        }

        func window() async -> BackgroundSyncReport {
            await engine.syncInBackgroundWindow(until: clock.now().addingTimeInterval(BackgroundWindowTests.window))
        }
    }

    /// Another device of the team puts `count` tasks on the server.
    static func seed(_ server: LiveServer, tasks count: Int) async throws {
        let directory = try TemporaryDirectory()
        let store = try makeEngineDeviceStore(directory, device: "seeder")
        for index in 0..<count { try store.create(card("seed-\(index)")) }
        let engine = SyncEngine(
            store: store, transport: server.transport("seeder"),
            configuration: SyncEngineConfiguration(scopes: ["team"], retriesAutomatically: false, usesLiveChannel: false)
        )
        guard case .succeeded(pushed: count, _) = await engine.syncNow() else {
            Issue.record("the seeder's push")
            return
        }
    }

    @Test("pending work that needs ten windows finishes in ten, killed after each, nothing redone", arguments: StorageKind.allCases)
    func tenWindows(_ kind: StorageKind) async throws {
        try await LiveServer.engine(kind) { server in
            let device = try Device(server: server, name: "d-1")
            // A first sync (nothing on the server yet) gives the scope its cursor.
            guard case .succeeded = await device.engine.syncNow() else { Issue.record("first sync"); return }
            let requestsBefore = device.transport.requests
            let cursorsBefore = device.transport.cursors.count

            // Queued work: 36 writes, 18 pushes of 2: two windows of 9 requests.
            let writes = 36
            for index in 0..<writes { try device.store.create(Self.card("mine-\(index)")) }
            // Then 282 tasks from another device and the 36 back: 318 rows, 64 pages of 5. A pulling
            // window asks for the urgent changes first, then 8 pages: 8 windows.
            let seeded = 282
            try await Self.seed(server, tasks: seeded)
            let pushes = writes / 2
            let pages = (seeded + writes + 4) / 5
            let expectedWindows =
                (pushes + Self.requestsPerWindow - 1) / Self.requestsPerWindow
                + (pages + Self.requestsPerWindow - 2) / (Self.requestsPerWindow - 1)
            #expect(expectedWindows == 10)

            var windows = 0
            var pulled = 0
            var pushed = 0
            while windows < 20 {
                let started = device.clock.now()
                let report = await device.window()
                windows += 1
                pushed += report.pushed
                pulled += report.pulled
                #expect(report.error == nil)
                #expect(report.ended <= report.deadline.addingTimeInterval(-Self.settings.safetyMargin), "stopped before the margin")
                #expect(report.requests <= Self.requestsPerWindow)
                #expect(device.clock.now().timeIntervalSince(started) <= Self.window - Self.settings.safetyMargin)
                if report.finished {
                    #expect(report.remainingWrites == 0)
                    break
                }
                #expect(report.stoppedForDeadline)
                #expect(report.requests == Self.requestsPerWindow, "a window that stopped used its whole time")
                #expect(await device.engine.currentStatus.deferred == .backgroundWindowEnded)
                if windows <= 2 {
                    #expect(report.scopesLeftToPull == ["team"])
                }
                // The process is killed at the window's end; the next window is a new launch.
                try await device.killAndRelaunch("d-1")
                device.sleeper.advance(by: 15 * 60)
            }
            #expect(windows == expectedWindows)
            #expect(pushed == writes)
            #expect(pulled == seeded + writes, "every row once: no page stored twice")
            #expect(device.transport.requests - requestsBefore == pushes + pages + (windows - 2), "no request wasted or repeated")
            // Nothing redone: every write pushed once, every page asked for once.
            let ids = device.transport.mutationIDs
            #expect(ids.count == writes && Set(ids).count == writes)
            let cursors = device.transport.cursors.dropFirst(cursorsBefore).compactMap { $0 }
            #expect(cursors.count == pages)
            #expect(Set(cursors).count == cursors.count, "no page asked for twice")
            #expect(try device.store.count(Card.self) == seeded + writes)
            #expect(try device.store.outboxCounts().unsent == 0)
            #expect(await device.engine.currentStatus.deferred == nil)
        }
    }

    @Test("the OS ending a window mid-request cancels it; the pages stored stay and the next window goes on", arguments: StorageKind.allCases)
    func expiredMidRequest(_ kind: StorageKind) async throws {
        try await LiveServer.engine(kind) { server in
            let device = try Device(server: server, name: "d-1")
            guard case .succeeded = await device.engine.syncNow() else { Issue.record("first sync"); return }
            let cursorsBefore = device.transport.cursors.count
            try await Self.seed(server, tasks: 23)
            // A long window: 3 pages, then the 4th page's request hangs until the OS ends the window.
            let engine = device.engine
            let deadline = device.clock.now().addingTimeInterval(3_600)
            device.transport.hang(atPull: 4)
            let window = Task { await engine.syncInBackgroundWindow(until: deadline) }
            await eventually("the 4th page hangs, 3 are stored") {
                device.transport.isHanging && (try? device.store.count(Card.self)) == 15
            }
            window.cancel()
            let report = await window.value
            #expect(report.stoppedForDeadline)
            #expect(report.scopesLeftToPull == ["team"])
            #expect(report.pulled >= 15)
            #expect(try device.store.count(Card.self) == report.pulled)

            try await device.killAndRelaunch("d-1")
            let next = await device.window()
            #expect(next.finished)
            #expect(report.pulled + next.pulled == 23, "the next window starts after the last committed page")
            #expect(try device.store.count(Card.self) == 23)
            let cursors = device.transport.cursors.dropFirst(cursorsBefore).compactMap { $0 }
            #expect(Set(cursors).count == cursors.count)
        }
    }

    @Test("a file upload stops between chunks before the deadline, is reported as left, and the next windows resume it from its offset")
    func uploadAcrossWindows() async throws {
        let clock = ManualClock(TestStore.start)
        let sleeper = ManualSleeper(clock: clock)
        var device = try FileTestStore(clock: clock)
        // 20 500 bytes in chunks of 1 000: a declaration, 21 chunks, then the write's push.
        let size = 20_500
        let bytes = typed(sampleBytes(size, seed: 3), as: "application/pdf")
        let document = try device.store.importFile(bytes, contentType: "application/pdf", name: "scan.pdf")
        try device.store.create(Receipt(id: "r-1", title: "Receipt", document: document))
        let server = FakeFileTransport()
        server.locked { server.answered = { sleeper.advance(by: 1) } }
        var configuration = Self.configuration(sleeper, scopes: [])
        configuration.fileChunkBytes = 1_000
        var engine = SyncEngine(store: device.store, transport: server, configuration: configuration)

        // The first window: the declaration and 8 chunks (9 requests), then the deadline.
        var report = await engine.syncInBackgroundWindow(until: clock.now().addingTimeInterval(Self.window))
        #expect(report.stoppedForDeadline && !report.finished)
        #expect(report.error == nil)
        #expect(report.requests == Self.requestsPerWindow)
        #expect(report.ended <= report.deadline.addingTimeInterval(-Self.settings.safetyMargin), "stopped before the margin")
        #expect(report.filesLeftToUpload == 1)
        #expect(report.fileBytesLeftToUpload == Int64(size - 8_000))
        #expect(report.remainingWrites == 1 && report.pushed == 0)
        #expect(try device.store.storedFile(sha256: document.sha256)?.acknowledgedOffset == 8_000)
        #expect(server.calls.filter { $0 == "POST" }.count == 1)

        // Killed at the window's end; the next launch's windows go on from the offset recorded.
        var windows = 1
        while !report.finished, windows < 6 {
            await engine.stop()
            device = try device.reopen()
            engine = SyncEngine(store: device.store, transport: server, configuration: configuration)
            sleeper.advance(by: 15 * 60)
            report = await engine.syncInBackgroundWindow(until: clock.now().addingTimeInterval(Self.window))
            windows += 1
            #expect(report.error == nil)
            #expect(report.requests <= Self.requestsPerWindow)
            #expect(report.ended <= report.deadline.addingTimeInterval(-Self.settings.safetyMargin))
            if !report.finished { #expect(report.filesLeftToUpload == 1) }
        }
        // 1 + 21 + 1 requests, plus a HEAD for each window that resumes: 9, 9 and 7.
        #expect(windows == 3)
        #expect(report.finished && report.pushed == 1)
        #expect(report.filesLeftToUpload == 0 && report.fileBytesLeftToUpload == 0)
        #expect(server.files[document.sha256] == bytes)
        let patches = server.calls.filter { $0.hasPrefix("PATCH") }
        #expect(patches.count == 21 && Set(patches).count == 21, "no chunk sent twice")
        #expect(server.calls.filter { $0.hasPrefix("HEAD") }.count == 2)
        #expect(server.calls.last == "push 1")
        #expect(try device.store.outboxCounts().unsent == 0)
    }

    @Test(
        "a subscription's pull stops between pages before the deadline, is reported as left, and the next window goes on from its cursor",
        arguments: StorageKind.allCases)
    func subscriptionAcrossWindows(_ kind: StorageKind) async throws {
        try await LiveServer.engine(kind) { server in
            // A device that syncs only the user scope: the team's cards come by its subscription.
            let device = try Device(server: server, name: "d-1", scopes: ["user"])
            guard case .succeeded = await device.engine.syncNow() else { Issue.record("first sync"); return }
            let assigned = 60
            for index in 0..<assigned {
                try await server.storeRow(
                    Card.descriptor,
                    [
                        "id": .string("c-\(index)"), "team_id": .string("team-1"), "board_id": .string("board-1"),
                        "title": .string("Card \(index)"), "assignee_id": .string("u-1"), "revision": .int(1),
                    ], scopeKey: "workspace:team:team-1")
            }
            let mine = try await device.engine.subscribe(Subscriptions.assignedCards())

            // The urgent changes of the user scope, then 8 subscription pages of 5: the deadline.
            let first = await device.window()
            #expect(first.stoppedForDeadline && !first.finished)
            #expect(first.error == nil)
            #expect(first.requests == Self.requestsPerWindow)
            #expect(first.ended <= first.deadline.addingTimeInterval(-Self.settings.safetyMargin), "stopped before the margin")
            #expect(first.subscriptionsLeftToPull == [mine.id])
            #expect(first.scopesLeftToPull == ["user"])
            #expect(first.pulled == 40)
            #expect(try device.store.count(Card.self) == 40)

            // Killed at the window's end; the next launch's window pulls the rest from the cursor stored.
            try await device.killAndRelaunch("d-1")
            device.sleeper.advance(by: 15 * 60)
            let second = await device.window()
            #expect(second.finished, "\(second)")
            #expect(second.subscriptionsLeftToPull.isEmpty && second.scopesLeftToPull.isEmpty)
            #expect(first.pulled + second.pulled == assigned, "no page stored twice")
            #expect(try device.store.count(Card.self) == assigned)
            let cursors = device.transport.subscriptionPageCursors.compactMap { $0 }
            #expect(Set(cursors).count == cursors.count, "no subscription page asked for twice")
            #expect(try device.engine.subscription(id: mine.id)?.status?.hasSynced == true)
        }
    }

    @Test("a window is skipped while the preferences hold automatic syncs, and says why")
    func skippedByPreferences() async throws {
        try await LiveServer.engine(.sqlite) { server in
            let device = try Device(server: server, name: "d-1")
            try await device.engine.setPreferences(SyncPreferences(dailyAutomaticDataBudget: 0))
            try device.store.create(Self.card("t-1"))
            let report = await device.window()
            #expect(report.skipped == .dataBudgetUsed(used: 0, budget: 0))
            #expect(!report.finished)
            #expect(report.requests == 0 && device.transport.requests == 0)
            #expect(report.remainingWrites == 1)
        }
    }
}
