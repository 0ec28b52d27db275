package import ContractRuntime
import Foundation
package import SyncProtocol

/// What the server knows of one device (tenant, user, device) from its requests: the census's row.
package struct DeviceCensus: Sendable, Hashable {
    package var tenant: String
    package var userID: String
    package var deviceID: String
    /// Seconds since 1970.
    package var firstSeenAt: Int64
    package var lastSeenAt: Int64
    /// `X-Outpost-App` of its latest request that sent one.
    package var appVersion: String?
    /// Its schema version of every contract it named in `X-Outpost-Schema`, the latest of each.
    package var schema: [String: Int]
    /// `ok`, or the error code its latest sync (push, pull or live channel) was answered with.
    package var lastOutcome: String
    package var lastStatus: Int
    /// `push`, `pull` or `live`.
    package var lastRoute: String
    package var pushes: Int64
    package var pulls: Int64
    /// Syncs answered with an error.
    package var failures: Int64
    /// Its latest syncs, newest first (at most ``FleetCensus/recentLimit``).
    package var recent: [SyncOutcome]
    /// What the device sent of its own telemetry: counters summed, gauges as last sent.
    package var telemetry: [DeviceTelemetry: Int64]

    /// The census's JSON of the device (the admin route's and `sync-server fleet --json`'s).
    package var json: JSONValue {
        var object: [String: JSONValue] = [
            "tenant": .string(tenant), "user": .string(userID), "device": .string(deviceID),
            "first_seen_at": .string(Timestamp(millisecondsSince1970: firstSeenAt * 1000).description),
            "last_seen_at": .string(Timestamp(millisecondsSince1970: lastSeenAt * 1000).description),
            "app_version": appVersion.map(JSONValue.string) ?? .null,
            "schema": .object(schema.mapValues { .int(Int64($0)) }),
            "last_outcome": .string(lastOutcome), "last_status": .int(Int64(lastStatus)), "last_route": .string(lastRoute),
            "pushes": .int(pushes), "pulls": .int(pulls), "failures": .int(failures),
            "recent": .array(recent.map(\.json)),
        ]
        object["telemetry"] = .object(Dictionary(uniqueKeysWithValues: telemetry.map { ($0.key.rawValue, JSONValue.int($0.value)) }))
        return .object(object)
    }
}

/// One sync request's outcome, as the census keeps it.
package struct SyncOutcome: Sendable, Hashable, Codable {
    /// Seconds since 1970.
    package var at: Int64
    /// `push`, `pull` or `live`.
    package var route: String
    package var status: Int
    /// `ok` or the error code.
    package var outcome: String
    package var milliseconds: Int

    package init(at: Int64, route: String, status: Int, outcome: String, milliseconds: Int) {
        self.at = at
        self.route = route
        self.status = status
        self.outcome = outcome
        self.milliseconds = milliseconds
    }

    enum CodingKeys: String, CodingKey {
        case at, route, status, outcome
        case milliseconds = "ms"
    }

    var json: JSONValue {
        .object([
            "at": .string(Timestamp(millisecondsSince1970: at * 1000).description), "route": .string(route), "status": .int(Int64(status)),
            "outcome": .string(outcome), "ms": .int(Int64(milliseconds)),
        ])
    }
}

/// Devices counted as active (seen within the window) and stale (seen before it).
package struct FleetCounts: Sendable, Hashable {
    package var active = 0
    package var stale = 0

    package init(active: Int = 0, stale: Int = 0) {
        self.active = active
        self.stale = stale
    }

    var json: JSONValue { .object(["active": .int(Int64(active)), "stale": .int(Int64(stale))]) }
}

/// The fleet at a glance: devices per contract version and per app version, active and stale.
/// Its JSON is the census file `contractc check --fleet` reads (``json``).
package struct FleetSummary: Sendable, Hashable {
    /// The census file's `format` and `format_version`.
    package static let format = "outpost.fleet-census"
    package static let formatVersion = 1

    /// `nil` when it covers every tenant.
    package var tenant: String?
    /// Seconds since 1970.
    package var generatedAt: Int64
    package var activeWindowSeconds: Int64
    package var devices = FleetCounts()
    /// Contract name → schema version → devices.
    package var contracts: [String: [Int: FleetCounts]] = [:]
    /// App version (`unknown` for devices that never sent one) → devices.
    package var appVersions: [String: FleetCounts] = [:]

    package init(tenant: String?, generatedAt: Int64, activeWindowSeconds: Int64) {
        self.tenant = tenant
        self.generatedAt = generatedAt
        self.activeWindowSeconds = activeWindowSeconds
    }

    /// Counts a device seen at `lastSeenAt`.
    mutating func add(lastSeenAt: Int64, schema: [String: Int], appVersion: String?) {
        let active = lastSeenAt >= generatedAt - activeWindowSeconds
        func count(_ counts: inout FleetCounts) {
            if active { counts.active += 1 } else { counts.stale += 1 }
        }
        count(&devices)
        for (contract, version) in schema { count(&contracts[contract, default: [:]][version, default: FleetCounts()]) }
        count(&appVersions[appVersion ?? "unknown", default: FleetCounts()])
    }

    /// How many active devices run `contract` below `oldestSupported` (they would be refused
    /// with 426 and purge it), of all active devices.
    package func cutoff(contract: String, oldestSupported: Int) -> (refused: Int, active: Int) {
        let refused = (contracts[contract] ?? [:]).filter { $0.key < oldestSupported }.reduce(0) { $0 + $1.value.active }
        return (refused, devices.active)
    }

    /// The census file: `{"format": "outpost.fleet-census", "format_version": 1, …}`.
    package var json: JSONValue {
        .object([
            "format": .string(Self.format), "format_version": .int(Int64(Self.formatVersion)),
            "generated_at": .string(Timestamp(millisecondsSince1970: generatedAt * 1000).description),
            "tenant": tenant.map(JSONValue.string) ?? .null,
            "active_window_seconds": .int(activeWindowSeconds),
            "devices": devices.json,
            "contracts": .object(
                contracts.mapValues { versions in .object(Dictionary(uniqueKeysWithValues: versions.map { (String($0.key), $0.value.json) })) }),
            "app_versions": .object(appVersions.mapValues(\.json)),
        ])
    }

    /// A window written as `30d`, `12h`, `90m` or seconds (`3600`), read as the server's other
    /// durations are (``ServerHousekeeping/parseDuration(_:bareUnit:)``), in whole seconds; `nil`
    /// when malformed, under a second, or over ten years.
    package static func window(_ text: String) -> Int64? {
        guard let duration = ServerHousekeeping.parseDuration(text, bareUnit: 1) ?? nil else { return nil }
        let seconds = duration.components.seconds
        guard seconds > 0, seconds <= 3_650 * 86_400 else { return nil }
        return seconds
    }

    /// Thirty days: a device not seen for longer is stale.
    package static let defaultActiveWindow: Int64 = 30 * 86_400
}
