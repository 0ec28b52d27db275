import Foundation
import NIOCore
import NIOPosix
import SyncClient
import SyncProtocol
import SyncServer

/// Poke fan-out at 1 000 live devices holding 10 subscriptions each and syncing no team scope,
/// against the same devices syncing their team's scope whole, in the same run (the
/// `subscriptions` benchmark's last part).
///
/// The live channel pokes by scope key only: a channel is filed under the team scopes its user
/// may read, and the server keeps nothing per subscription, so subscriptions change neither
/// who is poked nor the poke itself. What a poke sets off is each device's pull after it (after
/// the engine's poke debounce, a poke meanwhile sharing it or queuing one more, as
/// ``SyncEngine`` does), which the server answers while it fans out the next writes. Three
/// cases, each on the same 1 000 devices (``FanOutMode``):
///
/// - **whole scope** (the baseline): each device syncs its team's scope whole, so each poke makes
///   it pull the scope's delta from its cursor (`GET /sync/v1/pull`, pages to the end), as a
///   real device syncing the team does;
/// - **subscriptions** (measured): each device holds 10 subscriptions and syncs no team scope,
///   so each poke (its channel still filed under its team's scope) makes it pull its 10
///   subscriptions (`POST /sync/v1/subscriptions/pull`);
/// - **no pulls** (information): the devices only listen.
///
/// `sync-server serve` (SQLite) with 100 teams of 10 and 100 incidents in each team's scope;
/// 1 000 lightweight live connections (``LiveBenchmark``'s method: pushes of one `Task` create
/// to random teams, 50 a second, one at a time per team). Before the rounds every device pulls
/// its team's scope to its end and its 10 subscriptions once (10 incidents of its team, with
/// their asset), as a first sync does. Rounds of 200 pushes then take the three cases in an order
/// that turns from round to round, 3 each after a warm-up round. The figure is, per push, the time
/// from its send until the last of its team's 9 other members had the poke.
///
/// Bar: its p99 with subscriptions within ``barRatio`` of its p99 with the scope synced whole,
/// and the poke p99 with subscriptions under the `live` benchmark's bar (``LiveBenchmark/barSeconds``,
/// its definition: the poke's arrival at each other member). The server's CPU and this process's
/// (the devices) over each case say where the time went.
///
/// Why 1.5×: the fan-out path is the same, so the ratio measures the load one case's pulls add
/// against the other's (at 50 writes a second, up to 500 pulls a second in both) on the two cores
/// the server shares with the 1 000 devices; more than half again would say a pull of 10
/// subscriptions costs the pokes much more than a pull of the scope's delta.
enum SubscriptionFanOut {
    static let devices = 1_000
    static let subscriptionsPerDevice = 10
    static let incidentsPerTeam = LiveBenchmark.teamSize * subscriptionsPerDevice
    static let pushesPerRound = 200
    static let roundsPerCase = 3
    static let warmUpPushes = 50
    static let barRatio = 1.5
    /// The cases in the order of the first round (the order turns by one each round).
    static let cases: [FanOutMode] = [.listen, .scope, .subscriptions]

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

        // First syncs: every device pulls its team's scope to its end, and its 10 subscriptions.
        func everyDevice(_ work: @escaping @Sendable (FanOutDevice) async throws -> Int) throws -> (seconds: Double, rows: Int) {
            let (rows, seconds) = try Timing.measure {
                try runBlocking { () async throws -> Int in
                    var rows = 0
                    for batch in stride(from: 0, to: fleet.count, by: 50) {
                        rows += try await withThrowingTaskGroup(of: Int.self) { tasks in
                            for device in fleet[batch..<min(batch + 50, fleet.count)] { tasks.addTask { try await work(device) } }
                            return try await tasks.reduce(0, +)
                        }
                    }
                    return rows
                }
            }
            return (seconds, rows)
        }
        let scopeSync = try everyDevice { try await $0.syncScope() }
        let subscribed = try everyDevice { try await $0.subscribe() }

        let plan = PushPlan()
        var probes: [FanOutMode: PokeProbe] = [:]
        var spent: [FanOutMode: Spent] = [:]
        for mode in cases { probes[mode] = PokeProbe() }
        let warmUp = try round(
            pushesPerRound: warmUpPushes, probe: PokeProbe(), plan: plan, pushers: pushers, deployment: deployment, room: room)
        for number in 0..<roundsPerCase {
            for offset in 0..<cases.count {
                let mode = cases[(number + offset) % cases.count]
                room.mode = mode
                spent[mode, default: Spent()] += try round(
                    pushesPerRound: pushesPerRound, probe: probes[mode]!, plan: plan, pushers: pushers, deployment: deployment, room: room)
                room.mode = .listen
            }
        }

