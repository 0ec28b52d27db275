import ContractRuntime
import Contracts
import Foundation
import Hummingbird
import HummingbirdTesting
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// The fleet census under a hostile device (issue 44): one device token naming thousands of
/// made-up contracts in `X-Outpost-Schema` grew one census row to 18 MB and `/admin/v1/fleet`
/// to 34 MB, and requests refused for their rate were noted too. The census keeps only the
/// catalog's contracts, at most ``IdentityStateLimits/censusContractsPerDevice`` per device, an
/// absurd header is a 400, and the census runs after the rate limit.
@Suite("Fleet census bounds: made-up contracts, the per-device cap, absurd headers, rate-limited requests", .blockingWork)
struct CensusBoundsTests {
    /// The contracts the sample server knows, and their current versions.
    static let known = ContractCatalog(ContractRegistry.self).currentVersions

    static func pull(_ client: any TestClientProtocol, _ token: String, schema: String?) async throws -> TestResponse {
        var extra: HTTPFields = [:]
        if let schema { extra[.outpostSchema] = schema }
        return try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(token, extra))
    }

    /// `count` made-up contract names, distinct for each `round`.
    static func madeUp(_ count: Int, round: Int) -> [String: Int] {
        Dictionary(uniqueKeysWithValues: (0..<count).map { ("Fake\(round)x\($0)", 1) })
    }

    static func device(_ client: any TestClientProtocol, _ h: HostileHarness, user: String, device: String) async throws -> [String: JSONValue] {
        let response = try await client.execute(
            uri: "/admin/v1/fleet/devices/\(user)/\(device)", method: .get, headers: HostileHarness.headers(h.adminToken))
        #expect(response.status == .ok, "\(response.bodyText.prefix(300))")
        return try FleetCensusTests.json(response)
    }

    static func schema(of device: [String: JSONValue]) -> [String: Int64] {
        guard case .object(let schema)? = device["schema"] else { return [:] }
        return schema.compactMapValues { FleetCensusTests.int($0) }
    }

    @Test("made-up contract names are never stored: 30 pulls of 200 made-up names each leave only the catalog's", arguments: StorageKind.allCases)
    func madeUpContractsAreNotRecorded(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            let token = h.hostileToken
            for round in 0..<30 {
                var versions = Self.madeUp(200, round: round)
                versions["Unit"] = Self.known["Unit"]
                let response = try await Self.pull(client, token, schema: SchemaHeader.encode(versions))
                #expect(response.status == .ok, "round \(round): \(response.bodyText.prefix(200))")
            }
            let device = try await Self.device(client, h, user: "mallory", device: "mallory-phone")
            #expect(
                Self.schema(of: device) == ["Unit": Int64(Self.known["Unit"]!)], "only the contract the server knows: \(device["schema"] ?? .null)")
            let fleet = try await client.execute(uri: "/admin/v1/fleet", method: .get, headers: HostileHarness.headers(h.adminToken))
            #expect(fleet.status == .ok)
            #expect(!fleet.bodyText.contains("Fake"), "the fleet lists no made-up contract")
            #expect(fleet.body.readableBytes < 16_384, "the fleet stays small: \(fleet.body.readableBytes) bytes")
            // What is stored is bounded too, not only what is shown.
            let stored = try await h.storage.read { reader in
                try await reader.serverTableQuery("SELECT schema FROM device_census WHERE device_id = ?", [.text("mallory-phone")])
            }
            guard case .text(let text)? = stored.first?["schema"] else { throw CensusTestError.missing("the census row") }
            #expect(text == SchemaHeader.encode(["Unit": Self.known["Unit"]!]))
        }
    }

    @Test("a device's census keeps at most censusContractsPerDevice contracts, the latest request's first", arguments: StorageKind.allCases)
    func contractsPerDeviceAreCapped(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind) { $0.identityLimits.censusContractsPerDevice = 2 }
        let names = Self.known.keys.sorted()
        try #require(names.count >= 4, "the sample catalog has at least 4 contracts")
        try await h.live { client in
            let token = h.hostileToken
            let first = Dictionary(uniqueKeysWithValues: names.prefix(3).map { ($0, Self.known[$0]!) })
            #expect(try await Self.pull(client, token, schema: SchemaHeader.encode(first)).status == .ok)
            let second = [names[3]: Self.known[names[3]]!]
            #expect(try await Self.pull(client, token, schema: SchemaHeader.encode(second)).status == .ok)
            let schema = Self.schema(of: try await Self.device(client, h, user: "mallory", device: "mallory-phone"))
            #expect(schema.count == 2, "\(schema)")
            #expect(schema[names[3]] != nil, "the latest request's contract is kept: \(schema)")
        }
    }

    @Test("an absurd X-Outpost-Schema is refused with 400 and noted nowhere", arguments: [StorageKind.sqlite])
    func absurdSchemaHeadersAreRefused(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            let token = h.hostileToken
            let refused: [(String, ErrorCode)] = [
                // 2 000 contracts: far past the entries one header may name.
                (SchemaHeader.encode(Self.madeUp(2_000, round: 0)), .malformedRequest),
                // Over the header's bytes, in few entries.
                ((0..<140).map { "\(String(repeating: "N", count: 120))\($0)=1" }.joined(separator: ","), .malformedRequest),
                // A contract name over 128 bytes.
                ("\(String(repeating: "L", count: 129))=1", .identifierInvalid),
                // Not in NFC: `Unite` + U+0301.
                ("Unite\u{301}=1", .identifierNotNormalized),
                ("Unit=0", .malformedRequest),
            ]
            for (header, code) in refused {
                let response = try await Self.pull(client, token, schema: header)
                #expect(response.status == .badRequest, "\(header.prefix(40)): \(response.status)")
                #expect(try response.errorDetail.code == code, "\(header.prefix(40))")
            }
            // The census refuses it on any route a device calls, not only those that read it.
            let key = try await client.execute(
                uri: "/sync/v1/device-key", method: .put,
                headers: HostileHarness.headers(
                    token, [.outpostSchema: SchemaHeader.encode(Self.madeUp(2_000, round: 1)), .contentType: "application/json"]),
                body: ByteBuffer(string: "{}"))
            #expect(key.status == .badRequest)
            #expect(try key.errorDetail.message.contains(ProtocolHeaders.schema), "refused for the header: \(key.bodyText)")
            let fleet = try await client.execute(uri: "/admin/v1/fleet", method: .get, headers: HostileHarness.headers(h.adminToken))
            #expect(!fleet.bodyText.contains("Fake") && !fleet.bodyText.contains("LLLL"), "nothing of the refused headers is kept")
        }
    }

    @Test("requests refused by the rate limit (429) are not noted in the census", arguments: StorageKind.allCases)
    func rateLimitedRequestsAreNotNoted(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind) { $0.rateLimit = ServerConfiguration.RateLimit(requestsPerSecond: 0.01, burst: 3) }
        try await h.live { client in
            let token = h.hostileToken
            var statuses: [Int] = []
            for round in 0..<8 {
                statuses.append(Int(try await Self.pull(client, token, schema: SchemaHeader.encode(Self.madeUp(5, round: round))).status.code))
            }
            #expect(statuses.filter { $0 == 200 }.count == 3 && statuses.filter { $0 == 429 }.count == 5, "\(statuses)")
            let device = try await Self.device(client, h, user: "mallory", device: "mallory-phone")
            #expect(FleetCensusTests.int(device["pulls"]) == 3, "only the pulls the rate let through: \(device["pulls"] ?? .null)")
            #expect(FleetCensusTests.int(device["failures"]) == 0, "a 429 is not a sync the census saw")
            #expect(device["last_outcome"] == .string("ok"))
        }
    }

    @Test(
        "census rows stored before the bounds are trimmed when the device is next written, and when the census service starts",
        arguments: StorageKind.allCases)
    func oversizedRowsFromBeforeAreTrimmed(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        let now = Int64(Date().timeIntervalSince1970)
        var oversized = Self.madeUp(5_000, round: 7)
        oversized["Unit"] = Self.known["Unit"]
        let text = SchemaHeader.encode(oversized)
        // Two rows as a server before the bounds left them.
        for device in ["written-again", "left-alone"] {
            try await h.storage.write { transaction in
                _ = try await transaction.serverTableQuery(
                    """
                    INSERT INTO device_census (tenant, user_id, device_id, first_seen_at, last_seen_at, schema, pushes, pulls, failures, recent)
                    VALUES (?, ?, ?, ?, ?, ?, 0, 1, 0, '[]')
                    """,
                    [.text(HostileHarness.tenant), .text("mallory"), .text(device), .integer(now - 60), .integer(now - 60), .text(text)])
            }
        }
        let census = FleetCensus(
            storage: h.storage, clock: SystemClock(), contracts: Set(Self.known.keys),
            contractsPerDevice: h.configuration.identityLimits.censusContractsPerDevice)
        func stored(_ device: String) async throws -> String {
            let rows = try await h.storage.read { reader in
                try await reader.serverTableQuery("SELECT schema FROM device_census WHERE device_id = ?", [.text(device)])
            }
            guard case .text(let text)? = rows.first?["schema"] else { throw CensusTestError.missing("the row of \(device)") }
            return text
        }
        census.observe(
            FleetCensus.Observation(
                tenant: HostileHarness.tenant, userID: "mallory", deviceID: "written-again", at: now, appVersion: nil, schema: ["Task": 1],
                route: "pull", status: 200, outcome: "ok", milliseconds: 1, telemetry: [:]))
        try await census.flush()
        #expect(try await stored("written-again") == SchemaHeader.encode(["Task": 1, "Unit": Self.known["Unit"]!]), "trimmed by its next write")
        #expect(try await stored("left-alone") == text, "not written: still as it was")

        #expect(try await census.trimStoredSchemas() == 1)
        #expect(try await stored("left-alone") == SchemaHeader.encode(["Unit": Self.known["Unit"]!]))
        #expect(try await census.trimStoredSchemas() == 0, "nothing left to trim")

        // A server starting on such a row trims it by itself: the fleet route is bounded again.
        try await h.storage.write { transaction in
            _ = try await transaction.serverTableQuery("UPDATE device_census SET schema = ? WHERE device_id = ?", [.text(text), .text("left-alone")])
        }
        try await h.live { client in
            var fleet = try await client.execute(uri: "/admin/v1/fleet", method: .get, headers: HostileHarness.headers(h.adminToken))
            for _ in 0..<100 where fleet.bodyText.contains("Fake") {
                try await Task.sleep(for: .milliseconds(50))
                fleet = try await client.execute(uri: "/admin/v1/fleet", method: .get, headers: HostileHarness.headers(h.adminToken))
            }
            #expect(fleet.status == .ok && !fleet.bodyText.contains("Fake"), "\(fleet.body.readableBytes) bytes")
        }
        #expect(try await stored("left-alone") == SchemaHeader.encode(["Unit": Self.known["Unit"]!]))
    }
}
