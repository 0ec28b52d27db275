import ContractRuntime
import Contracts
import Foundation
import SyncProtocol
import SyncServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `outpost-bench peer`: Outpost beside Kinto (Mozilla's store-and-sync server), each through
/// its own HTTP API, on the same PostgreSQL, with the same records and the same client.
///
/// The records are `AssessmentResponse` rows of one learner (a user scope, a unique index),
/// 20 000 by default (`OUTPOST_BENCH_PEER_RECORDS`). For each server: push them in batches of
/// 500 (Outpost: `POST /sync/v1/push`; Kinto: `POST /v1/batch` of 500 record creates), then a
/// fresh client pulls them all in pages of 1 000 (Outpost: `GET /sync/v1/pull` by cursor;
/// Kinto: `GET …/records?_sort=last_modified&_limit=1000`, following `Next-Page`), 3 times;
/// then one more batch of 500 is pushed and pulled incrementally (Outpost by the full pull's
/// cursor; Kinto with `_since` its `ETag`), 3 times. Every answer is checked: each mutation
/// applied, each Kinto sub-response 201, every record pulled once. Both servers send identity
/// bodies (`Accept-Encoding: identity`) so neither pays for compression. A pull is timed from
/// its first request to the last byte of its last page: the client reads only what leads it to
/// the next page (Kinto's `Next-Page` header, Outpost's `cursor` and `has_more`, written before
/// the rows), and parses the pages with `JSONSerialization` after the clock (timed apart): the
/// bar compares the servers, not the client's JSON parser.
///
/// Kinto 26.5 runs under gunicorn with one worker process per core (4 threads each), on a
/// database of its own on the same PostgreSQL cluster (`scripts/kinto-peer.sh`, which installs
/// it into a throwaway virtual environment from PyPI). Outpost runs on SQLite (the default) and
/// on PostgreSQL. Bars: Outpost at least 5× Kinto's speed on the push and 2× on the full pull,
/// on both storages.
enum PeerBenchmark {
    static let recordsVariable = "OUTPOST_BENCH_PEER_RECORDS"
    static let batch = 500
    static let page = 1_000
    /// Full and incremental pulls of each server (3; `OUTPOST_BENCH_PEER_PULLS`).
    static let pullRuns = Int(ProcessInfo.processInfo.environment["OUTPOST_BENCH_PEER_PULLS"] ?? "").map { max(1, $0) } ?? 3
    static let serversVariable = "OUTPOST_BENCH_PEER_SERVERS"
    static let pushBar = 5.0
    static let pullBar = 2.0

    static let benchmark = Benchmark(
        name: "peer",
        summary: "Outpost (SQLite and PostgreSQL) beside Kinto on the same PostgreSQL: the same records pushed in batches, pulled "
            + "by a fresh client, then an incremental change set (bars: 5× Kinto on push, 2× on pull)",
        run: { try run() }
    )

    /// The learner whose records both servers store.
    static let policy = PostgresGrowthWorkload.policy
    static var learner: DeviceIdentity { policy.identity(0) }

    /// What one server did with the records.
    struct Figures {
        var push: Double
        /// Request to last byte of each full pull (the client reads only what leads to the next page).
        var pulls: [Double]
        /// The client's parse of one full pull's pages (`JSONSerialization`), after the clock.
        var parses: [Double]
        var incrementals: [Double]
        /// CPU seconds of the server (all its processes) and of PostgreSQL over one full pull.
        var pullServerCPU: Double
        var pullDatabaseCPU: Double
        /// The bytes of one full pull's bodies.
        var pullBytes: Int
        var pull: Double { median(pulls) }
        var incremental: Double { median(incrementals) }
    }

    static func run() throws -> BenchmarkResult {
        var result = BenchmarkResult()
        result.columns = ["measurement", "median", "min", "note"]
        let environment = ProcessInfo.processInfo.environment
        let records = Int(environment[recordsVariable] ?? "") ?? 20_000
        guard records >= batch, records % batch == 0 else {
            throw BenchmarkError("\(recordsVariable) must be a multiple of \(batch)")
        }
        #if DEBUG
            result.fact("build", "DEBUG — these figures are not representative; run `make bench` (release)")
        #endif
        guard let postgresURL = environment["OUTPOST_TEST_POSTGRES_URL"], !postgresURL.isEmpty else {
            result.fact("PostgreSQL", "missing: Kinto needs one (`scripts/with-postgres.sh -- outpost-bench peer`)")
            result.check("Kinto ran", false, "OUTPOST_TEST_POSTGRES_URL is not set; `make bench` starts a PostgreSQL")
            return result
        }
        result.fact(
            "records",
            "\(Format.grouped(records)) AssessmentResponse rows of one learner (\(recordsVariable)); pushes of \(batch), pulls in pages of \(page) "
                + "(\(pullRuns) fresh clients, median), then \(batch) more pulled incrementally (\(pullRuns) times)"
        )
        result.fact(
            "machine",
            "\(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(LoadBenchmark.loadAverage()) at the start")
        let workspace = try TemporaryFolder("peer")
        defer { workspace.remove() }
        let all = requests(count: records + batch)
        let (first, extra) = (Array(all.dropLast()), all.last!)

        // All three by default; `OUTPOST_BENCH_PEER_SERVERS=postgres` (sqlite, postgres, kinto) to
        // look at some (a profile of one server's pull); the bars need Kinto and the storage.
        let servers = Set((environment[serversVariable] ?? "kinto,sqlite,postgres").split(separator: ",").map(String.init))
        var rows: [(String, Figures)] = []
        var kintoFigures: Figures?
        if servers.contains("kinto") {
            let kintoStart = monotonicNanoseconds()
            let kinto = try KintoPeer(folder: try workspace.folder("kinto"), postgresURL: postgresURL)
            defer { kinto.stop() }
            result.fact(
                "Kinto",
                "\(KintoPeer.version) under gunicorn (\(ProcessInfo.processInfo.activeProcessorCount) workers × 4 threads), PostgreSQL storage in a "
                    + "database of its own; installed and started in \(Format.duration(Double(monotonicNanoseconds() - kintoStart) / 1e9))"
            )
            let figures = try kinto.measure(first, extra: extra, records: records)
            kintoFigures = figures
            rows.append(("Kinto", figures))
        }
        for (key, label, postgres) in [("sqlite", "Outpost on SQLite", nil), ("postgres", "Outpost on PostgreSQL", postgresURL)]
        where servers.contains(key) {
            let server = try OutpostPeer(folder: try workspace.folder(key), postgresURL: postgres)
            defer { server.stop() }
            rows.append((label, try server.measure(first, extra: extra, records: records)))
        }
        for (label, figures) in rows {
            result.rows.append(
                .init(
                    "\(label) · push \(Format.grouped(records))", median: Format.duration(figures.push), min: "",
                    note: "\(Format.grouped(Int(Double(records) / figures.push))) records/s"))
            result.rows.append(
                .init(
                    "\(label) · full pull by a fresh client", median: Format.duration(figures.pull), min: Format.duration(figures.pulls.min()!),
                    note:
                        "\(Format.bytes(figures.pullBytes)); server CPU \(Format.duration(figures.pullServerCPU)), PostgreSQL CPU "
                        + "\(Format.duration(figures.pullDatabaseCPU)) over one pull"
                ))
            result.rows.append(
                .init(
                    "\(label) · the client parses the pulled pages", median: Format.duration(median(figures.parses)),
                    min: Format.duration(figures.parses.min()!), note: "JSONSerialization, after the pull's clock"))
            result.rows.append(
                .init(
                    "\(label) · incremental pull of \(batch)", median: Format.duration(figures.incremental),
                    min: Format.duration(figures.incrementals.min()!)))
        }
        guard let kintoFigures else {
            result.check("Kinto ran", false, "\(serversVariable) leaves Kinto out: no bar can be checked")
            return result
        }
        for (label, figures) in rows where label != "Kinto" {
            let push = kintoFigures.push / figures.push
            let pull = kintoFigures.pull / figures.pull
            let incremental = kintoFigures.incremental / figures.incremental
            result.check(
                "\(label): push at least \(Format.fixed(pushBar, 0))× Kinto", push >= pushBar,
                "\(Format.fixed(push, 2))× (\(Format.duration(figures.push)) against \(Format.duration(kintoFigures.push)))")
            result.check(
                "\(label): pull at least \(Format.fixed(pullBar, 0))× Kinto", pull >= pullBar,
                "\(Format.fixed(pull, 2))× (\(Format.duration(figures.pull)) against \(Format.duration(kintoFigures.pull))); "
                    + "incremental \(Format.fixed(incremental, 2))× (\(Format.duration(figures.incremental)) against \(Format.duration(kintoFigures.incremental)))"
            )
        }
        return result
    }

    /// The pushes: `count` creates of the learner's answers, in batches.
    static func requests(count: Int) -> [PushRequest] {
        stride(from: 0, to: count, by: batch).map { start in
            let mutations = (start..<start + batch).map { number -> Mutation in
                let seq = Int64(number + 1)
                return Mutation(
                    seq: seq, clientMutationId: "cm-\(seq)", entity: policy.entity.name, op: .create, id: policy.id(3, number),
                    payload: .object(policy.row(3, number, 0)),
                    hlc: HybridLogicalClock(milliseconds: EntityWriteWorkload.start + Int64(number) * 1000, counter: 0, node: learner.deviceID)
                        .description
                )
            }
            return PushRequest(clientId: learner.deviceID, schema: [:], mutations: mutations)
        }
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }

    /// One HTTP exchange with the session every measurement uses; fails on a status not expected.
    static func exchange(_ request: URLRequest, expecting status: Int = 200, session: URLSession) throws -> (Data, HTTPURLResponse) {
        try runBlocking {
            let (data, response) = try await session.data(for: request)
            guard let http = response as? HTTPURLResponse else { throw BenchmarkError("no HTTP answer from \(request.url!)") }
            guard http.statusCode == status else {
                throw BenchmarkError(
                    "\(request.httpMethod ?? "GET") \(request.url!.path) answered \(http.statusCode): \(String(decoding: data.prefix(300), as: UTF8.self))"
                )
            }
            return (data, http)
        }
    }

    static func session() -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 600
        configuration.httpAdditionalHeaders = ["Accept-Encoding": "identity"]
        return URLSession(configuration: configuration)
    }

    /// CPU seconds so far of a process and every process of its group (gunicorn's workers).
    static func cpuSeconds(processGroup group: Int32) -> Double {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).reduce(0) { total, pid in
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = text.lastIndex(of: ")") else {
                return total
            }
            // After "pid (comm) ": state, ppid, pgrp.
            let fields = text[text.index(after: close)...].split(separator: " ")
            guard fields.count > 2, Int32(fields[2]) == group else { return total }
            return total + (ProcessMemory.cpuSeconds(pid: pid) ?? 0)
        }
    }
}

