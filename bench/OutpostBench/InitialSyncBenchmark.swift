import ContractRuntime
import Contracts
import Foundation
import GRDB
import SyncClient
import SyncProtocol
import SyncServer

/// The quality bar (docs/PERFORMANCE.md): "initial sync of 100 000 rows over loopback HTTP, server to a fresh device,
/// within 1.2× the raw SQLite upsert of the same rows measured in the same run; peak memory flat in the row count".
///
/// For each size (10 000, 100 000 and 1 000 000 rows) a server data folder is seeded with a
/// learner's `user` scope (``InitialSyncSeed``: answers, attempts, completion records, a few
/// tombstones), and the real `sync-server serve` runs on it on a free port of 127.0.0.1. Then,
/// per run, a fresh device syncs the whole scope: `outpost-bench initial-sync-device`
/// (``InitialSyncDevice``), a child process of its own, so its peak resident memory is the
/// device's alone — an ``OfflineStore`` in an empty folder, a ``SyncEngine`` over
/// ``URLSessionTransport``, one `syncNow()` with pages of 1 000. The bar is that call's wall
/// time at 100 000 rows over the raw SQLite upsert's (below), both medians of the same run: a
/// ratio, because the absolute time moves with the machine's load (the times are kept as
/// figures). The device's peak memory (VmHWM) is compared across the sizes.
///
/// Baselines in the same run, on the same server and rows:
///
/// - **server alone**: the same pages fetched with plain HTTP GETs (gzip, a new connection
///   each, inflated, the cursor picked out) and nothing decoded or stored: what the server and
///   loopback cost;
/// - **device alone**: the same device process syncing the same pages, recorded as the server
///   sent them and served from files (``RecordedPages``: inflated and read exactly as
///   `URLSessionTransport` does): what the device costs with no server and no network. With
///   the next page asked for while one is stored, the sync approaches the larger of the two
///   instead of their sum;
/// - **raw SQLite upsert**: the rows exactly as the device stored them, upserted with raw GRDB
///   into the same tables of another fresh store (one cached statement per table, one
///   transaction per ``commitRows`` rows, committed as the device commits pulled pages): what
///   storing costs at the least.
///
/// After every run the device's database is checked: each contract table holds exactly the
/// scope's live rows (the same ids as the server, by a digest), and the scope's cursor is stored.
enum InitialSyncBenchmark {
    static let sizes = [10_000, 100_000, 1_000_000]
    static let barRows = 100_000
    /// The most the sync may take, as a multiple of the raw upsert of the same rows.
    static let barRatio = 1.2
    static let pageSize = 1_000
    /// The rows the device commits per transaction (``SyncEngineConfiguration/pullCommitRows``).
    static let commitRows = SyncEngineConfiguration(scopes: []).pullCommitRows
    static let seed: UInt64 = 0x696e_6974_2d73_796e
    /// Development runs: `OUTPOST_BENCH_INITIAL_SYNC_SIZES=10000,100000` (the checks that need
    /// a missing size fail).
    static let sizesVariable = "OUTPOST_BENCH_INITIAL_SYNC_SIZES"

    static let benchmark = Benchmark(
        name: "initial-sync",
        summary: "a fresh device syncs a learner's scope of 10 000 / 100 000 / 1 000 000 rows from sync-server over loopback HTTP "
            + "(bar: 100 000 within \(Format.fixed(barRatio, 1))× the raw SQLite upsert of the same rows, peak device memory flat in the row count)",
        run: { try run() }
    )

    /// Timed runs per size (the device syncs each time into a new, empty store).
    static func runs(_ rows: Int) -> Int { rows <= 10_000 ? 5 : rows <= 100_000 ? 3 : 1 }

    /// What one size measured.
    struct Measured {
        var rows: Int
        var composition = InitialSyncSeed.Composition()
        var seedSeconds = 0.0
        var serverBytes = 0
        var sync = Samples()
        var syncCPU = Samples()
        var serverCPU = Samples()
        var process = Samples()
        var alone = Samples()
        var aloneCPU = Samples()
        var download = Samples()
        var downloadBytes = 0
        var downloadPages = 0
        var raw = Samples()
        var peakKiB: [Int] = []
        var residentBeforeKiB: [Int] = []
        var serverPeakKiB = 0
        var problems: [String] = []

        var worstPeakKiB: Int { peakKiB.max() ?? 0 }
    }

