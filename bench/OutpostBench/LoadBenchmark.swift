import Foundation
import NIOPosix
import SyncServer

/// `outpost-bench load`: thousands of simulated devices against real `sync-server` processes
/// (release build) for a bounded time, on SQLite, and on PostgreSQL with 1 and 2 processes on
/// one database (devices split across the ports).
///
/// Each device (``LoadDevice``) holds a keep-alive connection and, for most, the live channel
/// (`GET /sync/v1/live`); every 5–15 s it pushes 1–5 `Task` creates into its team's scope
/// (teams of 10), pulls that scope by its cursor, or reads a 64 KiB range of a 4 MiB asset;
/// on a `change` poke it pulls. A few devices pull back to back past the rate limit on
/// purpose (their 429s are counted apart). At 60 % of the run every device drops every
/// connection (a simulated outage of 1 s) and comes back within the next 1.5 s: live channel,
/// catch-up pull, and the push it wrote while offline.
///
/// Figures: each route's p50 / p99 / p99.9 latency (HdrHistogram), requests, the servers'
/// memory and descriptors over time. Checks: no error but the deliberate 429s; every pushed
/// mutation on the server exactly once; `sync-server audit verify`.
enum LoadBenchmark {
    static let secondsVariable = "OUTPOST_BENCH_LOAD_SECONDS"
    static let devicesVariable = "OUTPOST_BENCH_LOAD_DEVICES"
    /// Only some configurations (`sqlite`, `postgres-1`, `postgres-2`, comma-separated); all by default.
    static let onlyVariable = "OUTPOST_BENCH_LOAD_ONLY"
    static let teamSize = 10
    /// The share of devices holding a live channel; the others only poll.
    static let livePercent = 80
    static let devicesExceedingRate = 3
    static let outageSeconds = 1.0
    static let returnSpreadSeconds = 1.5
    static let joinSpreadSeconds = 5.0
    /// The bar on PostgreSQL (docs/PERFORMANCE.md): push p99 under 500 ms, p50 within 3× SQLite's.
    static let pushP99Bar = 0.500
    static let pushP50Bar = 3.0

    static let benchmark = Benchmark(
        name: "load",
        summary: "thousands of simulated devices (pushes, pulls, live channel, asset ranges, a reconnect storm) against sync-server on "
            + "SQLite and on PostgreSQL with 1 and 2 processes: latency per route, errors, server memory and descriptors, exactly once",
        run: { try run() }
    )

    struct Configuration {
        var key: String
        var label: String
        var database: LoadDeployment.Database
        var processes: Int
    }

