import ContractRuntime
import Contracts
import Foundation
import Logging
import PostgresNIO
import SampleServerApps
import SyncProtocol
import SyncServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The server on PostgreSQL beside SQLite, in the same run:
///
/// 1. **Push ingestion in process**: the `push-ingestion` workload, shortened (4 devices × 5
///    pushes of 500 Statement creates, each device its own user scope), through ``PushService``
///    on a fresh ``SQLiteStorage`` and on a fresh ``PostgresStorage`` schema; and, as the bar's
///    baseline, the same rows inserted raw through postgres-nio on one connection, one
///    transaction per 500, both as one multi-row `INSERT` and as a `COPY` (the faster counts).
/// 2. **Pull throughput in process**: one device's 10 000 `Task` creates (one team scope), then a
///    device pulls the whole scope in pages of 500 through ``PullService``, on both storages.
/// 3. **Several processes**: 1, 2 and 3 real `sync-server` processes (the release binary next to
///    `outpost-bench`) on one PostgreSQL, 12 devices pushing 5 × 200 Statement creates over
///    loopback HTTP at once, each push to the next process round the ring.
///
/// PostgreSQL is the one `make bench` starts (scripts/with-postgres.sh, PostgreSQL's default
/// durability: `fsync` and `synchronous_commit` on), named by `OUTPOST_TEST_POSTGRES_URL`.
/// The bar: PostgreSQL push ingestion within 3× the time of the raw baseline in the same run. The
/// other figures are recorded in docs/PERFORMANCE.md; the other check is the invariant
/// (everything stored once).
enum PostgresBenchmark {
    static let runs = 3
    static let pullRows = 10_000
    static let pullPage = 500
    static let httpDevices = 12
    static let httpPushes = 5
    static let httpBatch = 200
    /// The bar: PushService on PostgreSQL at most this many times the raw postgres-nio insert's time.
    static let barRatio = 3.0

    static let benchmark = Benchmark(
        name: "postgres",
        summary: "push ingestion and pull throughput on PostgreSQL beside SQLite; ingestion by 1, 2 and 3 sync-server processes on one PostgreSQL",
        run: { try run() }
    )

