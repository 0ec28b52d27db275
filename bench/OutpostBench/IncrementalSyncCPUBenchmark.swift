import ContractRuntime
import Contracts
import Foundation
import GRDB
import SyncClient
import SyncServer

/// The quality bar (issue 47, part 5, docs/PERFORMANCE.md): "the device's CPU time per
/// incremental sync of 1 000 changed rows within 1.5× the raw SQLite upsert of the same rows,
/// same run".
///
/// A server data folder is seeded with a learner's `user` scope of ``baseRows`` rows
/// (``InitialSyncSeed``) and the real `sync-server serve` runs on it. Two devices sync it whole
/// once (not measured): the warm device (`outpost-bench incremental-sync-device`, one process
/// whose store, engine and transport stay alive through the whole run, as in a running app) and
/// the cold device (`outpost-bench initial-sync-device`, a new process for every sync, as in
/// `initial-sync`). Then, per round, the server is stopped, ``changedRows`` more rows of the
/// learner's scope are written (the next attempts, answers and completion records, each with the
/// scope's next `_seq`, as a push from the learner's other device would leave them), the server is
/// started again on the same port, and each device syncs (which goes first alternates): its CPU
/// time (user + system, every thread, `getrusage`) during `syncNow()` is the figure: push
/// (nothing queued), the urgent-changes request, the pull of the changed rows over loopback HTTP,
/// the store's apply, the bookkeeping. The bar is judged on the warm device; the cold device's
/// figure, which holds a new process's first uses (the runtime's conformance lookups, the
/// dynamic loader, URLSession's first request, the store's first reads), is information.
///
/// The baseline in the same round: the rows the warm device's sync added, exactly as it stored
/// them, upserted with raw GRDB into a copy of its database taken before the sync (the same
/// table state; one cached statement per table, one transaction, as the device commits a page),
/// its CPU time taken the same way in this process.
enum IncrementalSyncCPUBenchmark {
    static let baseRows = 10_000
    static let changedRows = 1_000
    static let rounds = 10
    /// The most the device's CPU may take, as a multiple of the raw upsert's.
    static let barRatio = 1.5
    static let seed: UInt64 = 0x696e_6372_2d73_796e

    static let benchmark = Benchmark(
        name: "incremental-sync-cpu",
        summary: "a device's CPU time for an incremental sync of \(Format.grouped(changedRows)) changed rows from sync-server over loopback HTTP "
            + "(bar: within \(Format.fixed(barRatio, 1))× the CPU of a raw SQLite upsert of the same rows, same run)",
        run: { try run() }
    )

    struct Round {
        /// The warm device: one process alive across the rounds.
        var warm: IncrementalSyncDevice.Report
        /// The cold device: a new process for this round's sync.
        var coldCPU: Double
        var coldSeconds: Double
        var coldPulled: Int
        var rawCPU: Double
        var rawSeconds: Double
        var rawRows: Int
    }

