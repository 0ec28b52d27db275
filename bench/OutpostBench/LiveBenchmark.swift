import Contracts
import Foundation
import LearningClient
import NIOCore
import NIOPosix
import SyncClient
import SyncProtocol
import SyncServer

/// `outpost-bench live`: with N devices connected to the live channel (`GET /sync/v1/live`),
/// how long from a push by one device until the others of its team are poked, over loopback.
///
/// N devices are lightweight live connections (``EventStreamConnection``, one socket each,
/// all on one event loop of the bench process), in teams of 10 sharing a team scope. At each
/// step of a ramp (100, 1 000, then more until a connection fails) 200 pushes of one `Task`
/// create go to random teams, 50 a second, one at a time per team; each other connected member
/// records the time from the push's send to its `change` event (the poke), and a poke that never
/// comes is counted. The ramp's last step says what stopped it (a refusal, a descriptor limit,
/// a time-out), with the server's resident memory, descriptors and CPU at each step.
///
/// Then the same at N = 100 and 1 000 on PostgreSQL with 2 processes: devices connected to the
/// second, pushes through the first (the poke crosses processes through LISTEN/NOTIFY).
///
/// Bar (docs/PERFORMANCE.md): poke p99 under 250 ms at 1 000 connected devices.
enum LiveBenchmark {
    static let teamSize = 10
    static let pushesPerStep = 200
    static let pushesPerSecond = 50.0
    static let barDevices = 1_000
    static let barSeconds = 0.250
    /// The ramp after 100 and 1 000 (`OUTPOST_BENCH_LIVE_RAMP=100,1000` for a short run).
    static let rampVariable = "OUTPOST_BENCH_LIVE_RAMP"
    static let defaultRamp = [100, 1_000, 2_500, 5_000, 7_500, 10_000, 12_500, 15_000, 17_500, 19_000, 20_000]
    /// Raised for the ramp so the configured cap (default 10 000) is not what stops it.
    static let rampConnectionCap = 100_000
    static let helloTimeoutSeconds = 20.0
    /// A poke not there this long after its push's send is counted missed (and its team may push again).
    static let pokeTimeout: UInt64 = 5_000_000_000
    /// Real devices (OfflineStore + SyncEngine + URLSessionTransport), one in each of the first teams.
    static let storeDeviceCount = 10

    static let benchmark = Benchmark(
        name: "live",
        summary: "N devices on the live channel (100, 1 000, ramped to the machine's limit): push-to-poke latency over loopback on SQLite, "
            + "and across 2 processes on PostgreSQL (bar: p99 under 250 ms at 1 000 devices)",
        run: { try run() }
    )

