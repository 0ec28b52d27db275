import Contracts
import Foundation
import GRDB
import SyncClient
import SyncProtocol
import SyncServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The device's side of `subscriptions`: a real device subscribing over HTTP to one incident of
/// a team of 1 000 000 rows, against 50 rows' worth of a full pull: the same device's engine
/// syncing one 50-row page of the team's scope.
///
/// `sync-server serve` runs on the team's database (seeded by ``SubscriptionBenchmark``) on a
/// free port of 127.0.0.1; the device is an ``OfflineStore`` on a SQLite file in an empty folder
/// and one ``URLSessionTransport`` for the whole run (its connection kept alive, as an app's).
/// Run after run, each timed on a fresh store (opened before the clock starts, so every sample
/// really fetches and stores), in an order that turns from run to run:
///
/// - **subscribe**: `engine.subscribe(Subscriptions.incident(id:))` on a ``SyncEngine`` with no
///   scopes (a technician who does not sync the whole team), then `waitForFirstSync()` on its
///   handle: the engine's whole sync (push, subscription pull, bookkeeping) until the incident
///   and its asset are in the store;
/// - **baseline**, 50 rows' worth of a full pull: `syncNow()` on a ``SyncEngine`` syncing the
///   team's scope with pages of 50, its cursor 50 rows before the scope's end, so its only work
///   is one 50-row page: the full pull's machinery (push, urgent-changes check, page, commit) for
///   50 rows;
/// - **bare page**: a page of 50 rows of the team's scope from a random cursor, fetched with the
///   same transport, read and stored in one transaction (`applyServerChanges`), none of a sync's
///   bookkeeping (information);
/// - **raw read**: the same incident and asset read with two `SELECT`s on the server's file
///   (information).
///
/// Bar: subscribe ≤ 1× the one-page sync, as the median of the runs' pair ratios. Beside them,
/// to say where a subscribe's time goes: the subscription's request alone and a `syncNow()`
/// with nothing to sync (``Kind``).
enum SubscriptionDevice {
    static let runs = 101
    static let pageRows = 50
    static let user = "tech-0"

    /// What one sample times, each on a fresh store.
    enum Kind: CaseIterable, Sendable {
        /// `subscribe` then `waitForFirstSync()`: the bar's numerator.
        case subscribe
        /// A 50-row page fetched, read and stored, outside any sync (information).
        case page
        /// The subscription's request alone (HTTP and decoding, nothing stored).
        case subscriptionRequest
        /// `syncNow()` of an engine with no scopes and no subscriptions: what any sync costs.
        case emptySync
        /// `syncNow()` of an engine whose team cursor is 50 rows before the scope's end: one
        /// page inside a whole sync, as the engine pulls it: the bar's baseline.
        case pageSync
    }

    struct Figures: Sendable {
        var samples: [Kind: Samples] = [:]
        var raw = Samples()
        /// Subscribe over the one-page sync, run by run: the bar.
        var pairRatios = Samples()
        /// Subscribe over the bare page, run by run (information).
        var pagePairRatios = Samples()
        var subscriptionRows = 0
    }