    static func run() throws -> BenchmarkResult {
        var result = BenchmarkResult()
        let executables = try InitialSyncBenchmark.locateExecutables()
        let workspace = try TemporaryFolder("incremental-sync-cpu")
        defer { workspace.remove() }
        let environment = ["LOG_LEVEL": "warning"]
        let rounds = ProcessInfo.processInfo.environment["OUTPOST_BENCH_INCREMENTAL_ROUNDS"].flatMap(Int.init) ?? Self.rounds

        let data = try workspace.folder("server")
        var composition = try InitialSyncSeed.seed(baseRows, into: try SQLiteStorage(directory: data, contracts: ContractRegistry.self), seed: seed)
        let signer = try TokenKey.signer(secretFile: nil, dataDirectory: data, environment: [:])
        let token = signer.sign(InitialSyncSeed.learner)

        // The first start picks a free port; the later ones take the same, so the warm device's
        // transport reaches every round's server.
        var port = 0
        func startServer(_ name: String) throws -> ChildProcess {
            let server = try ChildProcess(
                executables.server,
                [
                    "serve", "--data", data.path, "--port", "\(port)", "--secret-file", data.appendingPathComponent(TokenKey.fileName).path, "--rate",
                    "0",
                    "--housekeeping-interval", "0",
                ],
                logs: workspace.url, name: name, environment: environment
            )
            let line = try server.waitForLine(containing: "listening on http://", timeout: 60)
            guard let address = line.range(of: "http://127.0.0.1:"), let listening = Int(line[address.upperBound...].prefix { $0.isNumber }) else {
                server.stop()
                throw BenchmarkError("cannot read the port in sync-server's line '\(line)'")
            }
            port = listening
            // One pull before the devices' (a row of the scope), so neither meets a server that
            // has not answered anything yet: a running app talks to a server that has.
            let warmUp = try LoopbackHTTP.get(
                port: port, path: "/sync/v1/pull?scope=user&limit=1", headers: [("Authorization", "Bearer \(token)"), ("Accept-Encoding", "gzip")])
            guard warmUp.status == 200 else {
                server.stop()
                throw BenchmarkError("the server's first pull answered \(warmUp.status)")
            }
            return server
        }
        var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

        // OUTPOST_BENCH_INCREMENTAL_CHANGES=push: the server runs through the whole run and the
        // changes are pushed by the learner's other device (answers only), instead of written
        // into the stopped server's folder.
        let pushing = ProcessInfo.processInfo.environment["OUTPOST_BENCH_INCREMENTAL_CHANGES"] == "push"
        let http = Self.deviceHTTP
        let cold = try workspace.folder("device-cold")
        let warmFolder = try workspace.folder("device-warm")
        let warm: ChildProcess
        var running: ChildProcess?
        defer { running?.stop() }
        do {
            let server = try startServer("server-initial")
            if pushing { running = server }
            defer { if !pushing { server.stop() } }
            let report = try InitialSyncBenchmark.runDevice(
                executables.bench, ["--server", url.absoluteString, "--token", token], folder: cold, logs: workspace.url, name: "device-initial"
            ).report
            guard report.pulled == baseRows else { throw BenchmarkError("the initial sync pulled \(report.pulled) rows, not \(baseRows)") }
            warm = try ChildProcess(
                executables.bench,
                [
                    IncrementalSyncDevice.command, "--server", url.absoluteString, "--token", token, "--folder", warmFolder.path, "--page-size",
                    "\(InitialSyncBenchmark.pageSize)", "--http", http.rawValue,
                ],
                logs: workspace.url, name: "device-warm", input: true
            )
            let first = try warmSync(warm, round: 1)
            guard first.pulled == baseRows else {
                throw BenchmarkError("the warm device's initial sync pulled \(first.pulled) rows, not \(baseRows)")
            }
        }
        defer { warm.stop() }
        if let pause = ProcessInfo.processInfo.environment["OUTPOST_BENCH_PAUSE_BEFORE_ROUNDS"].flatMap(Double.init) {
            // Time to attach a profiler to the warm device (`perf record -g -p PID`).
            Console.error("incremental-sync-cpu: the warm device is pid \(warm.pid); the rounds start in \(pause) s")
            usleep(useconds_t(pause * 1e6))
        }

        let pusher = pushing ? try Pusher(folder: try workspace.folder("device-pusher"), server: url, token: signer.sign(Pusher.identity)) : nil
        var measured: [Round] = []
        var problems: [String] = []
        for round in 0..<rounds {
            if let pusher {
                // The changes, pushed by the learner's other device.
                try pusher.push(round: round)
                composition.rows[ContractRegistry.assessmentResponse.name, default: 0] += changedRows
            } else {
                // The changes, written while no server runs, with the scope's next sequence numbers.
                let added = try InitialSyncSeed.seed(
                    changedRows, into: try SQLiteStorage(directory: data, contracts: ContractRegistry.self), seed: seed &+ UInt64(round + 1))
                for (name, count) in added.rows { composition.rows[name, default: 0] += count }
                for (name, count) in added.tombstones { composition.tombstones[name, default: 0] += count }
            }

            // The warm device's tables before the sync: their last rowid, and a copy for the baseline.
            let before = try lastRowIDs(warmFolder)
            let copy = try workspace.folder("before-\(round)")
            try backupStore(from: warmFolder, to: copy)

            let server = pushing ? nil : try startServer("server-\(round)")
            var warmReport: IncrementalSyncDevice.Report?
            var coldReport: InitialSyncDevice.Report?
            do {
                defer { server?.stop() }
                // Which device syncs first alternates: the first request of a round meets a server just started.
                for device in round % 2 == 0 ? ["warm", "cold"] : ["cold", "warm"] {
                    if device == "warm" {
                        warmReport = try warmSync(warm, round: round + 2)
                    } else {
                        coldReport =
                            try InitialSyncBenchmark.runDevice(
                                executables.bench, ["--server", url.absoluteString, "--token", token], folder: cold, logs: workspace.url,
                                name: "device-cold-\(round)"
                            ).report
                    }
                }
            }
            guard let warmReport, let coldReport else { throw BenchmarkError("round \(round + 1): a device did not report") }
            if warmReport.pulled != changedRows {
                problems.append("round \(round + 1): the warm device pulled \(warmReport.pulled) rows, not \(changedRows)")
            }
            if coldReport.pulled != changedRows {
                problems.append("round \(round + 1): the cold device pulled \(coldReport.pulled) rows, not \(changedRows)")
            }
            let raw = try rawUpsert(from: warmFolder, after: before, into: copy)
            workspace.remove(copy)
            measured.append(
                Round(
                    warm: warmReport, coldCPU: coldReport.syncCPUSeconds, coldSeconds: coldReport.syncSeconds, coldPulled: coldReport.pulled,
                    rawCPU: raw.cpu, rawSeconds: raw.seconds, rawRows: raw.rows))
        }
        try warm.send("stop")
        try warm.waitForSuccess()
        try pusher?.close()
        running?.stop()
        let expected = try InitialSyncBenchmark.serverDigests(data)
        problems += try InitialSyncBenchmark.checkDevice(warmFolder, expected: expected, composition: composition, run: rounds).map {
            "warm device: \($0)"
        }
        problems += try InitialSyncBenchmark.checkDevice(cold, expected: expected, composition: composition, run: rounds).map { "cold device: \($0)" }

        describe(measured, composition: composition, rounds: rounds, into: &result)
        var warmCPU = Samples()
        var coldCPU = Samples()
        var rawCPU = Samples()
        for round in measured {
            warmCPU.append(round.warm.syncCPUSeconds)
            coldCPU.append(round.coldCPU)
            rawCPU.append(round.rawCPU)
        }
        let ratio = warmCPU.median / rawCPU.median
        // The mean of what each sync cost with what it left to run (a checkpoint every few syncs),
        // against the raw upsert's mean: the median alone would leave the shared checkpoints out.
        let settledMean = measured.map(\.warm.settledCPUSeconds).reduce(0, +) / Double(max(measured.count, 1))
        let rawMean = measured.map(\.rawCPU).reduce(0, +) / Double(max(measured.count, 1))
        let meanRatio = settledMean / rawMean
        result.check(
            "complete", problems.isEmpty,
            problems.isEmpty
                ? "every round both devices pulled the \(Format.grouped(changedRows)) changed rows; at the end each held exactly the server's live rows of each table and the scope's cursor"
                : problems.prefix(5).joined(separator: "; "))
        result.check(
            "warm device CPU within \(Format.fixed(barRatio, 1))× the raw upsert", ratio <= barRatio && meanRatio <= barRatio,
            "\(Format.ratio(ratio)): \(Format.duration(warmCPU.median)) of CPU per incremental sync against \(Format.duration(rawCPU.median)) for the raw upsert (medians of \(rounds) rounds); "
                + "means with what each sync left to run (the shared checkpoints): \(Format.ratio(meanRatio)), \(Format.duration(settledMean)) against \(Format.duration(rawMean)); "
                + "a new device process per sync (information): \(Format.ratio(coldCPU.median / rawCPU.median)), \(Format.duration(coldCPU.median))"
        )
        return result
    }