    static func run() throws -> BenchmarkResult {
        var result = BenchmarkResult()
        let sizes = try selectedSizes()
        let executables = try locateExecutables()
        let workspace = try TemporaryFolder("initial-sync")
        defer { workspace.remove() }
        // The server logs "listening on …" at info level; nothing else is wanted in its log file.
        let environment = ["LOG_LEVEL": "warning"]

        var measured: [Measured] = []
        for rows in sizes {
            var size = Measured(rows: rows)
            let data = try workspace.folder("server-\(rows)")
            let seeded = try Timing.measure { () throws -> InitialSyncSeed.Composition in
                let storage = try SQLiteStorage(directory: data, contracts: ContractRegistry.self)
                return try InitialSyncSeed.seed(rows, into: storage, seed: seed)
            }
            size.composition = seeded.value
            size.seedSeconds = seeded.seconds
            size.serverBytes = folderBytes(data)
            let expected = try serverDigests(data)

            let signer = try TokenKey.signer(secretFile: nil, dataDirectory: data, environment: [:])
            let token = signer.sign(InitialSyncSeed.learner)
            let server = try ChildProcess(
                executables.server,
                [
                    "serve", "--data", data.path, "--port", "0", "--secret-file", data.appendingPathComponent(TokenKey.fileName).path, "--rate", "0",
                    // The seeded scope is years old: housekeeping at start would drop its old
                    // tombstones while the device pages through them (410 cursor_expired).
                    "--housekeeping-interval", "0",
                ],
                logs: workspace.url, name: "server-\(rows)", environment: environment
            )
            defer { server.stop() }
            let line = try server.waitForLine(containing: "listening on http://", timeout: 60)
            guard let address = line.range(of: "http://127.0.0.1:"), let port = Int(line[address.upperBound...].prefix { $0.isNumber }) else {
                throw BenchmarkError("cannot read the port in sync-server's line '\(line)'")
            }
            let url = URL(string: "http://127.0.0.1:\(port)")!

            // The pages as the server sends them, recorded for the device-alone baseline (untimed).
            let recorded = try workspace.folder("pages-\(rows)")
            let download = try downloadOnly(port: port, token: token, recordInto: recorded)
            (size.downloadBytes, size.downloadPages) = (download.bytes, download.pages)
            if download.rows != rows {
                size.problems.append("the plain GETs counted \(download.rows) rows, not \(rows)")
            }

            for run in 0..<runs(rows) {
                // Each measurement in turn, run after run, so load on the machine hits all alike.
                size.download.append(try Timing.measure { try downloadOnly(port: port, token: token) }.seconds)

                let alone = try workspace.folder("alone-\(rows)-\(run)")
                let aloneReport = try runDevice(
                    executables.bench, ["--pages", recorded.path], folder: alone, logs: workspace.url, name: "alone-\(rows)-\(run)"
                ).report
                size.alone.append(aloneReport.syncSeconds)
                size.aloneCPU.append(aloneReport.syncCPUSeconds)
                workspace.remove(alone)

                let folder = try workspace.folder("device-\(rows)-\(run)")
                let serverCPU = ProcessMemory.cpuSeconds(pid: server.pid) ?? 0
                let (report, processSeconds) = try runDevice(
                    executables.bench, ["--server", url.absoluteString, "--token", token], folder: folder, logs: workspace.url,
                    name: "device-\(rows)-\(run)"
                )
                size.serverCPU.append((ProcessMemory.cpuSeconds(pid: server.pid) ?? 0) - serverCPU)
                size.sync.append(report.syncSeconds)
                size.syncCPU.append(report.syncCPUSeconds)
                size.process.append(processSeconds)
                size.peakKiB.append(report.peakKiB)
                size.residentBeforeKiB.append(report.residentBeforeSyncKiB)
                if report.pulled != rows { size.problems.append("run \(run + 1): the sync reported \(report.pulled) rows pulled, not \(rows)") }
                size.problems += try checkDevice(folder, expected: expected, composition: size.composition, run: run + 1)

                // Raw SQLite upsert of what the device stored, into another fresh store.
                size.raw.append(try rawUpsert(from: folder, into: try workspace.folder("raw-\(rows)-\(run)")))
                workspace.remove(folder)
                workspace.remove(workspace.url.appendingPathComponent("raw-\(rows)-\(run)"))
            }
            size.serverPeakKiB = ProcessMemory.status("VmHWM", pid: server.pid)
            server.stop()
            workspace.remove(data)
            workspace.remove(recorded)
            measured.append(size)
        }

        describe(measured, into: &result)
        judge(measured, into: &result)
        return result
    }