        let pulls = room.pullFigures
        result.fact(
            "machine", "\(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(LoadBenchmark.loadAverage()) at the fan-out's end")
        result.fact(
            "fan-out",
            "\(Format.grouped(devices)) live devices in teams of \(teamSize) (connected in \(Format.duration(connectSeconds))); "
                + "\(roundsPerCase) rounds of \(pushesPerRound) Task creates per case, 50/s, the three cases' order turning each round, "
                + "after \(warmUpPushes) to warm up")
        result.fact(
            "live channel",
            "pokes by scope key only: the server keeps nothing per subscription, so holding them changes neither who is poked nor the poke; "
                + "after each poke (\(Format.duration(room.debounceSeconds)) debounce, as SyncEngine) a device syncing the team scope whole "
                + "pulls its delta, a device holding subscriptions pulls them")
        result.fact(
            "first syncs",
            "every device's team scope pulled to its end (\(Format.grouped(scopeSync.rows)) rows in \(Format.duration(scopeSync.seconds)) for all); "
                + "\(Format.grouped(devices * subscriptionsPerDevice)) subscriptions held, each device's first pull of its 10 "
                + "(\(Format.grouped(subscribed.rows)) rows in \(Format.duration(subscribed.seconds)) for all)")
        let labels: [(FanOutMode, String)] = [
            (.scope, "team scope synced whole, its delta pulled on each poke (baseline)"),
            (.subscriptions, "10 subscriptions each and no team scope, pulled on each poke (measured)"),
            (.listen, "no pulls, the devices only listen (information)"),
        ]
        for (mode, label) in labels {
            let probe = probes[mode]!, rounds = spent[mode]!
            let all = probe.everyMemberSummary
            let member = probe.summary
            let pulled = pulls.tallies[mode].map { "; \(Format.grouped($0.answered)) pulls (\(Format.grouped($0.rows)) rows) while measured" } ?? ""
            result.rows.append(
                .init(
                    "poke to a team's 9 others, \(Format.grouped(devices)) devices, \(label) (p50 / p99 / p99.9)",
                    median: all?.percentiles ?? "none", min: "",
                    note:
                        "\(all.map { Format.grouped(Int($0.count)) } ?? "0") pushes; each member \(member?.percentiles ?? "-"); "
                        + "max \(all.map { Format.duration($0.max) } ?? "-"); \(rounds.missed) missed; "
                        + "server \(Format.fixed(rounds.serverCPU / rounds.seconds, 2)) cores, devices \(Format.fixed(rounds.benchCPU / rounds.seconds, 2))"
                        + pulled
                ))
        }
        let missedPokes = warmUp.missed + spent.values.reduce(0) { $0 + $1.missed }
        result.check(
            "every poke reached its team", missedPokes == 0 && room.connections.unexpectedEnds == 0,
            "\(missedPokes) pokes missed (5 s), \(room.connections.unexpectedEnds) live channels ended; "
                + "\(probes.values.reduce(0) { $0 + $1.resyncCount }) resync events")
        let answered = pulls.tallies.values.reduce(0) { $0 + $1.answered }
        result.check(
            "every pull answered (scope deltas and subscriptions)", pulls.failures.isEmpty,
            pulls.failures.isEmpty
                ? "\(Format.grouped(answered)) answered"
                : "\(pulls.failures.count) failed: \(pulls.failures.prefix(3).joined(separator: " | "))")
        let subscriptions = probes[.subscriptions]!, whole = probes[.scope]!, listening = probes[.listen]!
        if let with = subscriptions.everyMemberSummary?.p99, let baseline = whole.everyMemberSummary?.p99,
            let member = subscriptions.summary?.p99
        {
            let ratio = with / baseline
            let information =
                listening.everyMemberSummary.map {
                    " (information: \(Format.ratio(with / $0.p99)) the p99 of devices that pull nothing, \(Format.duration($0.p99)))"
                } ?? ""
            result.check(
                "poke fan-out p99 with 10 subscriptions per device ≤ \(Format.fixed(barRatio, 1))× the team scope synced whole, "
                    + "and under the live bar of \(Format.duration(LiveBenchmark.barSeconds)) (\(Format.grouped(devices)) devices; pokes by scope key only)",
                ratio <= barRatio && member <= LiveBenchmark.barSeconds,
                "\(Format.ratio(ratio)): \(Format.duration(with)) against \(Format.duration(baseline)) (per push, its whole team poked); "
                    + "each member's poke p99 \(Format.duration(member)) (the live bar's definition)" + information)
        } else {
            result.check("poke fan-out p99 with subscriptions", false, "no push reached its whole team in one of the cases")
        }
    }

    /// `pushesPerRound` pushes to random teams at ``LiveBenchmark/pushesPerSecond``, then the
    /// stragglers and the pulls they set off.
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

