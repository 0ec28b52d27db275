import ContractRuntime
import Contracts
import Foundation
import GRDB
import SyncProtocol
import SyncServer

/// Subscriptions on a large team (docs/PERFORMANCE.md): a device that subscribes to one
/// incident with the asset it names must not pay for the team's size.
///
/// A team's scope on the SQLite server holds 10 000 incidents, then 1 000 000 (one service
/// asset per 100 incidents), written straight into the database file. At each size, in the
/// same run:
///
/// - **subscribe**: the first page of `incident(id:)` for a random incident (``SubscriptionService``,
///   in process: the rows read from the derived indexes, then shaped and written as JSON);
/// - **baseline**: a full pull page of 50 rows of the same scope from a cursor in its middle
///   (``PullService``), what a device syncing the whole team pays for 50 rows;
/// - **raw read**: the same incident and asset read with two `SELECT`s on the server's file.
///
/// Bars: subscribe ≤ 1× the 50-row pull page at 1 000 000 rows; subscribe at 1 000 000 rows
/// within 1.5× of subscribe at 10 000 (flat in the team's size).
///
/// Then the server's cost per subscription pull as the subscriptions of other devices grow: 10
/// devices hold 10 subscriptions each, then 1 000 each (pulled in requests of 64, as devices
/// send them); the time of one device's pull of its 10 subscriptions, from their cursors, is
/// measured after each (bar: within 1.25×). The server stores nothing per subscription, so
/// this holds by construction; the figure keeps it so.
///
/// Then the device's side at 1 000 000 rows (``SubscriptionDevice``): a real device subscribing
/// over HTTP until the rows are in its store, against 50 rows' worth of a full pull, the same
/// device's engine syncing one 50-row page of the team's scope (bar: ≤ 1×; a bare 50-row page
/// and the raw read beside it); and poke fan-out at 1 000 live devices holding 10 subscriptions
/// each and syncing no team scope, against the same devices syncing the team's scope whole
/// (``SubscriptionFanOut``; bar: p99 within 1.5×, and the `live` benchmark's 250 ms; devices
/// that pull nothing beside them).
enum SubscriptionBenchmark {
    static let sizes = [10_000, 1_000_000]
    static let assetsEvery = 100
    static let runs = 201
    static let tenant = "bench"
    static let scopeKey = "ops:team:t-1"

    static let benchmark = Benchmark(
        name: "subscriptions",
        summary: "subscribing to one incident of a team of 10 000 and 1 000 000 rows against a 50-row pull page (bar ≤ 1×, flat in size), "
            + "and a pull's cost with 10×10 and 10×1 000 subscriptions held (bar ≤ 1.25×); a device's subscribe over HTTP against its syncNow() "
            + "of one 50-row page (bar ≤ 1×) and poke fan-out p99 at 1 000 devices with 10 subscriptions each against the team scope synced "
            + "whole (bar ≤ 1.5× and ≤ 250 ms)",
        run: { try run() }
    )

    static let device = DeviceIdentity(tenant: tenant, userID: "tech-0", deviceID: "phone-0", teams: ["t-1"], expiresAt: 4_102_444_800)

