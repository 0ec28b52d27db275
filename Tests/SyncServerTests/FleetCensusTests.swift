import ContractRuntime
import Contracts
import Foundation
import Hummingbird
import HummingbirdTesting
import OutpostTestSupport
import SampleServerApps
import SyncProtocol
import Testing

@testable import SyncServer

/// The fleet census: what the server records of each device from its requests, its admin
/// routes and `sync-server fleet`, on both storages.
@Suite("Fleet census: last seen, app and schema versions, latest syncs, telemetry", .blockingWork)
struct FleetCensusTests {
    static func headers(_ token: String, app: String? = nil, schema: String? = nil, telemetry: String? = nil) -> HTTPFields {
        var extra: HTTPFields = [.contentType: "application/json"]
        if let app { extra[.outpostApp] = app }
        if let schema { extra[.outpostSchema] = schema }
        if let telemetry { extra[.outpostTelemetry] = telemetry }
        return HostileHarness.headers(token, extra)
    }

    static func push(
        _ client: any TestClientProtocol, _ token: String, clientID: String, schema: [String: Int] = [:], mutations: [Mutation] = [],
        app: String? = nil, telemetry: String? = nil
    ) async throws -> TestResponse {
        try await client.execute(
            uri: "/sync/v1/push", method: .post,
            headers: headers(token, app: app, schema: schema.isEmpty ? nil : SchemaHeader.encode(schema), telemetry: telemetry),
            body: ByteBuffer(bytes: try JSONEncoder().encode(PushRequest(clientId: clientID, schema: schema, mutations: mutations))))
    }

    static func json(_ response: TestResponse) throws -> [String: JSONValue] {
        guard case .object(let object) = try JSONDecoder().decode(JSONValue.self, from: Data(buffer: response.body)) else { return [:] }
        return object
    }

    static func int(_ value: JSONValue?) -> Int64? {
        if case .int(let number)? = value { number } else { nil }
    }

    static func counts(_ value: JSONValue?) -> (active: Int64, stale: Int64)? {
        guard case .object(let object)? = value, let active = int(object["active"]), let stale = int(object["stale"]) else { return nil }
        return (active, stale)
    }

    @Test("an active window reads as the server's durations do, in whole seconds; none, zero, under a second or over ten years is no window")
    func activeWindows() {
        #expect(FleetSummary.window("30d") == 2_592_000)
        #expect(FleetSummary.window("12h") == 43_200)
        #expect(FleetSummary.window("90m") == 5_400)
        #expect(FleetSummary.window("3600") == 3_600)
        #expect(FleetSummary.window("1.5h") == 5_400)
        for malformed in ["soon", "", "d", "0", "off", "-1d", "0.2s", "3651d"] {
            #expect(FleetSummary.window(malformed) == nil, "\(malformed)")
        }
    }