    static func run() throws -> BenchmarkResult {
        var result = BenchmarkResult()
        guard let url = ProcessInfo.processInfo.environment["OUTPOST_TEST_POSTGRES_URL"], !url.isEmpty else {
            throw BenchmarkError(
                "no PostgreSQL: OUTPOST_TEST_POSTGRES_URL is not set. Run `make bench` (it starts one), or "
                    + "`scripts/with-postgres.sh -- $(swift build -c release --show-bin-path)/outpost-bench postgres`"
            )
        }
        let base = try Self.configuration(url: url)
        let workspace = try TemporaryFolder("postgres")
        defer { workspace.remove() }
        #if DEBUG
            result.fact("build", "DEBUG — these figures are not representative; run `make bench` (release)")
        #endif
        result.fact(
            "PostgreSQL", "\(base.host):\(base.port)/\(base.database), a fresh schema per run (scripts/with-postgres.sh: PostgreSQL 15, fsync on)")
        result.fact("SQLite", "SQLiteStorage (WAL, synchronous NORMAL), a fresh database per run in \(workspace.url.path)")

        // 1. Ingestion in process.
        let devices = PushIngestionBenchmark.makeDevices(count: 4, pushes: 5)
        let mutations = devices.reduce(0) { $0 + $1.requests.reduce(0) { $0 + $1.mutations.count } }
        result.fact("ingestion", "4 devices × 5 pushes × 500 Statement creates = \(Format.grouped(mutations)) mutations, at once; \(runs) runs each")
        var ingestion: [Kind: Samples] = [:]
        for kind in Kind.allCases {
            for run in 0..<runs {
                let storage = try open(kind, base: base, folder: workspace.folder("push-\(kind)-\(run)"))
                let service = PushService(storage: storage, reducers: SampleServerApps.reducers)
                let timed = try Timing.measure { try runBlocking { try await PushIngestionBenchmark.pushAll(devices, service: service) } }
                ingestion[kind, default: Samples()].append(timed.seconds)
                let applied = timed.value.joined().flatMap(\.results).filter { $0.status == .applied }.count
                if applied != mutations { throw BenchmarkError("\(kind): \(applied) of \(mutations) mutations applied") }
                try close(storage)
            }
        }

        // The bar's baseline: the same rows straight through postgres-nio, each way, fresh schema per run.
        let rawRows = try PushIngestionBenchmark.baselineRows(devices, entity: ContractRegistry.statement)
        var rawInsert = Samples(), rawCopy = Samples()
        for _ in 0..<runs {
            rawInsert.append(try runBlocking { try await PostgresRawInsert.run(rawRows, base: base, copy: false) })
            rawCopy.append(try runBlocking { try await PostgresRawInsert.run(rawRows, base: base, copy: true) })
        }
        let raw = rawInsert.median <= rawCopy.median ? rawInsert : rawCopy
        let rawName = rawInsert.median <= rawCopy.median ? "multi-row INSERT" : "COPY"

        // 1b. A table filled from empty by last_writer_wins creates with a unique index.
        let growthRequests = PostgresGrowthWorkload.requests()
        result.fact(
            "growth",
            "\(PostgresGrowthWorkload.pushes) pushes × \(PostgresGrowthWorkload.batch) AssessmentResponse creates (last_writer_wins, "
                + "unique (attempt_id, question_id)) by one device into an empty table; each push timed; "
                + "medians of the first and last \(PostgresGrowthWorkload.window); the median of \(PostgresGrowthWorkload.rounds) rounds"
        )
        var growth: [Kind: PostgresGrowthWorkload.Outcome] = [:]
        for kind in Kind.allCases {
            // Each round from an empty table, after a checkpoint (the ingestion runs' WAL would
            // otherwise be written out during whichever pushes it met); the median round counts.
            var rounds: [PostgresGrowthWorkload.Outcome] = []
            for round in 0..<PostgresGrowthWorkload.rounds {
                let storage = try open(kind, base: base, folder: workspace.folder("growth-\(kind)-\(round)"))
                if kind == .postgres { try runBlocking { try await PostgresRawInsert.checkpoint(base: base) } }
                rounds.append(try runBlocking { try await PostgresGrowthWorkload.run(growthRequests, on: storage) })
                try close(storage)
            }
            growth[kind] = rounds.sorted { $0.growth < $1.growth }[rounds.count / 2]
        }

        // 1c. Entity writes of every policy, into tables already holding rows.
        let sizes = EntityWriteWorkload.sizes
        result.fact(
            "entity writes",
            EntityWriteWorkload.policies.map(\.label).joined(separator: ", ")
                + ": \(EntityWriteWorkload.pushes) pushes × \(EntityWriteWorkload.batch) creates, then as many of updates of them, "
                + "by one device, into tables preloaded with \(sizes.map { Format.grouped($0) }.joined(separator: " and ")) rows "
                + "over \(EntityWriteWorkload.scopes) scopes (its own among them); medians of each phase's pushes"
        )
        var entityMedians: [Kind: [String: [Int: Double]]] = [:]
        var preloadSeconds: [Kind: [Int: Double]] = [:]
        // The baseline, by (policy, phase) and table size: the rows the PostgreSQL pushes stored,
        // written raw into a copy of the tables as the preload left them (the same rows into
        // the same table state).
        var rawEntity: [String: [Int: Samples]] = [:]
        // The same on SQLite: SQLite's own write of the rows the SQLite pushes stored.
        var rawSQLiteEntity: [String: [Int: Samples]] = [:]
        let tables = EntityWriteWorkload.policies.map(\.entity.table)
        for kind in Kind.allCases {
            // Both sizes side by side, their pushes alternating (EntityWriteWorkload.push).
            var targets: [EntityWriteWorkload.Target] = []
            var schemas: [Int: (pushed: String, raw: String)] = [:]
            var sqliteCopies: [Int: URL] = [:]
            for size in sizes {
                let schema = schemaName()
                let folder = try workspace.folder("entities-\(kind)-\(size)")
                let storage = try open(kind, base: base, folder: folder, schema: schema)
                let preload = try Timing.measure { try runBlocking { try await EntityWriteWorkload.preload(storage, rows: size) } }
                preloadSeconds[kind, default: [:]][size] = preload.seconds
                let rawSchema = schemaName()
                if kind == .sqlite {
                    // At rest as on PostgreSQL: the load's WAL checkpointed and truncated, not left
                    // for the timed pushes to work through.
                    try EntityWriteWorkload.settleSQLite(in: folder)
                    sqliteCopies[size] = try SQLiteRawEntityWrites.copy(in: folder)
                }
                if kind == .postgres {
                    try runBlocking {
                        try await PostgresRawInsert.settle(tables, in: schema, base: base)
                        try await PostgresRawInsert.copyTables(tables, from: schema, into: rawSchema, base: base)
                    }
                }
                schemas[size] = (schema, rawSchema)
                targets.append(EntityWriteWorkload.Target(size: size, storage: storage))
            }
            let (filled, named) = (targets, schemas)
            let pushed = try runBlocking {
                try await EntityWriteWorkload.push(filled) { policy, target in
                    guard kind == .postgres else { return }
                    try await PostgresRawInsert.prewarmIndexes(of: policy.entity.table, in: named[target.size]!.pushed, base: base)
                }
            }
            for target in targets { try close(target.storage) }
            for (size, figures) in pushed {
                for (key, samples) in figures.times { entityMedians[kind, default: [:]][key, default: [:]][size] = samples.median }
            }
            if kind == .sqlite { rawSQLiteEntity = try SQLiteRawEntityWrites.write(pushed, copies: sqliteCopies) }
            guard kind == .postgres else { continue }
            for size in sizes {
                let rawSchema = schemas[size]!.raw
                for policy in EntityWriteWorkload.policies {
                    for phase in EntityWriteWorkload.Phase.allCases {
                        let batches = pushed[size]?.stored[policy.label]?[phase] ?? []
                        rawEntity[EntityWriteWorkload.Figures.key(policy, phase), default: [:]][size] = try runBlocking {
                            if phase == .create { try await PostgresRawInsert.prewarmIndexes(of: policy.entity.table, in: rawSchema, base: base) }
                            return try await PostgresRawInsert.write(
                                batches, entity: policy.entity, upserting: phase == .update, schema: rawSchema, base: base)
                        }
                    }
                }
            }
        }

        // 2. Pull throughput in process.
        result.fact(
            "pull", "\(Format.grouped(pullRows)) Task rows in one team scope, pulled from the start in pages of \(pullPage); \(runs) runs each")
        var pulls: [Kind: Samples] = [:]
        for kind in Kind.allCases {
            let storage = try open(kind, base: base, folder: workspace.folder("pull-\(kind)"))
            try runBlocking { try await seedTasks(storage) }
            let service = PullService(storage: storage, defaultLimit: pullPage, maximumLimit: pullPage)
            for _ in 0..<runs {
                let timed = try Timing.measure { try runBlocking { try await pullAll(service) } }
                if timed.value != pullRows { throw BenchmarkError("\(kind): pulled \(timed.value) of \(pullRows) rows") }
                pulls[kind, default: Samples()].append(timed.seconds)
            }
            try close(storage)
        }

        // 3. Several processes on one PostgreSQL, over HTTP.
        let server = try locateServer()
        let httpTotal = httpDevices * httpPushes * httpBatch
        result.fact(
            "processes",
            "\(httpDevices) devices × \(httpPushes) pushes × \(httpBatch) Statement creates = \(Format.grouped(httpTotal)) mutations over loopback HTTP, "
                + "push n of device d to process (d + n) mod k; \(server.path)"
        )
        var scaling: [Int: Samples] = [:]
        for processes in 1...3 {
            for run in 0..<2 {
                let seconds = try runBlocking {
                    try await ingestOverHTTP(
                        processes: processes, server: server, base: base, folder: try workspace.folder("http-\(processes)-\(run)"))
                }
                scaling[processes, default: Samples()].append(seconds)
            }
        }

        let sqlite = ingestion[.sqlite]!, postgres = ingestion[.postgres]!
        let total = Double(mutations)
        result.rows = [
            .init(
                "ingestion, SQLite (PushService in process)", median: Format.rate(total / sqlite.median), min: Format.rate(total / sqlite.min),
                note: "mutations/s; \(Format.duration(sqlite.median)) for \(Format.grouped(mutations))"),
            .init(
                "ingestion, PostgreSQL (PushService in process)", median: Format.rate(total / postgres.median),
                min: Format.rate(total / postgres.min),
                note: "mutations/s; \(Format.duration(postgres.median)); \(Format.ratio(postgres.median / sqlite.median)) SQLite's time"),
            .init(
                "baseline: raw postgres-nio, multi-row INSERT", median: Format.duration(rawInsert.median), min: Format.duration(rawInsert.min),
                note: "the same rows, 1 connection, 1 transaction and 1 INSERT per 500 (\(Format.rate(total / rawInsert.median)))"),
            .init(
                "baseline: raw postgres-nio, COPY", median: Format.duration(rawCopy.median), min: Format.duration(rawCopy.min),
                note: "the same rows, 1 connection, 1 transaction and 1 COPY per 500 (\(Format.rate(total / rawCopy.median)))"),
            .init(
                "ratio PostgreSQL ingestion / raw (\(rawName), the faster)", median: Format.ratio(postgres.median / raw.median),
                min: Format.ratio(postgres.min / raw.min), note: "time; medians, mins; the bar: at most \(Format.fixed(barRatio, 1))×"),
            .init(
                "pull, SQLite (PullService in process)", median: Format.rate(Double(pullRows) / pulls[.sqlite]!.median),
                min: Format.rate(Double(pullRows) / pulls[.sqlite]!.min), note: "rows/s, shaped as JSON values, pages of \(pullPage)"),
            .init(
                "pull, PostgreSQL (PullService in process)", median: Format.rate(Double(pullRows) / pulls[.postgres]!.median),
                min: Format.rate(Double(pullRows) / pulls[.postgres]!.min),
                note: "rows/s; \(Format.ratio(pulls[.postgres]!.median / pulls[.sqlite]!.median)) SQLite's time"),
        ]
        for kind in Kind.allCases {
            let outcome = growth[kind]!
            result.rows.append(
                .init(
                    "growth from empty, \(kind == .sqlite ? "SQLite" : "PostgreSQL"): a push of 500, last / first",
                    median: Format.ratio(outcome.growth), min: Format.duration(outcome.total),
                    note:
                        "first pushes \(Format.duration(outcome.first)), last \(Format.duration(outcome.last)) (\(PostgresGrowthWorkload.rowsGrowth)× the rows); "
                        + "'min' column: the whole run; the bar: at most \(Format.fixed(PostgresGrowthWorkload.flatBar, 1))×"
                ))
        }
        for kind in Kind.allCases {
            for policy in EntityWriteWorkload.policies {
                for phase in EntityWriteWorkload.Phase.allCases {
                    let key = EntityWriteWorkload.Figures.key(policy, phase)
                    let bySize = entityMedians[kind]![key]!
                    let (small, large) = (bySize[sizes[0]]!, bySize[sizes[1]]!)
                    var note =
                        "\(Format.duration(small)) with \(Format.grouped(sizes[0])) rows, \(Format.duration(large)) with \(Format.grouped(sizes[1]))"
                    if kind == .postgres, let raw = rawEntity[key], let rawSmall = raw[sizes[0]], let rawLarge = raw[sizes[1]] {
                        note +=
                            "; raw postgres-nio \(Format.duration(rawSmall.median)) / \(Format.duration(rawLarge.median)): "
                            + "\(Format.ratio(small / rawSmall.median)) / \(Format.ratio(large / rawLarge.median))"
                    }
                    if kind == .sqlite, let raw = rawSQLiteEntity[key], let rawSmall = raw[sizes[0]], let rawLarge = raw[sizes[1]] {
                        note +=
                            "; raw SQLite \(Format.duration(rawSmall.median)) → \(Format.duration(rawLarge.median)) "
                            + "(\(Format.ratio(rawLarge.median / rawSmall.median)))"
                    }
                    result.rows.append(
                        .init(
                            "\(kind == .sqlite ? "SQLite" : "PostgreSQL"), \(key): a push of 500, large / small table",
                            median: Format.ratio(large / small), note: note))
                }
            }
            result.fact(
                "preload (\(kind))",
                sizes.map {
                    "\(Format.grouped($0)) rows × \(EntityWriteWorkload.policies.count) tables in \(Format.duration(preloadSeconds[kind]![$0]!))"
                }
                .joined(separator: ", "))
        }
        for processes in 1...3 {
            let samples = scaling[processes]!
            result.rows.append(
                .init(
                    "ingestion over HTTP, \(processes) sync-server process\(processes == 1 ? "" : "es"), one PostgreSQL",
                    median: Format.rate(Double(httpTotal) / samples.median), min: Format.rate(Double(httpTotal) / samples.min),
                    note: "mutations/s; \(Format.ratio(scaling[1]!.median / samples.median)) the rate of 1 process"
                ))
        }
        let ratio = postgres.median / raw.median
        result.check(
            "bar", ratio <= barRatio,
            "PostgreSQL push ingestion: \(Format.ratio(ratio)) the time of the raw postgres-nio \(rawName) of the same rows "
                + (ratio <= barRatio ? "<=" : ">") + " \(Format.fixed(barRatio, 1))× (medians, same run: \(Format.duration(postgres.median)) "
                + "against \(Format.duration(raw.median))); rate \(Format.rate(total / postgres.median))"
        )
        for kind in Kind.allCases {
            let outcome = growth[kind]!
            result.check(
                "flat as the table grows (\(kind))", outcome.growth <= PostgresGrowthWorkload.flatBar,
                "\(kind): a push of 500 creates with a unique index takes \(Format.ratio(outcome.growth)) as long in the full table "
                    + "as in the nearly empty one (\(Format.duration(outcome.last)) against \(Format.duration(outcome.first))) "
                    + (outcome.growth <= PostgresGrowthWorkload.flatBar ? "<=" : ">") + " \(Format.fixed(PostgresGrowthWorkload.flatBar, 1))×"
            )
        }
        for kind in Kind.allCases {
            let ratios = EntityWriteWorkload.policies.flatMap { policy in
                EntityWriteWorkload.Phase.allCases.map { phase -> (String, Double) in
                    let key = EntityWriteWorkload.Figures.key(policy, phase)
                    let bySize = entityMedians[kind]![key]!
                    return (key, bySize[sizes[1]]! / bySize[sizes[0]]!)
                }
            }
            let worst = ratios.max { $0.1 < $1.1 }!
            result.check(
                "entity writes flat in the table's size (\(kind))", worst.1 <= EntityWriteWorkload.flatBar,
                "\(kind): every policy's push of 500 with \(Format.grouped(sizes[1])) rows in the table within "
                    + "\(Format.fixed(EntityWriteWorkload.flatBar, 1))× of the same with \(Format.grouped(sizes[0])); worst \(worst.0): \(Format.ratio(worst.1))"
            )
        }
        // Where SQLite's push grows past the bar, whether SQLite's own write of the same rows
        // grows as much: the B-trees' cost, not the push's.
        let sqliteBeyondRaw = EntityWriteWorkload.policies.flatMap { policy in
            EntityWriteWorkload.Phase.allCases.map { phase -> (key: String, push: Double, raw: Double) in
                let key = EntityWriteWorkload.Figures.key(policy, phase)
                let bySize = entityMedians[.sqlite]![key]!, raw = rawSQLiteEntity[key]!
                return (key, bySize[sizes[1]]! / bySize[sizes[0]]!, raw[sizes[1]]!.median / raw[sizes[0]]!.median)
            }
        }
        let grownPastRaw = sqliteBeyondRaw.filter { $0.push > EntityWriteWorkload.flatBar && $0.push > $0.raw }
        let pastBar = sqliteBeyondRaw.filter { $0.push > EntityWriteWorkload.flatBar }.map {
            "\($0.key) \(Format.ratio($0.push)) against raw \(Format.ratio($0.raw))"
        }
        result.check(
            "SQLite entity writes grow no more than SQLite's own", grownPastRaw.isEmpty,
            "sqlite: every policy's push of 500 that grows past \(Format.fixed(EntityWriteWorkload.flatBar, 1))× from "
                + "\(Format.grouped(sizes[0])) to \(Format.grouped(sizes[1])) rows grows no more than writing the same rows raw into the "
                + "same tables: "
                + (pastBar.isEmpty ? "none grows past the bar" : pastBar.joined(separator: "; "))
        )
        let rawRatios = EntityWriteWorkload.policies.flatMap { policy in
            EntityWriteWorkload.Phase.allCases.flatMap { phase -> [(String, Double)] in
                let key = EntityWriteWorkload.Figures.key(policy, phase)
                return sizes.map { size in
                    ("\(key) (\(Format.grouped(size)) rows)", entityMedians[.postgres]![key]![size]! / rawEntity[key]![size]!.median)
                }
            }
        }
        let worstRaw = rawRatios.max { $0.1 < $1.1 }!
        result.check(
            "entity writes against raw postgres-nio", worstRaw.1 <= EntityWriteWorkload.rawBar,
            "PostgreSQL: every policy's push of 500 within \(Format.fixed(EntityWriteWorkload.rawBar, 1))× of writing the same rows raw "
                + "into the same table state (\(sizes.map { Format.grouped($0) }.joined(separator: " and ")) rows); "
                + "worst \(worstRaw.0): \(Format.ratio(worstRaw.1))"
        )
        let pullRatio = pulls[.postgres]!.median / pulls[.sqlite]!.median
        result.check(
            "pull against SQLite", pullRatio <= 2.0,
            "PostgreSQL pulls \(Format.grouped(pullRows)) rows in \(Format.ratio(pullRatio)) SQLite's time (medians) "
                + (pullRatio <= 2.0 ? "<=" : ">") + " 2×"
        )
        let growthRatio = growth[.postgres]!.total / growth[.sqlite]!.total
        result.fact(
            "growth, PostgreSQL / SQLite",
            "\(Format.ratio(growthRatio)) the time for the same \(Format.grouped(PostgresGrowthWorkload.pushes * PostgresGrowthWorkload.batch)) creates"
        )
        result.check("exactly once", true, "every run: every mutation applied once (counted in the answers, and in PostgreSQL for the HTTP runs)")
        return result
    }