    static func run() throws -> BenchmarkResult {
        var result = BenchmarkResult()
        result.columns = ["measurement", "p50 / p99 / p99.9", "requests", "note"]
        let environment = ProcessInfo.processInfo.environment
        let seconds = Double(environment[secondsVariable] ?? "") ?? 30
        let devices = Int(environment[devicesVariable] ?? "") ?? 2_000
        guard seconds >= 10, devices >= teamSize else {
            throw BenchmarkError("\(secondsVariable) must be at least 10 and \(devicesVariable) at least \(teamSize)")
        }
        #if DEBUG
            result.fact("build", "DEBUG — these figures are not representative; run `make bench` (release)")
        #endif
        result.fact(
            "devices",
            "\(Format.grouped(devices)) in teams of \(teamSize) (+\(devicesExceedingRate) pulling past the rate limit on purpose), joining over "
                + "\(Int(joinSpreadSeconds)) s; \(livePercent) % hold the live channel and pull on a poke; each acts every 5–15 s: "
                + "push 40 % (1–5 Task creates), pull by cursor 35 %, 64 KiB asset range 25 %"
        )
        result.fact(
            "run",
            "\(Int(seconds)) s per configuration (\(secondsVariable)); outage at 60 %: every connection dropped for \(Int(outageSeconds)) s, "
                + "devices back within \(returnSpreadSeconds) s; servers: --rate 50 --burst 100 (the defaults), LOG_LEVEL=warning"
        )
        result.fact(
            "machine",
            "\(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(loadAverage()) at the start, ulimit -n \(descriptorLimit())")

        var configurations = [Configuration(key: "sqlite", label: "SQLite, 1 process", database: .sqlite, processes: 1)]
        if let url = environment["OUTPOST_TEST_POSTGRES_URL"], !url.isEmpty {
            configurations.append(Configuration(key: "postgres-1", label: "PostgreSQL, 1 process", database: .postgres(url: url), processes: 1))
            configurations.append(Configuration(key: "postgres-2", label: "PostgreSQL, 2 processes", database: .postgres(url: url), processes: 2))
        } else {
            result.fact(
                "PostgreSQL",
                "skipped: OUTPOST_TEST_POSTGRES_URL is not set (`make bench` starts one; by hand: "
                    + "`scripts/with-postgres.sh -- $(swift build -c release --show-bin-path)/outpost-bench load`)"
            )
        }
        if let only = environment[onlyVariable].map({ Set($0.split(separator: ",").map(String.init)) }), !only.isEmpty {
            let known = Set(configurations.map(\.key))
            if let unknown = only.subtracting(known).first {
                throw BenchmarkError("\(onlyVariable): no configuration '\(unknown)' here (known: \(known.sorted().joined(separator: ", ")))")
            }
            configurations = configurations.filter { only.contains($0.key) }
        }
        let workspace = try TemporaryFolder("load")
        defer { workspace.remove() }
        var pushes: [String: LatencySummary] = [:]
        for (index, configuration) in configurations.enumerated() {
            pushes[configuration.key] = try measure(
                configuration, devices: devices, seconds: seconds, folder: try workspace.folder("configuration-\(index)"), into: &result)
        }
        // The bar on PostgreSQL: a push's p99, and its p50 against SQLite's in the same run.
        for configuration in configurations where configuration.key != "sqlite" {
            guard let push = pushes[configuration.key] else { continue }
            result.check(
                "\(configuration.label): push p99 under \(Format.duration(pushP99Bar))", push.p99 < pushP99Bar,
                "p99 \(Format.duration(push.p99)) at \(Format.grouped(devices)) devices")
            if let sqlite = pushes["sqlite"] {
                let ratio = push.p50 / sqlite.p50
                result.check(
                    "\(configuration.label): push p50 within \(Format.fixed(pushP50Bar, 0))× SQLite's", ratio <= pushP50Bar,
                    "\(Format.fixed(ratio, 2))× (\(Format.duration(push.p50)) against \(Format.duration(sqlite.p50)))")
            }
        }
        return result
    }