    /// Runs `outpost-bench initial-sync-device` (with `source`: a server or recorded pages) into
    /// `folder`; its report and the process's wall time from launch to exit.
    static func runDevice(
        _ bench: URL, _ source: [String], folder: URL, logs: URL, name: String
    ) throws -> (report: InitialSyncDevice.Report, processSeconds: Double) {
        let device = try ChildProcess(
            bench, [InitialSyncDevice.command] + source + ["--folder", folder.path, "--page-size", "\(pageSize)"], logs: logs, name: name
        )
        let seconds = try device.waitForSuccess()
        guard let line = device.output.split(separator: "\n").last,
            let report = try? JSONDecoder().decode(InitialSyncDevice.Report.self, from: Data(line.utf8))
        else { throw BenchmarkError("the device printed no report: \(device.output.suffix(500)) \(device.errors.suffix(500))") }
        return (report, seconds)
    }

    // MARK: Baselines

    /// Every page of the scope with plain HTTP GETs, as the device asks for them (gzip), with
    /// nothing decoded: the body inflated and the cursor and `has_more` picked out of it. With
    /// `recordInto`, each gzip body is also written there for ``RecordedPages`` (not timed apart:
    /// record on a run whose time is not kept).
    static func downloadOnly(port: Int, token: String, recordInto folder: URL? = nil) throws -> (pages: Int, rows: Int, bytes: Int) {
        var cursor: String?
        var pages = 0, rows = 0, bytes = 0
        var cursors = ""
        defer {
            if let folder { try? Data(cursors.utf8).write(to: folder.appendingPathComponent(RecordedPages.cursorsFile)) }
        }
        while true {
            var path = "/sync/v1/pull?scope=user&limit=\(pageSize)"
            if let cursor { path += "&cursor=\(cursor)" }
            let response = try LoopbackHTTP.get(
                port: port, path: path, headers: [("Authorization", "Bearer \(token)"), ("Accept-Encoding", "gzip")]
            )
            guard response.status == 200 else {
                throw BenchmarkError("GET \(path) answered \(response.status): \(String(decoding: response.body.prefix(300), as: UTF8.self))")
            }
            guard response.headers["content-encoding"] == "gzip" else { throw BenchmarkError("GET \(path) did not answer gzip") }
            let body = try Gzip.decompress(response.body, limit: 1 << 30)
            if let folder {
                try response.body.write(to: folder.appendingPathComponent(RecordedPages.pageFile(pages)))
                cursors += (cursor ?? "") + "\n"
            }
            bytes += response.body.count
            pages += 1
            let page = TopLevelFields(body)
            guard let next = page.string("cursor"), let more = page.literal("has_more") else {
                throw BenchmarkError("a pull page without a cursor or has_more")
            }
            rows += page.rowCount
            cursor = next
            if more != "true" { break }
        }
        return (pages, rows, bytes)
    }