    /// One sample of `kind` on `store` (fresh, opened untimed): its seconds, and the rows the
    /// subscription holds for ``Kind/subscribe``.
    static func sample(
        _ kind: Kind, store: OfflineStore, transport: URLSessionTransport, id: String, cursor: String, assets: Int, incidents: Int
    ) async throws -> (seconds: Double, rows: Int) {
        let scopeKey = SubscriptionBenchmark.scopeKey
        let clock = ContinuousClock()
        var rows = 0
        switch kind {
        case .subscribe, .emptySync:
            let engine = SyncEngine(
                store: store, transport: transport, configuration: SyncEngineConfiguration(scopes: [], retriesAutomatically: false))
            let start = clock.now
            if kind == .emptySync {
                let result = await engine.syncNow()
                guard case .succeeded = result else { throw BenchmarkError("an empty sync answered \(result)") }
                return (Timing.seconds(clock.now - start), 0)
            }
            let handle = try await engine.subscribe(Subscriptions.incident(id: id))
            try await handle.waitForFirstSync()
            let seconds = Timing.seconds(clock.now - start)
            guard let incident = try store.fetch(Incident.self, id: id), let asset = incident.serviceAssetId,
                try store.fetch(ServiceAsset.self, id: asset) != nil
            else { throw BenchmarkError("after waitForFirstSync() the store lacks incident \(id) or its asset") }
            rows = try handle.status?.rowCount ?? 0
            return (seconds, rows)
        case .page:
            let start = clock.now
            let body = try await transport.pull(
                scope: scopeKey, cursor: cursor, limit: pageRows, schema: try store.requestSchemaVersions(), clientID: store.identity.clientId)
            let report = try store.applyServerChanges(ServerChanges(pull: try PullResponse(json: body), scopeKey: scopeKey))
            let seconds = Timing.seconds(clock.now - start)
            let stored = report.upserted.values.reduce(0, +)
            guard stored == pageRows else { throw BenchmarkError("the 50-row page stored \(stored) rows") }
            return (seconds, stored)
        case .subscriptionRequest:
            let request = SubscriptionPullRequest(subscriptions: [.init(id: "s", name: "incident", parameters: ["id": .string(id)])])
            let start = clock.now
            let answer = try await transport.pullSubscriptions(request, schema: try store.requestSchemaVersions(), clientID: store.identity.clientId)
            let seconds = Timing.seconds(clock.now - start)
            guard answer.subscriptions.first?.error == nil, answer.subscriptions.first?.upserts["Incident"]?.count == 1 else {
                throw BenchmarkError("the subscription request did not answer the incident: \(answer.subscriptions)")
            }
            return (seconds, answer.subscriptions[0].rowCount)
        case .pageSync:
            let last = SyncCursor(scopeKey: scopeKey, sequence: Int64(assets + incidents - pageRows)).encoded
            try store.storeCursor(last, forScope: scopeKey)
            let engine = SyncEngine(
                store: store, transport: transport,
                configuration: SyncEngineConfiguration(scopes: [scopeKey], pullPageSize: pageRows, retriesAutomatically: false))
            let start = clock.now
            let result = await engine.syncNow()
            let seconds = Timing.seconds(clock.now - start)
            guard case .succeeded(_, let pulled) = result, pulled == pageRows else {
                throw BenchmarkError("a sync of the scope's last 50 rows answered \(result)")
            }
            return (seconds, pulled)
        }
    }

    /// The incident and its asset read with two `SELECT`s, as ``SubscriptionBenchmark`` reads
    /// them (GRDB's blocking read, not its async one); the seconds it took.
    static func rawRead(_ queue: DatabaseQueue, id: String) throws -> Double {
        let tenant = SubscriptionBenchmark.tenant
        return try Timing.measure {
            try queue.read { db in
                let incident = try Row.fetchOne(db, sql: "SELECT * FROM incidents WHERE _tenant_id = ? AND id = ?", arguments: [tenant, id])
                let asset: String? = incident?["service_asset_id"]
                _ = try Row.fetchOne(db, sql: "SELECT * FROM service_assets WHERE _tenant_id = ? AND id = ?", arguments: [tenant, asset])
            }
        }.seconds
    }