    /// Asks the warm device for one sync and waits for its report (`round` counts its syncs from 1).
    static func warmSync(_ device: ChildProcess, round: Int) throws -> IncrementalSyncDevice.Report {
        try device.send("sync")
        let line = try device.waitForLine(containing: "\"round\":\(round),", timeout: 300)
        guard let report = try? JSONDecoder().decode(IncrementalSyncDevice.Report.self, from: Data(line.utf8)) else {
            throw BenchmarkError("the warm device printed no report: \(line.prefix(500))")
        }
        return report
    }

    static func describe(_ measured: [Round], composition: InitialSyncSeed.Composition, rounds: Int, into result: inout BenchmarkResult) {
        #if DEBUG
            result.fact("build", "DEBUG — these figures are not representative; run `make bench` (release)")
        #endif
        result.fact(
            "scope",
            "a learner's `user` scope of \(Format.grouped(baseRows)) rows synced once, then \(rounds) rounds of \(Format.grouped(changedRows)) changed rows each; at the end \(composition.description)"
        )
        result.fact(
            "warm device (the bar)",
            "outpost-bench \(IncrementalSyncDevice.command): one process whose store, SyncEngine and URLSessionTransport (pages of \(Format.grouped(InitialSyncBenchmark.pageSize))) stay alive across the rounds, as in a running app; \(Self.deviceHTTP.description); it did the initial sync; the server restarts on the same port each round; CPU = getrusage user + system of the process during syncNow()"
        )
        result.fact(
            "cold device (information)",
            "outpost-bench \(InitialSyncDevice.command): a new process each round, reopening its own store (its first request, first reads and the runtime's first uses are in its figure)"
        )
        result.fact(
            "baseline",
            "the rows the warm device's sync added, as it stored them, upserted with raw GRDB (one transaction, a cached statement per table) into a copy of its database from before the sync; CPU = getrusage of this process"
        )
        var warmCPU = Samples()
        var warmWall = Samples()
        var settled = Samples()
        var coldCPU = Samples()
        var coldWall = Samples()
        var rawCPU = Samples()
        var rawWall = Samples()
        var ratios = Samples()
        var coldRatios = Samples()
        for round in measured {
            warmCPU.append(round.warm.syncCPUSeconds)
            warmWall.append(round.warm.syncSeconds)
            settled.append(round.warm.settledCPUSeconds)
            coldCPU.append(round.coldCPU)
            coldWall.append(round.coldSeconds)
            rawCPU.append(round.rawCPU)
            rawWall.append(round.rawSeconds)
            ratios.append(round.warm.syncCPUSeconds / max(round.rawCPU, 1e-6))
            coldRatios.append(round.coldCPU / max(round.rawCPU, 1e-6))
        }
        let rawRows = measured.map(\.rawRows).max() ?? 0
        result.fact(
            "rounds (warm CPU, settled, wall / cold CPU / raw CPU)",
            measured.map {
                "\(Format.duration($0.warm.syncCPUSeconds)), \(Format.duration($0.warm.settledCPUSeconds)), \(Format.duration($0.warm.syncSeconds)) / \(Format.duration($0.coldCPU)) / \(Format.duration($0.rawCPU))"
            }.joined(separator: "; "))
        result.rows = [
            .init(
                "warm device CPU per incremental sync of \(Format.grouped(changedRows)) rows", median: Format.duration(warmCPU.median),
                min: Format.duration(warmCPU.min),
                note: "wall \(Format.duration(warmWall.median)); pulled \(measured.map(\.warm.pulled).max() ?? 0) rows"),
            .init(
                "  the same, with what it left to run \(Format.fixed(IncrementalSyncDevice.settleSeconds, 1)) s after",
                median: Format.duration(settled.median),
                min: Format.duration(settled.min),
                note:
                    "mean \(Format.duration(settled.values.reduce(0, +) / Double(max(settled.count, 1)))), max \(Format.duration(settled.max)): the log's checkpoint every few syncs; the baseline does none"
            ),
            .init(
                "cold device (new process) CPU per incremental sync", median: Format.duration(coldCPU.median), min: Format.duration(coldCPU.min),
                note: "wall \(Format.duration(coldWall.median)); pulled \(measured.map(\.coldPulled).max() ?? 0) rows"),
            .init(
                "  baseline: raw SQLite upsert CPU, same rows", median: Format.duration(rawCPU.median), min: Format.duration(rawCPU.min),
                note: "wall \(Format.duration(rawWall.median)); \(Format.grouped(rawRows)) rows stored (tombstones of rows never held are not)"),
            .init(
                "  warm ratio, round by round", median: Format.ratio(ratios.median), min: Format.ratio(ratios.min),
                note: "max \(Format.ratio(ratios.max)); the bar takes the ratio of the medians"),
            .init(
                "  cold ratio, round by round", median: Format.ratio(coldRatios.median), min: Format.ratio(coldRatios.min),
                note: "max \(Format.ratio(coldRatios.max)); information"),
        ]
    }

