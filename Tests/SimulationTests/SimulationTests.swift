import Foundation
import Testing

/// The deterministic simulation: whole schedules of writes, syncs, faults, crashes and restarts,
/// seeded, checked against the system's invariants (docs/testing.md).
///
/// `make test` runs a bounded number of seeds; `make sim SEEDS=N` runs as many as asked, and
/// `make sim SEED=N` replays one. Environment: `OUTPOST_SIM_SEEDS`, `OUTPOST_SIM_FIRST_SEED`,
/// `OUTPOST_SIM_SEED`, `OUTPOST_SIM_SCHEDULE` (a schedule file a failure wrote),
/// `OUTPOST_SIM_STEPS`, `OUTPOST_SIM_DEVICES`, `OUTPOST_SIM_JOBS`, `OUTPOST_SIM_TRACE=1`.
@Suite struct SimulationTests {
    struct Options {
        var seeds: ClosedRange<UInt64>
        var steps: Int
        var devices: Int
        var jobs: Int
        var schedule: URL?
        var printTrace: Bool

        static var current: Options {
            let environment = ProcessInfo.processInfo.environment
            func number(_ name: String) -> Int? { environment[name].flatMap { Int($0) } }
            let first = UInt64(number("OUTPOST_SIM_FIRST_SEED") ?? 1)
            var seeds = first...(first + UInt64(max(1, number("OUTPOST_SIM_SEEDS") ?? 16)) - 1)
            if let one = number("OUTPOST_SIM_SEED") { seeds = UInt64(one)...UInt64(one) }
            return Options(
                seeds: seeds, steps: number("OUTPOST_SIM_STEPS") ?? 80, devices: number("OUTPOST_SIM_DEVICES") ?? 3,
                jobs: max(1, number("OUTPOST_SIM_JOBS") ?? 1), schedule: environment["OUTPOST_SIM_SCHEDULE"].map { URL(fileURLWithPath: $0) },
                printTrace: environment["OUTPOST_SIM_TRACE"] == "1"
            )
        }

        /// The command that runs `seed` again, exactly.
        func replayCommand(seed: UInt64) -> String {
            var command = "make sim SEED=\(seed)"
            if steps != 80 { command += " STEPS=\(steps)" }
            if devices != 3 { command += " DEVICES=\(devices)" }
            return command
        }
    }

    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Seeds that once found a bug (docs/testing.md says which): run whole, as generated.
    static let regressionSeeds: [UInt64] = [1, 3, 4, 8, 9, 11, 12, 14, 17, 21, 46, 65, 86, 171, 667, 1063, 1104, 1414]

    /// The shortest schedules shrinking found for those bugs, kept as they were written
    /// (`Regressions/seed-N-what-it-found.json`), so they hold whatever the generator becomes.
    static let regressionSchedules: [String] = {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Regressions")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.filter { $0.hasSuffix(".json") }.sorted()
    }()

    @Test("the seeded schedules keep every invariant")
    func seededSchedules() async throws {
        let options = Options.current
        if let file = options.schedule {
            let schedule = try JSONDecoder().decode(SimSchedule.self, from: Data(contentsOf: file))
            let outcome = await Simulation.run(schedule)
            report(schedule, outcome, options: options)
            return
        }
        let started = Date()
        var clean = 0
        var totals = SimCounts()
        try await withThrowingTaskGroup(of: (SimSchedule, SimOutcome).self) { group in
            var next = options.seeds.lowerBound
            func launch() {
                guard next <= options.seeds.upperBound else { return }
                let schedule = SimSchedule.generate(seed: next, devices: options.devices, steps: options.steps)
                next += 1
                group.addTask { (schedule, await Simulation.run(schedule)) }
            }
            for _ in 0..<options.jobs { launch() }
            while let (schedule, outcome) = try await group.next() {
                if outcome.failure == nil {
                    clean += 1
                    totals.add(outcome.counts)
                    if options.printTrace { print(outcome.trace.joined(separator: "\n")) }
                    if clean % 100 == 0 {
                        print("sim: \(clean) of \(options.seeds.count) seeds clean, \(Int(Date().timeIntervalSince(started))) s")
                    }
                } else {
                    await reportShrunk(schedule, outcome, options: options)
                }
                launch()
            }
        }
        print(
            "sim: \(clean) of \(options.seeds.count) seeds clean in \(Int(Date().timeIntervalSince(started))) s: \(totals.writes) writes, "
                + "\(totals.syncs) syncs (\(totals.failedSyncs) failed), \(totals.conflictsResolved) conflict resolutions, "
                + "\(totals.deviceCrashes) device crashes, \(totals.serverRestarts) server restarts, \(totals.lateDeliveries) late requests, "
                + "\(totals.auditEntries) audit entries, \(totals.pokesDelivered) pokes delivered (\(totals.pokesLost) lost), "
                + "\(totals.automaticSyncs) automatic syncs (\(totals.automaticSyncsPaused) paused by preferences, "
                + "\(totals.automaticSyncsHeldForPower) held by low-power mode), \(totals.windows) background windows "
                + "(\(totals.windowsStopped) stopped for their deadline, \(totals.killedAtWindowEnd) killed at their end), "
                + "\(totals.lowPowerToggles) low-power toggles, "
                + "\(totals.housekeepingRuns) server housekeeping runs, \(totals.cursorExpiries) cursors expired, "
                + "\(totals.revocations) revocations, \(totals.erasures) erasures, \(totals.wipes) devices wiped, "
                + "\(totals.subscriptionsEnded) subscriptions ended, \(totals.subscriberRowsLeft) team rows left the device without the team scope"
        )
    }