/// What the fan-out's devices pull after a poke.
enum FanOutMode: Hashable, Sendable {
    /// Nothing: they only listen.
    case listen
    /// Their team's scope, synced whole: its delta from their cursor.
    case scope
    /// Their 10 subscriptions (no team scope).
    case subscriptions
}

/// What the fan-out's devices share: the probe of the round under way, what they pull on a
/// poke, and the pulls' tallies.
final class FanOutRoom: @unchecked Sendable {
    let debounceSeconds: Double
    /// Hellos, refusals and channels that ended, over the whole run.
    let connections = PokeProbe()
    private let lock = NSLock()
    private var currentProbe = PokeProbe()
    private var currentMode = FanOutMode.listen
    private var pending = 0
    private var tallies: [FanOutMode: (answered: Int, rows: Int)] = [:]
    private var failures: [String] = []

    init(debounceSeconds: Double) {
        self.debounceSeconds = debounceSeconds
    }

    var probe: PokeProbe {
        get { lock.withLock { currentProbe } }
        set { lock.withLock { currentProbe = newValue } }
    }

    var mode: FanOutMode {
        get { lock.withLock { currentMode } }
        set { lock.withLock { currentMode = newValue } }
    }

    /// Devices with a pull scheduled or under way.
    var pullsPending: Int { lock.withLock { pending } }

    /// Pulls answered and the rows they brought, per case, and the failures.
    var pullFigures: (tallies: [FanOutMode: (answered: Int, rows: Int)], failures: [String]) { lock.withLock { (tallies, failures) } }

    func pullScheduled() { lock.withLock { pending += 1 } }
    func pullsDone() { lock.withLock { pending -= 1 } }

    func pulled(_ mode: FanOutMode, rows count: Int) {
        lock.withLock {
            let tally = tallies[mode] ?? (0, 0)
            tallies[mode] = (tally.answered + 1, tally.rows + count)
        }
    }

    func pullFailed(_ why: String) { lock.withLock { failures.append(why) } }
}

/// One device of the fan-out: a live channel, a keep-alive connection for its requests, its
/// team scope's cursor and the cursors of its subscriptions.
final class FanOutDevice: @unchecked Sendable {
    let index: Int
    let team: Int
    let token: String
    let room: FanOutRoom
    private let lock = NSLock()
    private var live: EventStreamConnection?
    private var requests: LoadConnection?
    private var requestsAt: (port: Int, group: any EventLoopGroup)?
    private var scopeCursor: String?
    private var subscriptions: [SubscriptionPullRequest.Entry] = []
    private var status = 0
    private var closing = false
    /// A poke's debounce is running: later pokes share it.
    private var debouncing = false
    private var pulling = false
    /// A poke came while a pull ran: one more after it.
    private var pullAgain = false