    enum Kind: String, CaseIterable, CustomStringConvertible {
        case sqlite
        case postgres
        var description: String { rawValue }
    }

    static func open(_ kind: Kind, base: PostgresStorage.Configuration, folder: URL, schema: String = schemaName()) throws -> any SyncStorage {
        switch kind {
        case .sqlite: return try SQLiteStorage(directory: folder, contracts: ContractRegistry.self)
        case .postgres:
            var configuration = base
            configuration.schema = schema
            configuration.maximumConnections = 8
            let fresh = configuration
            return try runBlocking { try await PostgresStorage(configuration: fresh, contracts: ContractRegistry.self) }
        }
    }

    /// The storages a benchmark of both measures: SQLite, and PostgreSQL when
    /// `OUTPOST_TEST_POSTGRES_URL` names one (`make bench` starts one; `result` says so when not).
    struct Storages {
        let kinds: [Kind]
        private let base: PostgresStorage.Configuration?

        init(noting result: inout BenchmarkResult) throws {
            let url = ProcessInfo.processInfo.environment["OUTPOST_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
            base = try url.map(PostgresBenchmark.configuration(url:))
            kinds = base == nil ? [.sqlite] : [.sqlite, .postgres]
            if base == nil { result.fact("PostgreSQL", "not measured: OUTPOST_TEST_POSTGRES_URL is not set (`make bench` starts one)") }
        }

        /// A fresh storage of `kind`: a SQLite file in `folder`, or a new PostgreSQL schema.
        func open(_ kind: Kind, folder: URL) throws -> any SyncStorage {
            try PostgresBenchmark.open(
                kind, base: try base ?? PostgresStorage.Configuration(url: "postgres://unused@localhost/unused"), folder: folder)
        }
    }