    /// Upserts the rows the device stored in `synced` into a fresh store in `folder` with raw
    /// GRDB (one cached statement per table, one transaction per ``commitRows`` rows, committed
    /// as the device commits pulled pages: `synchronous = NORMAL`, the same checkpoint interval);
    /// returns the seconds spent writing (reading the rows back is not counted).
    static func rawUpsert(from synced: URL, into folder: URL) throws -> Double {
        try ClientStoreBenchmarks.openStore(folder, tenantId: InitialSyncSeed.tenant).close()
        let source = try DatabaseQueue(path: synced.appendingPathComponent("store.sqlite").path)
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            try db.execute(sql: "PRAGMA wal_autocheckpoint = \(OfflineStore.refetchableCheckpointPages)")
        }
        let target = try DatabasePool(path: folder.appendingPathComponent("store.sqlite").path, configuration: configuration)
        defer {
            try? source.close()
            try? target.close()
        }
        var seconds = 0.0
        for entity in contracts {
            var after: Int64 = 0
            while true {
                let batch = try source.read { db in
                    try Row.fetchAll(
                        db,
                        sql: "SELECT rowid AS \"__rowid\", * FROM \(entity.table.quotedDatabaseIdentifier) WHERE rowid > ? ORDER BY rowid LIMIT ?",
                        arguments: [after, commitRows]
                    )
                }
                guard let last = batch.last else { break }
                after = last["__rowid"]
                let columns = Array(last.columnNames.dropFirst())
                let values = batch.map { row in columns.map { row[$0] as DatabaseValue } }
                let sql = ClientApplyBenchmark.rawUpsertSQL(table: entity.table, columns: columns)
                seconds += try Timing.measure {
                    try target.write { db in
                        let statement = try db.cachedStatement(sql: sql)
                        for row in values { try statement.execute(arguments: StatementArguments(row)) }
                    }
                }.seconds
            }
        }
        return seconds
    }

    // MARK: Checks

    /// The contracts of the scope the device receives.
    static let contracts = [ContractRegistry.assessmentResponse, ContractRegistry.attempt, ContractRegistry.completionRecord]

    /// Per table: live rows and a digest of their ids, in id order.
    typealias Digests = [String: (count: Int, digest: UInt64)]

    static func serverDigests(_ data: URL) throws -> Digests {
        let queue = try DatabaseQueue(path: data.appendingPathComponent("server.sqlite").path)
        defer { try? queue.close() }
        return try queue.read { db in
            var digests: Digests = [:]
            for entity in contracts {
                digests[entity.table] = try digest(
                    db,
                    sql:
                        "SELECT \"id\" FROM \(entity.table.quotedDatabaseIdentifier) WHERE \"_tenant_id\" = ? AND \"_scope_key\" = ? AND \"_deleted\" = 0 ORDER BY \"id\"",
                    arguments: [InitialSyncSeed.tenant, InitialSyncSeed.scopeKey]
                )
            }
            return digests
        }
    }

    /// FNV-1a over the ids in order, and their count.
    static func digest(_ db: Database, sql: String, arguments: StatementArguments) throws -> (count: Int, digest: UInt64) {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        var count = 0
        let ids = try String.fetchCursor(db, sql: sql, arguments: arguments)
        while let id = try ids.next() {
            for byte in id.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
            hash = (hash ^ 0x0A) &* 0x100_0000_01b3
            count += 1
        }
        return (count, hash)
    }

    /// What is wrong with the device's database after a run (nothing, when the sync was complete).
    static func checkDevice(_ folder: URL, expected: Digests, composition: InitialSyncSeed.Composition, run: Int) throws -> [String] {
        let queue = try DatabaseQueue(path: folder.appendingPathComponent("store.sqlite").path)
        defer { try? queue.close() }
        return try queue.read { db in
            var problems: [String] = []
            for entity in contracts {
                let found = try digest(db, sql: "SELECT \"id\" FROM \(entity.table.quotedDatabaseIdentifier) ORDER BY \"id\"", arguments: [])
                let wanted = expected[entity.table] ?? (0, 0)
                if found.count != wanted.count || found.digest != wanted.digest || found.count != composition.live(entity.name) {
                    problems.append(
                        "run \(run): the device holds \(found.count) \(entity.name) rows (digest \(found.digest)), the server \(wanted.count) (digest \(wanted.digest))"
                    )
                }
            }
            if try String.fetchOne(db, sql: #"SELECT "cursor" FROM "sync_state" WHERE "scope_key" = 'user'"#) == nil {
                problems.append("run \(run): no cursor stored for the scope")
            }
            return problems
        }
    }

    // MARK: Report

    static func describe(_ measured: [Measured], into result: inout BenchmarkResult) {
        #if DEBUG
            result.fact("build", "DEBUG — these figures are not representative; run `make bench` (release)")
        #endif
        for size in measured {
            result.fact(
                "\(Format.grouped(size.rows)) rows",
                "\(size.composition.description); seeded in \(Format.duration(size.seedSeconds)), server folder \(Format.bytes(size.serverBytes)); "
                    + "\(size.downloadPages) pages, \(Format.bytes(size.downloadBytes)) gzip on the wire"
            )
        }
        result.fact(
            "server",
            "sync-server serve --port 0 --rate 0 --housekeeping-interval 0 (its own process; the rate limit is off: at 1 000 000 rows a device "
                + "asks for 1 000 pages; no housekeeping: it would drop the seeded years-old tombstones during the pull)"
        )
        result.fact(
            "device",
            "outpost-bench \(InitialSyncDevice.command) (its own process): fresh OfflineStore, SyncEngine, URLSessionTransport, scope 'user', pages of \(Format.grouped(pageSize))"
        )
        result.fact(
            "runs", "\(measured.map { "\(runs($0.rows)) at \(Format.grouped($0.rows))" }.joined(separator: ", ")); each run a new, empty device")

        var rows: [BenchmarkResult.Row] = []
        for size in measured {
            let n = Double(size.rows)
            let label = Format.grouped(size.rows)
            let before = size.residentBeforeKiB.min() ?? 0
            rows.append(
                .init(
                    "\(label) rows: device syncNow()", median: Format.duration(size.sync.median), min: Format.duration(size.sync.min),
                    note:
                        "\(Format.rate(n / size.sync.median)); device CPU \(Format.duration(size.syncCPU.median)), server CPU \(Format.duration(size.serverCPU.median))"
                ))
            rows.append(
                .init(
                    "  for scale: the device process, launch to exit", median: Format.duration(size.process.median),
                    min: Format.duration(size.process.min),
                    note: "opens the store, syncs, checks nothing"
                ))
            rows.append(
                .init(
                    "  baseline: device alone (the same pages from files)", median: Format.duration(size.alone.median),
                    min: Format.duration(size.alone.min), note: "no server, no HTTP; device CPU \(Format.duration(size.aloneCPU.median))"
                ))
            rows.append(
                .init(
                    "  baseline: server alone (plain GETs, no decode/apply)", median: Format.duration(size.download.median),
                    min: Format.duration(size.download.min), note: "the same pages, gzip, one connection each"
                ))
            let serial = size.alone.median + size.download.median
            rows.append(
                .init(
                    "  overlap: sync / (device alone + server alone)", median: Format.ratio(size.sync.median / serial),
                    note: "1.00× one after the other; \(Format.ratio(max(size.alone.median, size.download.median) / serial)) if fully overlapped"
                ))
            rows.append(
                .init(
                    "  baseline: raw SQLite upsert of the same rows", median: Format.duration(size.raw.median), min: Format.duration(size.raw.min),
                    note:
                        "sync is \(Format.ratio(size.sync.median / size.raw.median)) this; 1 tx per \(Format.grouped(commitRows)) rows, committed as the device does"
                ))
            rows.append(
                .init(
                    "  device peak memory (VmHWM)", median: mebibytes(size.worstPeakKiB), min: mebibytes(size.peakKiB.min() ?? 0),
                    note: "highest of the runs; \(mebibytes(before)) resident before the sync; server peak \(mebibytes(size.serverPeakKiB))"
                ))
        }
        result.rows = rows
    }

    static func judge(_ measured: [Measured], into result: inout BenchmarkResult) {
        let problems = measured.flatMap(\.problems)
        result.check(
            "complete", problems.isEmpty,
            problems.isEmpty
                ? "after every run the device held exactly the server's live rows of each table (same ids) and the scope's cursor"
                : problems.prefix(5).joined(separator: "; ")
        )
        if let bar = measured.first(where: { $0.rows == barRows }) {
            let ratio = bar.sync.median / bar.raw.median
            result.check(
                "bar: initial sync of \(Format.grouped(barRows)) rows", ratio <= barRatio,
                "median \(Format.duration(bar.sync.median)) = \(Format.ratio(ratio)) the raw SQLite upsert's \(Format.duration(bar.raw.median)) "
                    + (ratio <= barRatio ? "<=" : ">") + " \(Format.fixed(barRatio, 2))× (device alone \(Format.duration(bar.alone.median)), "
                    + "server alone \(Format.duration(bar.download.median)))"
            )
        } else {
            result.check("bar: initial sync of \(Format.grouped(barRows)) rows", false, "not measured (\(sizesVariable) leaves it out)")
        }
        if let small = measured.first, let large = measured.last, large.rows > small.rows {
            let limit = Int(Double(small.worstPeakKiB) * flatnessFactor) + flatnessSlackKiB
            let slope = Double(large.worstPeakKiB - small.worstPeakKiB) * 1024 / Double(large.rows - small.rows)
            result.check(
                "flat memory", large.worstPeakKiB <= limit,
                "device peak \(mebibytes(large.worstPeakKiB)) at \(Format.grouped(large.rows)) rows vs \(mebibytes(small.worstPeakKiB)) at "
                    + "\(Format.grouped(small.rows)) (\(Format.ratio(Double(large.worstPeakKiB) / Double(small.worstPeakKiB)))); limit "
                    + "\(Format.fixed(flatnessFactor, 2)) × the smaller + \(mebibytes(flatnessSlackKiB)) = \(mebibytes(limit)); "
                    + "\(Format.fixed(slope, 1)) B per extra row"
            )
        } else {
            result.check("flat memory", false, "needs two sizes (\(sizesVariable) leaves one)")
        }
    }

    /// The flatness criterion: the peak at the largest size at most this factor of the peak at
    /// the smallest, plus ``flatnessSlackKiB``.
    static let flatnessFactor = 1.5
    static let flatnessSlackKiB = 8 * 1024

    static func mebibytes(_ kibibytes: Int) -> String { Format.fixed(Double(kibibytes) / 1024, 1) + " MiB" }

    // MARK: Setup

    static func selectedSizes() throws -> [Int] {
        guard let text = ProcessInfo.processInfo.environment[sizesVariable], !text.isEmpty else { return sizes }
        let parsed = text.split(separator: ",").map { Int($0.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "_", with: "")) }
        guard !parsed.isEmpty, parsed.allSatisfy({ ($0 ?? 0) > 0 }) else {
            throw BenchmarkError("\(sizesVariable) must be row counts separated by commas, like 10000,100000; not '\(text)'")
        }
        return parsed.map { $0! }.sorted()
    }

    /// `sync-server` and `outpost-bench` itself, from the same build folder.
    static func locateExecutables() throws -> (server: URL, bench: URL) {
        let bench = (Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0])).resolvingSymlinksInPath()
        let server = bench.deletingLastPathComponent().appendingPathComponent("sync-server")
        guard FileManager.default.isExecutableFile(atPath: server.path) else {
            throw BenchmarkError(
                "sync-server is not next to outpost-bench (looked for \(server.path)); "
                    + "build it in the same configuration: `swift build -c release --product sync-server`"
            )
        }
        return (server, bench)
    }

    static func folderBytes(_ folder: URL) -> Int {
        let files = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: [.fileSizeKey])
        var total = 0
        while let file = files?.nextObject() as? URL {
            total += (try? file.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0
        }
        return total
    }
}

