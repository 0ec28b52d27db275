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
///
/// What one device can make it keep is bounded: only the contracts of the server's catalog are
/// recorded of its `X-Outpost-Schema` (a made-up name is never stored), at most
/// ``IdentityStateLimits/censusContractsPerDevice`` of them, and rows stored before that bound
/// are trimmed when the device is next written and when the census service starts
/// (``trimStoredSchemas()``).
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
    /// The contracts whose versions are recorded (the server's catalog); `nil` records any name
    /// (a tool that only reads the census).
    let knownContracts: Set<String>?
    /// Contract versions kept per device at most (``IdentityStateLimits/censusContractsPerDevice``).
    let contractsPerDevice: Int
    private let pending = NIOLockedValueBox([DeviceKey: Observed]())
    /// Tenants with labels of their own in the telemetry metrics: at most ``labelledTenantLimit``,
    /// the others count as `_other`, so a server of many tenants keeps a bounded exposition.
    private let labelledTenants = NIOLockedValueBox(Set<String>())
    package static let labelledTenantLimit = 200
    private let wakeups: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation
    /// One flush at a time: two would write one device's observations twice.
    private let flushTurns = FlushTurns()

    /// - Parameters:
    ///   - contracts: the contract names whose versions are recorded (the server's catalog);
    ///     `nil` records any name, for a tool that only reads the census.
    ///   - contractsPerDevice: the contract versions kept per device at most.
    package init(
        storage: any SyncStorage, clock: any ServerClock, flushInterval: Duration = .seconds(5), metrics: ServerMetrics? = nil,
        logger: Logger = Logger(label: "outpost.census"), contracts: Set<String>? = nil,
        contractsPerDevice: Int = IdentityStateLimits().censusContractsPerDevice
    ) {
        self.storage = storage
        self.clock = clock
        self.flushInterval = flushInterval
        self.metrics = metrics
        self.logger = logger
        knownContracts = contracts
        self.contractsPerDevice = max(0, contractsPerDevice)
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
        /// `X-Outpost-Schema` as read (``RequestInput/schema(_:)``); empty when not sent. Only
        /// the contracts the census knows are kept of it.
        package var schema: [String: Int]
        /// `push`, `pull` or `live` for a sync; `nil` for any other request (seen, not a sync).
        package var route: String?
        package var status: Int
        package var outcome: String
        package var milliseconds: Int
        /// The device's telemetry, only from a request the server accepted.
        package var telemetry: [DeviceTelemetry: Int64]

        package init(
            tenant: String, userID: String, deviceID: String, at: Int64, appVersion: String?, schema: [String: Int], route: String?, status: Int,
            outcome: String, milliseconds: Int, telemetry: [DeviceTelemetry: Int64]
        ) {
            self.tenant = tenant
            self.userID = userID
            self.deviceID = deviceID
            self.at = at
            self.appVersion = appVersion
            self.schema = schema
            self.route = route
            self.status = status
            self.outcome = outcome
            self.milliseconds = milliseconds
            self.telemetry = telemetry
        }
    }

    /// What this process observed of one device since its last flush.
    struct Observed {
        var firstSeenAt: Int64
        var lastSeenAt: Int64
        var appVersion: String?
        var schema: [String: Int] = [:]
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
            if !observation.schema.isEmpty, observation.schema != observed.schema {
                observed.schema = kept(newer: observation.schema, older: observed.schema)
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
                    pending[key] = pending[key].map { merge(older: observed, newer: $0) } ?? observed
                }
            }
            await flushTurns.give()
            throw error
        }
    }

    /// Trims rows stored before the census's bounds (``trimStoredSchemas()``), then flushes every
    /// ``flushInterval`` (sooner when ``pendingLimit`` is reached) until the server stops, then
    /// once more.
    package func run() async throws {
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await _ in self.wakeups { await self.flushLogging() }
                }
                group.addTask {
                    await self.trimStoredSchemasLogging()
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

    private func trimStoredSchemasLogging() async {
        do {
            let trimmed = try await trimStoredSchemas()
            if trimmed > 0 { logger.notice("trimmed the schema versions of \(trimmed) fleet census rows to the census's bounds") }
        } catch {
            logger.warning("the fleet census's stored rows could not be trimmed; they are trimmed when next written: \(String(reflecting: error))")
        }
    }

    private func flushLogging() async {
        do {
            try await flush()
        } catch {
            logger.warning("the fleet census could not be written; kept for the next try: \(String(reflecting: error))")
        }
    }

    private func merge(older: Observed, newer: Observed) -> Observed {
        var merged = newer
        merged.firstSeenAt = min(older.firstSeenAt, newer.firstSeenAt)
        merged.appVersion = newer.appVersion ?? older.appVersion
        merged.schema = kept(newer: newer.schema, older: older.schema)
        merged.last = newer.last ?? older.last
        merged.pushes += older.pushes
        merged.pulls += older.pulls
        merged.failures += older.failures
        merged.recent = Array((newer.recent + older.recent).prefix(Self.recentLimit))
        merged.counters.merge(older.counters) { $0 + $1 }
        merged.unrecorded.merge(older.unrecorded) { $0 + $1 }
        merged.gauges = older.gauges.merging(newer.gauges) { $1 }
        return merged
    }

    // MARK: Bounds

    /// The longest contract name kept, in UTF-8 bytes (the bound of a name in a push or a header).
    static let maximumContractNameBytes = 128

    /// The contract versions a device's census keeps of `newer` and `older` (the newer's version
    /// of a contract both name): only contracts the catalog knows (``knownContracts``), named
    /// within ``maximumContractNameBytes``, at most ``contractsPerDevice`` of them, the newer's
    /// first and each side's by name.
    func kept(newer: [String: Int], older: [String: Int] = [:]) -> [String: Int] {
        var kept: [String: Int] = [:]
        for versions in [newer, older] {
            guard kept.count < contractsPerDevice else { break }
            let names = versions.keys.filter { name in
                kept[name] == nil && name.utf8.count <= Self.maximumContractNameBytes && (knownContracts?.contains(name) ?? true)
            }
            for name in names.count + kept.count <= contractsPerDevice ? names : Array(names.sorted().prefix(contractsPerDevice - kept.count)) {
                kept[name] = versions[name]
            }
        }
        return kept
    }

    /// The longest `schema` text a row this census writes can hold: a longer stored one
    /// predates the bounds (``trimStoredSchemas()``).
    var longestKeptSchema: Int {
        // `name=version,` with a version of up to 19 digits.
        let lengths = (knownContracts.map { $0.map(\.utf8.count) } ?? []).sorted(by: >)
        let named = lengths.prefix(contractsPerDevice).reduce(0) { $0 + $1 + 21 }
        let unnamed = max(0, contractsPerDevice - lengths.count) * (knownContracts == nil ? Self.maximumContractNameBytes + 21 : 0)
        return named + unnamed
    }

    /// Trims the stored rows whose schema versions exceed what this census keeps (rows written
    /// before the bound: made-up contract names, past ``contractsPerDevice``) to what it would
    /// keep of them, in batches; returns how many rows it rewrote. The census service runs it
    /// when it starts, so the fleet routes are bounded again after an upgrade.
    @discardableResult
    package func trimStoredSchemas() async throws -> Int {
        await flushTurns.take()
        do {
            let trimmed = try await trimStoredSchemasInTurn()
            await flushTurns.give()
            return trimmed
        } catch {
            await flushTurns.give()
            throw error
        }
    }

    private func trimStoredSchemasInTurn() async throws -> Int {
        let longest = Int64(longestKeptSchema)
        var trimmed = 0
        while true {
            let rewritten = try await storage.write { transaction in
                let rows = try await transaction.serverTableQuery(
                    "SELECT tenant, user_id, device_id, schema FROM device_census WHERE length(schema) > ? LIMIT 100", [.integer(longest)])
                var rewritten = 0
                for row in rows {
                    guard case .text(let tenant) = row["tenant"], case .text(let user) = row["user_id"], case .text(let device) = row["device_id"]
                    else { continue }
                    let stored = if case .text(let text) = row["schema"] { SchemaHeader.decode(text) ?? [:] } else { [String: Int]() }
                    _ = try await transaction.serverTableQuery(
                        "UPDATE device_census SET schema = ? WHERE tenant = ? AND user_id = ? AND device_id = ?",
                        [.text(SchemaHeader.encode(self.kept(newer: stored))), .text(tenant), .text(user), .text(device)])
                    rewritten += 1
                }
                return rewritten
            }
            trimmed += rewritten
            // A batch under its size was the last; every row rewritten is within the bound now.
            if rewritten < 100 { return trimmed }
        }
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
                            // Both bounded: a row stored before the bounds is trimmed here.
                            let older = SchemaHeader.decode(existing.schema) ?? [:]
                            schema =
                                existing.seen > observed.lastSeenAt
                                ? self.kept(newer: older, older: schema) : self.kept(newer: schema, older: older)
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

    /// The bytes a `device_census` row is counted for in a page: its text columns as stored.
    static let rowBytesSQL =
        "(LENGTH(user_id) + LENGTH(device_id) + COALESCE(LENGTH(app_version), 0) + COALESCE(LENGTH(schema), 0) + COALESCE(LENGTH(recent), 0) + 256)"

    /// Devices per contract version and app version, active when seen within `activeSeconds`
    /// of `now`; of one tenant, or of every tenant when `tenant` is `nil`. The rows are read a
    /// page of `pageBytes` at a time (``ResponsePage``), never all at once.
    package func summary(tenant: String?, now: Int64, activeSeconds: Int64, pageBytes: Int = 4 * 1024 * 1024) async throws -> FleetSummary {
        try await flush()
        var summary = FleetSummary(tenant: tenant, generatedAt: now, activeWindowSeconds: activeSeconds)
        var after = ["", "", ""]
        while true {
            let filter = (tenant == nil ? "" : "tenant = ? AND ") + "(tenant, user_id, device_id) > (?, ?, ?)"
            let arguments = (tenant.map { [ColumnValue.text($0)] } ?? []) + after.map(ColumnValue.text)
            let rows = try await storage.read { reader in
                let count = try await Self.countWithinBudget(
                    reader, filter: filter, arguments: arguments, order: "tenant, user_id, device_id", limit: 1000, byteBudget: pageBytes)
                return try await reader.serverTableQuery(
                    "SELECT tenant, user_id, device_id, last_seen_at, schema, app_version FROM device_census WHERE \(filter) "
                        + "ORDER BY tenant, user_id, device_id LIMIT ?", arguments + [.integer(Int64(count.taken))])
            }
            guard let last = rows.last else { return summary }
            after = [last.text("tenant") ?? "", last.text("user_id") ?? "", last.text("device_id") ?? ""]
            for row in rows {
                guard case .integer(let seen) = row["last_seen_at"] else { continue }
                let schema = if case .text(let text) = row["schema"] { SchemaHeader.decode(text) ?? [:] } else { [String: Int]() }
                let app: String? = if case .text(let text) = row["app_version"] { text } else { nil }
                summary.add(lastSeenAt: seen, schema: schema, appVersion: app)
            }
        }
    }

    /// Where a page of ``devicesPage(tenant:activeSince:after:limit:pageBytes:)`` ends: the last
    /// device's time seen, user and device.
    package struct DevicesCursor: Hashable, Sendable {
        package var lastSeenAt: Int64
        package var userID: String
        package var deviceID: String

        package init(lastSeenAt: Int64, userID: String, deviceID: String) {
            self.lastSeenAt = lastSeenAt
            self.userID = userID
            self.deviceID = deviceID
        }
    }

    /// A page of a tenant's devices, the latest seen first, after `after`; only those seen since
    /// `activeSince` when given. At most `limit`, and as many as ``ResponsePage`` takes of
    /// `pageBytes` (sizes read first: rows past the budget are never read).
    package func devicesPage(
        tenant: String, activeSince: Int64? = nil, after: DevicesCursor? = nil, limit: Int = 1000, pageBytes: Int
    ) async throws -> (devices: [DeviceCensus], hasMore: Bool) {
        try await flush()
        let start = after ?? DevicesCursor(lastSeenAt: Int64.max, userID: "", deviceID: "")
        let filter =
            "tenant = ? AND last_seen_at >= ? AND (last_seen_at < ? OR (last_seen_at = ? AND (user_id > ? OR (user_id = ? AND device_id > ?))))"
        let arguments: [ColumnValue] = [
            .text(tenant), .integer(activeSince ?? Int64.min), .integer(start.lastSeenAt), .integer(start.lastSeenAt), .text(start.userID),
            .text(start.userID), .text(start.deviceID),
        ]
        let order = "last_seen_at DESC, user_id, device_id"
        return try await storage.read { reader in
            let count = try await Self.countWithinBudget(
                reader, filter: filter, arguments: arguments, order: order, limit: limit, byteBudget: pageBytes)
            let rows = try await reader.serverTableQuery(
                "SELECT * FROM device_census WHERE \(filter) ORDER BY \(order) LIMIT ?", arguments + [.integer(Int64(count.taken))])
            return (rows.map(Self.device), count.hasMore)
        }
    }

    /// A tenant's devices, the latest seen first, at most `limit`; only those seen since
    /// `activeSince` when given (the command line's `fleet --devices`).
    package func devices(tenant: String, activeSince: Int64? = nil, limit: Int = 1000) async throws -> [DeviceCensus] {
        try await devicesPage(tenant: tenant, activeSince: activeSince, limit: limit, pageBytes: .max).devices
    }

    /// How many of the rows `filter` selects, in `order`, a page takes (at most `limit`, and by
    /// ``rowBytesSQL`` within `byteBudget` but for the last), and whether more follow: read from
    /// the rows' sizes only.
    private static func countWithinBudget(
        _ reader: any StorageReader, filter: String, arguments: [ColumnValue], order: String, limit: Int, byteBudget: Int
    ) async throws -> (taken: Int, hasMore: Bool) {
        let sizes = try await reader.serverTableQuery(
            "SELECT \(rowBytesSQL) AS bytes FROM device_census WHERE \(filter) ORDER BY \(order) LIMIT ?",
            arguments + [.integer(Int64(min(limit, Int(Int32.max) - 1) + 1))])
        var page = ResponsePage(byteBudget: byteBudget)
        var taken = 0
        while taken < sizes.count, taken < limit, page.hasRoom {
            page.take(bytes: Int(sizes[taken].integer("bytes") ?? 0))
            taken += 1
        }
        return (taken, taken < sizes.count)
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