    static func close(_ storage: any SyncStorage) throws {
        guard let postgres = storage as? PostgresStorage else { return }
        try runBlocking { await postgres.close() }
    }

    static func schemaName() -> String {
        "bench_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
    }

    static let teamDevice = DeviceIdentity(
        tenant: "bench-tenant", userID: "dispatcher", deviceID: "tablet-1", teams: ["north"], expiresAt: 4_102_444_800)

    /// 10 000 `Task` creates in the team scope, in pushes of 500.
    static func seedTasks(_ storage: any SyncStorage) async throws {
        let service = PushService(storage: storage, reducers: SampleServerApps.reducers)
        for push in 0..<(pullRows / 500) {
            let mutations = (0..<500).map { index -> Mutation in
                let seq = Int64(push * 500 + index + 1)
                let id = "task-\(seq)"
                return Mutation(
                    seq: seq, clientMutationId: "cm-\(id)", entity: "Task", op: .create, id: id,
                    payload: .object([
                        "id": .string(id), "team_id": .string("north"), "title": .string("Swap the battery of scooter \(seq)"),
                        "task_kind": .string("battery_swap"), "status": .string("assigned"), "estimated_minutes": .int(Int64(10 + seq % 50)),
                        "checklist": .array([.string("helmet"), .string("gloves"), .string("charged pack")]),
                    ])
                )
            }
            _ = try await service.push(PushRequest(clientId: "tablet-1", schema: [:], mutations: mutations), identity: teamDevice)
        }
    }

