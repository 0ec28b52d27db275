import ContractRuntime
import Contracts
import Foundation
import Hummingbird
import HummingbirdTesting
import LearningAPI
import SyncProtocol
import Testing

@testable import SyncServer

/// The learning app's content routes, on the sample's contracts and content: units synced whole,
/// gzip-encoded when asked, and content an admin publishes and deletes reaching them. The engine's
/// own routes are in RouteSyncTests.
@Suite("Routes: the learning app's content")
struct RouteLearningContentTests {
    @Test("the units route answers gzip when asked, with download URLs built from the server's own address")
    func unitsGzip() async throws {
        let harness = try RouteHarness()
        try await harness.seed()
        try await harness.test { client in
            let units = try await client.execute(
                uri: "/api/v1/content/units/sync?include_deleted=true", method: .get, headers: harness.headers(nil, [.acceptEncoding: "gzip"])
            )
            #expect(units.headers[.contentEncoding] == "gzip")
            let synced = try JSONDecoder().decode(UnitsSyncResponse.self, from: try TestZlib.gunzip(units.data))
            #expect(synced.units.count == 2)
            // Built from the server's own address, never from the request's Host (localhost here).
            #expect(synced.units.flatMap(\.lessons).flatMap(\.assets).allSatisfy { $0.downloadURL.hasPrefix("http://127.0.0.1:8080/assets/") })

        }
    }

    @Test("admin routes publish, upload and delete content that devices then sync")
    func adminRoutes() async throws {
        let harness = try RouteHarness()
        try await harness.seed()
        let admin = harness.token(user: "admin", device: "console", admin: true)
        try await harness.test { client in
            let publish = try await client.execute(
                uri: "/admin/v1/content/Unit", method: .post, headers: harness.headers(admin),
                body: ByteBuffer(string: #"{"id": "unit-new", "title": "Ladders", "learner_level": "beginner", "sort_index": 9}"#)
            )
            #expect(publish.status == .ok, "\(publish.text)")

            let units = try await client.execute(uri: "/api/v1/content/units/sync?limit=100", method: .get, headers: harness.headers())
            let synced = try JSONDecoder().decode(UnitsSyncResponse.self, from: units.data)
            #expect(synced.units.contains { $0.id == "unit-new" })

            let delete = try await client.execute(uri: "/admin/v1/content/Unit/unit-new", method: .delete, headers: harness.headers(admin))
            #expect(delete.status == .noContent)
            let again = try await client.execute(uri: "/admin/v1/content/Unit/unit-new", method: .delete, headers: harness.headers(admin))
            #expect(again.status == .notFound)

            let after = try await client.execute(
                uri: "/api/v1/content/units/sync?include_deleted=true&since=\(synced.nextSince)", method: .get, headers: harness.headers()
            )
            #expect(try JSONDecoder().decode(UnitsSyncResponse.self, from: after.data).tombstones.map(\.id) == ["unit-new"])
        }
    }

    @Test("the units route refuses a Unit schema below the oldest supported with 426")
    func unitsSchemaTooOld() async throws {
        let harness = try RouteHarness()
        try await harness.test { client in
            let response = try await client.execute(
                uri: "/api/v1/content/units/sync", method: .get, headers: harness.headers(nil, [.outpostSchema: "Unit=1"]))
            #expect(response.status == .upgradeRequired)
            #expect(try response.errorBody().code == .schemaTooOld)
        }
    }

    @Test("the units route answers 410 for a since below the compacted sequence")
    func unitsCursorExpired() async throws {
        let harness = try RouteHarness()
        try await harness.seed()
        try await harness.storage.write { try await $0.raiseCompactedSequence(tenant: "acme", scopeKey: "content:global", to: 5) }
        let old = SyncCursor(scopeKey: "content:global", sequence: 4).encoded
        try await harness.test { client in
            let units = try await client.execute(uri: "/api/v1/content/units/sync?since=\(old)", method: .get, headers: harness.headers())
            #expect(units.status.code == 410)
        }
    }
}
