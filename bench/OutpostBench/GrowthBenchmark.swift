import ContractRuntime
import Contracts
import Foundation
import GRDB
import SampleServerApps
import SyncProtocol
import SyncServer

/// A year of a fleet's traffic on the SQLite server, time compressed, with the data horizons on
/// and, in the same run, the same traffic with them off: the database size at each quarter, and
/// a pull and a push at the end.
///
/// 100 teams of 20 field technicians, one device each (2 000 devices). Every simulated day a
/// fifth of the devices push 4 changes to their team's equipment (`ServiceAsset`, last writer
/// wins): a new asset, edits of live ones, and the retirement (deletion) of the oldest once a
/// team holds 60, so the live data stays the same size all year while the server's own records
/// (stored push results, tombstones, audit entries) keep coming. Each push is one call of the
/// real ``PushService``; the server clock is the simulated day's.
///
/// With horizons, ``ServerHousekeeping`` runs once a simulated day with the defaults (push
/// results pruned 7 days after their client acknowledged them, tombstones compacted after 90
/// days), and at the start of each month the audit entries older than 90 days are archived to a
/// file (`AuditChain.archive`), as an operator would. Without horizons nothing is removed.
///
/// At the end: a device of team 0 pulls its scope from the cursor it had a day earlier, a fresh
/// device pulls the whole scope, and a device pushes 4 changes; each 30 times, median.
enum GrowthBenchmark {
    static let teams = 100
    static let devicesPerTeam = 20
    static let days = 365
    static let activeSharePercent = 20
    static let changesPerPush = 4
    static let liveAssetsPerTeam = 60
    static let measurements = 30
    static let tenant = "fleet"
    static let dayMilliseconds: Int64 = 86_400_000
    static let start = Timestamp(iso8601: "2026-01-01T08:00:00.000Z")!.millisecondsSince1970

    static let benchmark = Benchmark(
        name: "growth",
        summary: "a year of \(teams * devicesPerTeam) devices' traffic on SQLite with the data horizons on and off: database size, "
            + "a pull and a push at the end (horizons on must be smaller, with pulls and pushes no slower than 1.25× off)",
        run: { try run() }
    )

    /// The server clock, moved by the simulation.
    final class SimulatedClock: ServerClock, @unchecked Sendable {
        private let lock = NSLock()
        private var milliseconds: Int64

        init(_ milliseconds: Int64) { self.milliseconds = milliseconds }

        func now() -> Timestamp { lock.withLock { Timestamp(millisecondsSince1970: milliseconds) } }
        func set(_ value: Int64) { lock.withLock { milliseconds = value } }
    }

    /// What one simulated year left behind.
    struct Year {
        var quarterSizes: [Int] = []
        var databaseBytes = 0
        var liveBytes = 0
        var archivedBytes = 0
        var pushResults = 0
        var tombstones = 0
        var liveRows = 0
        var auditEntries = 0
        var mutations = 0
        var simulationSeconds = 0.0
        var housekeepingSeconds = 0.0
        var incrementalPull = Samples()
        var fullPull = Samples()
        var push = Samples()
        var expiredCursorRefused = false
        var auditVerified = false
    }