/// A server of the comparison, through its own HTTP API.
private protocol PeerServer {
    var name: String { get }
    /// The request body that stores a push's records (a push, or a batch of creates).
    func body(of request: PushRequest) throws -> Data
    /// Sends one body; fails unless every record in it was stored.
    func push(_ body: Data, session: URLSession) throws
    /// Every page after `position` (from the start when `nil`), and the position after them.
    func pull(after position: String?, session: URLSession) throws -> ([Data], String)
    /// The records of pages, parsed as a client would.
    func count(_ pages: [Data]) throws -> Int
    /// The server's CPU seconds so far.
    func serverCPUSeconds() -> Double
}

extension PeerServer {
    /// Pushes `pushes`, pulls them all with fresh clients, pushes `extra` and pulls it incrementally.
    func measure(_ pushes: [PushRequest], extra: PushRequest, records: Int) throws -> PeerBenchmark.Figures {
        let session = PeerBenchmark.session()
        let bodies = try pushes.map(body(of:))
        let start = monotonicNanoseconds()
        for body in bodies { try push(body, session: session) }
        let push = Double(monotonicNanoseconds() - start) / 1e9

        var pulls: [Double] = []
        var parses: [Double] = []
        var bytes = 0
        var position = ""
        var serverCPU = 0.0
        var databaseCPU = 0.0
        for _ in 0..<PeerBenchmark.pullRuns {
            let cpuBefore = (serverCPUSeconds(), ProcessMemory.cpuSeconds(named: "postgres"))
            let started = monotonicNanoseconds()
            let (pages, last) = try pull(after: nil, session: session)
            pulls.append(Double(monotonicNanoseconds() - started) / 1e9)
            serverCPU = serverCPUSeconds() - cpuBefore.0
            databaseCPU = ProcessMemory.cpuSeconds(named: "postgres") - cpuBefore.1
            let parseStart = monotonicNanoseconds()
            let count = try count(pages)
            parses.append(Double(monotonicNanoseconds() - parseStart) / 1e9)
            bytes = pages.reduce(0) { $0 + $1.count }
            guard count == records else { throw BenchmarkError("\(name): a fresh client pulled \(count) records, not \(records)") }
            position = last
        }
        try self.push(try body(of: extra), session: session)
        var incrementals: [Double] = []
        for _ in 0..<PeerBenchmark.pullRuns {
            let started = monotonicNanoseconds()
            let (pages, _) = try pull(after: position, session: session)
            incrementals.append(Double(monotonicNanoseconds() - started) / 1e9)
            let count = try count(pages)
            guard count == PeerBenchmark.batch else {
                throw BenchmarkError("\(name): the incremental pull brought \(count) records, not \(PeerBenchmark.batch)")
            }
        }
        return .init(
            push: push, pulls: pulls, parses: parses, incrementals: incrementals, pullServerCPU: serverCPU, pullDatabaseCPU: databaseCPU,
            pullBytes: bytes)
    }
}