    /// Every page of the team scope from the start; the rows pulled.
    static func pullAll(_ service: PullService) async throws -> Int {
        var cursor: String?
        var rows = 0
        while true {
            let page = try await service.pull(scope: "team", cursor: cursor, limit: pullPage, schema: [:], clientID: nil, identity: teamDevice)
            rows += page.upserts.values.reduce(0) { $0 + $1.count }
            cursor = page.cursor
            if !page.hasMore { return rows }
        }
    }

    // MARK: Several processes

    static func locateServer() throws -> URL {
        try siblingExecutable("sync-server")
    }

    /// The database of `url`, sealed with the benchmark's audit key.
    static func configuration(url: String) throws -> PostgresStorage.Configuration {
        var configuration = try PostgresStorage.Configuration(url: url)
        configuration.auditKey = try AuditKey(bytes: benchAuditKey)
        return configuration
    }

    /// The URL `sync-server --postgres` takes for `base`'s database and `schema`.
    static func url(_ base: PostgresStorage.Configuration, schema: String, maximumConnections: Int? = nil) -> String {
        var url = URLComponents()
        url.scheme = "postgres"
        url.user = base.username
        url.password = base.password
        url.host = base.host
        url.port = base.port
        url.path = "/" + base.database
        url.queryItems =
            [URLQueryItem(name: "schema", value: schema)]
            + (maximumConnections.map { [URLQueryItem(name: "max_connections", value: String($0))] } ?? [])
        return url.string!
    }

