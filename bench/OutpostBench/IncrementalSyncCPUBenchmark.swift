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
/// (``InitialSyncSeed``) and the real `sync-server serve` runs on it. A device syncs it whole
/// once (`outpost-bench initial-sync-device`, its own process, as in `initial-sync`; not
/// measured). Then, per round, the server is stopped, ``changedRows`` more rows of the learner's
/// scope are written (the next attempts, answers and completion records, each with the scope's
/// next `_seq`, as a push from the learner's other device would leave them), the server is started
/// again, and the same device process syncs into the same store: its CPU time (user + system,
/// every thread, `getrusage`) during `syncNow()` is the figure: push (nothing queued), the
/// urgent-changes request, the pull of the changed rows over loopback HTTP, the store's apply,
/// the bookkeeping.
///
/// The baseline in the same round: the rows the sync added, exactly as the device stored them,
/// upserted with raw GRDB into a copy of the device's database taken before the sync (the same
/// table state; one cached statement per table, one transaction, as the device commits a page),
/// its CPU time taken the same way in this process.
enum IncrementalSyncCPUBenchmark {
    static let baseRows = 10_000
    static let changedRows = 1_000
    static let rounds = 7
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
        var syncCPU: Double
        var syncSeconds: Double
        var pulled: Int
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

        let data = try workspace.folder("server")
        var composition = try InitialSyncSeed.seed(baseRows, into: try SQLiteStorage(directory: data, contracts: ContractRegistry.self), seed: seed)
        let signer = try TokenKey.signer(secretFile: nil, dataDirectory: data, environment: [:])
        let token = signer.sign(InitialSyncSeed.learner)

        func startServer(_ name: String) throws -> (ChildProcess, URL) {
            let server = try ChildProcess(
                executables.server,
                [
                    "serve", "--data", data.path, "--port", "0", "--secret-file", data.appendingPathComponent(TokenKey.fileName).path, "--rate", "0",
                    "--housekeeping-interval", "0",
                ],
                logs: workspace.url, name: name, environment: environment
            )
            let line = try server.waitForLine(containing: "listening on http://", timeout: 60)
            guard let address = line.range(of: "http://127.0.0.1:"), let port = Int(line[address.upperBound...].prefix { $0.isNumber }) else {
                server.stop()
                throw BenchmarkError("cannot read the port in sync-server's line '\(line)'")
            }
            return (server, URL(string: "http://127.0.0.1:\(port)")!)
        }

        let device = try workspace.folder("device")
        do {
            let (server, url) = try startServer("server-initial")
            defer { server.stop() }
            let report = try InitialSyncBenchmark.runDevice(
                executables.bench, ["--server", url.absoluteString, "--token", token], folder: device, logs: workspace.url, name: "device-initial"
            ).report
            guard report.pulled == baseRows else { throw BenchmarkError("the initial sync pulled \(report.pulled) rows, not \(baseRows)") }
        }

        var measured: [Round] = []
        var problems: [String] = []
        for round in 0..<rounds {
            // The changes, written while no server runs, with the scope's next sequence numbers.
            let added = try InitialSyncSeed.seed(
                changedRows, into: try SQLiteStorage(directory: data, contracts: ContractRegistry.self), seed: seed &+ UInt64(round + 1))
            for (name, count) in added.rows { composition.rows[name, default: 0] += count }
            for (name, count) in added.tombstones { composition.tombstones[name, default: 0] += count }

            // The device's tables before the sync: their last rowid, and a copy for the baseline.
            let before = try lastRowIDs(device)
            let copy = try workspace.folder("before-\(round)")
            try copyStore(from: device, to: copy)

            let (server, url) = try startServer("server-\(round)")
            let report: InitialSyncDevice.Report
            do {
                defer { server.stop() }
                report = try InitialSyncBenchmark.runDevice(
                    executables.bench, ["--server", url.absoluteString, "--token", token], folder: device, logs: workspace.url,
                    name: "device-\(round)"
                ).report
            }
            if report.pulled != changedRows { problems.append("round \(round + 1): the sync pulled \(report.pulled) rows, not \(changedRows)") }
            let raw = try rawUpsert(from: device, after: before, into: copy)
            workspace.remove(copy)
            measured.append(
                Round(
                    syncCPU: report.syncCPUSeconds, syncSeconds: report.syncSeconds, pulled: report.pulled, rawCPU: raw.cpu, rawSeconds: raw.seconds,
                    rawRows: raw.rows))
        }
        problems += try InitialSyncBenchmark.checkDevice(
            device, expected: InitialSyncBenchmark.serverDigests(data), composition: composition, run: rounds)