    static func run() throws -> BenchmarkResult {
        var result = BenchmarkResult()
        let workspace = try TemporaryFolder("growth")
        defer { workspace.remove() }
        #if DEBUG
            result.fact("build", "DEBUG — these figures are not representative; run `make bench` (release)")
        #endif
        result.fact(
            "traffic",
            "\(teams) teams × \(devicesPerTeam) devices; each day \(activeSharePercent) % of them push \(changesPerPush) ServiceAsset "
                + "changes (create, edits, the oldest retired past \(liveAssetsPerTeam) per team); \(days) simulated days"
        )
        result.fact(
            "horizons on",
            "ServerHousekeeping daily (push results 7 d after acknowledged, tombstones 90 d); audit entries older than 90 d archived monthly")
        result.fact("storage", "SQLiteStorage (WAL) in \(workspace.url.path); sizes after a checkpoint")

        let with = try simulate(horizons: true, folder: try workspace.folder("horizons-on"))
        let without = try simulate(horizons: false, folder: try workspace.folder("horizons-off"))

        func quarters(_ year: Year) -> String { year.quarterSizes.map(Format.bytes).joined(separator: " → ") }
        result.rows = [
            .init(
                "mutations pushed in the year", median: Format.grouped(with.mutations),
                note: "each run; \(Format.duration(with.simulationSeconds)) on, \(Format.duration(without.simulationSeconds)) off"),
            .init("database at each quarter, horizons on", median: quarters(with)),
            .init("database at each quarter, horizons off", median: quarters(without)),
            .init(
                "database at the end, horizons on", median: Format.bytes(with.databaseBytes),
                note: "\(Format.bytes(with.liveBytes)) in use; \(Format.bytes(with.archivedBytes)) of audit archived to files"),
            .init(
                "database at the end, horizons off", median: Format.bytes(without.databaseBytes), note: "\(Format.bytes(without.liveBytes)) in use"),
            .init("ratio on / off, size", median: Format.ratio(Double(with.databaseBytes) / Double(without.databaseBytes))),
            .init("stored push results on / off", median: "\(Format.grouped(with.pushResults)) / \(Format.grouped(without.pushResults))"),
            .init("tombstones on / off", median: "\(Format.grouped(with.tombstones)) / \(Format.grouped(without.tombstones))"),
            .init("audit entries in the database on / off", median: "\(Format.grouped(with.auditEntries)) / \(Format.grouped(without.auditEntries))"),
            .init("live rows on / off", median: "\(Format.grouped(with.liveRows)) / \(Format.grouped(without.liveRows))"),
            .init("housekeeping, the whole year", median: Format.duration(with.housekeepingSeconds), note: "365 runs + 12 archives"),
            .init(
                "pull, 1 day of changes, horizons on", median: Format.duration(with.incrementalPull.median),
                min: Format.duration(with.incrementalPull.min)),
            .init(
                "pull, 1 day of changes, horizons off", median: Format.duration(without.incrementalPull.median),
                min: Format.duration(without.incrementalPull.min)),
            .init("pull, whole team scope, horizons on", median: Format.duration(with.fullPull.median), min: Format.duration(with.fullPull.min)),
            .init(
                "pull, whole team scope, horizons off", median: Format.duration(without.fullPull.median), min: Format.duration(without.fullPull.min)),
            .init("push of \(changesPerPush), horizons on", median: Format.duration(with.push.median), min: Format.duration(with.push.min)),
            .init("push of \(changesPerPush), horizons off", median: Format.duration(without.push.median), min: Format.duration(without.push.min)),
            .init(
                "ratio on / off: pull 1 day, whole pull, push",
                median: [
                    with.incrementalPull.median / without.incrementalPull.median, with.fullPull.median / without.fullPull.median,
                    with.push.median / without.push.median,
                ]
                .map(Format.ratio).joined(separator: ", ")
            ),
        ]

        let size = Double(with.liveBytes) / Double(without.liveBytes)
        result.check(
            "size", size < 1,
            "horizons on: \(Format.bytes(with.liveBytes)) in use against \(Format.bytes(without.liveBytes)) off (\(Format.ratio(size)))")
        // Bounded: the second half of the year adds less than half of what the first half did.
        let firstHalf = with.quarterSizes[1] - 0, secondHalf = with.quarterSizes[3] - with.quarterSizes[1]
        result.check(
            "bounded", Double(secondHalf) < Double(firstHalf) * 0.5,
            "horizons on: the database grew \(Format.bytes(firstHalf)) in the first half, \(Format.bytes(max(0, secondHalf))) in the second"
        )
        for (name, on, off) in [
            ("pull 1 day", with.incrementalPull.median, without.incrementalPull.median),
            ("whole pull", with.fullPull.median, without.fullPull.median),
            ("push", with.push.median, without.push.median),
        ] {
            result.check(
                name, on <= off * 1.25,
                "\(name): \(Format.duration(on)) on against \(Format.duration(off)) off (\(Format.ratio(on / off)); bar 1.25×)")
        }
        result.check("expired cursor", with.expiredCursorRefused, "a cursor older than the tombstone horizon is answered 410 cursor_expired")
        result.check(
            "audit", with.auditVerified && without.auditVerified,
            "the audit chain verifies at the end of both years (from the last archive's base with horizons)")
        return result
    }

    // MARK: One year