/// sync-server on a fresh data folder (SQLite) or a fresh schema (PostgreSQL).
private struct OutpostPeer: PeerServer {
    let name = "Outpost"
    let process: Process
    let port: Int
    let token: String

    init(folder: URL, postgresURL: String?) throws {
        let secret = Data((0..<32).map { UInt8(7 + $0) })
        let secretFile = folder.appendingPathComponent("token.secret")
        try secret.write(to: secretFile)
        let data = folder.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        try Data((0..<32).map { UInt8(50 + $0) }).write(to: data.appendingPathComponent(AuditKey.fileName))
        var arguments = ["serve", "--data", data.path, "--port", "0", "--secret-file", secretFile.path, "--rate", "0"]
        if let postgresURL {
            let base = try PostgresStorage.Configuration(url: postgresURL)
            arguments += ["--postgres", PostgresBenchmark.url(base, schema: PostgresBenchmark.schemaName())]
        }
        (process, port) = try PostgresBenchmark.startServer(try PostgresBenchmark.locateServer(), arguments: arguments)
        let learner = PeerBenchmark.learner
        token = try TokenSigner(secret: secret).sign(
            DeviceIdentity(
                tenant: learner.tenant, userID: learner.userID, deviceID: learner.deviceID, expiresAt: Int64(Date().timeIntervalSince1970) + 3600))
    }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    func body(of request: PushRequest) throws -> Data { try JSONEncoder().encode(request) }