    /// The learner's other device, which pushes the changes when the run asks for pushed ones:
    /// a round's answers are ``changedRows`` `AssessmentResponse` rows of 20 answers per attempt.
    final class Pusher: @unchecked Sendable {
        static let identity = DeviceIdentity(
            tenant: InitialSyncSeed.tenant, userID: InitialSyncSeed.learner.userID, deviceID: "tablet-2", expiresAt: 4_102_444_800)
        let store: OfflineStore
        let engine: SyncEngine

        init(folder: URL, server: URL, token: String) throws {
            store = try ClientStoreBenchmarks.openStore(folder, tenantId: InitialSyncSeed.tenant)
            engine = SyncEngine(
                store: store, transport: URLSessionTransport(baseURL: server, timeout: 120) { token },
                configuration: SyncEngineConfiguration(scopes: [], retriesAutomatically: false)
            )
        }

        func push(round: Int) throws {
            // Not the seed's own streams: the answers' ids must be new ones.
            var random = SeededGenerator(seed: ~IncrementalSyncCPUBenchmark.seed &+ UInt64(round))
            let start = Date(timeIntervalSince1970: 1_790_000_000 + Double(round) * 86_400)
            for index in 0..<IncrementalSyncCPUBenchmark.changedRows {
                let attempt = "attempt-pushed-\(round)-\(index / 20)"
                try store.create(
                    AssessmentResponse(
                        id: UUID(uuidString: PullCompressionBenchmark.uuid(&random))!, assessmentId: "assessment-pushed", attemptId: attempt,
                        questionId: "q\(index % 20 + 1)", answer: .object(["choice": .int(Int64(index % 4))]), timeSpentMs: Int64(2_000 + index),
                        answeredAt: Timestamp(start.addingTimeInterval(Double(index))), updatedAt: Timestamp(start.addingTimeInterval(Double(index))))
                )
            }
            let engine = engine
            let result = try runBlocking { await engine.syncNow() }
            guard case .succeeded(let pushed, _) = result, pushed == IncrementalSyncCPUBenchmark.changedRows else {
                throw BenchmarkError("round \(round + 1): the other device's push answered \(result)")
            }
        }