    static func run() throws -> BenchmarkResult {
        var result = BenchmarkResult()
        result.columns = ["measurement", "p50 / p99 / p99.9", "samples", "note"]
        let environment = ProcessInfo.processInfo.environment
        let ramp = (environment[rampVariable]?.split(separator: ",").compactMap { Int($0) }).flatMap { $0.isEmpty ? nil : $0 } ?? defaultRamp
        #if DEBUG
            result.fact("build", "DEBUG — these figures are not representative; run `make bench` (release)")
        #endif
        result.fact(
            "machine",
            "\(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(LoadBenchmark.loadAverage()) at the start, ulimit -n \(LoadBenchmark.descriptorLimit()) (bench and server alike)"
        )
        result.fact(
            "method",
            "teams of \(teamSize) on one live connection each; per step \(pushesPerStep) pushes of one Task create to random teams, "
                + "\(Int(pushesPerSecond))/s, one at a time per team; latency = the poke's arrival at each other member − the push's send"
        )
        result.fact(
            "ramp",
            ramp.map(Format.grouped).joined(separator: " → ") + " devices (\(rampVariable)), server --live-max-connections \(rampConnectionCap)")
        let workspace = try TemporaryFolder("live")
        defer { workspace.remove() }

        let sqlite = try measureRamp(ramp, database: .sqlite, processes: 1, label: "SQLite", folder: try workspace.folder("sqlite"), into: &result)
        if let atBar = sqlite.first(where: { $0.devices == barDevices }), let summary = atBar.poke {
            result.check(
                "p99 at \(Format.grouped(barDevices)) devices", summary.p99 < barSeconds,
                "poke p99 \(Format.duration(summary.p99)) (p50 \(Format.duration(summary.p50))) on SQLite; bar \(Format.duration(barSeconds))"
            )
        } else {
            result.check(
                "p99 at \(Format.grouped(barDevices)) devices", false, "the ramp did not reach \(Format.grouped(barDevices)) connected devices")
        }
        if let url = environment["OUTPOST_TEST_POSTGRES_URL"], !url.isEmpty {
            _ = try measureRamp(
                ramp.filter { $0 <= barDevices }, database: .postgres(url: url), processes: 2, label: "PostgreSQL, 2 processes",
                folder: try workspace.folder("postgres"), into: &result
            )
        } else {
            result.fact(
                "PostgreSQL",
                "skipped: OUTPOST_TEST_POSTGRES_URL is not set (`make bench` starts one; by hand: "
                    + "`scripts/with-postgres.sh -- $(swift build -c release --show-bin-path)/outpost-bench live`)"
            )
        }
        return result
    }

    struct Step {
        var devices: Int
        var poke: LatencySummary?
        var missedPokes: Int
        var residentKiB: Int
        var descriptors: Int
    }