    func serverCPUSeconds() -> Double { ProcessMemory.cpuSeconds(pid: process.processIdentifier) ?? 0 }

    func push(_ body: Data, session: URLSession) throws {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/sync/v1/push")!)
        request.httpMethod = "POST"
        request.httpBody = body
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let (data, _) = try PeerBenchmark.exchange(request, session: session)
        let answer = try JSONDecoder().decode(PushResponse.self, from: data)
        guard answer.results.allSatisfy({ $0.status == .applied }) else { throw BenchmarkError("Outpost: a push was not applied whole") }
    }

    /// Pages of the learner's scope from `after` (the start when `nil`) until `has_more` is false:
    /// the pages' bodies and the last cursor. Only each page's head (`cursor` and `has_more`,
    /// which the server writes before the rows) is read here; the rows are parsed afterwards.
    func pull(after: String?, session: URLSession) throws -> ([Data], String) {
        var cursor = after
        var bodies: [Data] = []
        while true {
            var components = URLComponents(string: "http://127.0.0.1:\(port)/sync/v1/pull")!
            components.queryItems =
                [URLQueryItem(name: "scope", value: "user"), URLQueryItem(name: "limit", value: String(PeerBenchmark.page))]
                + (cursor.map { [URLQueryItem(name: "cursor", value: $0)] } ?? [])
            var request = URLRequest(url: components.url!)
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            let (data, _) = try PeerBenchmark.exchange(request, session: session)
            bodies.append(data)
            let (next, hasMore) = try Self.head(of: data)
            cursor = next
            if !hasMore { return (bodies, next) }
        }
    }

