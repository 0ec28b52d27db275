import ContractRuntime
import Foundation
package import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle
package import SyncProtocol

/// The fleet census: what the server knows of each device from its requests (when it was
/// last seen, its app and schema versions, its latest syncs, its telemetry), kept in the
/// `device_census` table of the server's storage.
///
/// Requests are observed in memory (``observe(_:)``: a lock and a dictionary entry, nothing
/// written), and the observations are written together every ``flushInterval`` by the server's
/// census service (``run()``), and once more when it stops: a push or pull never waits on the
/// census. A process that dies loses at most its last interval of observations; the devices
/// are seen again at their next sync. Reads flush this process's observations first.
package final class FleetCensus: Service, Sendable {
    /// How many of a device's latest syncs are kept.
    package static let recentLimit = 20
    /// Devices observed and not written yet beyond which the next observation writes at once,
    /// rather than waiting for the interval: memory stays bounded under a burst of devices.
    package static let pendingLimit = 20_000

    let storage: any SyncStorage
    let clock: any ServerClock
    let flushInterval: Duration
    let metrics: ServerMetrics?
    let logger: Logger
    private let pending = NIOLockedValueBox([DeviceKey: Observed]())
    /// Tenants with labels of their own in the telemetry metrics: at most ``labelledTenantLimit``,
    /// the others count as `_other`, so a server of many tenants keeps a bounded exposition.
    private let labelledTenants = NIOLockedValueBox(Set<String>())
    package static let labelledTenantLimit = 200
    private let wakeups: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation
    /// One flush at a time: two would write one device's observations twice.
    private let flushTurns = FlushTurns()

    package init(
        storage: any SyncStorage, clock: any ServerClock, flushInterval: Duration = .seconds(5), metrics: ServerMetrics? = nil,
        logger: Logger = Logger(label: "outpost.census")
    ) {
        self.storage = storage
        self.clock = clock
        self.flushInterval = flushInterval
        self.metrics = metrics
        self.logger = logger
        (wakeups, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    struct DeviceKey: Hashable {
        var tenant: String
        var userID: String
        var deviceID: String
    }

    /// One request of a device, as the census middleware saw it.
    package struct Observation: Sendable {
        package var tenant: String
        package var userID: String
        package var deviceID: String
        /// Seconds since 1970.
        package var at: Int64
        package var appVersion: String?
        /// `X-Outpost-Schema` as sent (``SchemaHeader``), read only when it changed.
        package var schemaHeader: String?
        /// `push`, `pull` or `live` for a sync; `nil` for any other request (seen, not a sync).
        package var route: String?
        package var status: Int
        package var outcome: String
        package var milliseconds: Int
        /// The device's telemetry, only from a request the server accepted.
        package var telemetry: [DeviceTelemetry: Int64]

        package init(
            tenant: String, userID: String, deviceID: String, at: Int64, appVersion: String?, schemaHeader: String?, route: String?, status: Int,
            outcome: String, milliseconds: Int, telemetry: [DeviceTelemetry: Int64]
        ) {
            self.tenant = tenant
            self.userID = userID
            self.deviceID = deviceID
            self.at = at
            self.appVersion = appVersion
            self.schemaHeader = schemaHeader
            self.route = route
            self.status = status
            self.outcome = outcome
            self.milliseconds = milliseconds
            self.telemetry = telemetry
        }

        /// An observation whose schema versions are given already read.
        package init(
            tenant: String, userID: String, deviceID: String, at: Int64, appVersion: String?, schema: [String: Int], route: String?, status: Int,
            outcome: String, milliseconds: Int, telemetry: [DeviceTelemetry: Int64]
        ) {
            self.init(
                tenant: tenant, userID: userID, deviceID: deviceID, at: at, appVersion: appVersion,
                schemaHeader: schema.isEmpty ? nil : SchemaHeader.encode(schema), route: route, status: status, outcome: outcome,
                milliseconds: milliseconds, telemetry: telemetry)
        }
    }

    /// What this process observed of one device since its last flush.
    struct Observed {
        var firstSeenAt: Int64
        var lastSeenAt: Int64
        var appVersion: String?
        var schema: [String: Int] = [:]
        /// The `X-Outpost-Schema` text last read into ``schema``.
        var schemaHeader: String?
        var last: SyncOutcome?
        var pushes: Int64 = 0
        var pulls: Int64 = 0
        var failures: Int64 = 0
        var recent: [SyncOutcome] = []
        var counters: [DeviceTelemetry: Int64] = [:]
        /// The part of ``counters`` not in the metrics yet (all of it until a flush records it;
        /// none once a failed flush puts the observation back).
        var unrecorded: [DeviceTelemetry: Int64] = [:]
        var gauges: [DeviceTelemetry: Int64] = [:]
    }

    /// Notes one request of a device; writes nothing.
    package func observe(_ observation: Observation) {
        let count = pending.withLockedValue { pending in
            let key = DeviceKey(tenant: observation.tenant, userID: observation.userID, deviceID: observation.deviceID)
            var observed = pending[key] ?? Observed(firstSeenAt: observation.at, lastSeenAt: observation.at)
            observed.lastSeenAt = max(observed.lastSeenAt, observation.at)
            observed.firstSeenAt = min(observed.firstSeenAt, observation.at)
            if let app = observation.appVersion { observed.appVersion = app }
            if let header = observation.schemaHeader, header != observed.schemaHeader {
                observed.schemaHeader = header
                if let versions = SchemaHeader.decode(header) { observed.schema.merge(versions) { $1 } }
            }
            if let route = observation.route {
                let outcome = SyncOutcome(
                    at: observation.at, route: route, status: observation.status, outcome: observation.outcome, milliseconds: observation.milliseconds
                )
                observed.last = outcome
                observed.recent.insert(outcome, at: 0)
                if observed.recent.count > Self.recentLimit { observed.recent.removeLast() }
                if route == "push" { observed.pushes += 1 } else if route == "pull" { observed.pulls += 1 }
                if observation.status >= 400 { observed.failures += 1 }
            }
            for (name, value) in observation.telemetry {
                if name.isGauge {
                    observed.gauges[name] = value
                } else {
                    observed.counters[name, default: 0] += value
                    observed.unrecorded[name, default: 0] += value
                }
            }
            pending[key] = observed
            return pending.count
        }
        if count >= Self.pendingLimit { wake.yield() }
    }

    /// The telemetry counters noted since the last flush, summed per tenant, into the metrics:
    /// at most every ``flushInterval`` behind, which a scrape every 15 s or more does not see.
    private func recordMetrics(_ taken: [DeviceKey: Observed]) {
        guard let metrics else { return }
        var perTenant: [String: [DeviceTelemetry: Int64]] = [:]
        for (key, observed) in taken where !observed.unrecorded.isEmpty {
            perTenant[key.tenant, default: [:]].merge(observed.unrecorded, uniquingKeysWith: +)
        }
        for (tenant, counters) in perTenant {
            let label = labelledTenants.withLockedValue { tenants in
                if tenants.contains(tenant) { return tenant }
                guard tenants.count < Self.labelledTenantLimit else { return "_other" }
                tenants.insert(tenant)
                return tenant
            }
            metrics.recordDeviceTelemetry(tenantLabel: label, counters)
        }
    }

    /// Writes every observation noted so far.
    package func flush() async throws {
        // A read waits for a flush under way, so it sees what was observed before it.
        await flushTurns.take()
        let taken = pending.withLockedValue { pending in
            defer { pending = [:] }
            return pending
        }
        recordMetrics(taken)
        do {
            if !taken.isEmpty { try await write(Array(taken)) }
            await flushTurns.give()
        } catch {
            // Put them back (merged with what arrived meanwhile) for the next flush.
            pending.withLockedValue { pending in
                for (key, var observed) in taken {
                    observed.unrecorded = [:]
                    pending[key] = pending[key].map { Self.merge(older: observed, newer: $0) } ?? observed
                }
            }
            await flushTurns.give()
            throw error
        }
    }

    /// Flushes every ``flushInterval`` (sooner when ``pendingLimit`` is reached) until the
    /// server stops, then once more.
    package func run() async throws {
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await _ in self.wakeups { await self.flushLogging() }
                }
                group.addTask {
                    while !Task.isCancelled {
                        try? await Task.sleep(for: self.flushInterval)
                        self.wake.yield()
                    }
                }
                await group.next()
                group.cancelAll()
            }
        }
        await flushLogging()
    }

    private func flushLogging() async {
        do {
            try await flush()
        } catch {
            logger.warning("the fleet census could not be written; kept for the next try: \(String(reflecting: error))")
        }
    }

    private static func merge(older: Observed, newer: Observed) -> Observed {
        var merged = newer
        merged.firstSeenAt = min(older.firstSeenAt, newer.firstSeenAt)
        merged.appVersion = newer.appVersion ?? older.appVersion
        merged.schema = older.schema.merging(newer.schema) { $1 }
        merged.schemaHeader = newer.schemaHeader ?? older.schemaHeader
        merged.last = newer.last ?? older.last
        merged.pushes += older.pushes
        merged.pulls += older.pulls
        merged.failures += older.failures
        merged.recent = Array((newer.recent + older.recent).prefix(recentLimit))
        merged.counters.merge(older.counters) { $0 + $1 }
        merged.unrecorded.merge(older.unrecorded) { $0 + $1 }
        merged.gauges = older.gauges.merging(newer.gauges) { $1 }
        return merged
    }

    // MARK: Writing

    /// Counters are added in SQL, so two processes that saw the same device both count; the
    /// rest is the newer of the row and the observation, and a device's latest syncs merge by time.
    private func write(_ observations: [(key: DeviceKey, value: Observed)]) async throws {
        for batch in stride(from: 0, to: observations.count, by: 500).map({ observations[$0..<min($0 + 500, observations.count)] }) {
            try await storage.write { transaction in
                // Two reads per tenant of the batch, not two per device: the users' erasures and
                // the devices' stored rows.
                for (tenant, devices) in Dictionary(grouping: batch, by: \.key.tenant) {
                    let users = Array(Set(devices.map(\.key.userID))).sorted()
                    let marks = Array(repeating: "?", count: users.count).joined(separator: ", ")
                    let arguments = [ColumnValue.text(tenant)] + users.map(ColumnValue.text)
                    var erasedAt: [String: Int64] = [:]
                    for row in try await transaction.serverTableQuery(
                        "SELECT user_id, erased_at FROM erasures WHERE tenant = ? AND user_id IN (\(marks))", arguments)
                    {
                        if case .text(let user) = row["user_id"], case .integer(let at) = row["erased_at"] {
                            erasedAt[user] = max(erasedAt[user] ?? at, at)
                        }
                    }
                    var stored: [DeviceKey: (seen: Int64, recent: String, schema: String)] = [:]
                    for row in try await transaction.serverTableQuery(
                        "SELECT user_id, device_id, last_seen_at, recent, schema FROM device_census WHERE tenant = ? AND user_id IN (\(marks))",
                        arguments)
                    {
                        guard case .text(let user) = row["user_id"], case .text(let device) = row["device_id"],
                            case .integer(let seen) = row["last_seen_at"], case .text(let recent) = row["recent"],
                            case .text(let schema) = row["schema"]
                        else { continue }
                        stored[DeviceKey(tenant: tenant, userID: user, deviceID: device)] = (seen, recent, schema)
                    }
                    for (key, observed) in devices {
                        // A user erased since: the census keeps nothing of them (their tokens are refused from then on).
                        if let erased = erasedAt[key.userID], erased >= observed.lastSeenAt { continue }
                        var recent = observed.recent
                        var schema = observed.schema
                        if let existing = stored[key] {
                            recent = Array((recent + Self.decodeRecent(existing.recent)).sorted { $0.at > $1.at }.prefix(Self.recentLimit))
                            // The newer list of versions wins, with the contracts only the older one named.
                            let older = SchemaHeader.decode(existing.schema) ?? [:]
                            schema = existing.seen > observed.lastSeenAt ? schema.merging(older) { $1 } : older.merging(schema) { $1 }
                        }
                        try await Self.upsert(key, observed, recent: recent, schema: schema, in: transaction)
                    }
                }
            }
        }
    }

    private static let counterColumns: [(DeviceTelemetry, String)] = DeviceTelemetry.allCases.map { ($0, "t_" + $0.rawValue) }

    private static func upsert(
        _ key: DeviceKey, _ observed: Observed, recent: [SyncOutcome], schema: [String: Int], in transaction: any StorageTransaction
    ) async throws {
        let newer = "excluded.last_seen_at >= device_census.last_seen_at"
        var columns = [
            "tenant", "user_id", "device_id", "first_seen_at", "last_seen_at", "app_version", "schema", "last_outcome", "last_status", "last_route",
            "pushes", "pulls", "failures", "recent",
        ]
        var values: [ColumnValue] = [
            .text(key.tenant), .text(key.userID), .text(key.deviceID), .integer(observed.firstSeenAt), .integer(observed.lastSeenAt),
            observed.appVersion.map(ColumnValue.text) ?? .null, .text(SchemaHeader.encode(schema)),
            observed.last.map { .text($0.outcome) } ?? .null, observed.last.map { .integer(Int64($0.status)) } ?? .null,
            observed.last.map { .text($0.route) } ?? .null,
            .integer(observed.pushes), .integer(observed.pulls), .integer(observed.failures), .text(encodeRecent(recent)),
        ]
        var updates = [
            "first_seen_at = CASE WHEN excluded.first_seen_at < device_census.first_seen_at THEN excluded.first_seen_at ELSE device_census.first_seen_at END",
            "last_seen_at = CASE WHEN \(newer) THEN excluded.last_seen_at ELSE device_census.last_seen_at END",
            "app_version = CASE WHEN \(newer) AND excluded.app_version IS NOT NULL THEN excluded.app_version ELSE device_census.app_version END",
            "last_outcome = CASE WHEN \(newer) AND excluded.last_outcome IS NOT NULL THEN excluded.last_outcome ELSE device_census.last_outcome END",
            "last_status = CASE WHEN \(newer) AND excluded.last_status IS NOT NULL THEN excluded.last_status ELSE device_census.last_status END",
            "last_route = CASE WHEN \(newer) AND excluded.last_route IS NOT NULL THEN excluded.last_route ELSE device_census.last_route END",
            "pushes = device_census.pushes + excluded.pushes", "pulls = device_census.pulls + excluded.pulls",
            "failures = device_census.failures + excluded.failures", "recent = excluded.recent", "schema = excluded.schema",
        ]
        for (name, column) in counterColumns {
            columns.append(column)
            if name.isGauge {
                values.append(observed.gauges[name].map(ColumnValue.integer) ?? .null)
                updates.append(
                    "\(column) = CASE WHEN excluded.\(column) IS NOT NULL AND \(newer) THEN excluded.\(column) ELSE device_census.\(column) END")
            } else {
                values.append(.integer(observed.counters[name] ?? 0))
                updates.append("\(column) = device_census.\(column) + excluded.\(column)")
            }
        }
        _ = try await transaction.serverTableQuery(
            """
            INSERT INTO device_census (\(columns.joined(separator: ", "))) VALUES (\(Array(repeating: "?", count: columns.count).joined(separator: ", ")))
            ON CONFLICT (tenant, user_id, device_id) DO UPDATE SET \(updates.joined(separator: ", "))
            """, values)
    }

    private static func encodeRecent(_ recent: [SyncOutcome]) -> String {
        String(decoding: (try? JSONEncoder().encode(recent)) ?? Data("[]".utf8), as: UTF8.self)
    }

    private static func decodeRecent(_ text: String) -> [SyncOutcome] {
        (try? JSONDecoder().decode([SyncOutcome].self, from: Data(text.utf8))) ?? []
    }

    // MARK: Reading

    /// Devices per contract version and app version, active when seen within `activeSeconds`
    /// of `now`; of one tenant, or of every tenant when `tenant` is `nil`.
    package func summary(tenant: String?, now: Int64, activeSeconds: Int64) async throws -> FleetSummary {
        try await flush()
        return try await storage.read { reader in
            var summary = FleetSummary(tenant: tenant, generatedAt: now, activeWindowSeconds: activeSeconds)
            let rows =
                if let tenant {
                    try await reader.serverTableQuery("SELECT last_seen_at, schema, app_version FROM device_census WHERE tenant = ?", [.text(tenant)])
                } else {
                    try await reader.serverTableQuery("SELECT last_seen_at, schema, app_version FROM device_census", [])
                }
            for row in rows {
                guard case .integer(let seen) = row["last_seen_at"] else { continue }
                let schema = if case .text(let text) = row["schema"] { SchemaHeader.decode(text) ?? [:] } else { [String: Int]() }
                let app: String? = if case .text(let text) = row["app_version"] { text } else { nil }
                summary.add(lastSeenAt: seen, schema: schema, appVersion: app)
            }
            return summary
        }
    }

    /// A tenant's devices, the latest seen first; only those seen since `activeSince` when given.
    package func devices(tenant: String, activeSince: Int64? = nil, limit: Int = 1000) async throws -> [DeviceCensus] {
        try await flush()
        return try await storage.read { reader in
            try await reader.serverTableQuery(
                "SELECT * FROM device_census WHERE tenant = ? AND last_seen_at >= ? ORDER BY last_seen_at DESC, user_id, device_id LIMIT ?",
                [.text(tenant), .integer(activeSince ?? Int64.min), .integer(Int64(limit))]
            ).map(Self.device)
        }
    }

    /// One device, `nil` when the census never saw it.
    package func device(tenant: String, userID: String, deviceID: String) async throws -> DeviceCensus? {
        try await flush()
        return try await storage.read { reader in
            try await reader.serverTableQuery(
                "SELECT * FROM device_census WHERE tenant = ? AND user_id = ? AND device_id = ?", [.text(tenant), .text(userID), .text(deviceID)]
            ).first.map(Self.device)
        }
    }

    /// A `device_census` row as the census reads it.
    static func device(_ row: StoredRow) -> DeviceCensus {
        func text(_ name: String) -> String? { if case .text(let value) = row[name] { value } else { nil } }
        func integer(_ name: String) -> Int64? { if case .integer(let value) = row[name] { value } else { nil } }
        var telemetry: [DeviceTelemetry: Int64] = [:]
        for (name, column) in counterColumns {
            if let value = integer(column) { telemetry[name] = value }
        }
        return DeviceCensus(
            tenant: text("tenant") ?? "", userID: text("user_id") ?? "", deviceID: text("device_id") ?? "",
            firstSeenAt: integer("first_seen_at") ?? 0, lastSeenAt: integer("last_seen_at") ?? 0, appVersion: text("app_version"),
            schema: text("schema").flatMap(SchemaHeader.decode) ?? [:], lastOutcome: text("last_outcome") ?? "none",
            lastStatus: Int(integer("last_status") ?? 0), lastRoute: text("last_route") ?? "none", pushes: integer("pushes") ?? 0,
            pulls: integer("pulls") ?? 0, failures: integer("failures") ?? 0, recent: text("recent").map(decodeRecent) ?? [], telemetry: telemetry)
    }
}

/// Turns at flushing, one at a time, in the order asked.
private actor FlushTurns {
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func take() async {
        if busy {
            await withCheckedContinuation { waiting.append($0) }
        } else {
            busy = true
        }
    }

    func give() {
        if waiting.isEmpty { busy = false } else { waiting.removeFirst().resume() }
    }
}