        describe(measured, composition: composition, into: &result)
        var syncCPU = Samples()
        var rawCPU = Samples()
        for round in measured {
            syncCPU.append(round.syncCPU)
            rawCPU.append(round.rawCPU)
        }
        let ratio = syncCPU.median / rawCPU.median
        result.check(
            "complete", problems.isEmpty,
            problems.isEmpty
                ? "every round pulled the \(Format.grouped(changedRows)) changed rows; at the end the device held exactly the server's live rows of each table and the scope's cursor"
                : problems.prefix(5).joined(separator: "; "))
        result.check(
            "device CPU within \(Format.fixed(barRatio, 1))× the raw upsert", ratio <= barRatio,
            "\(Format.ratio(ratio)): \(Format.duration(syncCPU.median)) of CPU per incremental sync against \(Format.duration(rawCPU.median)) for the raw upsert (medians of \(rounds) rounds)"
        )
        return result
    }

    static func describe(_ measured: [Round], composition: InitialSyncSeed.Composition, into result: inout BenchmarkResult) {
        #if DEBUG
            result.fact("build", "DEBUG — these figures are not representative; run `make bench` (release)")
        #endif
        result.fact(
            "scope",
            "a learner's `user` scope of \(Format.grouped(baseRows)) rows synced once, then \(rounds) rounds of \(Format.grouped(changedRows)) changed rows each; at the end \(composition.description)"
        )
        result.fact(
            "device",
            "outpost-bench \(InitialSyncDevice.command) (its own process, reopening the same store each round): SyncEngine, URLSessionTransport, pages of \(Format.grouped(InitialSyncBenchmark.pageSize)); CPU = getrusage user + system of the process during syncNow()"
        )
        result.fact(
            "baseline",
            "the rows the sync added, as the device stored them, upserted with raw GRDB (one transaction, a cached statement per table) into a copy of the device's database from before the sync; CPU = getrusage of this process"
        )
        var syncCPU = Samples()
        var syncWall = Samples()
        var rawCPU = Samples()
        var rawWall = Samples()
        var ratios = Samples()
        for round in measured {
            syncCPU.append(round.syncCPU)
            syncWall.append(round.syncSeconds)
            rawCPU.append(round.rawCPU)
            rawWall.append(round.rawSeconds)
            ratios.append(round.syncCPU / max(round.rawCPU, 1e-6))
        }
        let rawRows = measured.map(\.rawRows).max() ?? 0
        result.rows = [
            .init(
                "device CPU per incremental sync of \(Format.grouped(changedRows)) rows", median: Format.duration(syncCPU.median),
                min: Format.duration(syncCPU.min), note: "wall \(Format.duration(syncWall.median)); pulled \(measured.map(\.pulled).max() ?? 0) rows"),
            .init(
                "  baseline: raw SQLite upsert CPU, same rows", median: Format.duration(rawCPU.median), min: Format.duration(rawCPU.min),
                note: "wall \(Format.duration(rawWall.median)); \(Format.grouped(rawRows)) rows stored (tombstones of rows never held are not)"),
            .init(
                "  ratio, round by round", median: Format.ratio(ratios.median), min: Format.ratio(ratios.min),
                note: "max \(Format.ratio(ratios.max)); the bar takes the ratio of the medians"),
        ]
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

    /// The device's database files (and its keys) copied into `folder`, for a store in the same state.
    static func copyStore(from device: URL, to folder: URL) throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: device.path)
        for name in files {
            try FileManager.default.copyItem(at: device.appendingPathComponent(name), to: folder.appendingPathComponent(name))
        }
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