    /// `cursor` and `has_more` of a page, read from the members before `upserts`.
    static func head(of page: Data) throws -> (String, Bool) {
        let text = String(decoding: page.prefix(1024), as: UTF8.self)
        guard let cursorStart = text.range(of: #""cursor":""#)?.upperBound, let cursorEnd = text[cursorStart...].firstIndex(of: "\""),
            let more = text.range(of: #""has_more":"#)?.upperBound
        else { throw BenchmarkError("Outpost: a pull page without a cursor and has_more before its rows") }
        return (String(text[cursorStart..<cursorEnd]), text[more...].hasPrefix("true"))
    }

    /// The records of pages, parsed as a client would.
    func count(_ pages: [Data]) throws -> Int {
        try pages.reduce(0) { total, data in
            guard let page = try JSONSerialization.jsonObject(with: data) as? [String: Any], let upserts = page["upserts"] as? [String: Any] else {
                throw BenchmarkError("Outpost: a pull page without upserts")
            }
            return total + upserts.values.reduce(0) { $0 + (($1 as? [Any])?.count ?? 0) }
        }
    }
}

/// Kinto, installed into a virtual environment of the run and started on the same PostgreSQL
/// (`scripts/kinto-peer.sh`).
private struct KintoPeer: PeerServer {
    let name = "Kinto"
    static let version = "Kinto 26.5.0"
    static let credentials = "Basic " + Data("bench:bench".utf8).base64EncodedString()
    static let records = "/v1/buckets/bench/collections/records/records"
    let work: URL
    let script: URL
    let port: Int
    let group: Int32

    init(folder: URL, postgresURL: String) throws {
        script = try Self.locateScript()
        work = folder.appendingPathComponent("server")
        let venv = folder.appendingPathComponent("venv")
        try Self.run(script, ["install", venv.path])
        // The database gets a name of this run: Kinto keeps tombstones, and a run starts empty.
        port = try Self.freePort()
        try Self.run(
            script, ["start", venv.path, work.path, postgresURL, String(port)],
            environment: ["KINTO_DATABASE": "kinto_\(UUID().uuidString.prefix(8).lowercased())"])
        guard let text = try? String(contentsOf: work.appendingPathComponent("kinto.pid"), encoding: .utf8),
            let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
        else { throw BenchmarkError("Kinto started without a pid file") }
        group = pid
    }

    func stop() {
        try? Self.run(script, ["stop", work.path])
    }

    func body(of request: PushRequest) throws -> Data { try Self.batchBody(request) }

    /// Every gunicorn process's.
    func serverCPUSeconds() -> Double { PeerBenchmark.cpuSeconds(processGroup: group) }

    /// A `POST /v1/batch` of record creates: each mutation's row as the record's data.
    static func batchBody(_ request: PushRequest) throws -> Data {
        let creates: [JSONValue] = request.mutations.map { mutation in
            .object(["body": .object(["data": mutation.payload ?? .object([:])])])
        }
        let body: JSONValue = .object([
            "defaults": .object(["method": .string("POST"), "path": .string("/buckets/bench/collections/records/records")]),
            "requests": .array(creates),
        ])
        return try JSONEncoder().encode(body)
    }

    func push(_ body: Data, session: URLSession) throws {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/v1/batch")!)
        request.httpMethod = "POST"
        request.httpBody = body
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue(Self.credentials, forHTTPHeaderField: "Authorization")
        let (data, _) = try PeerBenchmark.exchange(request, session: session)
        // A batch answers 200 whatever its requests did: each must have created its record.
        guard let answer = try JSONSerialization.jsonObject(with: data) as? [String: Any], let responses = answer["responses"] as? [[String: Any]],
            responses.count == PeerBenchmark.batch
        else { throw BenchmarkError("Kinto: a batch answer without its \(PeerBenchmark.batch) responses") }
        if let refused = responses.first(where: { $0["status"] as? Int != 201 }) {
            throw BenchmarkError("Kinto: a record create answered \(refused["status"] ?? "?"): \(refused["body"] ?? "")")
        }
    }

    /// Pages of the collection after `since` (everything when `nil`), following `Next-Page`: the
    /// pages' bodies, parsed afterwards, and the collection's `ETag` (its newest timestamp) for
    /// the next pull.
    func pull(after since: String?, session: URLSession) throws -> ([Data], String) {
        var url = URL(string: "http://127.0.0.1:\(port)\(Self.records)?_sort=last_modified&_limit=\(PeerBenchmark.page)&_since=\(since ?? "0")")!
        var bodies: [Data] = []
        var etag = since ?? "0"
        while true {
            var request = URLRequest(url: url)
            request.setValue(Self.credentials, forHTTPHeaderField: "Authorization")
            let (data, response) = try PeerBenchmark.exchange(request, session: session)
            bodies.append(data)
            if let tag = response.value(forHTTPHeaderField: "ETag") { etag = tag.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
            guard let next = response.value(forHTTPHeaderField: "Next-Page"), let nextURL = URL(string: next) else { return (bodies, etag) }
            url = nextURL
        }
    }

    /// The records of pages, parsed as a client would.
    func count(_ pages: [Data]) throws -> Int {
        try pages.reduce(0) { total, data in
            guard let page = try JSONSerialization.jsonObject(with: data) as? [String: Any], let records = page["data"] as? [Any] else {
                throw BenchmarkError("Kinto: a page without data")
            }
            return total + records.count
        }
    }

    /// `scripts/kinto-peer.sh` of the checkout the benchmark runs from (`OUTPOST_KINTO_PEER_SCRIPT` overrides).
    static func locateScript() throws -> URL {
        if let path = ProcessInfo.processInfo.environment["OUTPOST_KINTO_PEER_SCRIPT"] { return URL(fileURLWithPath: path) }
        var folder = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
        for _ in 0..<4 {
            let candidate = folder.appendingPathComponent("scripts/kinto-peer.sh")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            folder.deleteLastPathComponent()
        }
        throw BenchmarkError("scripts/kinto-peer.sh not found from \(FileManager.default.currentDirectoryPath): run from the checkout")
    }

    static func run(_ script: URL, _ arguments: [String], environment: [String: String] = [:]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [script.path] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let said = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw BenchmarkError("kinto-peer.sh \(arguments.first ?? "") failed: \(String(decoding: said.suffix(2000), as: UTF8.self))")
        }
    }

    static func freePort() throws -> Int {
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        probe.arguments = ["python3", "-c", "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"]
        let output = Pipe()
        probe.standardOutput = output
        try probe.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        probe.waitUntilExit()
        guard let port = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { throw BenchmarkError("no free port: \(text)") }
        return port
    }
}