    @Test(
        "each device's last seen, app version, schema versions and last sync outcome; admin requests are not devices", arguments: StorageKind.allCases
    )
    func recordsDevices(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            let alice = h.token(user: "alice", device: "alice-phone")
            let bob = h.token(user: "bob", device: "bob-tablet")
            let current = ["Task": CURRENT_TASK_SCHEMA, "Unit": CURRENT_UNIT_SCHEMA]
            #expect(try await Self.push(client, alice, clientID: "alice-phone", schema: current, app: "fieldops-ios/1.4.2").status == .ok)
            let pull = try await client.execute(
                uri: "/sync/v1/pull?scope=user", method: .get, headers: Self.headers(bob, app: "fieldops-android/1.3.0", schema: "Task=1,Unit=2"))
            #expect(pull.status == .ok)
            // Bob's app is older than the server supports for Unit: refused, and the census says so.
            let old = try await Self.push(client, bob, clientID: "bob-tablet", schema: ["Unit": 1], app: "fieldops-android/1.3.0")
            #expect(old.status.code == 426)

            let fleet = try Self.json(try await client.execute(uri: "/admin/v1/fleet", method: .get, headers: HostileHarness.headers(h.adminToken)))
            #expect(fleet["format"] == .string(FleetSummary.format) && Self.int(fleet["format_version"]) == 1)
            #expect(fleet["tenant"] == .string(HostileHarness.tenant))
            #expect(Self.counts(fleet["devices"])! == (2, 0), "the admin's own requests are not a device: \(fleet)")
            guard case .object(let contracts)? = fleet["contracts"], case .object(let unit)? = contracts["Unit"],
                case .object(let apps)? = fleet["app_versions"]
            else {
                Issue.record("no contracts or app versions: \(fleet)")
                return
            }
            // Bob's latest request named Unit 1: that is the version he runs now.
            #expect(Self.counts(unit[String(CURRENT_UNIT_SCHEMA)])! == (1, 0) && Self.counts(unit["1"])! == (1, 0), "\(unit)")
            #expect(Self.counts(apps["fieldops-ios/1.4.2"])! == (1, 0) && Self.counts(apps["fieldops-android/1.3.0"])! == (1, 0))

            let device = try Self.json(
                try await client.execute(uri: "/admin/v1/fleet/devices/bob/bob-tablet", method: .get, headers: HostileHarness.headers(h.adminToken)))
            #expect(device["last_outcome"] == .string("schema_too_old") && Self.int(device["last_status"]) == 426)
            #expect(device["last_route"] == .string("push") && Self.int(device["pushes"]) == 1 && Self.int(device["pulls"]) == 1)
            #expect(Self.int(device["failures"]) == 1 && device["app_version"] == .string("fieldops-android/1.3.0"))
            guard case .array(let recent)? = device["recent"], case .object(let latest)? = recent.first else {
                Issue.record("no recent syncs: \(device)")
                return
            }
            #expect(recent.count == 2 && latest["route"] == .string("push") && latest["outcome"] == .string("schema_too_old"))

            let list = try Self.json(
                try await client.execute(uri: "/admin/v1/fleet/devices", method: .get, headers: HostileHarness.headers(h.adminToken)))
            guard case .array(let devices)? = list["devices"] else { throw CensusTestError.missing("devices") }
            #expect(devices.count == 2)
            let unknown = try await client.execute(
                uri: "/admin/v1/fleet/devices/bob/nope", method: .get, headers: HostileHarness.headers(h.adminToken))
            #expect(unknown.status == .notFound)
            #expect(try await client.execute(uri: "/admin/v1/fleet", method: .get, headers: HostileHarness.headers(alice)).status == .forbidden)
            let badWindow = try await client.execute(uri: "/admin/v1/fleet?active=soon", method: .get, headers: HostileHarness.headers(h.adminToken))
            #expect(badWindow.status == .badRequest)
            #expect(try badWindow.errorDetail.code == .malformedRequest)
        }
    }

    @Test("a malformed X-Outpost-App or X-Outpost-Telemetry is refused with 400 and the push applies nothing", arguments: StorageKind.allCases)
    func refusesMalformedHeaders(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            let token = h.ownerToken
            try await ChangeFeedTests.join(client, h)
            let before = try await h.auditCount()
            for (app, telemetry) in [
                (String(repeating: "v", count: 65), nil), ("fieldops/1.0 \u{FC}", nil), (nil, "syncs_ok=-1"), (nil, "syncs_ok=1,syncs_ok=2"),
                (nil, "syncs_ok"), (nil, "conflicts=1000001"), (nil, "x=" + String(repeating: "1", count: 600)),
            ] as [(String?, String?)] {
                let response = try await Self.push(
                    client, token, clientID: "alice-phone", mutations: [ChangeFeedTests.task(1, "task-1")], app: app, telemetry: telemetry)
                #expect(response.status == .badRequest, "app \(app ?? "-") telemetry \(telemetry ?? "-")")
                #expect(try response.errorDetail.code == .malformedRequest)
            }
            #expect(try await h.auditCount() == before, "nothing applied")
            // Names this server does not know are skipped: a newer device may count more.
            let newer = try await Self.push(
                client, token, clientID: "alice-phone", mutations: [ChangeFeedTests.task(1, "task-1")], telemetry: "syncs_ok=1,hologram_views=3")
            #expect(newer.status == .ok)
        }
    }

    @Test(
        "telemetry of accepted requests is summed per tenant into /metrics and the device's census; a refused request's is not counted",
        arguments: StorageKind.allCases)
    func telemetry(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            let alice = h.ownerToken
            try await ChangeFeedTests.join(client, h)
            let sent =
                "syncs_ok=3,syncs_failed=1,conflicts=2,writes_queued=5,writes_delivered=4,cache_hits=7,cache_misses=1,outbox_pending=1,conflicts_open=2"
            #expect(
                try await Self.push(client, alice, clientID: "alice-phone", mutations: [ChangeFeedTests.task(1, "task-1")], telemetry: sent).status
                    == .ok)
            // Refused (a gap in seq): the device keeps these counts and sends them again.
            let refused = try await Self.push(
                client, alice, clientID: "alice-phone", mutations: [ChangeFeedTests.task(5, "task-5")], telemetry: "syncs_ok=100,outbox_pending=9")
            #expect(refused.status.code >= 400)
            #expect(
                try await Self.push(client, alice, clientID: "alice-phone", telemetry: "syncs_ok=1,writes_delivered=1,outbox_pending=0").status == .ok
            )

            let device = try Self.json(
                try await client.execute(
                    uri: "/admin/v1/fleet/devices/alice/alice-phone", method: .get, headers: HostileHarness.headers(h.adminToken)))
            guard case .object(let telemetry)? = device["telemetry"] else { throw CensusTestError.missing("telemetry") }
            #expect(Self.int(telemetry["syncs_ok"]) == 4 && Self.int(telemetry["writes_delivered"]) == 5, "\(telemetry)")
            #expect(Self.int(telemetry["outbox_pending"]) == 0 && Self.int(telemetry["conflicts_open"]) == 2, "gauges are the latest accepted")

            let metrics = try await client.execute(uri: "/metrics", method: .get, headers: HostileHarness.headers(HostileHarness.metricsToken))
            let text = String(buffer: metrics.body)
            #expect(text.contains(#"outpost_device_syncs_total{tenant="acme",outcome="ok"} 4"#), "\(text)")
            #expect(text.contains(#"outpost_device_syncs_total{tenant="acme",outcome="failed"} 1"#))
            #expect(text.contains(#"outpost_device_conflicts_total{tenant="acme"} 2"#))
            #expect(text.contains(#"outpost_device_writes_total{tenant="acme",state="delivered"} 5"#))
            #expect(text.contains(#"outpost_device_cache_reads_total{tenant="acme",result="hit"} 7"#))
        }
    }

    @Test(
        "two processes' observations of one device add up; the newest request wins; stale devices fall out of the window",
        arguments: StorageKind.allCases)
    func mergesAcrossProcesses(_ kind: StorageKind) async throws {
        let folder = try TemporaryDirectory(prefix: "census")
        let storages = try await kind.makeSharedStorages(2, in: folder.url, contracts: ContractRegistry.self)
        let (first, second) = (FleetCensus(storage: storages[0], clock: SystemClock()), FleetCensus(storage: storages[1], clock: SystemClock()))
        func seen(_ device: String, at: Int64, app: String, schema: [String: Int], status: Int = 200, telemetry: [DeviceTelemetry: Int64] = [:])
            -> FleetCensus.Observation
        {
            FleetCensus.Observation(
                tenant: "acme", userID: "u-1", deviceID: device, at: at, appVersion: app, schema: schema, route: "push", status: status,
                outcome: status == 200 ? "ok" : "internal_error", milliseconds: 3, telemetry: telemetry)
        }
        let day: Int64 = 86_400
        let now: Int64 = 1_800_000_000
        first.observe(seen("phone", at: now - 10, app: "1.0", schema: ["Task": 1, "Unit": 2], telemetry: [.syncsOK: 2, .outboxPending: 4]))
        second.observe(seen("phone", at: now - 5, app: "1.1", schema: ["Unit": 3], status: 500, telemetry: [.syncsOK: 1, .outboxPending: 1]))
        first.observe(seen("old-tablet", at: now - 40 * day, app: "0.9", schema: ["Unit": 2]))
        // The second process writes first: the first's older request must not overwrite it.
        try await second.flush()
        try await first.flush()

        let phone = try #require(try await first.device(tenant: "acme", userID: "u-1", deviceID: "phone"))
        #expect(phone.appVersion == "1.1" && phone.lastOutcome == "internal_error" && phone.lastSeenAt == now - 5)
        #expect(phone.schema == ["Task": 1, "Unit": 3], "the newer request's versions, with the contracts only the older one named")
        #expect(phone.pushes == 2 && phone.failures == 1 && phone.firstSeenAt == now - 10)
        #expect(phone.telemetry[.syncsOK] == 3 && phone.telemetry[.outboxPending] == 1)
        #expect(phone.recent.map(\.at) == [now - 5, now - 10])

        let summary = try await second.summary(tenant: "acme", now: now, activeSeconds: 30 * day)
        #expect(summary.devices == FleetCounts(active: 1, stale: 1))
        #expect(summary.contracts["Unit"] == [3: FleetCounts(active: 1), 2: FleetCounts(stale: 1)])
        #expect(summary.cutoff(contract: "Unit", oldestSupported: 3) == (0, 1) && summary.cutoff(contract: "Unit", oldestSupported: 4) == (1, 1))
        let everyTenant = try await second.summary(tenant: nil, now: now, activeSeconds: 60 * day)
        #expect(everyTenant.tenant == nil && everyTenant.devices == FleetCounts(active: 2, stale: 0))
        #expect(try await first.devices(tenant: "acme", activeSince: now - day).map(\.deviceID) == ["phone"])
    }

    @Test(
        "an erasure deletes the user's census, and what a server still held of them is not written back; an export lists it first",
        arguments: StorageKind.allCases)
    func erasure(_ kind: StorageKind) async throws {
        let folder = try TemporaryDirectory(prefix: "census-erasure")
        let storage = try await kind.makeStorage(in: folder.url, contracts: ContractRegistry.self)
        let census = FleetCensus(storage: storage, clock: SystemClock())
        let now = Int64(Date().timeIntervalSince1970)
        func seen(_ at: Int64) -> FleetCensus.Observation {
            FleetCensus.Observation(
                tenant: "acme", userID: "u-9", deviceID: "tablet-9", at: at, appVersion: "2.0", schema: ["Unit": 3], route: "pull", status: 200,
                outcome: "ok", milliseconds: 1, telemetry: [:])
        }
        census.observe(seen(now - 60))
        try await census.flush()
        var lines: [String] = []
        try await UserExport(storage: storage).export(tenant: "acme", userID: "u-9") { lines.append(String(decoding: $0, as: UTF8.self)) }
        #expect(lines.contains { $0.contains(#""type":"census""#) && $0.contains(#""app_version":"2.0""#) }, "\(lines)")

        census.observe(seen(now - 30))  // still in memory when the erasure lands
        _ = try await storage.write { try await $0.setTeamMembership(tenant: "acme", team: "team-1", userID: "u-9", isMember: true) }
        _ = try await UserErasure(storage: storage).erase(tenant: "acme", userID: "u-9", requestedBy: .commandLine)
        try await census.flush()
        #expect(try await census.device(tenant: "acme", userID: "u-9", deviceID: "tablet-9") == nil)
        #expect(try await census.summary(tenant: "acme", now: now, activeSeconds: 86_400).devices == FleetCounts())
    }

    @Test("sync-server fleet prints the census, --json and --export write the census file, --devices lists them")
    func command() async throws {
        let folder = CLITests.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = try SQLiteStorage(directory: folder, contracts: ContractRegistry.self)
        let census = FleetCensus(storage: storage, clock: SystemClock())
        let now = Int64(Date().timeIntervalSince1970)
        for (device, app, unit, age) in [("a", "1.2", 3, 60), ("b", "1.2", 3, 3_600), ("c", "1.0", 2, 40 * 86_400)] {
            census.observe(
                FleetCensus.Observation(
                    tenant: "acme", userID: "u-\(device)", deviceID: device, at: now - Int64(age), appVersion: app, schema: ["Unit": unit],
                    route: "pull",
                    status: 200, outcome: "ok", milliseconds: 1, telemetry: [:]))
        }
        try await census.flush()

        let text = try SyncServerCommand.run(["fleet", "--data", folder.path, "--tenant", "acme"])
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("2 active, 1 stale"), "\(text.stdout)")
        #expect(text.stdout.split(separator: "\n").contains { $0.split(separator: " ", omittingEmptySubsequences: true) == ["Unit", "2", "0", "1"] })

        let file = folder.appendingPathComponent("census.json")
        let exported = try SyncServerCommand.run(["fleet", "--data", folder.path, "--active", "1d", "--export", file.path, "--json"])
        #expect(exported.status == 0, "\(exported.stderr)")
        guard case .object(let census)? = try? JSONDecoder().decode(JSONValue.self, from: Data(contentsOf: file)) else {
            throw CensusTestError.missing("census file")
        }
        #expect(census["format"] == .string("outpost.fleet-census") && census["tenant"] == .null)
        #expect(Self.counts(census["devices"])! == (2, 1) && Self.int(census["active_window_seconds"]) == 86_400)

        let listed = try SyncServerCommand.run(["fleet", "--data", folder.path, "--tenant", "acme", "--devices"])
        #expect(listed.status == 0 && listed.stdout.contains("u-c") && listed.stdout.contains("pull ok"), "\(listed.stdout)")
        #expect(try SyncServerCommand.run(["fleet", "--data", folder.path, "--active", "soon"]).status == 64)
        #expect(try SyncServerCommand.run(["fleet", "--data", folder.path, "--devices"]).status == 64)
    }
}

enum CensusTestError: Error {
    case missing(String)
}
