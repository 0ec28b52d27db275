import Foundation
import NIOCore
import NIOPosix
import SyncClient
import SyncProtocol

/// Poke fan-out at 1 000 live devices holding 10 subscriptions each, against the same devices
/// holding none, in the same run (the `subscriptions` benchmark's last part).
///
/// The live channel pokes by scope key only: a channel is filed under the team scopes its user
/// may read, and the server keeps nothing per subscription, so subscriptions change neither
/// who is poked nor the poke itself. What they add is each device's subscription pull after
/// a poke (after the engine's poke debounce, a poke meanwhile sharing it or queuing one more,
/// as ``SyncEngine`` does), which the server answers while it fans out the next writes. That
/// is what is measured: devices holding subscriptions pull them over HTTP on every poke;
/// devices holding none only listen.
///
/// `sync-server serve` (SQLite) with 100 teams of 10 and 100 incidents in each team's scope;
/// 1 000 lightweight live connections (``LiveBenchmark``'s method: pushes of one `Task` create
/// to random teams, 50 a second, one at a time per team). Rounds of 200 pushes alternate between
/// the two cases, 3 each after a warm-up round; the 10 subscriptions of each device (10 incidents
/// of its team, with their asset) are pulled once before the first round that holds them.
/// The figure is, per push, the time from its send until the last of its team's 9 other members
/// had the poke; the bar is its p99 with subscriptions within ``barRatio`` of its p99 without.
/// The server's CPU and this process's (the devices) over each case say where the time went.
///
/// Why 1.5×: the fan-out path is the same, so the ratio measures only the load the subscription
/// pulls add (at 50 writes a second, up to 500 pulls of 10 subscriptions a second) on the two
/// cores the server shares with the 1 000 devices; more than half again would say that load, or
/// a cost per subscription held, reaches the pokes.
enum SubscriptionFanOut {
    static let devices = 1_000
    static let subscriptionsPerDevice = 10
    static let incidentsPerTeam = LiveBenchmark.teamSize * subscriptionsPerDevice
    static let pushesPerRound = 200
    static let roundsPerCase = 3
    static let warmUpPushes = 50
    static let barRatio = 1.5