    /// Connects devices step by step up to each count of `ramp`, measuring pokes at each; stops
    /// at the first step where a device could not connect.
    static func measureRamp(
        _ ramp: [Int], database: LoadDeployment.Database, processes: Int, label: String, folder: URL, into result: inout BenchmarkResult
    ) throws -> [Step] {
        let deployment = try LoadDeployment(database: database, folder: folder)
        let most = ramp.max() ?? 0
        let teams = (most + teamSize - 1) / teamSize
        try LoadSeed.seed(deployment, teams: teams, tasks: 0, rangedFile: false) { team in
            (team * teamSize..<min(most, (team + 1) * teamSize)).map(LiveListener.user)
        }
        try deployment.start(processes: processes, extra: ["--live-max-connections", "\(rampConnectionCap)"])
        defer { deployment.stop() }
        // Listeners on the last process, pushes through the first: across processes on PostgreSQL.
        let listenPort = deployment.ports.last!, pushPort = deployment.ports.first!
        let server = deployment.servers.last!.pid
        if processes > 1 {
            result.fact("\(label)", "devices connected to process 2 (port \(listenPort)), pushes sent to process 1 (port \(pushPort))")
        }

        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let probe = PokeProbe()
        var listeners: [LiveListener] = []
        var steps: [Step] = []
        var storeMissed = 0
        let plan = PushPlan()
        let pushers = try runBlocking { try await (0..<8).asyncMap { _ in try await LoadConnection.connect(port: pushPort, group: group) } }
        // Real devices, one in each of the first teams (a member's second device), on the listening process.
        let storeDevices = try (0..<min(storeDeviceCount, (ramp.min() ?? 0) / teamSize)).map { team in
            let user = LiveListener.user(team * teamSize + 1)
            return try StoreDevice(
                team: team, user: user, device: "store-device-\(team)",
                token: deployment.token(user: user, device: "store-device-\(team)", teams: [LoadSeed.team(team)]), port: listenPort,
                folder: try storeFolder(folder, team: team)
            )
        }
        try runBlocking { for device in storeDevices { try await device.start() } }
        defer { try? runBlocking { for device in storeDevices { await device.stop() } } }

        for target in ramp {
            let baseline = probe.failures
            probe.beginStep()
            let cpuBefore = ProcessMemory.cpuSeconds(pid: server) ?? 0
            let stepStart = monotonicNanoseconds()
            // Connect the new devices, 200 at a time, then wait for their hellos.
            let newcomers = (listeners.count..<target).map { index in
                LiveListener(
                    index: index, team: index / teamSize,
                    token: deployment.token(
                        user: LiveListener.user(index), device: LiveListener.device(index), teams: [LoadSeed.team(index / teamSize)]),
                    probe: probe
                )
            }
            let connectStart = monotonicNanoseconds()
            try runBlocking {
                for batch in stride(from: 0, to: newcomers.count, by: 200) {
                    await withTaskGroup(of: Void.self) { tasks in
                        for listener in newcomers[batch..<min(batch + 200, newcomers.count)] {
                            tasks.addTask { await listener.open(port: listenPort, group: group) }
                        }
                    }
                }
            }
            listeners += newcomers
            let helloDeadline = monotonicNanoseconds() + UInt64(helloTimeoutSeconds * 1e9)
            while probe.greeted < listeners.count, probe.failures == baseline, monotonicNanoseconds() < helloDeadline {
                usleep(20_000)
            }
            let connectEnd = monotonicNanoseconds()
            let connectSeconds = Double(connectEnd - connectStart) / 1e9
            let connected = probe.greeted
            let failed = probe.failures - baseline
            if connected < target || failed > 0 {
                let why = probe.failureSamples.suffix(3).joined(separator: " | ")
                result.rows.append(
                    .init(
                        "\(label) · ramp stopped at \(Format.grouped(target))", median: "\(Format.grouped(connected)) connected", min: "",
                        note:
                            "\(failed) refused or failed\(why.isEmpty ? ", the rest without a hello in \(Int(helloTimeoutSeconds)) s" : ": " + why); "
                            + "server \(ServerSampler.openDescriptors(pid: server)) fds, bench \(ServerSampler.openDescriptors(pid: getpid())) fds, "
                            + "server VmRSS \(Format.bytes(ProcessMemory.status("VmRSS", pid: server) * 1024))"
                    ))
                result.fact("\(label) limit", "\(Format.grouped(connected)) live connections held; the step to \(Format.grouped(target)) failed")
                break
            }

            // Pushes: to random teams, one at a time per team (its pusher's `seq`s are in order).
            let teamsNow = (target + teamSize - 1) / teamSize
            try runBlocking {
                try await withThrowingTaskGroup(of: Void.self) { tasks in
                    for number in 0..<pushesPerStep {
                        await LoadBenchmark.sleep(until: connectEnd + UInt64(Double(number) / pushesPerSecond * 1e9))
                        // Every 5th push goes to a team with a store device, so each step measures the store too.
                        let choices = number % 5 == 0 ? min(storeDevices.count, teamsNow) : teamsNow
                        var team = plan.team(below: choices)
                        while probe.isBusy(team: team) {
                            try await Task.sleep(nanoseconds: 2_000_000)
                            team = plan.team(below: choices)
                        }
                        // Marked in flight here, not when the task starts: the next turn of this loop
                        // must not pick the team while its push has not left (pushes of one team go
                        // over different connections, and a later seq arriving first is a gap).
                        probe.willPush(team: team)
                        let seq = plan.nextSeq(team: team)
                        let pusher = pushers[number % pushers.count]
                        let token = deployment.token(
                            user: LiveListener.user(team * teamSize), device: LiveListener.device(team * teamSize), teams: [LoadSeed.team(team)])
                        let members = min(teamSize, target - team * teamSize) - 1
                        tasks.addTask {
                            try await push(
                                team: team, seq: seq, token: token, receivers: members, on: pusher, probe: probe,
                                storeDevice: team < storeDevices.count ? storeDevices[team] : nil
                            )
                        }
                    }
                    try await tasks.waitForAll()
                }
            }
            // Stragglers: the last pokes may take up to the time a poke counts as missed.
            let stragglersDeadline = monotonicNanoseconds() + pokeTimeout
            while probe.anyWaiting, monotonicNanoseconds() < stragglersDeadline { usleep(10_000) }
            let missed = probe.endStep()
            let cpu = (ProcessMemory.cpuSeconds(pid: server) ?? cpuBefore) - cpuBefore
            let stepSeconds = Double(monotonicNanoseconds() - stepStart) / 1e9
            let resident = ProcessMemory.status("VmRSS", pid: server)
            let descriptors = ServerSampler.openDescriptors(pid: server)
            let summary = probe.summary
            steps.append(Step(devices: target, poke: summary, missedPokes: missed, residentKiB: resident, descriptors: descriptors))
            result.rows.append(
                .init(
                    "\(label) · poke, \(Format.grouped(target)) devices", median: summary?.percentiles ?? "none",
                    min: Format.grouped(Int(summary?.count ?? 0)),
                    note:
                        "max \(summary.map { Format.duration($0.max) } ?? "-"); \(missed) missed; connect+hello of the step's \(Format.grouped(newcomers.count)) "
                        + "\(Format.duration(connectSeconds)); server VmRSS \(Format.bytes(resident * 1024)), \(Format.grouped(descriptors)) fds, "
                        + "\(Format.fixed(cpu / stepSeconds, 2)) cores over the step"
                ))
            let store = probe.storeSummaries
            if let fromSend = store.fromSend {
                result.rows.append(
                    .init(
                        "\(label) · in a store device, \(Format.grouped(target)) devices", median: fromSend.percentiles,
                        min: Format.grouped(Int(fromSend.count)),
                        note:
                            "from the push's send; from its answer \(store.fromAnswer?.percentiles ?? "-"); \(store.missed) not in the store within 10 s"
                    ))
            }
            storeMissed += store.missed
            if let hello = probe.helloSummary {
                result.rows.append(
                    .init(
                        "\(label) · connect to hello, step to \(Format.grouped(target))", median: hello.percentiles,
                        min: Format.grouped(Int(hello.count))))
            }
        }
        if steps.count >= 2, let first = steps.first, let last = steps.last, last.devices > first.devices {
            let perConnection = Double(last.residentKiB - first.residentKiB) * 1024 / Double(last.devices - first.devices)
            result.fact(
                "\(label) memory",
                "\(Format.bytes(Int(perConnection))) of server VmRSS per live connection (\(Format.grouped(first.devices)) → \(Format.grouped(last.devices)) devices: "
                    + "\(Format.bytes(first.residentKiB * 1024)) → \(Format.bytes(last.residentKiB * 1024)))"
            )
        }
        let missed = steps.reduce(0) { $0 + $1.missedPokes }
        result.check(
            "\(label): every poke", missed == 0 && !steps.isEmpty,
            "\(missed) pokes did not reach a connected member within 5 s (\(steps.count) steps); \(probe.resyncCount) resync events"
        )
        result.check("\(label): every store row", storeMissed == 0, "\(storeMissed) pushed rows not in a store device within 10 s")
        let unexpected = probe.unexpectedEnds
        result.check("\(label): connections held", unexpected == 0, "\(unexpected) live channels ended or said bye while the bench held them")
        let held = listeners
        try runBlocking {
            for listener in held { await listener.close() }
            for pusher in pushers { await pusher.close() }
        }
        return steps
    }