    static func run() throws -> BenchmarkResult {
        var result = BenchmarkResult()
        var subscribeMedians: [Int: Double] = [:]
        for size in sizes {
            let workspace = try TemporaryFolder("subscriptions")
            defer { workspace.remove() }
            let storage = try SQLiteStorage(directory: workspace.url, contracts: ContractRegistry.self)
            let (_, seconds) = try Timing.measure { try populate(workspace.url.appendingPathComponent("server.sqlite"), incidents: size) }
            result.fact("team of \(Format.grouped(size)) incidents", "written in \(Format.duration(seconds))")
            let pulls = PullService(storage: storage, defaultLimit: 50, maximumLimit: 50)
            let service = SubscriptionService(storage: storage, pages: pulls)
            var generator = SeededGenerator(seed: 0x7375_6273 &+ UInt64(size))

            var subscribe = Samples()
            var rows = 0
            for run in 0..<runs {
                let id = "inc-\(generator.int(in: 0...(size - 1)))"
                let request = SubscriptionPullRequest(subscriptions: [.init(id: "s", name: "incident", parameters: ["id": .string(id)])])
                let (answer, seconds) = try Timing.measure {
                    try runBlocking { try await service.pull(request, schema: [:], clientID: nil, identity: device) }
                }
                guard answer.subscriptions[0].error == nil, answer.subscriptions[0].upserts["Incident"]?.count == 1 else {
                    throw BenchmarkError("subscribing to \(id) did not answer the incident: \(answer.subscriptions[0])")
                }
                rows = answer.subscriptions[0].rowCount
                if run > 0 { subscribe.append(seconds) }
            }
            var baseline = Samples()
            let middle = SyncCursor(scopeKey: scopeKey, sequence: Int64(size / 2)).encoded
            for run in 0..<runs {
                let (page, seconds) = try Timing.measure {
                    try runBlocking {
                        try await pulls.page(scope: scopeKey, cursor: middle, limit: 50, schema: [:], clientID: nil, identity: device).json()
                    }
                }
                guard !page.isEmpty else { throw BenchmarkError("the 50-row pull page is empty") }
                if run > 0 { baseline.append(seconds) }
            }
            var raw = Samples()
            let queue = try DatabaseQueue(path: workspace.url.appendingPathComponent("server.sqlite").path)
            for run in 0..<runs {
                let id = "inc-\(generator.int(in: 0...(size - 1)))"
                let (_, seconds) = try Timing.measure {
                    try queue.read { db in
                        let incident = try Row.fetchOne(db, sql: "SELECT * FROM incidents WHERE _tenant_id = ? AND id = ?", arguments: [tenant, id])
                        let asset: String? = incident?["service_asset_id"]
                        return try Row.fetchOne(db, sql: "SELECT * FROM service_assets WHERE _tenant_id = ? AND id = ?", arguments: [tenant, asset])
                    }
                }
                if run > 0 { raw.append(seconds) }
            }
            subscribeMedians[size] = subscribe.median
            let ratio = subscribe.median / baseline.median
            result.rows.append(
                .init(
                    "subscribe to one incident (\(rows) rows), \(Format.grouped(size))", median: Format.duration(subscribe.median),
                    min: Format.duration(subscribe.min),
                    note: "\(Format.ratio(ratio)) the 50-row page; \(Format.ratio(subscribe.median / raw.median)) the raw read"))
            result.rows.append(
                .init("50-row pull page, \(Format.grouped(size))", median: Format.duration(baseline.median), min: Format.duration(baseline.min)))
            result.rows.append(
                .init("raw SQLite read of the same rows, \(Format.grouped(size))", median: Format.duration(raw.median), min: Format.duration(raw.min))
            )
            if size == sizes.last {
                result.check("subscribe ≤ 1× a 50-row pull page at \(Format.grouped(size)) rows", ratio <= 1, Format.ratio(ratio))
                try SubscriptionDevice.measure(
                    data: workspace.url, incidents: size, storage: storage, workspace: workspace, into: &result)
            }
        }
        let growth = subscribeMedians[sizes.last!]! / subscribeMedians[sizes.first!]!
        result.check("subscribe flat in the team's size (1 000 000 vs 10 000 within 1.5×)", growth <= 1.5, Format.ratio(growth))
        try held(into: &result)
        let fanOut = try TemporaryFolder("subscriptions-fan-out")
        defer { fanOut.remove() }
        try SubscriptionFanOut.measure(workspace: fanOut, into: &result)
        return result
    }