    static func measure(workspace: TemporaryFolder, into result: inout BenchmarkResult) throws {
        let teamSize = LiveBenchmark.teamSize
        let teams = devices / teamSize
        let folder = try workspace.folder("fan-out")
        let deployment = try LoadDeployment(database: .sqlite, folder: folder)
        try LoadSeed.seed(deployment, teams: teams, tasks: 0, rangedFile: false) { team in
            (team * teamSize..<(team + 1) * teamSize).map(LiveListener.user)
        }
        let database = deployment.data.appendingPathComponent("server.sqlite")
        for team in 0..<teams {
            let name = LoadSeed.team(team)
            try SubscriptionBenchmark.populate(database, incidents: incidentsPerTeam, tenant: LoadDeployment.tenant, team: name, idPrefix: "\(name)-")
        }
        try deployment.start(processes: 1)
        defer { deployment.stop() }
        let port = deployment.ports[0]

        let liveGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? liveGroup.syncShutdownGracefully() }
        // The devices' requests on a loop of their own: answers being read do not hold back
        // the instant a poke is seen.
        let requestGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? requestGroup.syncShutdownGracefully() }
        let room = FanOutRoom(debounceSeconds: SyncEngineConfiguration(scopes: []).livePokeDebounce)
        let fleet = (0..<devices).map { index in
            FanOutDevice(
                index: index, team: index / teamSize,
                token: deployment.token(user: LiveListener.user(index), device: LiveListener.device(index), teams: [LoadSeed.team(index / teamSize)]),
                room: room)
        }
        let pushers = try runBlocking { try await (0..<8).asyncMap { _ in try await LoadConnection.connect(port: port, group: requestGroup) } }
        defer {
            try? runBlocking {
                for device in fleet { await device.close() }
                for pusher in pushers { await pusher.close() }
            }
        }
        let connectSeconds = try Timing.measure {
            try runBlocking {
                for batch in stride(from: 0, to: fleet.count, by: 200) {
                    try await withThrowingTaskGroup(of: Void.self) { tasks in
                        for device in fleet[batch..<min(batch + 200, fleet.count)] {
                            tasks.addTask { try await device.open(port: port, liveGroup: liveGroup, requestGroup: requestGroup) }
                        }
                        try await tasks.waitForAll()
                    }
                }
            }
            let deadline = monotonicNanoseconds() + UInt64(LiveBenchmark.helloTimeoutSeconds * 1e9)
            while room.connections.greeted < devices, room.connections.failures == 0, monotonicNanoseconds() < deadline { usleep(20_000) }
        }.seconds
        guard room.connections.greeted == devices, room.connections.failures == 0 else {
            throw BenchmarkError(
                "\(room.connections.greeted) of \(devices) live channels said hello: \(room.connections.failureSamples.prefix(3).joined(separator: " | "))"
            )
        }

        let plan = PushPlan()
        let probes = (without: PokeProbe(), with: PokeProbe())
        var spent = (without: Spent(), with: Spent())
        var subscribeSeconds = 0.0
        let warmUp = try round(
            pushesPerRound: warmUpPushes, probe: PokeProbe(), plan: plan, pushers: pushers, deployment: deployment, room: room)
        for number in 0..<roundsPerCase {
            spent.without += try round(
                pushesPerRound: pushesPerRound, probe: probes.without, plan: plan, pushers: pushers, deployment: deployment, room: room)
            if number == 0 {
                subscribeSeconds = try Timing.measure {
                    try runBlocking {
                        for batch in stride(from: 0, to: fleet.count, by: 50) {
                            try await withThrowingTaskGroup(of: Void.self) { tasks in
                                for device in fleet[batch..<min(batch + 50, fleet.count)] { tasks.addTask { try await device.subscribe() } }
                                try await tasks.waitForAll()
                            }
                        }
                    }
                }.seconds
            }
            room.pullsOnPoke = true
            spent.with += try round(
                pushesPerRound: pushesPerRound, probe: probes.with, plan: plan, pushers: pushers, deployment: deployment, room: room)
            room.pullsOnPoke = false
        }

        let pulls = room.pullFigures
        result.fact(
            "machine", "\(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(LoadBenchmark.loadAverage()) at the fan-out's end")
        result.fact(
            "fan-out",
            "\(Format.grouped(devices)) live devices in teams of \(teamSize) (connected in \(Format.duration(connectSeconds))); "
                + "\(roundsPerCase) rounds of \(pushesPerRound) Task creates per case, 50/s, alternating, after \(warmUpPushes) to warm up")
        result.fact(
            "live channel",
            "pokes by scope key only: the server keeps nothing per subscription, so holding them changes neither who is poked nor the poke; "
                + "devices holding them pull them after each poke (\(Format.duration(room.debounceSeconds)) debounce, as SyncEngine)")
        result.fact(
            "subscriptions held",
            "\(Format.grouped(devices * subscriptionsPerDevice)) (each device's first pull of its 10: \(Format.duration(subscribeSeconds)) for all)")
        var p99 = (without: Double?.none, with: Double?.none)
        for (label, probe, rounds) in [
            ("no subscriptions", probes.without, spent.without),
            ("10 subscriptions each, pulled on each poke", probes.with, spent.with),
        ] {
            let all = probe.everyMemberSummary
            let member = probe.summary
            if probe === probes.without { p99.without = all?.p99 } else { p99.with = all?.p99 }
            result.rows.append(
                .init(
                    "poke to a team's 9 others, \(Format.grouped(devices)) devices, \(label) (p50 / p99 / p99.9)",
                    median: all?.percentiles ?? "none", min: "",
                    note:
                        "\(all.map { Format.grouped(Int($0.count)) } ?? "0") pushes; each member \(member?.percentiles ?? "-"); "
                        + "max \(all.map { Format.duration($0.max) } ?? "-"); \(rounds.missed) missed; "
                        + "server \(Format.fixed(rounds.serverCPU / rounds.seconds, 2)) cores, devices \(Format.fixed(rounds.benchCPU / rounds.seconds, 2))"
                        + (probe === probes.with
                            ? "; \(Format.grouped(pulls.answered)) subscription pulls (\(Format.grouped(pulls.rows)) rows) while measured" : "")
                ))
        }
        let missedPokes = warmUp.missed + spent.without.missed + spent.with.missed
        result.check(
            "every poke reached its team", missedPokes == 0 && room.connections.unexpectedEnds == 0,
            "\(missedPokes) pokes missed (5 s), \(room.connections.unexpectedEnds) live channels ended; "
                + "\(probes.without.resyncCount + probes.with.resyncCount) resync events")
        result.check(
            "every subscription pull answered", pulls.failures.isEmpty,
            pulls.failures.isEmpty
                ? "\(Format.grouped(pulls.answered)) answered"
                : "\(pulls.failures.count) failed: \(pulls.failures.prefix(3).joined(separator: " | "))")
        if let without = p99.without, let with = p99.with {
            let ratio = with / without
            result.check(
                "poke fan-out p99 with 10 subscriptions per device ≤ \(Format.fixed(barRatio, 1))× without (\(Format.grouped(devices)) devices; pokes by scope only)",
                ratio <= barRatio, "\(Format.ratio(ratio)): \(Format.duration(with)) against \(Format.duration(without))")
        } else {
            result.check("poke fan-out p99 with subscriptions", false, "no push reached its whole team in one of the cases")
        }
    }

    /// `pushesPerRound` pushes to random teams at ``LiveBenchmark/pushesPerSecond``, then the
    /// stragglers and the subscription pulls they set off.
    static func round(
        pushesPerRound: Int, probe: PokeProbe, plan: PushPlan, pushers: [LoadConnection], deployment: LoadDeployment, room: FanOutRoom
    ) throws -> Spent {
        let teamSize = LiveBenchmark.teamSize
        let teams = devices / teamSize
        room.probe = probe
        let server = deployment.servers[0].pid
        let serverCPU = ProcessMemory.cpuSeconds(pid: server) ?? 0
        let benchCPU = Timing.processCPUSeconds()
        let start = monotonicNanoseconds()
        try runBlocking {
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                for number in 0..<pushesPerRound {
                    await LoadBenchmark.sleep(until: start + UInt64(Double(number) / LiveBenchmark.pushesPerSecond * 1e9))
                    var team = plan.team(below: teams)
                    while probe.isBusy(team: team) {
                        try await Task.sleep(nanoseconds: 2_000_000)
                        team = plan.team(below: teams)
                    }
                    // In flight before the task starts: the next turn must not pick the team (see LiveBenchmark).
                    probe.willPush(team: team)
                    let seq = plan.nextSeq(team: team)
                    let pusher = pushers[number % pushers.count]
                    let token = deployment.token(
                        user: LiveListener.user(team * teamSize), device: LiveListener.device(team * teamSize), teams: [LoadSeed.team(team)])
                    tasks.addTask {
                        try await LiveBenchmark.push(
                            team: team, seq: seq, token: token, receivers: teamSize - 1, on: pusher, probe: probe, storeDevice: nil)
                    }
                }
                try await tasks.waitForAll()
            }
        }
        let deadline = monotonicNanoseconds() + LiveBenchmark.pokeTimeout
        while probe.anyWaiting || room.pullsPending > 0, monotonicNanoseconds() < deadline { usleep(10_000) }
        return Spent(
            missed: probe.endStep(), seconds: Double(monotonicNanoseconds() - start) / 1e9,
            serverCPU: (ProcessMemory.cpuSeconds(pid: server) ?? serverCPU) - serverCPU, benchCPU: Timing.processCPUSeconds() - benchCPU)
    }

    /// What rounds took: pokes missed, wall time, and the CPU of the server and of this process
    /// (the devices and the pushers).
    struct Spent {
        var missed = 0
        var seconds = 0.0
        var serverCPU = 0.0
        var benchCPU = 0.0

        static func += (total: inout Spent, round: Spent) {
            total.missed += round.missed
            total.seconds += round.seconds
            total.serverCPU += round.serverCPU
            total.benchCPU += round.benchCPU
        }
    }
}