/// The top-level members of a pull page's JSON, found by scanning the bytes once (strings
/// skipped, nesting counted) without building anything: what the download-only baseline needs
/// to follow the cursor, and the number of rows in the page.
struct TopLevelFields {
    private var values: [String: Range<Int>] = [:]
    private let bytes: [UInt8]
    /// Objects directly inside the `upserts` arrays plus strings inside `deletes` arrays.
    private(set) var rowCount = 0

    init(_ data: Data) {
        bytes = [UInt8](data)
        var index = 0
        var depth = 0
        var key: String?
        var keyStart = -1
        var valueStart = -1
        var section: String?
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                let start = index
                index += 1
                while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                    index += bytes[index] == UInt8(ascii: "\\") ? 2 : 1
                }
                if depth == 1 {
                    if key == nil {
                        keyStart = start
                    } else if valueStart == -1 {
                        values[key!] = start..<(index + 1)
                        key = nil
                    }
                } else if depth == 3, section == "deletes" {
                    rowCount += 1
                }
            case UInt8(ascii: ":") where depth == 1 && keyStart >= 0:
                key = String(decoding: bytes[(keyStart + 1)..<(index - 1)], as: UTF8.self)
                keyStart = -1
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                if depth == 1 {
                    section = key
                    valueStart = index
                }
                if depth == 3, byte == UInt8(ascii: "{"), section == "upserts" { rowCount += 1 }
                depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                if depth == 1, let name = key {
                    values[name] = valueStart..<(index + 1)
                    key = nil
                    valueStart = -1
                }
            case UInt8(ascii: ","), UInt8(ascii: " "), UInt8(ascii: "\n"):
                break
            default:
                if depth == 1, let name = key, valueStart == -1 {
                    var end = index
                    while end < bytes.count, ![UInt8(ascii: ","), UInt8(ascii: "}")].contains(bytes[end]) { end += 1 }
                    values[name] = index..<end
                    key = nil
                    index = end - 1
                }
            }
            index += 1
        }
    }

    /// A string member without its quotes (cursors need no unescaping).
    func string(_ name: String) -> String? {
        guard let range = values[name], range.count >= 2, bytes[range.lowerBound] == UInt8(ascii: "\"") else { return nil }
        return String(decoding: bytes[(range.lowerBound + 1)..<(range.upperBound - 1)], as: UTF8.self)
    }

    /// A literal member (`true`, `42`) as text.
    func literal(_ name: String) -> String? {
        values[name].map { String(decoding: bytes[$0], as: UTF8.self) }
    }
}