    /// Starts `processes` servers on a fresh schema, lets every device push at once, and returns
    /// the wall time from the first push sent to the last answer.
    static func ingestOverHTTP(processes: Int, server: URL, base: PostgresStorage.Configuration, folder: URL) async throws -> Double {
        let secret = Data((0..<32).map { UInt8($0) })
        let secretFile = folder.appendingPathComponent("token.secret")
        try secret.write(to: secretFile)
        // The servers seal the audit log with the key of their data folder: the one the checks use.
        let data = folder.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        try benchAuditKey.write(to: data.appendingPathComponent(AuditKey.fileName))
        let signer = try TokenSigner(secret: secret)
        let schema = schemaName()
        let postgresURL = Self.url(base, schema: schema, maximumConnections: 8)

        var servers: [Process] = []
        defer {
            for process in servers where process.isRunning {
                process.terminate()
                process.waitUntilExit()
            }
        }
        var ports: [Int] = []
        for _ in 0..<processes {
            let (process, port) = try startServer(
                server,
                arguments: [
                    "serve", "--data", folder.appendingPathComponent("data").path, "--postgres", postgresURL, "--port", "0",
                    "--secret-file", secretFile.path, "--rate", "0",
                ])
            servers.append(process)
            ports.append(port)
        }

        // Bodies and tokens are made before the clock starts.
        let devices = PushIngestionBenchmark.makeDevices(count: httpDevices, pushes: (httpPushes * httpBatch + 499) / 500)
        let encoder = JSONEncoder()
        var plans: [(token: String, bodies: [Data])] = []
        for device in devices {
            let token = signer.sign(
                DeviceIdentity(
                    tenant: device.identity.tenant, userID: device.identity.userID, deviceID: device.identity.deviceID,
                    expiresAt: Int64(Date().timeIntervalSince1970) + 3600
                ))
            let statements = device.requests.flatMap(\.mutations).prefix(httpPushes * httpBatch)
            let bodies = try stride(from: 0, to: statements.count, by: httpBatch).map { start in
                try encoder.encode(
                    PushRequest(
                        clientId: device.clientID, schema: [:], mutations: Array(statements.dropFirst(start).prefix(httpBatch))
                    ))
            }
            plans.append((token, bodies))
        }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = 64
        configuration.timeoutIntervalForRequest = 300
        let session = URLSession(configuration: configuration)
        let portList = ports

        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, plan) in plans.enumerated() {
                group.addTask {
                    for (push, body) in plan.bodies.enumerated() {
                        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(portList[(index + push) % portList.count])/sync/v1/push")!)
                        request.httpMethod = "POST"
                        request.httpBody = body
                        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
                        request.setValue("Bearer \(plan.token)", forHTTPHeaderField: "Authorization")
                        let (data, response) = try await session.data(for: request)
                        guard (response as? HTTPURLResponse)?.statusCode == 200 else {
                            throw BenchmarkError(
                                "push answered \((response as? HTTPURLResponse)?.statusCode ?? 0): \(String(decoding: data, as: UTF8.self))")
                        }
                        let answer = try JSONDecoder().decode(PushResponse.self, from: data)
                        guard answer.results.allSatisfy({ $0.status == .applied }) else { throw BenchmarkError("a push was not applied whole") }
                    }
                }
            }
            try await group.waitForAll()
        }
        let seconds = Timing.seconds(ContinuousClock.now - start)