/// What the fan-out's devices share: the probe of the round under way, whether they pull their
/// subscriptions on a poke, and the pulls' tallies.
final class FanOutRoom: @unchecked Sendable {
    let debounceSeconds: Double
    /// Hellos, refusals and channels that ended, over the whole run.
    let connections = PokeProbe()
    private let lock = NSLock()
    private var currentProbe = PokeProbe()
    private var pulling = false
    private var pending = 0
    private var answered = 0
    private var rows = 0
    private var failures: [String] = []

    init(debounceSeconds: Double) {
        self.debounceSeconds = debounceSeconds
    }

    var probe: PokeProbe {
        get { lock.withLock { currentProbe } }
        set { lock.withLock { currentProbe = newValue } }
    }

    var pullsOnPoke: Bool {
        get { lock.withLock { pulling } }
        set { lock.withLock { pulling = newValue } }
    }

    /// Devices with a pull scheduled or under way.
    var pullsPending: Int { lock.withLock { pending } }

    var pullFigures: (answered: Int, rows: Int, failures: [String]) { lock.withLock { (answered, rows, failures) } }

    func pullScheduled() { lock.withLock { pending += 1 } }
    func pullsDone() { lock.withLock { pending -= 1 } }

    func pulled(rows count: Int) {
        lock.withLock {
            answered += 1
            rows += count
        }
    }