    @Test("a seed that once found a bug keeps every invariant", arguments: regressionSeeds)
    func regressionSeed(_ seed: UInt64) async {
        let schedule = SimSchedule.generate(seed: seed)
        let outcome = await Simulation.run(schedule)
        report(schedule, outcome, options: Options.current)
    }

    @Test("a shrunk schedule that once failed keeps every invariant", arguments: regressionSchedules)
    func regressionSchedule(_ name: String) async throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Regressions/\(name)")
        let schedule = try JSONDecoder().decode(SimSchedule.self, from: Data(contentsOf: file))
        let outcome = await Simulation.run(schedule)
        report(schedule, outcome, options: Options.current)
    }

    @Test("the regression schedules are kept")
    func regressionSchedulesAreThere() {
        #expect(Self.regressionSchedules.count >= 6)
    }

    @Test("the same schedule gives the same run, exchange for exchange")
    func runsAreReproducible() async {
        let schedule = SimSchedule.generate(seed: 42, devices: 3, steps: 40)
        let first = await Simulation.run(schedule)
        let second = await Simulation.run(schedule)
        #expect(first.failure == nil, "\(first.failure.map { "\($0)" } ?? "")")
        #expect(first.trace == second.trace)
        #expect(first.counts == second.counts)
        #expect(first.trace.count > 40)
    }

    // MARK: The invariants notice a bug

    @Test("a pending write deleted behind the store's back is reported, and shrunk to the write alone")
    func droppedPendingWriteIsCaught() async {
        var schedule = SimSchedule.generate(seed: 5, devices: 3, steps: 12)
        schedule.steps = schedule.steps.filter { if case .write = $0 { false } else { true } }
        schedule.steps.append(.write(device: 0, salt: Self.salt { $0.below(14) < 2 }))  // a create
        let outcome = await Simulation.run(schedule, sabotage: .dropPendingWrite)
        #expect(outcome.failure?.invariant == "pending-kept", "\(outcome.failure.map { "\($0)" } ?? "no failure")")
        let shrunk = await Shrinker.shrink(schedule, failing: outcome, sabotage: .dropPendingWrite, budget: 60)
        #expect(shrunk.schedule.steps.count == 1, "\(shrunk.schedule.listing)")
    }

    @Test("a row the server forgets without a tombstone is reported as divergence")
    func forgottenServerRowIsCaught() async {
        let publishUnit = Self.salt { random in
            _ = random.below(4)
            return random.below(5) < 2
        }
        let schedule = SimSchedule(
            seed: 9, devices: 2, steps: [.publishContent(salt: publishUnit), .sync(device: 1, faults: false, salt: 0)]
        )
        let outcome = await Simulation.run(schedule, sabotage: .forgetServerRow)
        #expect(outcome.failure?.invariant == "converged", "\(outcome.failure.map { "\($0)" } ?? "no failure")")
        let clean = await Simulation.run(schedule)
        #expect(clean.failure == nil, "\(clean.failure.map { "\($0)" } ?? "")")
    }

    @Test("an incident gone from a device that syncs no team scope while its subscription selects it is reported")
    func droppedSubscribedRowIsCaught() async {
        // Device 0 creates an incident (the workload's kind 5) and pushes it; device 1, which
        // syncs no team scope, subscribes to an incident the server holds (not to its
        // assignments) and pulls it.
        let create = Self.salt { $0.below(14) == 5 }
        let subscribe = Self.salt { !$0.chance(25) && $0.chance(80) }
        let schedule = SimSchedule(
            seed: 9, devices: 2,
            steps: [
                .write(device: 0, salt: create), .sync(device: 0, faults: false, salt: 0), .subscription(device: 1, salt: subscribe),
                .sync(device: 1, faults: false, salt: 0),
            ],
            subscriber: 1
        )
        let outcome = await Simulation.run(schedule, sabotage: .dropSubscribedRow)
        #expect(outcome.failure?.invariant == "subscriptions-exact", "\(outcome.failure.map { "\($0)" } ?? "no failure")")
        let clean = await Simulation.run(schedule)
        #expect(clean.failure == nil, "\(clean.failure.map { "\($0)" } ?? "")")
        #expect(clean.trace.contains { $0.contains("device 1 subscribes to incident inc-1") }, "\(clean.trace.joined(separator: "\n"))")
    }

    /// The first salt whose generator satisfies `condition` (steps draw their choices from it).
    static func salt(_ condition: (inout SimRandom) -> Bool) -> UInt64 {
        var salt: UInt64 = 1
        while true {
            var random = SimRandom(seed: salt)
            if condition(&random) { return salt }
            salt += 1
        }
    }

    // MARK: Reporting

    private func report(_ schedule: SimSchedule, _ outcome: SimOutcome, options: Options) {
        if options.printTrace || outcome.failure != nil { print(outcome.trace.joined(separator: "\n")) }
        if let failure = outcome.failure {
            Issue.record("simulation seed \(schedule.seed) failed: \(failure)\nschedule:\n\(schedule.listing)")
        } else {
            print("sim: seed \(schedule.seed) clean: \(outcome.counts)")
        }
    }

    /// Shrinks a failing schedule, writes it to `.build/sim-failures/`, and reports the replay
    /// command, the shortest schedule found and the end of its trace.
    private func reportShrunk(_ schedule: SimSchedule, _ outcome: SimOutcome, options: Options) async {
        let failure = outcome.failure!
        let shrunk = await Shrinker.shrink(schedule, failing: outcome)
        let folder = Self.repositoryRoot.appendingPathComponent(".build/sim-failures", isDirectory: true)
        let file = folder.appendingPathComponent("seed-\(schedule.seed).json")
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try? encoder.encode(shrunk.schedule).write(to: file)
        let trace = shrunk.outcome.trace.suffix(60).joined(separator: "\n")
        Issue.record(
            """
            simulation seed \(schedule.seed) failed: \(failure)
            replay: \(options.replayCommand(seed: schedule.seed))
            shortest failing schedule (\(shrunk.schedule.steps.count) of \(schedule.steps.count) steps, \(shrunk.runs) runs): \(shrunk.outcome.failure.map { "\($0)" } ?? "")
            \(shrunk.schedule.listing)
            replay it: make sim SCHEDULE=\(file.path)
            its trace (last 60 lines):
            \(trace)
            """
        )
    }
}

extension SimCounts {
    mutating func add(_ other: SimCounts) {
        writes += other.writes
        syncs += other.syncs
        failedSyncs += other.failedSyncs
        conflictsResolved += other.conflictsResolved
        deviceCrashes += other.deviceCrashes
        serverRestarts += other.serverRestarts
        lateDeliveries += other.lateDeliveries
        auditEntries += other.auditEntries
        pokesDelivered += other.pokesDelivered
        pokesLost += other.pokesLost
        automaticSyncs += other.automaticSyncs
        automaticSyncsPaused += other.automaticSyncsPaused
        windows += other.windows
        windowsStopped += other.windowsStopped
        killedAtWindowEnd += other.killedAtWindowEnd
        lowPowerToggles += other.lowPowerToggles
        automaticSyncsHeldForPower += other.automaticSyncsHeldForPower
        housekeepingRuns += other.housekeepingRuns
        cursorExpiries += other.cursorExpiries
        revocations += other.revocations
        erasures += other.erasures
        wipes += other.wipes
        subscriptionsEnded += other.subscriptionsEnded
        subscriberRowsLeft += other.subscriberRowsLeft
    }
}