    private static let queryCharacters = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))

    init(index: Int, team: Int, token: String, room: FanOutRoom) {
        self.index = index
        self.team = team
        self.token = token
        self.room = room
    }

    var teamName: String { LoadSeed.team(team) }
    var scopeKey: String { "ops:team:\(teamName)" }

    func open(port: Int, liveGroup: any EventLoopGroup, requestGroup: any EventLoopGroup) async throws {
        lock.withLock { self.requestsAt = (port, requestGroup) }
        let opened = monotonicNanoseconds()
        let scopeKey = scopeKey
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
                        poked(room.mode)
                    case "resync":
                        room.probe.poke(team: team, device: index, at: receivedAt, resync: true)
                        poked(room.mode)
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

    /// Pulls its team's scope to its end, as a first sync does; the rows it brought.
    func syncScope() async throws -> Int {
        try await pullScope()
    }

    /// Subscribes to 10 incidents of its team (its own, none shared with the other members) and
    /// pulls them once, as a first sync does; the rows they brought.
    func subscribe() async throws -> Int {
        let member = index % LiveBenchmark.teamSize
        let entries = (0..<SubscriptionFanOut.subscriptionsPerDevice).map { number in
            SubscriptionPullRequest.Entry(
                id: "s-\(number)", name: "incident",
                parameters: ["id": .string("\(teamName)-inc-\(member * SubscriptionFanOut.subscriptionsPerDevice + number)")])
        }
        lock.withLock { subscriptions = entries }
        let answer = try await pullSubscriptions()
        guard answer.subscriptions.count == entries.count,
            answer.subscriptions.allSatisfy({ $0.error == nil && !$0.hasMore && $0.upserts["Incident"]?.count == 1 })
        else { throw BenchmarkError("device \(index)'s first pull of its subscriptions: \(answer.subscriptions.prefix(2))") }
        return answer.subscriptions.reduce(0) { $0 + $1.rowCount }
    }

    /// A poke in `mode`: the engine's debounce, then a pull of what the device syncs (one more
    /// after it when another poke comes while it runs). Nothing when it only listens.
    private func poked(_ mode: FanOutMode) {
        guard mode != .listen else { return }
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
                        switch mode {
                        case .scope: room.pulled(mode, rows: try await pullScope())
                        case .subscriptions: room.pulled(mode, rows: try await pullSubscriptions().subscriptions.reduce(0) { $0 + $1.rowCount })
                        case .listen: break
                        }
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

    /// `GET /sync/v1/pull` of its team's scope from its cursor, page after page (the server's
    /// page size, as the engine's default; gzip accepted, as URLSession does) until the scope's
    /// end; keeps the cursor. The rows the pages brought.
    private func pullScope() async throws -> Int {
        var rows = 0
        while true {
            let connection = try await requestConnection()
            var path = "/sync/v1/pull?scope=" + (scopeKey.addingPercentEncoding(withAllowedCharacters: Self.queryCharacters) ?? scopeKey)
            if let cursor = lock.withLock({ scopeCursor }) {
                path += "&cursor=" + (cursor.addingPercentEncoding(withAllowedCharacters: Self.queryCharacters) ?? cursor)
            }
            let response = try await connection.send(
                LoadRequest(
                    method: .GET, path: path,
                    headers: [("Authorization", "Bearer \(token)"), ("Accept-Encoding", "gzip"), (ProtocolHeaders.clientID, "fan-out-\(index)")],
                    body: nil))
            var body = response.body.map { Data($0.readableBytesView) } ?? Data()
            guard response.status == 200 else {
                throw BenchmarkError("scope pull answered \(response.status): \(String(decoding: body.prefix(200), as: UTF8.self))")
            }
            if response.headers["Content-Encoding"].first == "gzip" { body = try Gzip.decompress(body, limit: 256 << 20) }
            let page = try PullResponse(json: body)
            lock.withLock { scopeCursor = page.cursor }
            rows += page.rowCount
            if !page.hasMore { return rows }
        }
    }

    /// `POST /sync/v1/subscriptions/pull` of every subscription from its cursor (gzip accepted, as
    /// URLSession does); keeps the new cursors.
    private func pullSubscriptions() async throws -> SubscriptionPullResponse {
        let connection = try await requestConnection()
        let entries = lock.withLock { subscriptions }
        let body = try JSONEncoder().encode(SubscriptionPullRequest(subscriptions: entries))
        let response = try await connection.send(
            LoadRequest(
                method: .POST, path: "/sync/v1/subscriptions/pull",
                headers: [
                    ("Authorization", "Bearer \(token)"), ("Content-Type", "application/json"), ("Accept-Encoding", "gzip"),
                    (ProtocolHeaders.clientID, "fan-out-\(index)"),
                ],
                body: ByteBuffer(bytes: body)))
        var text = response.body.map { Data($0.readableBytesView) } ?? Data()
        guard response.status == 200 else {
            throw BenchmarkError("subscription pull answered \(response.status): \(String(decoding: text.prefix(200), as: UTF8.self))")
        }
        if response.headers["Content-Encoding"].first == "gzip" { text = try Gzip.decompress(text, limit: 256 << 20) }
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