    func pullFailed(_ why: String) { lock.withLock { failures.append(why) } }
}

/// One device of the fan-out: a live channel, a keep-alive connection for its requests, and the
/// cursors of its subscriptions once it holds them.
final class FanOutDevice: @unchecked Sendable {
    let index: Int
    let team: Int
    let token: String
    let room: FanOutRoom
    private let lock = NSLock()
    private var live: EventStreamConnection?
    private var requests: LoadConnection?
    private var requestsAt: (port: Int, group: any EventLoopGroup)?
    private var subscriptions: [SubscriptionPullRequest.Entry] = []
    private var status = 0
    private var closing = false
    /// A poke's debounce is running: later pokes share it.
    private var debouncing = false
    private var pulling = false
    /// A poke came while a pull ran: one more after it.
    private var pullAgain = false

    init(index: Int, team: Int, token: String, room: FanOutRoom) {
        self.index = index
        self.team = team
        self.token = token
        self.room = room
    }

    var teamName: String { LoadSeed.team(team) }

    func open(port: Int, liveGroup: any EventLoopGroup, requestGroup: any EventLoopGroup) async throws {
        lock.withLock { self.requestsAt = (port, requestGroup) }
        let opened = monotonicNanoseconds()
        let scopeKey = "ops:team:\(teamName)"
        let connections = room.connections
        do {
            let live = try await EventStreamConnection.open(port: port, token: token, group: liveGroup) { [self] update in
                switch update {
                case .opened(let status, _):
                    lock.withLock { self.status = status }
                case .event(let event, let receivedAt):
                    switch event.event {
                    case "hello": connections.hello(after: receivedAt - opened)
                    case "change" where event.data.contains("\"\(scopeKey)\""):
                        room.probe.poke(team: team, device: index, at: receivedAt)
                        if room.pullsOnPoke { poked() }
                    case "resync":
                        room.probe.poke(team: team, device: index, at: receivedAt, resync: true)
                        if room.pullsOnPoke { poked() }
                    case "bye": if !lock.withLock({ closing }) { connections.endedUnexpectedly("device \(index): bye \(event.data)") }
                    default: break
                    }
                case .heartbeat: break
                case .refusalBody(let body):
                    connections.failed("HTTP \(lock.withLock { status }) \(body.prefix(200))")
                case .closed(let error):
                    let (closing, status) = lock.withLock { (self.closing, self.status) }
                    if !closing, status == 200 {
                        connections.endedUnexpectedly("device \(index): the channel ended (\(error ?? "closed by the server"))")
                    }
                    if status == 0, !closing { connections.failed("device \(index): closed before an answer (\(error ?? "by the server"))") }
                }
            }
            lock.withLock { self.live = live }
        } catch {
            connections.failed("device \(index): \(error)")
        }
    }