        // Every mutation stored once: each client's last seq and each user's scope sequence.
        var check = base
        check.schema = schema
        let storage = try await PostgresStorage(configuration: check, contracts: ContractRegistry.self)
        let perDevice = Int64(httpPushes * httpBatch)
        for device in devices {
            let (last, sequence) = try await storage.read { reader in
                (
                    try await reader.lastSequence(tenant: device.identity.tenant, clientID: device.clientID),
                    try await reader.scopeSequence(tenant: device.identity.tenant, scopeKey: "progress:user:\(device.identity.userID)")
                )
            }
            guard last == perDevice, sequence == perDevice else {
                throw BenchmarkError(
                    "\(processes) processes: \(device.clientID) has last_seq \(last) and scope sequence \(sequence), not \(perDevice)")
            }
        }
        await storage.close()
        return seconds
    }

    /// Starts a server process and reads the port it printed.
    static func startServer(_ executable: URL, arguments: [String]) throws -> (Process, Int) {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["OUTPOST_POSTGRES_URL"] = nil
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        var text = ""
        while !(text.contains("sync-server listening on") && text.hasSuffix("\n")) {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw BenchmarkError("sync-server did not start: \(text)") }
            text += String(decoding: chunk, as: UTF8.self)
        }
        output.fileHandleForReading.readabilityHandler = { _ = $0.availableData }
        guard let range = text.range(of: #"127\.0\.0\.1:[0-9]+"#, options: .regularExpression),
            let port = Int(text[range].split(separator: ":").last ?? "")
        else { throw BenchmarkError("sync-server said: \(text)") }
        return (process, port)
    }
}

/// The audit key of every PostgreSQL schema the benchmark writes (in process and in its servers).
private let benchAuditKey = Data((0..<32).map { UInt8(100 + $0) })

/// The bar's baseline on PostgreSQL: the push benchmark's rows (sync metadata included) inserted
/// with postgres-nio alone into the contract's own table (the server's migrations, in a fresh
/// schema), one transaction per push of 500, on one connection.
enum PostgresRawInsert {
    /// Runs `body` on a connection of its own to the benchmark's PostgreSQL, closed afterwards.
    static func withConnection<Value>(
        _ base: PostgresStorage.Configuration, _ body: (PostgresConnection, Logger) async throws -> Value
    ) async throws -> Value {
        let logger = Logger(label: "outpost-bench.postgres-raw")
        let connection = try await PostgresConnection.connect(
            configuration: .init(
                host: base.host, port: base.port, username: base.username, password: base.password, database: base.database, tls: .disable),
            id: 1, logger: logger
        )
        do {
            let value = try await body(connection, logger)
            try await connection.close()
            return value
        } catch {
            try? await connection.close()
            throw error
        }
    }

    /// Returns the wall time of the inserts; checks every row arrived.
    static func run(_ batches: [[PushIngestionBenchmark.BaselineRow]], base: PostgresStorage.Configuration, copy: Bool) async throws -> Double {
        var configuration = base
        configuration.schema = PostgresBenchmark.schemaName()
        // The server's migrations make the table and its indexes.
        await (try await PostgresStorage(configuration: configuration, contracts: ContractRegistry.self)).close()
        return try await withConnection(base) { connection, logger in
            try await insert(batches, schema: configuration.schema!, connection: connection, logger: logger, copy: copy)
        }
    }

