import ContractRuntime
import Contracts
import Foundation
import Hummingbird
import HummingbirdTesting
import SyncProtocol
import Testing

@testable import SyncServer

/// The admin routes of a user's data (`DELETE /admin/v1/users/{user}`,
/// `GET /admin/v1/users/{user}/export`), what an erased user's device is told, and urgent
/// changes over HTTP.
@Suite("User data and urgent change routes")
struct UserDataRouteTests {
    static let statement = #"""
        {"client_id": "d-1", "schema": {"Statement": 1}, "mutations": [{"seq": 1, "client_mutation_id": "m-1", "entity": "Statement", "op": "create", "id": "st-1",
         "payload": {"id": "st-1", "verb": "experienced", "object_id": "lesson-1", "stated_at": "2026-01-01T07:00:00.000Z"}}]}
        """#

    @Test("an admin erases a user: their device is told user_erased (410), a token issued later works, devices cannot erase")
    func erasureOverHTTP() async throws {
        let harness = try RouteHarness()
        try await harness.test { client in
            let device = harness.token(user: "u-1", device: "d-1")
            let pushed = try await client.execute(
                uri: "/sync/v1/push", method: .post, headers: harness.headers(device), body: ByteBuffer(string: Self.statement)
            )
            #expect(pushed.status == .ok, "\(pushed.text)")

            let refused = try await client.execute(uri: "/admin/v1/users/u-2", method: .delete, headers: harness.headers(device))
            #expect(refused.status == .forbidden)

            let admin = harness.token(user: "ops", device: "console", admin: true)
            let itself = try await client.execute(uri: "/admin/v1/users/ops", method: .delete, headers: harness.headers(admin))
            #expect(itself.status == .badRequest)
            let erased = try await client.execute(uri: "/admin/v1/users/u-1", method: .delete, headers: harness.headers(admin))
            #expect(erased.status == .ok, "\(erased.text)")
            let report = try JSONDecoder().decode(UserErasure.Report.self, from: erased.data)
            #expect(report.userID == "u-1" && report.rowsErased >= 1 && report.pushResultsDeleted == 1)

            let told = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: harness.headers(device))
            #expect(told.status == .gone)
            #expect(try told.errorBody().code == .userErased)

            // Signed in again after the erasure: a fresh start, nothing of before. Its token is
            // dated past the erasure's leeway, which the server takes from the next second on.
            try await ErasureMarginTests.waitPast(report.erasedAt)
            let identity = DeviceIdentity(tenant: "acme", userID: "u-1", deviceID: "d-2", expiresAt: Int64(Date().timeIntervalSince1970) + 3600)
            let fresh = harness.signer.sign(identity, issuedAt: report.erasedAt + TokenSigner.issuedAtLeeway + 1)
            let pulled = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: harness.headers(fresh))
            #expect(pulled.status == .ok, "\(pulled.text)")
            #expect(!pulled.text.contains("lesson-1"))
        }
    }

    @Test("an admin exports a user's data as JSON lines")
    func exportOverHTTP() async throws {
        let harness = try RouteHarness()
        try await harness.test { client in
            let device = harness.token(user: "u-1", device: "d-1")
            _ = try await client.execute(
                uri: "/sync/v1/push", method: .post, headers: harness.headers(device), body: ByteBuffer(string: Self.statement))
            let admin = harness.token(user: "ops", device: "console", admin: true)
            let export = try await client.execute(uri: "/admin/v1/users/u-1/export", method: .get, headers: harness.headers(admin))
            #expect(export.status == .ok)
            #expect(export.headers[.contentType] == "application/x-ndjson; charset=utf-8")
            let types = try export.text.split(separator: "\n").map { line -> String in
                guard case .object(let object) = try JSONDecoder().decode(JSONValue.self, from: Data(line.utf8)),
                    case .string(let type)? = object["type"]
                else { return "?" }
                return type
            }
            #expect(types.first == "user")
            #expect(types.contains("device") && types.contains("row") && types.contains("audit"))
            #expect(export.text.contains(#""st-1""#))

            let forbidden = try await client.execute(uri: "/admin/v1/users/u-1/export", method: .get, headers: harness.headers(device))
            #expect(forbidden.status == .forbidden)
        }
    }

    @Test("urgent=true marks a content change, and a pull with urgent=true answers it with the cursor unchanged")
    func urgentOverHTTP() async throws {
        let harness = try RouteHarness()
        try await harness.seed()
        try await harness.test { client in
            let device = harness.token()
            let first = try await client.execute(uri: "/sync/v1/pull?scope=content&limit=1000", method: .get, headers: harness.headers(device))
            let cursor = try PullResponse(json: first.data).cursor
            let units = try PullResponse(json: first.data).upserts["Unit"] ?? []
            guard case .object(let unit)? = units.first, case .string(let unitID)? = unit["id"] else {
                Issue.record("the sample content has no unit")
                return
            }

            let admin = harness.token(user: "ops", device: "console", admin: true)
            let bad = try await client.execute(uri: "/admin/v1/content/Unit/\(unitID)?urgent=soon", method: .delete, headers: harness.headers(admin))
            #expect(bad.status == .badRequest)
            let withdrawn = try await client.execute(
                uri: "/admin/v1/content/Unit/\(unitID)?urgent=true", method: .delete, headers: harness.headers(admin))
            #expect(withdrawn.status == .noContent)

            let encoded = cursor.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? cursor
            let urgent = try await client.execute(
                uri: "/sync/v1/pull?scope=content&cursor=\(encoded)&urgent=true", method: .get, headers: harness.headers(device)
            )
            #expect(urgent.status == .ok, "\(urgent.text)")
            let page = try PullResponse(json: urgent.data)
            #expect(page.cursor == cursor)
            #expect(page.deletes["Unit"] == [unitID])
        }
    }
}