    /// One device's pull of its 10 subscriptions with 10×10 and with 10×1 000 subscriptions held.
    static func held(into result: inout BenchmarkResult) throws {
        let workspace = try TemporaryFolder("subscriptions-held")
        defer { workspace.remove() }
        let storage = try SQLiteStorage(directory: workspace.url, contracts: ContractRegistry.self)
        try populate(workspace.url.appendingPathComponent("server.sqlite"), incidents: 20_000)
        let service = SubscriptionService(storage: storage, pages: PullService(storage: storage))
        let devices = (0..<10).map {
            DeviceIdentity(tenant: tenant, userID: "tech-\($0)", deviceID: "phone-\($0)", teams: ["t-1"], expiresAt: 4_102_444_800)
        }

        func subscriptions(of device: Int, count: Int) -> [SubscriptionPullRequest.Entry] {
            (0..<count).map { .init(id: "s-\($0)", name: "incident", parameters: ["id": .string("inc-\(device * 2_000 + $0)")]) }
        }
        func syncAll(count: Int) throws -> [SubscriptionPullRequest.Entry] {
            var first: [SubscriptionPullRequest.Entry] = []
            for (index, identity) in devices.enumerated() {
                var entries = subscriptions(of: index, count: count)
                for start in stride(from: 0, to: entries.count, by: 64) {
                    let part = Array(entries[start..<min(start + 64, entries.count)])
                    let answer = try runBlocking {
                        try await service.pull(.init(subscriptions: part), schema: [:], clientID: nil, identity: identity)
                    }
                    for (offset, page) in answer.subscriptions.enumerated() { entries[start + offset].cursor = page.cursor }
                }
                if index == 0 { first = Array(entries.prefix(10)) }
            }
            return first
        }
        var medians: [Int: Double] = [:]
        for count in [10, 1_000] {
            let entries = try syncAll(count: count)
            var samples = Samples()
            for run in 0..<runs {
                let (_, seconds) = try Timing.measure {
                    try runBlocking { try await service.pull(.init(subscriptions: entries), schema: [:], clientID: nil, identity: devices[0]) }
                }
                if run > 0 { samples.append(seconds) }
            }
            medians[count] = samples.median
            result.rows.append(
                .init(
                    "a device's pull of its 10 subscriptions, 10 × \(Format.grouped(count)) held", median: Format.duration(samples.median),
                    min: Format.duration(samples.min)))
        }
        let ratio = medians[1_000]! / medians[10]!
        result.check("a pull's cost flat in the subscriptions held (10 × 1 000 vs 10 × 10 within 1.25×)", ratio <= 1.25, Format.ratio(ratio))
    }

    /// `incidents` incidents of `team` and one service asset per ``assetsEvery`` (ids `inc-N`
    /// and `sa-N` after `idPrefix`), written straight into the server's database in one
    /// transaction after what its scope holds, with the scope's sequence after them.
    static func populate(_ file: URL, incidents: Int, tenant: String = SubscriptionBenchmark.tenant, team: String = "t-1", idPrefix: String = "")
        throws
    {
        let scopeKey = "ops:team:\(team)"
        let queue = try DatabaseQueue(path: file.path)
        try queue.inTransaction { db in
            let assets = try db.makeStatement(
                sql: """
                    INSERT INTO service_assets (_tenant_id, id, team_id, asset_tag, display_name, category, updated_at, _scope_key, _seq,
                    _schema_version, _updated_at) VALUES (?, ?, ?, ?, ?, 'vehicle', 1769846400000, ?, ?, 1, 1769846400000)
                    """)
            let rows = try db.makeStatement(
                sql: """
                    INSERT INTO incidents (_tenant_id, id, team_id, number, short_description, state, service_asset_id, assignee_id,
                    opened_at, updated_at, _scope_key, _seq, _schema_version, _updated_at)
                    VALUES (?, ?, ?, ?, ?, 'new', ?, ?, 1769846400000, 1769846400000, ?, ?, 1, 1769846400000)
                    """)
            var seq =
                try Int64.fetchOne(db, sql: "SELECT last_seq FROM scope_sequences WHERE tenant = ? AND scope_key = ?", arguments: [tenant, scopeKey])
                ?? 0
            for index in 0..<(incidents / assetsEvery) {
                seq += 1
                try assets.execute(arguments: [tenant, "\(idPrefix)sa-\(index)", team, "TAG-\(index)", "Scooter \(index)", scopeKey, seq])
            }
            for index in 0..<incidents {
                seq += 1
                try rows.execute(arguments: [
                    tenant, "\(idPrefix)inc-\(index)", team, "INC\(index)", "Broken scooter \(index): the brake lever is loose",
                    "\(idPrefix)sa-\(index / assetsEvery)", "tech-\(index % 20)", scopeKey, seq,
                ])
            }
            try db.execute(
                sql: """
                    INSERT INTO scope_sequences (tenant, scope_key, last_seq) VALUES (?, ?, ?)
                    ON CONFLICT (tenant, scope_key) DO UPDATE SET last_seq = excluded.last_seq
                    """, arguments: [tenant, scopeKey, seq])
            return .commit
        }
    }
}