        func close() throws {
            let engine = engine
            try runBlocking { await engine.stop() }
            try store.close()
        }
    }

    /// The last rowid of each contract table of the device's store.
    static func lastRowIDs(_ device: URL) throws -> [String: Int64] {
        let queue = try DatabaseQueue(path: device.appendingPathComponent("store.sqlite").path)
        defer { try? queue.close() }
        return try queue.read { db in
            var last: [String: Int64] = [:]
            for entity in InitialSyncBenchmark.contracts {
                last[entity.table] = try Int64.fetchOne(db, sql: "SELECT coalesce(max(rowid), 0) FROM \(entity.table.quotedDatabaseIdentifier)") ?? 0
            }
            return last
        }
    }

    /// The device's database copied into `folder` with SQLite's backup (the device's process
    /// may hold it open), for a store in the same state.
    static func backupStore(from device: URL, to folder: URL) throws {
        let source = try DatabaseQueue(path: device.appendingPathComponent("store.sqlite").path)
        defer { try? source.close() }
        let target = try DatabaseQueue(path: folder.appendingPathComponent("store.sqlite").path)
        defer { try? target.close() }
        try source.backup(to: target)
    }

    /// Upserts the rows the sync added to `device` (rowids after `before`) into the copy in
    /// `folder` with raw GRDB, one transaction, as the device commits a page (`synchronous =
    /// NORMAL`); the CPU and wall seconds of the write (reading the rows is not counted).
    static func rawUpsert(from device: URL, after before: [String: Int64], into folder: URL) throws -> (cpu: Double, seconds: Double, rows: Int) {
        let source = try DatabaseQueue(path: device.appendingPathComponent("store.sqlite").path)
        var tables: [(sql: String, values: [[DatabaseValue]])] = []
        try source.read { db in
            for entity in InitialSyncBenchmark.contracts {
                let rows = try Row.fetchAll(
                    db, sql: "SELECT * FROM \(entity.table.quotedDatabaseIdentifier) WHERE rowid > ? ORDER BY rowid",
                    arguments: [before[entity.table] ?? 0])
                guard let first = rows.first else { continue }
                let columns = Array(first.columnNames)
                tables.append(
                    (
                        ClientApplyBenchmark.rawUpsertSQL(table: entity.table, columns: columns),
                        rows.map { row in columns.map { row[$0] as DatabaseValue } }
                    )
                )
            }
        }
        try source.close()
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            try db.execute(sql: "PRAGMA wal_autocheckpoint = \(OfflineStore.refetchableCheckpointPages)")
        }
        let target = try DatabasePool(path: folder.appendingPathComponent("store.sqlite").path, configuration: configuration)
        defer { try? target.close() }
        // Opened and warmed before the clock starts, as the device's store is open before its sync.
        _ = try target.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master") }
        let cpu = Timing.processCPUSeconds()
        let timed = try Timing.measure {
            try target.write { db in
                for (sql, values) in tables {
                    let statement = try db.cachedStatement(sql: sql)
                    for row in values { try statement.execute(arguments: StatementArguments(row)) }
                }
            }
        }
        return (Timing.processCPUSeconds() - cpu, timed.seconds, tables.reduce(0) { $0 + $1.values.count })
    }
}

extension IncrementalSyncCPUBenchmark {
    /// How the warm device sends its requests: `OUTPOST_BENCH_DEVICE_HTTP=urlsession` for
    /// URLSession itself; otherwise the exchange a Linux device is told to use.
    static var deviceHTTP: IncrementalSyncDevice.HTTP {
        IncrementalSyncDevice.HTTP(rawValue: ProcessInfo.processInfo.environment["OUTPOST_BENCH_DEVICE_HTTP"] ?? "") ?? .defaultForPlatform
    }
}