    static func storeFolder(_ folder: URL, team: Int) throws -> URL {
        let url = folder.appendingPathComponent("store-device-\(team)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Pushes one Task create for `team` as its first member and tells the probe when it was sent.
    static func push(
        team: Int, seq: Int64, token: String, receivers: Int, on connection: LoadConnection, probe: PokeProbe, storeDevice: StoreDevice?
    ) async throws {
        let mutation = LoadMutations.taskCreate(id: "lv-\(team)-\(seq)", team: LoadSeed.team(team), seq: seq, clientMutationID: "lv-\(team)-\(seq)")
        let body = try JSONEncoder().encode(PushRequest(clientId: "live-pusher-\(team)", schema: [:], mutations: [mutation]))
        let request = LoadRequest(
            method: .POST, path: "/sync/v1/push", headers: [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json")],
            body: ByteBuffer(bytes: body)
        )
        let watcher = await storeDevice?.watch(id: mutation.id)
        let sent = monotonicNanoseconds()
        probe.pushSent(team: team, receivers: receivers, at: sent)
        let response = try await connection.send(request)
        let answered = monotonicNanoseconds()
        probe.answered(team: team)
        guard response.status == 200 else {
            watcher?.cancel()
            throw BenchmarkError("push for team \(team) answered \(response.status): \(response.body.map { String(buffer: $0) } ?? "")")
        }
        guard let watcher else { return }
        let timeout = Task {
            try? await Task.sleep(nanoseconds: 10_000_000_000)
            watcher.cancel()
        }
        let stored = await watcher.value
        timeout.cancel()
        probe.stored(sent: sent, answered: answered, at: stored)
    }
}

/// Which team pushes next and its pusher's next `seq`; used by the one task that sends the pushes.
final class PushPlan: @unchecked Sendable {
    private var generator = SeededGenerator(seed: 0x6c69_7665)
    private var pushed: [Int: Int64] = [:]

    func team(below count: Int) -> Int { generator.int(in: 0...(count - 1)) }

    func nextSeq(team: Int) -> Int64 {
        let seq = (pushed[team] ?? 0) + 1
        pushed[team] = seq
        return seq
    }
}

/// The pokes of one step: when each team's push was sent, which members got its poke, and the
/// connections' hellos and failures.
final class PokeProbe: @unchecked Sendable {
    private let lock = NSLock()
    private var sentAt: [Int: UInt64] = [:]
    private var waitingFor: [Int: Set<Int>] = [:]
    private var expectedReceivers: [Int: Int] = [:]
    private var missed = 0
    private var latencies = LatencyRecorder()
    private var inFlight: Set<Int> = []
    private var storeMissed = 0
    private var resyncs = 0
    private var hellos = LatencyRecorder()
    private(set) var greetedCount = 0
    private var failureCount = 0
    private var samples: [String] = []
    private var ends = 0

    var greeted: Int { lock.withLock { greetedCount } }
    var failures: Int { lock.withLock { failureCount } }
    var failureSamples: [String] { lock.withLock { samples } }
    var unexpectedEnds: Int { lock.withLock { ends } }

    func beginStep() {
        lock.withLock {
            storeMissed = 0
            latencies = LatencyRecorder()
            hellos = LatencyRecorder()
        }
    }

    /// Ends the step; the pokes still missing.
    func endStep() -> Int {
        lock.withLock {
            for (team, received) in waitingFor { missed += max(0, (expectedReceivers[team] ?? 0) - received.count) }
            waitingFor = [:]
            sentAt = [:]
            defer { missed = 0 }
            return missed
        }
    }

    var summary: LatencySummary? { lock.withLock { latencies.summary("poke") } }
    var helloSummary: LatencySummary? { lock.withLock { hellos.summary("hello") } }

    /// The team's next push is about to be sent: busy from now on.
    func willPush(team: Int) {
        _ = lock.withLock { inFlight.insert(team) }
    }

    func pushSent(team: Int, receivers: Int, at instant: UInt64) {
        lock.withLock {
            // The previous push's stragglers are missed pokes now.
            if let received = waitingFor[team] { missed += max(0, (expectedReceivers[team] ?? 0) - received.count) }
            sentAt[team] = instant
            inFlight.insert(team)
            waitingFor[team] = []
            expectedReceivers[team] = receivers
        }
    }

    /// Whether the team's last push is unanswered, or its pokes are still coming (for a second at most).
    func isBusy(team: Int) -> Bool {
        lock.withLock {
            if inFlight.contains(team) { return true }
            guard let received = waitingFor[team], let sent = sentAt[team] else { return false }
            return received.count < (expectedReceivers[team] ?? 0) && monotonicNanoseconds() - sent < LiveBenchmark.pokeTimeout
        }
    }

    /// Whether some team's pokes are still coming (within the time-out).
    var anyWaiting: Bool {
        lock.withLock {
            let now = monotonicNanoseconds()
            return waitingFor.contains { team, received in
                received.count < (expectedReceivers[team] ?? 0) && now - (sentAt[team] ?? now) < LiveBenchmark.pokeTimeout
            }
        }
    }

    func answered(team: Int) { _ = lock.withLock { inFlight.remove(team) } }

    /// A store device's row: in its store at `instant` (nil: not within 10 s).
    func stored(sent: UInt64, answered: UInt64, at instant: UInt64?) {
        lock.withLock {
            guard let instant else {
                storeMissed += 1
                return
            }
            latencies.record("store from send", from: sent, to: instant)
            latencies.record("store from answer", from: answered, to: instant)
        }
    }

    var storeSummaries: (fromSend: LatencySummary?, fromAnswer: LatencySummary?, missed: Int) {
        lock.withLock { (latencies.summary("store from send"), latencies.summary("store from answer"), storeMissed) }
    }

    /// A `change` event on `device` of `team` (the team's first member is the pusher: not counted).
    func poke(team: Int, device: Int, at instant: UInt64, resync: Bool = false) {
        guard device % LiveBenchmark.teamSize != 0 else { return }
        lock.withLock {
            if resync { resyncs += 1 }
            guard let sent = sentAt[team], instant >= sent, waitingFor[team]?.insert(device).inserted == true else { return }
            // A resync is no poke of this push: it covers it without a latency of its own.
            guard !resync else { return }
            latencies.record("poke", from: sent, to: instant)
            // The last member it waited for: the push has reached its whole team.
            if waitingFor[team]?.count == expectedReceivers[team] { latencies.record("poke to all", from: sent, to: instant) }
        }
    }

    /// Per push, from its send until the last of its team's other members had the poke (pushes
    /// a resync covered for a member are not counted).
    var everyMemberSummary: LatencySummary? { lock.withLock { latencies.summary("poke to all") } }

    /// `resync` events received over the whole run.
    var resyncCount: Int { lock.withLock { resyncs } }

    func hello(after nanoseconds: UInt64) {
        lock.withLock {
            greetedCount += 1
            hellos.record("hello", nanoseconds: nanoseconds)
        }
    }

    func failed(_ why: String) {
        lock.withLock {
            failureCount += 1
            if samples.count < 20 { samples.append(why) }
        }
    }

    func endedUnexpectedly(_ why: String) {
        lock.withLock {
            ends += 1
            if samples.count < 20 { samples.append(why) }
        }
    }
}

/// One lightweight device on the live channel.
final class LiveListener: @unchecked Sendable {
    let index: Int
    let team: Int
    let token: String
    let probe: PokeProbe
    private let lock = NSLock()
    private var connection: EventStreamConnection?
    private var status = 0
    private var closing = false

    init(index: Int, team: Int, token: String, probe: PokeProbe) {
        self.index = index
        self.team = team
        self.token = token
        self.probe = probe
    }

    static func user(_ index: Int) -> String { "live-user-\(index)" }
    static func device(_ index: Int) -> String { "live-device-\(index)" }

    func open(port: Int, group: any EventLoopGroup) async {
        let opened = monotonicNanoseconds()
        let scopeKey = "ops:team:\(LoadSeed.team(team))"
        do {
            let connection = try await EventStreamConnection.open(port: port, token: token, group: group) { [self] update in
                switch update {
                case .opened(let status, _):
                    lock.withLock { self.status = status }
                case .event(let event, let receivedAt):
                    switch event.event {
                    case "hello": probe.hello(after: receivedAt - opened)
                    case "change" where event.data.contains("\"\(scopeKey)\""): probe.poke(team: team, device: index, at: receivedAt)
                    // The server lost its notifications for a while: the device pulls every scope, which covers the push.
                    case "resync": probe.poke(team: team, device: index, at: receivedAt, resync: true)
                    case "bye": if !lock.withLock({ closing }) { probe.endedUnexpectedly("device \(index): bye \(event.data)") }
                    default: break
                    }
                case .heartbeat: break
                case .refusalBody(let body):
                    probe.failed("HTTP \(lock.withLock { status }) \(body.prefix(200))")
                case .closed(let error):
                    let (closing, status) = lock.withLock { (self.closing, self.status) }
                    if !closing, status == 200 { probe.endedUnexpectedly("device \(index): the channel ended (\(error ?? "closed by the server"))") }
                    if status == 0, !closing { probe.failed("device \(index): closed before an answer (\(error ?? "by the server"))") }
                }
            }
            lock.withLock { self.connection = connection }
        } catch {
            probe.failed("device \(index): \(error)")
        }
    }

    func close() async {
        let connection = lock.withLock { () -> EventStreamConnection? in
            closing = true
            return self.connection
        }
        await connection?.close()
    }
}

extension Sequence where Element: Sendable {
    /// `map` with an async transform, one element after another.
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}

/// A real device on the live channel: an ``OfflineStore``, a ``SyncEngine`` over
/// ``URLSessionTransport``, started online as an app starts it (the engine keeps the channel
/// open and syncs on a poke). It measures from a push's send until the pushed row is in its store.
final class StoreDevice: @unchecked Sendable {
    let team: Int
    let store: OfflineStore
    let engine: SyncEngine

    init(team: Int, user: String, device: String, token: String, port: Int, folder: URL) throws {
        self.team = team
        store = try OfflineStore(
            OfflineStoreConfiguration(
                databaseURL: folder.appendingPathComponent("store.sqlite"), tenantId: LoadDeployment.tenant, userId: user, deviceId: device,
                keyProvider: FileKeyProvider(directory: folder.appendingPathComponent("keys", isDirectory: true))
            ), contracts: ContractRegistry.self, extensions: [LearningStore()])
        let transport = URLSessionTransport(baseURL: URL(string: "http://127.0.0.1:\(port)")!, timeout: 30) { token }
        engine = SyncEngine(store: store, transport: transport, configuration: SyncEngineConfiguration(scopes: ["team"]))
    }

    /// Syncs once, starts the engine online and waits until its live channel is connected.
    func start() async throws {
        let first = await engine.syncNow()
        guard case .succeeded = first else { throw BenchmarkError("a store device's first sync: \(first)") }
        await engine.start(connectivity: ManualConnectivityMonitor(online: true))
        let deadline = monotonicNanoseconds() + 20_000_000_000
        while await engine.currentStatus.live != .connected {
            guard monotonicNanoseconds() < deadline else {
                throw BenchmarkError("a store device's live channel is \(await engine.currentStatus.live)")
            }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
    }

    /// Starts watching the store for `id` and returns once the first (absent) value was read,
    /// so a push sent afterwards cannot be missed; the task ends with the instant the row is in
    /// the store, or `nil` when cancelled first.
    func watch(id: String) async -> Task<UInt64?, Never> {
        let (ready, readyContinuation) = AsyncStream.makeStream(of: Void.self)
        let store = self.store
        let watcher = Task<UInt64?, Never> {
            defer { readyContinuation.finish() }
            do {
                for try await present in store.observe({ reader in try reader.fetch(FieldTask.self, id: id) != nil }) {
                    if present { return monotonicNanoseconds() }
                    readyContinuation.yield()
                }
            } catch {
                return nil
            }
            return nil
        }
        for await _ in ready { break }
        return watcher
    }

    func stop() async {
        await engine.stop()
        try? store.close()
    }
}