    /// Measures against `sync-server serve` on `data` (its `server.sqlite` holds `incidents`
    /// incidents of team t-1); folders for the stores go in `workspace`.
    static func measure(data: URL, incidents: Int, storage: SQLiteStorage, workspace: TemporaryFolder, into result: inout BenchmarkResult) throws {
        let tenant = SubscriptionBenchmark.tenant
        let scopeKey = SubscriptionBenchmark.scopeKey
        // The server reads teams from its memberships, not from the token.
        try runBlocking {
            try await storage.write { transaction in
                _ = try await transaction.setTeamMembership(tenant: tenant, team: "t-1", userID: user, isMember: true)
            }
        }
        let signer = try TokenKey.signer(secretFile: nil, dataDirectory: data, environment: [:])
        let token = signer.sign(
            DeviceIdentity(tenant: tenant, userID: user, deviceID: "phone-0", teams: ["t-1"], expiresAt: Int64(Date().timeIntervalSince1970) + 86_400)
        )
        let server = try ChildProcess(
            try siblingExecutable("sync-server"),
            [
                "serve", "--data", data.path, "--port", "0", "--secret-file", data.appendingPathComponent(TokenKey.fileName).path,
                "--rate", "0", "--housekeeping-interval", "off",
            ],
            logs: workspace.url, name: "subscriptions-server", environment: ["LOG_LEVEL": "warning", "OUTPOST_POSTGRES_URL": ""]
        )
        defer { server.stop() }
        let line = try server.waitForLine(containing: "listening on http://", timeout: 120)
        guard let address = line.range(of: "http://127.0.0.1:"), let port = Int(line[address.upperBound...].prefix { $0.isNumber }) else {
            throw BenchmarkError("cannot read the port in sync-server's line '\(line)'")
        }
        let transport = URLSessionTransport(baseURL: URL(string: "http://127.0.0.1:\(port)")!, timeout: 60) { token }
        let raw = try DatabaseQueue(path: data.appendingPathComponent("server.sqlite").path)
        let assets = incidents / SubscriptionBenchmark.assetsEvery

        let figures = try runBlocking { () async throws -> Figures in
            var figures = Figures()
            var generator = SeededGenerator(seed: 0x6465_7669_6365)
            for run in 0..<runs {
                let id = "inc-\(generator.int(in: 0...(incidents - 1)))"
                // Sequences after the assets are incidents: a page of 50 of them, from anywhere.
                let cursor = SyncCursor(scopeKey: scopeKey, sequence: Int64(generator.int(in: assets...(assets + incidents - pageRows)))).encoded
                var seconds: [Kind: Double] = [:]
                // The order turns run by run, so none always finds the server warmer.
                for offset in 0..<Kind.allCases.count {
                    let kind = Kind.allCases[(run + offset) % Kind.allCases.count]
                    let folder = try workspace.folder("device-\(run)-\(kind)")
                    let store = try ClientStoreBenchmarks.openStore(folder, tenantId: tenant)
                    let (time, rows) = try await sample(
                        kind, store: store, transport: transport, id: id, cursor: cursor, assets: assets, incidents: incidents)
                    seconds[kind] = time
                    if kind == .subscribe { figures.subscriptionRows = rows }
                    try store.close()
                    workspace.remove(folder)
                }
                let rawSeconds = try rawRead(raw, id: id)
                // The first run opens the connection and warms both sides: dropped.
                guard run > 0 else { continue }
                for (kind, time) in seconds { figures.samples[kind, default: Samples()].append(time) }
                figures.raw.append(rawSeconds)
                figures.pairRatios.append(seconds[.subscribe]! / seconds[.pageSync]!)
                figures.pagePairRatios.append(seconds[.subscribe]! / seconds[.page]!)
            }
            return figures
        }
        try raw.close()

        let size = Format.grouped(incidents)
        let subscribe = figures.samples[.subscribe]!, pageSync = figures.samples[.pageSync]!, page = figures.samples[.page]!
        result.fact(
            "device over HTTP",
            "sync-server serve on the \(size)-incident team, one URLSessionTransport; each sample on a fresh OfflineStore (opened untimed); "
                + "\(runs - 1) runs after 1 warm-up, the order turning")
        result.rows.append(
            .init(
                "device: subscribe + waitForFirstSync over HTTP (\(figures.subscriptionRows) rows), \(size)",
                median: Format.duration(subscribe.median),
                min: Format.duration(subscribe.min),
                note:
                    "\(Format.ratio(figures.pairRatios.median)) the one-page syncNow() (bar; median of pairs; "
                    + "\(Format.ratio(subscribe.median / pageSync.median)) of medians)"))
        result.rows.append(
            .init(
                "device: syncNow() pulling one 50-row page of the team scope (50 rows' worth of a full pull), \(size)",
                median: Format.duration(pageSync.median), min: Format.duration(pageSync.min), note: "the bar's baseline"))
        result.rows.append(
            .init(
                "device: bare 50-row pull page over HTTP, read and stored, no sync (information), \(size)", median: Format.duration(page.median),
                min: Format.duration(page.min),
                note:
                    "subscribe is \(Format.ratio(figures.pagePairRatios.median)) this (median of pairs; "
                    + "\(Format.ratio(subscribe.median / page.median)) of medians)"))
        let context: [(Kind, String)] = [
            (.subscriptionRequest, "device: the subscription's request alone (HTTP, decoded; information)"),
            (.emptySync, "device: syncNow() with nothing to sync (information)"),
        ]
        for (kind, label) in context {
            let samples = figures.samples[kind]!
            result.rows.append(
                .init(
                    "\(label), \(size)", median: Format.duration(samples.median), min: Format.duration(samples.min),
                    note: "subscribe is \(Format.ratio(subscribe.median / samples.median)) this"))
        }
        result.rows.append(
            .init(
                "raw SQLite read of the same rows (server's file; information), \(size)", median: Format.duration(figures.raw.median),
                min: Format.duration(figures.raw.min), note: "subscribe is \(Format.ratio(subscribe.median / figures.raw.median)) this"))
        result.check(
            "a device's subscribe over HTTP ≤ 1× 50 rows' worth of a full pull (its engine's syncNow() of one 50-row team page) at \(size) rows",
            figures.pairRatios.median <= 1,
            "\(Format.ratio(figures.pairRatios.median)) (median of \(figures.pairRatios.count) pairs; p90 \(Format.ratio(figures.pairRatios.percentile(0.9)))); "
                + "information: \(Format.ratio(figures.pagePairRatios.median)) a bare 50-row page, "
                + "\(Format.ratio(subscribe.median / figures.raw.median)) a raw SQLite read of the same rows"
        )
    }
}
