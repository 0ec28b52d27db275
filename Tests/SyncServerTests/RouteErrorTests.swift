import ContractRuntime
import EngineTestContracts
import Foundation
import Hummingbird
import HummingbirdTesting
import SyncProtocol
import Testing

@testable import SyncServer

/// Every whole-request error of docs/openapi.yaml, through the router: the status, the JSON body with
/// its stable code, the headers it needs, and that nothing was written. On the engines' own contracts
/// (`Activity` pushes, the catalog's `Label`); the learning app's routes are in RouteLearningContentTests.
@Suite("Routes: errors")
struct RouteErrorTests {
    /// Whether anything was written: the audit log and the client's sequence.
    static func nothingWritten(_ harness: RouteHarness, client: String = "client-1") async throws -> Bool {
        try await harness.storage.read { reader in
            let noAudit = try await reader.auditEntries(after: 0, limit: 1).isEmpty
            let lastSeq = try await reader.lastSequence(tenant: "acme", clientID: client)
            return noAudit && lastSeq == 0
        }
    }

    @Test("malformed JSON is 400 malformed_request and writes nothing")
    func malformedJSON() async throws {
        let harness = try RouteHarness.engine()
        try await harness.test { client in
            for body in ["{not json", "[]", #"{"client_id": "c", "schema": {}, "mutations": [{"seq": "one"}]}"#] {
                let response = try await client.execute(
                    uri: "/sync/v1/push", method: .post, headers: harness.headers(), body: ByteBuffer(string: body)
                )
                #expect(response.status == .badRequest, "\(body)")
                #expect(response.headers[.contentType] == "application/json; charset=utf-8")
                #expect(try response.errorBody().code == .malformedRequest)
            }
            let missing = try await client.execute(
                uri: "/sync/v1/push", method: .post, headers: harness.headers(), body: ByteBuffer(string: #"{"client_id": "c"}"#)
            )
            #expect(try missing.errorBody().message == "`schema` is required")
            let noScope = try await client.execute(uri: "/sync/v1/pull", method: .get, headers: harness.headers())
            #expect(noScope.status == .badRequest)
            let badLimit = try await client.execute(uri: "/sync/v1/pull?scope=user&limit=ten", method: .get, headers: harness.headers())
            #expect(try badLimit.errorBody().code == .malformedRequest)
            let badSchema = try await client.execute(
                uri: "/sync/v1/pull?scope=user", method: .get, headers: harness.headers(nil, [.outpostSchema: "Label"])
            )
            #expect(badSchema.status == .badRequest)
        }
        #expect(try await Self.nothingWritten(harness))
    }

    @Test("a missing, foreign, tampered or expired token is 401 with a message naming the problem")
    func unauthorized() async throws {
        let harness = try RouteHarness.engine()
        let foreign = try TokenSigner(secret: Data(repeating: 9, count: 32)).sign(
            DeviceIdentity(tenant: "acme", userID: "u-1", deviceID: "d-1", expiresAt: Int64(Date().timeIntervalSince1970) + 60)
        )
        let valid = harness.token()
        let parts = valid.split(separator: ".")
        let flipped = (parts[2].first == "A" ? "B" : "A") + String(parts[2].dropFirst())
        let tampered = "\(parts[0]).\(parts[1]).\(flipped)"
        let cases: [(HTTPFields, String, ErrorCode)] = [
            ([:], "missing token", .tokenMissing),
            ([.authorization: "Basic dTpw"], "must be `Bearer <token>`", .tokenMalformed),
            ([.authorization: "Bearer not-a-token"], "not a JWT", .tokenMalformed),
            ([.authorization: "Bearer \(foreign)"], "is not one this server accepts", .tokenUnknownKey),
            ([.authorization: "Bearer \(tampered)"], "signature does not match", .tokenInvalidSignature),
            ([.authorization: "Bearer \(harness.token(expiresIn: -5))"], "expired", .tokenExpired),
        ]
        try await harness.test { client in
            for (headers, message, code) in cases {
                let response = try await client.execute(
                    uri: "/sync/v1/push", method: .post, headers: headers,
                    body: try ByteBuffer(json: EngineMutations.push([EngineMutations.activity(seq: 1)]))
                )
                #expect(response.status == .unauthorized, "\(headers)")
                #expect(response.headers[.wwwAuthenticate] == "Bearer")
                let error = try response.errorBody()
                #expect(error.code == code)
                #expect(error.message.contains(message), "\(error.message)")
            }
        }
        #expect(try await Self.nothingWritten(harness))
    }

    @Test("a scope the token does not grant, and a device token on an admin route, are 403")
    func forbidden() async throws {
        let harness = try RouteHarness.engine()
        try await harness.test { client in
            let foreignTeam = try await client.execute(uri: "/sync/v1/pull?scope=workspace:team:team-2", method: .get, headers: harness.headers())
            #expect(foreignTeam.status == .forbidden)
            #expect(try foreignTeam.errorBody().code == .forbidden)

            let publish = try await client.execute(
                uri: "/admin/v1/content/Label", method: .post, headers: harness.headers(),
                body: ByteBuffer(string: #"{"id": "label-x", "name": "X"}"#)
            )
            #expect(publish.status == .forbidden)
            #expect(try publish.errorBody().message.contains("admin token"))
            let delete = try await client.execute(uri: "/admin/v1/content/Label/label-x", method: .delete, headers: harness.headers())
            #expect(delete.status == .forbidden)
            let member = try await client.execute(uri: "/admin/v1/teams/team-1/members/u-2", method: .put, headers: harness.headers())
            #expect(member.status == .forbidden)
        }
        #expect(try await Self.nothingWritten(harness))
    }

    @Test("an unknown route or file is 404 JSON")
    func notFound() async throws {
        let harness = try RouteHarness.engine()
        try await harness.test { client in
            for (uri, method) in [("/nowhere", HTTPRequest.Method.get), ("/sync/v1/push", .get), ("/sync/v2/pull", .get)] {
                let response = try await client.execute(uri: uri, method: method, headers: harness.headers())
                #expect(response.status == .notFound, "\(method) \(uri)")
                let error = try response.errorBody()
                #expect(error.code == .notFound)
                #expect(error.message == "no route for \(method.rawValue) \(uri)")
            }
            let file = try await client.execute(uri: "/sync/v1/files/\(String(repeating: "0", count: 64))", method: .get, headers: harness.headers())
            #expect(file.status == .notFound)
            #expect(try file.errorBody().code == .notFound)
        }
    }

    @Test("a body over the limit is 413, announced or not, plain or gzip, and writes nothing")
    func payloadTooLarge() async throws {
        let harness = try RouteHarness.engine(configuration: ServerConfiguration(maximumBodyBytes: 1024, maximumAssetBytes: 2048, rateLimit: nil))
        let activities = (1...40).map { EngineMutations.activity(seq: $0, id: "9b2f3c1e-0000-4000-8000-\(String(format: "%012d", $0))") }
        let big = try JSONEncoder().encode(EngineMutations.push(activities))
        #expect(big.count > 1024)
        try await harness.test { client in
            let response = try await client.execute(uri: "/sync/v1/push", method: .post, headers: harness.headers(), body: ByteBuffer(bytes: big))
            #expect(response.status == .contentTooLarge)
            #expect(try response.errorBody().code == .payloadTooLarge)

            // A small gzip body that inflates past the limit.
            let bomb = Gzip.compress(Data(repeating: UInt8(ascii: " "), count: 100_000))
            #expect(bomb.count < 1024)
            let inflated = try await client.execute(
                uri: "/sync/v1/push", method: .post, headers: harness.headers(nil, [.contentEncoding: "gzip"]), body: ByteBuffer(bytes: bomb)
            )
            #expect(inflated.status == .contentTooLarge)

            // A file's bytes are bounded by the file limit, before anything else of the upload is read.
            let upload = try await client.execute(
                uri: "/sync/v1/files/uploads/upload-1", method: .patch,
                headers: harness.headers(nil, [.contentType: "application/offset+octet-stream", .uploadOffset: "0"]),
                body: ByteBuffer(bytes: Data(count: 4096))
            )
            #expect(upload.status == .contentTooLarge)
            #expect(try upload.errorBody().message.contains("2048"))
        }
        #expect(try await Self.nothingWritten(harness))
    }

    @Test("an unknown contract: its mutations are rejected one by one (unknown_entity), a publish is 422")
    func unprocessable() async throws {
        let harness = try RouteHarness.engine()
        try await harness.test { client in
            // A device built with contracts this server does not know yet still pushes the others.
            var spaceship = EngineMutations.activity(seq: 2)
            spaceship.entity = "Spaceship"
            let push = try await client.execute(
                uri: "/sync/v1/push", method: .post, headers: harness.headers(),
                body: try ByteBuffer(
                    json: EngineMutations.push([EngineMutations.activity(seq: 1), spaceship], schema: ["Activity": 1, "Spaceship": 1])
                )
            )
            #expect(push.status == .ok)
            let results = try JSONDecoder().decode(PushResponse.self, from: push.data).results
            #expect(results.map(\.status) == [.applied, .rejected])
            #expect(results.last?.error?.code == .unknownEntity)

            let admin = harness.token(user: "admin", device: "console", admin: true)
            let publish = try await client.execute(
                uri: "/admin/v1/content/Spaceship", method: .post, headers: harness.headers(admin), body: ByteBuffer(string: #"{"id": "s-1"}"#)
            )
            #expect(publish.status == .unprocessableContent)
            #expect(try publish.errorBody().code == .unknownEntity)
        }
        // The push's two mutations are done (one applied, one rejected); the refused publish wrote nothing.
        let outcomes = try await harness.storage.read { try await $0.auditEntries(after: 0, limit: 10) }.map(\.outcome.rawValue)
        #expect(outcomes == ["applied,rejected"], "one entry for the push, naming both outcomes")
    }

    @Test("a schema below the oldest supported version is 426 naming the entity and the versions")
    func schemaTooOld() async throws {
        let harness = try RouteHarness.engine()
        try await harness.test { client in
            let push = try await client.execute(
                uri: "/sync/v1/push", method: .post, headers: harness.headers(),
                body: try ByteBuffer(json: EngineMutations.push([EngineMutations.activity(seq: 1)], schema: ["Activity": 1, "Label": 1]))
            )
            #expect(push.status == .upgradeRequired)
            let error = try push.errorBody()
            #expect(error.code == .schemaTooOld)
            #expect(
                error.details == .object(["entity": .string("Label"), "oldest_supported": .int(2), "current": .int(3), "last_seq": .int(0)])
            )

            let pull = try await client.execute(
                uri: "/sync/v1/pull?scope=catalog", method: .get, headers: harness.headers(nil, [.outpostSchema: "Label=1"]))
            #expect(pull.status == .upgradeRequired)
            #expect(try pull.errorBody().code == .schemaTooOld)
        }
        #expect(try await Self.nothingWritten(harness))
    }

    @Test("over the per-device rate is 429 with Retry-After; other devices are not held back")
    func rateLimited() async throws {
        let clock = ManualSeconds()
        let limiter = RateLimiter(ServerConfiguration.RateLimit(requestsPerSecond: 0.5, burst: 2), now: { clock.value })
        let harness = try RouteHarness.engine(rateLimiter: limiter)
        try await harness.test { client in
            for _ in 0..<2 {
                let allowed = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: harness.headers())
                #expect(allowed.status == .ok)
            }
            let refused = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: harness.headers())
            #expect(refused.status == .tooManyRequests)
            #expect(refused.headers[.retryAfter] == "2")
            #expect(try refused.errorBody().code == .rateLimited)

            let other = try await client.execute(
                uri: "/sync/v1/pull?scope=user", method: .get, headers: harness.headers(harness.token(device: "d-2"))
            )
            #expect(other.status == .ok)
            // /health and /metrics are not rate limited (nor authenticated).
            let health = try await client.execute(uri: "/health", method: .get)
            #expect(health.status == .ok)

            clock.advance(by: 2)
            let later = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: harness.headers())
            #expect(later.status == .ok)
        }
    }

    @Test("any other failure is a 500 internal_error that says nothing of its cause")
    func internalError() async throws {
        struct SecretFailure: Error, CustomStringConvertible {
            var description: String { "password=hunter2 at /var/db/server.sqlite" }
        }
        // The error middleware alone, in front of a route that fails with an arbitrary error.
        let router = Router(context: SyncRequestContext.self)
        router.add(middleware: ErrorMiddleware())
        router.get("/fails") { _, _ -> String in throw SecretFailure() }
        try await Application(router: router).test(.router) { client in
            let response = try await client.execute(uri: "/fails", method: .get)
            #expect(response.status == .internalServerError)
            let error = try response.errorBody()
            #expect(error.code == .internalError)
            #expect(!response.text.contains("hunter2") && !response.text.contains("sqlite"))
        }

        // A storage that fails under the server: health says 503, a push 500, neither names the cause.
        let harness = try RouteHarness.engine()
        try await harness.test { client in
            try await harness.storage.write { transaction in
                try (transaction as! SQLiteTransaction).db.execute(sql: "DROP TABLE clients")
            }
            let health = try await client.execute(uri: "/health", method: .get)
            #expect(health.status == .serviceUnavailable)
            #expect(try health.errorBody().code == .internalError)
            #expect(!health.text.contains("clients"))

            let push = try await client.execute(
                uri: "/sync/v1/push", method: .post, headers: harness.headers(),
                body: try ByteBuffer(json: EngineMutations.push([EngineMutations.activity(seq: 1)]))
            )
            #expect(push.status == .internalServerError)
            #expect(try push.errorBody().code == .internalError)
            #expect(!push.text.contains("clients") && !push.text.lowercased().contains("sqlite"))
        }
    }
}

/// A settable clock for the rate limiter.
final class ManualSeconds: @unchecked Sendable {
    private let lock = NSLock()
    private var seconds: Double = 1000

    var value: Double { lock.withLock { seconds } }
    func advance(by delta: Double) { lock.withLock { seconds += delta } }
}