    /// Measures one configuration into `result`; the push route's latencies.
    @discardableResult
    static func measure(_ configuration: Configuration, devices deviceCount: Int, seconds: Double, folder: URL, into result: inout BenchmarkResult)
        throws -> LatencySummary?
    {
        let label = configuration.label
        let deployment = try LoadDeployment(database: configuration.database, folder: folder)
        let teams = (deviceCount + teamSize - 1) / teamSize
        let rateTeam = teams  // the devices exceeding the rate have a team of their own
        try LoadSeed.seed(deployment, teams: teams + 1) { team in
            team == rateTeam
                ? (0..<devicesExceedingRate).map { LoadDevice.user(deviceCount + $0) }
                : (team * teamSize..<min(deviceCount, (team + 1) * teamSize)).map(LoadDevice.user)
        }
        try deployment.start(processes: configuration.processes)
        defer { deployment.stop() }
        let sampler = ServerSampler(pids: deployment.servers.map(\.pid))

        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let run = LoadRun(group: group)
        var generator = SeededGenerator(seed: 0x5354_4f52_4d)
        let devices = (0..<(deviceCount + devicesExceedingRate)).map { index -> LoadDevice in
            let exceeds = index >= deviceCount
            let team = LoadSeed.team(exceeds ? rateTeam : index / teamSize)
            return LoadDevice(
                index: index, team: team, token: deployment.token(user: LoadDevice.user(index), device: LoadDevice.deviceID(index), teams: [team]),
                port: deployment.ports[index % deployment.ports.count], holdsLiveChannel: !exceeds && generator.chance(livePercent),
                exceedsRate: exceeds
            )
        }
        // Where the machine's CPU goes over the run: the servers, PostgreSQL, this process (the devices).
        let serverCPUBefore = deployment.servers.map { ProcessMemory.cpuSeconds(pid: $0.pid) ?? 0 }.reduce(0, +)
        let databaseCPUBefore = ProcessMemory.cpuSeconds(named: "postgres")
        let benchCPUBefore = ProcessMemory.cpuSeconds(pid: getpid()) ?? 0
        let machineBefore = ProcessMemory.machineCPUSeconds()
        let started = monotonicNanoseconds()
        let at: @Sendable (Double) -> UInt64 = { started + UInt64($0 * 1e9) }
        let outageAt = seconds * 0.6
        let backBase = outageAt + outageSeconds
        let stormJitter = devices.map { _ in Double(generator.int(in: 0...1_000)) / 1_000 * returnSpreadSeconds }
        let joins = devices.map { _ in Double(generator.int(in: 0...1_000)) / 1_000 * joinSpreadSeconds }
        let tickSeeds = devices.map { _ in generator.next() }

        try runBlocking {
            await withTaskGroup(of: Void.self) { tasks in
                for (index, device) in devices.enumerated() {
                    let join = joins[index]
                    tasks.addTask {
                        await LoadBenchmark.sleep(until: at(join))
                        await device.run(run)
                    }
                    // The device's clock: a tick every 5–15 s after it joined (not for those exceeding the rate).
                    guard !device.exceedsRate else { continue }
                    let tickSeed = tickSeeds[index]
                    tasks.addTask {
                        var ticks = SeededGenerator(seed: tickSeed)
                        var next = join + Double(ticks.int(in: 1_000...15_000)) / 1_000
                        while next < seconds {
                            await LoadBenchmark.sleep(until: at(next))
                            device.wake.yield(.tick)
                            next += Double(ticks.int(in: 5_000...15_000)) / 1_000
                        }
                    }
                }
                tasks.addTask {
                    await LoadBenchmark.sleep(until: at(seconds * 0.4))
                    for device in devices where device.exceedsRate { device.wake.yield(.exceedRate) }
                    await LoadBenchmark.sleep(until: at(outageAt))
                    for (index, device) in devices.enumerated() { device.wake.yield(.outage(backAt: at(backBase + stormJitter[index]))) }
                    await LoadBenchmark.sleep(until: at(seconds))
                    for device in devices {
                        device.wake.yield(.stop)
                        device.wake.finish()
                    }
                }
            }
        }
        let wall = Double(monotonicNanoseconds() - started) / 1e9
        let series = sampler.stop()
        let serverCores = (deployment.servers.map { ProcessMemory.cpuSeconds(pid: $0.pid) ?? 0 }.reduce(0, +) - serverCPUBefore) / wall
        let databaseCores = (ProcessMemory.cpuSeconds(named: "postgres") - databaseCPUBefore) / wall
        let benchCores = ((ProcessMemory.cpuSeconds(pid: getpid()) ?? 0) - benchCPUBefore) / wall
        let machineAfter = ProcessMemory.machineCPUSeconds()
        let busy = (machineAfter.busy - machineBefore.busy) / max(machineAfter.total - machineBefore.total, 1e-9)
        result.rows.append(
            .init(
                "\(label) · CPU over the run",
                median: "\(Format.fixed(busy * 100, 0)) % of \(ProcessInfo.processInfo.activeProcessorCount) cores busy",
                min: "",
                note:
                    "server\(deployment.servers.count > 1 ? "s" : "") \(Format.fixed(serverCores, 2)) cores, PostgreSQL \(Format.fixed(databaseCores, 2)), "
                    + "the devices (this process) \(Format.fixed(benchCores, 2))"
            ))

        // The figures.
        for route in run.latencies.names {
            guard let summary = run.latencies.summary(route) else { continue }
            result.rows.append(
                .init(
                    "\(label) · \(route)", median: summary.percentiles, min: Format.grouped(Int(summary.count)),
                    note: "max \(Format.duration(summary.max)); \(Format.fixed(Double(summary.count) / wall, 1))/s"
                ))
        }
        let returns = run.returns
        if let last = returns.max() {
            let back = Double(Int64(last) - Int64(at(backBase))) / 1e9
            result.rows.append(
                .init(
                    "\(label) · storm: every live device back", median: Format.duration(back), min: Format.grouped(returns.count),
                    note: "from the first instant devices could return to the last hello (returns spread over \(returnSpreadSeconds) s)"
                ))
        }
        for (index, samples) in series.enumerated() {
            let peakMemory = samples.map(\.residentKiB).max() ?? 0
            let peakDescriptors = samples.map(\.descriptors).max() ?? 0
            let meanCores = samples.isEmpty ? 0 : samples.map(\.cores).reduce(0, +) / Double(samples.count)
            result.rows.append(
                .init(
                    "\(label) · server \(index + 1): peak VmRSS / fds",
                    median: "\(Format.bytes(peakMemory * 1024)) / \(Format.grouped(peakDescriptors))",
                    min: "", note: "mean CPU \(Format.fixed(meanCores, 2)) cores; \(ServerSampler.timeline(samples))"
                ))
        }

        // The checks.
        let errors = run.errors.total
        result.check(
            "\(label): errors", errors == 0,
            "\(errors) errors\(errors == 0 ? "" : ": " + run.errors.byKind.map { "\($0.0) ×\($0.1)" }.joined(separator: ", ") + "; e.g. " + run.errors.firstSamples.joined(separator: " | "))"
                + "; \(run.errors.deliberate) deliberate 429s from the \(devicesExceedingRate) devices pulling past their rate"
        )
        result.check(
            "\(label): live channel", !run.isLiveMissing,
            run.isLiveMissing ? "the server answered 404 to GET /sync/v1/live: no live channel in this build" : "every live channel opened")
        let expected = run.answeredMutations
        let report = try runBlocking {
            let storage = try await deployment.openStorage()
            do {
                let report = try await ExactlyOnce.check(expected, prefix: LoadDevice.idPrefix, storage: storage, tenant: LoadDeployment.tenant)
                await deployment.close(storage)
                return report
            } catch {
                await deployment.close(storage)
                throw error
            }
        }
        result.check(
            "\(label): exactly once", report.passed && report.pushed > 0,
            "\(Format.grouped(report.pushed)) mutations answered to \(Format.grouped(expected.lastSeqByClient.count)) devices; "
                + "\(Format.grouped(report.rowsFound)) rows found, \(Format.grouped(report.appliedOnce)) audited applied once"
                + (report.problems.isEmpty ? "" : "; " + report.problems.prefix(4).joined(separator: "; "))
        )
        deployment.stop()
        let audit = deployment.verifyAudit()
        result.check("\(label): audit verify", audit.intact, audit.message)
        return run.latencies.summary(LoadDevice.routePush)
    }

    static func sleep(until instant: UInt64) async {
        let now = monotonicNanoseconds()
        if instant > now { try? await Task.sleep(nanoseconds: instant - now) }
    }

    /// The 1-minute load average (`/proc/loadavg`).
    static func loadAverage() -> String {
        ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?").split(separator: " ").prefix(3).joined(separator: " ")
    }

    /// This process's soft limit of open descriptors (children inherit it).
    static func descriptorLimit() -> Int {
        var limit = rlimit()
        #if canImport(Glibc)
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        #else
            getrlimit(RLIMIT_NOFILE, &limit)
        #endif
        return Int(limit.rlim_cur)
    }
}