    /// Subscribes to 10 incidents of its team (its own, none shared with the other members) and
    /// pulls them once, as a first sync does.
    func subscribe() async throws {
        let member = index % LiveBenchmark.teamSize
        let entries = (0..<SubscriptionFanOut.subscriptionsPerDevice).map { number in
            SubscriptionPullRequest.Entry(
                id: "s-\(number)", name: "incident",
                parameters: ["id": .string("\(teamName)-inc-\(member * SubscriptionFanOut.subscriptionsPerDevice + number)")])
        }
        lock.withLock { subscriptions = entries }
        let answer = try await pull()
        guard answer.subscriptions.count == entries.count,
            answer.subscriptions.allSatisfy({ $0.error == nil && !$0.hasMore && $0.upserts["Incident"]?.count == 1 })
        else { throw BenchmarkError("device \(index)'s first pull of its subscriptions: \(answer.subscriptions.prefix(2))") }
    }

    /// A poke: the engine's debounce, then a pull of the subscriptions (one more after it when
    /// another poke comes while it runs).
    private func poked() {
        let schedule = lock.withLock { () -> Bool in
            if debouncing { return false }
            debouncing = true
            return true
        }
        guard schedule else { return }
        room.pullScheduled()
        let debounce = UInt64(room.debounceSeconds * 1e9)
        Task {
            try? await Task.sleep(nanoseconds: debounce)
            let runs = lock.withLock { () -> Bool in
                debouncing = false
                if pulling {
                    pullAgain = true
                    return false
                }
                pulling = true
                return true
            }
            if runs {
                repeat {
                    do {
                        room.pulled(rows: try await pull().subscriptions.reduce(0) { $0 + $1.rowCount })
                    } catch {
                        room.pullFailed("device \(index): \(error)")
                    }
                } while anotherPull()
            }
            room.pullsDone()
        }
    }

    /// Its keep-alive connection, opened again when the server closed it (it closes one idle
    /// for a minute, or silent for 10 s after opening), as URLSession does.
    private func requestConnection() async throws -> LoadConnection {
        let (current, address) = lock.withLock { (requests, requestsAt) }
        if let current, current.isActive { return current }
        guard let address else { throw BenchmarkError("device \(index) was never opened") }
        let connection = try await LoadConnection.connect(port: address.port, group: address.group)
        lock.withLock { requests = connection }
        return connection
    }

    /// Whether a poke came during the pull that just ended; otherwise the device stops pulling.
    private func anotherPull() -> Bool {
        lock.withLock {
            if pullAgain {
                pullAgain = false
                return true
            }
            pulling = false
            return false
        }
    }

    /// `POST /sync/v1/subscriptions/pull` of every subscription from its cursor; keeps the new cursors.
    private func pull() async throws -> SubscriptionPullResponse {
        let connection = try await requestConnection()
        let entries = lock.withLock { subscriptions }
        let body = try JSONEncoder().encode(SubscriptionPullRequest(subscriptions: entries))
        let response = try await connection.send(
            LoadRequest(
                method: .POST, path: "/sync/v1/subscriptions/pull",
                headers: [
                    ("Authorization", "Bearer \(token)"), ("Content-Type", "application/json"),
                    (ProtocolHeaders.clientID, "fan-out-\(index)"),
                ],
                body: ByteBuffer(bytes: body)))
        let text = response.body.map { Data($0.readableBytesView) } ?? Data()
        guard response.status == 200 else {
            throw BenchmarkError("subscription pull answered \(response.status): \(String(decoding: text.prefix(200), as: UTF8.self))")
        }
        let answer = try JSONDecoder().decode(SubscriptionPullResponse.self, from: text)
        lock.withLock {
            for page in answer.subscriptions {
                guard let cursor = page.cursor, let slot = subscriptions.firstIndex(where: { $0.id == page.id }) else { continue }
                subscriptions[slot].cursor = cursor
            }
        }
        for page in answer.subscriptions where page.error != nil {
            room.pullFailed("device \(index), \(page.id): \(page.error!.code)")
        }
        return answer
    }

    func close() async {
        let (live, requests) = lock.withLock { () -> (EventStreamConnection?, LoadConnection?) in
            closing = true
            return (self.live, self.requests)
        }
        await live?.close()
        await requests?.close()
    }
}