    private static func insert(
        _ batches: [[PushIngestionBenchmark.BaselineRow]], schema: String, connection: PostgresConnection, logger: Logger, copy: Bool
    ) async throws -> Double {
        let table = ContractRegistry.statement.table
        let names = PushIngestionBenchmark.columns(ContractRegistry.statement)
        try await connection.query("SET search_path TO \(unescaped: schema)", logger: logger)
        var types: [String: String] = [:]
        for try await (name, type) in try await connection.query(
            "SELECT column_name::TEXT, data_type::TEXT FROM information_schema.columns WHERE table_schema = \(schema) AND table_name = \(table)",
            logger: logger
        ).decode((String, String).self) {
            types[name] = type
        }
        let columnTypes = try names.map { name in
            guard let type = types[name] else { throw BenchmarkError("\(table) has no column \(name) in PostgreSQL") }
            return type
        }
        // The VALUES text for 500 rows, built before the clock starts (a cast where a text parameter needs one).
        let width = names.count
        let casts = columnTypes.map { $0 == "jsonb" ? "::jsonb" : "" }
        func valuesText(rows: Int) -> String {
            (0..<rows).map { row in
                "(" + (0..<width).map { column in "$\(row * width + column + 1)\(casts[column])" }.joined(separator: ", ") + ")"
            }.joined(separator: ", ")
        }
        let head = "INSERT INTO \"\(table)\" (" + names.map { "\"\($0)\"" }.joined(separator: ", ") + ") VALUES "
        var texts: [Int: String] = [:]
        for batch in batches where texts[batch.count] == nil { texts[batch.count] = head + valuesText(rows: batch.count) }

        let start = ContinuousClock.now
        for batch in batches {
            try await connection.query("BEGIN", logger: logger)
            if copy {
                var buffer = ByteBuffer()
                for row in batch {
                    for (column, name) in names.enumerated() {
                        if column > 0 { buffer.writeString("\t") }
                        copyText(row.stored[name], type: columnTypes[column], into: &buffer)
                    }
                    buffer.writeString("\n")
                }
                try await connection.copyFrom(table: table, columns: names, logger: logger) { writer in try await writer.write(buffer) }
            } else {
                var bindings = PostgresBindings(capacity: batch.count * width)
                for row in batch {
                    for (column, name) in names.enumerated() { bind(row.stored[name], type: columnTypes[column], into: &bindings) }
                }
                try await connection.query(PostgresQuery(unsafeSQL: texts[batch.count]!, binds: bindings), logger: logger)
            }
            try await connection.query("COMMIT", logger: logger)
        }
        let seconds = Timing.seconds(ContinuousClock.now - start)
        let stored =
            try await connection.query("SELECT COUNT(*) FROM \(unescaped: "\"" + table + "\"")", logger: logger)
            .collect().first?.decode(Int64.self) ?? 0
        let expected = batches.reduce(0) { $0 + $1.count }
        guard stored == expected else { throw BenchmarkError("the raw PostgreSQL baseline stored \(stored) rows, not \(expected)") }
        return seconds
    }

    /// A value as the column's type takes it (the server stores timestamps as TIMESTAMPTZ and
    /// flags as BOOLEAN; ColumnValue holds milliseconds and 0/1).
    static func bind(_ value: ColumnValue, type: String, into bindings: inout PostgresBindings) {
        switch (value, type) {
        case (.null, _): bindings.appendNull()
        case (.integer(let number), "boolean"): bindings.append(number != 0)
        case (.integer(let number), "timestamp with time zone"): bindings.append(Date(timeIntervalSince1970: Double(number) / 1000))
        case (.integer(let number), "double precision"): bindings.append(Double(number))
        case (.integer(let number), _): bindings.append(number)
        case (.real(let number), _): bindings.append(number)
        case (.text(let text), _): bindings.append(text)
        case (.blob(let data), _): bindings.append(ByteBuffer(bytes: data))
        }
    }

    /// A value in COPY's text format: `\N` for NULL, tabs, newlines and backslashes escaped.
    private static func copyText(_ value: ColumnValue, type: String, into buffer: inout ByteBuffer) {
        let text: String
        switch (value, type) {
        case (.null, _): buffer.writeString("\\N"); return
        case (.integer(let number), "boolean"): text = number != 0 ? "t" : "f"
        case (.integer(let number), "timestamp with time zone"): text = Timestamp(millisecondsSince1970: number).iso8601
        case (.integer(let number), _): text = String(number)
        case (.real(let number), _): text = String(number)
        case (.text(let value), _): text = value
        case (.blob(let data), _): text = "\\x" + data.map { String(format: "%02x", $0) }.joined()
        }
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\\"): buffer.writeString("\\\\")
            case UInt8(ascii: "\t"): buffer.writeString("\\t")
            case UInt8(ascii: "\n"): buffer.writeString("\\n")
            case UInt8(ascii: "\r"): buffer.writeString("\\r")
            default: buffer.writeInteger(byte)
            }
        }
    }
}