    static func simulate(horizons: Bool, folder: URL) throws -> Year {
        let storage = try SQLiteStorage(directory: folder, contracts: ContractRegistry.self)
        let clock = SimulatedClock(start)
        let push = PushService(storage: storage, clock: clock, reducers: SampleServerApps.reducers)
        let housekeeping = ServerHousekeeping(storage: storage, horizons: horizons ? .init() : .off)
        var generator = SeededGenerator(seed: 0x6772_6f77_7468)
        var fleet = Fleet()
        var year = Year()
        var archiveCount = 0
        var oldCursor: String?
        var yesterdayCursor: String?
        let observer = DeviceIdentity(tenant: tenant, userID: "observer", deviceID: "observer", teams: ["team-0"], expiresAt: .max)
        let pull = PullService(storage: storage)

        let simulation = try Timing.measure {
            for day in 0..<days {
                let dayStart = start + Int64(day) * dayMilliseconds
                if horizons, day > 0, day % 30 == 0 {
                    let cutoff = dayStart - 90 * dayMilliseconds
                    let file = folder.appendingPathComponent("audit-archive-\(archiveCount).jsonl")
                    let housekeepingStart = ContinuousClock.now
                    try runBlocking { _ = try await AuditChain.archive(storage, before: cutoff, to: file) }
                    year.housekeepingSeconds += Timing.seconds(ContinuousClock.now - housekeepingStart)
                    archiveCount += 1
                }
                for device in 0..<(teams * devicesPerTeam) where generator.chance(activeSharePercent) {
                    let time = dayStart + Int64(device) * 20
                    clock.set(time)
                    let request = fleet.push(device: device, at: time, using: &generator)
                    year.mutations += request.mutations.count
                    let identity = Fleet.identity(device)
                    _ = try runBlocking { try await push.push(request, identity: identity) }
                }
                clock.set(dayStart + dayMilliseconds - 1)
                let housekeepingStart = ContinuousClock.now
                _ = try runBlocking { try await housekeeping.run(now: Date(timeIntervalSince1970: Double(dayStart + dayMilliseconds - 1) / 1000)) }
                year.housekeepingSeconds += Timing.seconds(ContinuousClock.now - housekeepingStart)
                if day == 1 { oldCursor = try pullToEnd(pull, from: nil, as: observer).cursor }
                if day == days - 2 { yesterdayCursor = try pullToEnd(pull, from: nil, as: observer).cursor }
                if (day + 1) % (days / 4) == 0, year.quarterSizes.count < 4 { year.quarterSizes.append(try databaseBytes(folder).used) }
            }
        }
        year.simulationSeconds = simulation.seconds - year.housekeepingSeconds

        // Where the year ended.
        let sizes = try databaseBytes(folder)
        (year.databaseBytes, year.liveBytes) = (sizes.file, sizes.used)
        year.archivedBytes = (0..<archiveCount).reduce(0) { total, index in
            let file = folder.appendingPathComponent("audit-archive-\(index).jsonl")
            return total + ((try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? 0)
        }
        let counts = try DatabaseQueue(path: folder.appendingPathComponent("server.sqlite").path).read { db in
            (
                try Int.fetchOne(db, sql: "SELECT COALESCE(SUM(last_seq - first_seq + 1), 0) FROM push_results") ?? 0,
                try Int.fetchOne(db, sql: #"SELECT COUNT(*) FROM "service_assets" WHERE "_deleted" = 1"#) ?? 0,
                try Int.fetchOne(db, sql: #"SELECT COUNT(*) FROM "service_assets" WHERE "_deleted" = 0"#) ?? 0,
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM audit_log") ?? 0
            )
        }
        (year.pushResults, year.tombstones, year.liveRows, year.auditEntries) = counts

        // The end: what a device waits for.
        guard let yesterdayCursor else { throw BenchmarkError("no cursor from the day before the end") }
        for _ in 0..<measurements {
            year.incrementalPull.append(try Timing.measure { try pullToEnd(pull, from: yesterdayCursor, as: observer) }.seconds)
            year.fullPull.append(try Timing.measure { try pullToEnd(pull, from: nil, as: observer) }.seconds)
        }
        let end = start + Int64(days) * dayMilliseconds
        for index in 0..<measurements {
            let time = end + Int64(index) * 1000
            clock.set(time)
            let request = fleet.push(device: index % devicesPerTeam, at: time, using: &generator)
            let identity = Fleet.identity(index % devicesPerTeam)
            year.push.append(try Timing.measure { _ = try runBlocking { try await push.push(request, identity: identity) } }.seconds)
        }
        do {
            _ = try pullToEnd(pull, from: oldCursor, as: observer)
            year.expiredCursorRefused = false
        } catch let error as ServiceError {
            year.expiredCursorRefused = error.status == 410 && error.detail.code == .cursorExpired
        }
        if case .intact = try runBlocking({ try await AuditChain.verify(storage) }) { year.auditVerified = true }
        return year
    }

    /// Pulls a scope to its last page; returns the last page.
    @discardableResult
    static func pullToEnd(_ pull: PullService, from cursor: String?, as identity: DeviceIdentity) throws -> PullResponse {
        try runBlocking {
            var page = try await pull.pull(scope: "ops:team:team-0", cursor: cursor, limit: 1000, schema: [:], clientID: nil, identity: identity)
            while page.hasMore {
                page = try await pull.pull(scope: "ops:team:team-0", cursor: page.cursor, limit: 1000, schema: [:], clientID: nil, identity: identity)
            }
            return page
        }
    }

    /// The database file's size after a checkpoint, and the part of it in use (free pages left out).
    static func databaseBytes(_ folder: URL) throws -> (file: Int, used: Int) {
        let queue = try DatabaseQueue(path: folder.appendingPathComponent("server.sqlite").path)
        return try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 4096
            let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            let free = try Int.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0
            return (pages * pageSize, (pages - free) * pageSize)
        }
    }

    // MARK: The fleet

    /// Each team's live assets, oldest first, and each device's next `seq`.
    struct Fleet {
        var live: [[String]] = Array(repeating: [], count: GrowthBenchmark.teams)
        var nextSeq: [Int64] = Array(repeating: 1, count: GrowthBenchmark.teams * GrowthBenchmark.devicesPerTeam)
        var made = 0

        static func team(of device: Int) -> Int { device / GrowthBenchmark.devicesPerTeam }

        static func identity(_ device: Int) -> DeviceIdentity {
            DeviceIdentity(
                tenant: GrowthBenchmark.tenant, userID: "tech-\(device)", deviceID: "device-\(device)", teams: ["team-\(team(of: device))"],
                expiresAt: .max
            )
        }

        /// A device's push of the day: a new asset, edits of live ones, the oldest retired past the team's size.
        mutating func push(device: Int, at time: Int64, using generator: inout SeededGenerator) -> PushRequest {
            let team = Self.team(of: device)
            var mutations: [Mutation] = []
            func next(_ op: MutationOperation, _ id: String, _ payload: JSONValue?) {
                let seq = nextSeq[device]
                nextSeq[device] += 1
                let hlc = HybridLogicalClock(milliseconds: time, counter: mutations.count, node: "device-\(device)").description
                mutations.append(
                    Mutation(seq: seq, clientMutationId: "m-\(device)-\(seq)", entity: "ServiceAsset", op: op, id: id, payload: payload, hlc: hlc)
                )
            }
            made += 1
            let id = "asset-\(made)"
            next(.create, id, Self.payload(id, team: team, name: "Asset \(made)", battery: Double(generator.int(in: 0...100)) / 100))
            live[team].append(id)
            for _ in 1..<(GrowthBenchmark.changesPerPush - 1) {
                let edited = generator.pick(live[team])
                next(.update, edited, Self.payload(edited, team: team, name: "Edited \(made)", battery: Double(generator.int(in: 0...100)) / 100))
            }
            if live[team].count > GrowthBenchmark.liveAssetsPerTeam {
                next(.delete, live[team].removeFirst(), nil)
            } else {
                let edited = generator.pick(live[team])
                next(.update, edited, Self.payload(edited, team: team, name: "Checked \(made)", battery: 1))
            }
            return PushRequest(clientId: "device-\(device)", schema: ["ServiceAsset": 1], mutations: mutations)
        }

        static func payload(_ id: String, team: Int, name: String, battery: Double) -> JSONValue {
            .object([
                "id": .string(id), "team_id": .string("team-\(team)"), "asset_tag": .string(id.uppercased()), "display_name": .string(name),
                "category": .string("battery"), "battery_level": .double(battery), "attributes": .object(["model": .string("BX-\(team % 7)")]),
            ])
        }
    }
}
