import ContractRuntime
import Contracts
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import OutpostTestSupport
import SampleServerApps
import SyncProtocol
import Testing

@testable import SyncServer

/// Limits meant for attackers must not land on the devices beside them, and what a request says
/// of itself (its Host, its transfer coding, its token's future date) must not buy it more.
@Suite("Abuse limits and what a request claims", .blockingWork)
struct AbuseLimitTests {
    static func pull(_ client: any TestClientProtocol, _ token: String, _ extra: HTTPFields = [:]) async throws -> TestResponse {
        try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(token, extra))
    }

    @Test(
        "110 bad signatures then 30 a second from one address: a valid device there still pulls, and /health answers", arguments: [StorageKind.sqlite]
    )
    func badTokensDoNotLockOutAnAddress(_ kind: StorageKind) async throws {
        // The default burst (100), refilled slowly enough that a loaded machine's pace cannot refill it.
        let h = try await HostileHarness.make(kind) { $0.peerLimit = ServerConfiguration.RateLimit(requestsPerSecond: 0.01, burst: 100) }
        let forged = try TokenSigner(secret: Data(repeating: 1, count: 32), keyID: try TokenSigner(secret: HostileHarness.secret).keyID)
            .token(tenant: "acme", user: "mallory", device: "m")
        try await h.live { client in
            var statuses: [HTTPResponse.Status] = []
            for _ in 0..<140 { statuses.append(try await Self.pull(client, forged).status) }
            #expect(statuses.prefix(100).allSatisfy { $0 == .unauthorized })
            #expect(statuses.suffix(40).filter { $0 == .tooManyRequests }.count >= 38, "the guessing address is limited")
            for _ in 0..<5 {
                #expect(try await Self.pull(client, h.ownerToken).status == .ok, "a valid token is never refused for its address")
                #expect(try await client.execute(uri: "/health", method: .get).status == .ok)
            }
        }
    }

    @Test("behind a trusted proxy the limit is per X-Forwarded-For client; from anyone else the header is ignored", arguments: [StorageKind.sqlite])
    func trustedProxy(_ kind: StorageKind) async throws {
        let limit = ServerConfiguration.RateLimit(requestsPerSecond: 0.01, burst: 2)
        let proxied = try await HostileHarness.make(kind) {
            $0.peerLimit = limit
            $0.trustedProxies = TrustedProxies([TrustedProxies.Block("127.0.0.0/8")!])
        }
        try await proxied.live { client in
            let attacker: HTTPFields = [.xForwardedFor: "203.0.113.9"]
            let statuses = try await (0..<3).asyncMap { _ in try await Self.pull(client, "bad.token.here", attacker).status }
            #expect(statuses == [.unauthorized, .unauthorized, .tooManyRequests])
            // Another client behind the same proxy is not the attacker.
            #expect(try await Self.pull(client, "bad.token.here", [.xForwardedFor: "198.51.100.7"]).status == .unauthorized)
            // The left of the header is the client's to write: only the right-most untrusted hop counts.
            #expect(try await Self.pull(client, "bad.token.here", [.xForwardedFor: "198.51.100.8, 203.0.113.9"]).status == .tooManyRequests)
        }
        let direct = try await HostileHarness.make(kind) { $0.peerLimit = limit }
        try await direct.live { client in
            // Without a trusted proxy, rotating the header buys nothing.
            let statuses = try await (0..<3).asyncMap { index in
                try await Self.pull(client, "bad.token.here", [.xForwardedFor: "203.0.113.\(index)"]).status
            }
            #expect(statuses == [.unauthorized, .unauthorized, .tooManyRequests])
        }
    }

    @Test("addresses and blocks: IPv4 and IPv6 CIDR, right-most untrusted hop")
    func proxyRules() {
        let proxies = TrustedProxies([TrustedProxies.Block("10.0.0.0/8")!, TrustedProxies.Block("fd00::/8")!])
        #expect(proxies.trusts("10.1.2.3") && !proxies.trusts("11.0.0.1"))
        #expect(proxies.trusts("fd12::1") && !proxies.trusts("fe80::1"))
        #expect(proxies.client(peer: "10.0.0.1", forwardedFor: ["1.2.3.4, 10.0.0.2"]) == "1.2.3.4")
        #expect(proxies.client(peer: "10.0.0.1", forwardedFor: ["not an address"]) == "10.0.0.1")
        #expect(proxies.client(peer: "8.8.8.8", forwardedFor: ["1.2.3.4"]) == "8.8.8.8")
        #expect(TrustedProxies.Block("10.0.0.0/33") == nil && TrustedProxies.Block("host") == nil)
    }

    @Test(
        "a token dated 50 s ahead (inside the leeway) is refused once its device is revoked: pulls and the live channel",
        arguments: StorageKind.allCases)
    func futureDatedTokenAndRevocation(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            let now = Int64(Date().timeIntervalSince1970)
            let ahead = h.signer.sign(
                DeviceIdentity(tenant: "acme", userID: "mallory", deviceID: "stolen", expiresAt: now + 3600), issuedAt: now + 50)
            #expect(try await Self.pull(client, ahead).status == .ok)
            let revoke = try await client.execute(
                uri: "/admin/v1/revocations", method: .post, headers: HostileHarness.headers(h.adminToken),
                body: ByteBuffer(string: #"{"device": "stolen"}"#)
            )
            #expect(revoke.status == .ok)
            let refused = try await Self.pull(client, ahead)
            #expect(refused.status == .unauthorized)
            #expect(try refused.errorDetail.code == .tokenRevoked)
            let live = try await client.execute(uri: "/sync/v1/live", method: .get, headers: HostileHarness.headers(ahead))
            #expect(live.status == .unauthorized)
        }
    }

    @Test("the Host header is never reflected into asset download links", arguments: [StorageKind.sqlite])
    func hostNotReflected(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        _ = try await SampleContent.seed(storage: h.storage, tenant: "acme", team: "team-1", clock: SystemClock())
        try await h.live { client in
            let port = try #require(client.port)
            let answer = try await RawHTTP.exchange(
                "GET /api/v1/content/units/sync HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer \(h.ownerToken)\r\nConnection: close\r\n\r\n",
                port: port
            )
            #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer.prefix(200))")
            #expect(!answer.contains("evil.example"))
            #expect(answer.contains("\"http://127.0.0.1:\(port)/assets/") || answer.contains(#""http:\/\/127.0.0.1:\#(port)\/assets\/"#))
        }
    }

    @Test("an identity provider's token saying admin: true or role: integration is neither", arguments: [StorageKind.sqlite])
    func identityProviderAdmin(_ kind: StorageKind) async throws {
        let key = P256.Signing.PrivateKey()
        let h = try await HostileHarness.make(kind)
        var signer = h.signer
        try await signer.addPublicKey(pem: key.publicKey.pemRepresentation, kid: "idp")
        let now = Int64(Date().timeIntervalSince1970)
        let claims: [String: Any] = [
            "sub": "mallory", "tenant": "acme", "device": "m", "exp": now + 3600, "iat": now, "aud": "outpost-sync", "admin": true,
            "role": "integration",
        ]
        let token = try TokenAttackTests.jwt(header: #"{"alg":"ES256","kid":"idp"}"#, claims: claims) { try key.signature(for: $0).rawRepresentation }
        let identity = try await signer.verify(token, now: now)
        #expect(identity.userID == "mallory")
        #expect(!identity.isAdmin)
        #expect(!identity.isIntegration)
    }

    @Test(
        "two users whose devices share an id do not share a rate bucket; a revoked device over its rate is told 401, not 429",
        arguments: StorageKind.allCases)
    func sharedDeviceID(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind) { $0.rateLimit = ServerConfiguration.RateLimit(requestsPerSecond: 0.01, burst: 3) }
        try await h.live { client in
            let mallory = h.token(user: "mallory", device: "phone")
            let alice = h.token(user: "alice", device: "phone")
            for _ in 0..<4 { _ = try await Self.pull(client, mallory) }
            let limited = try await Self.pull(client, mallory)
            #expect(limited.status == .tooManyRequests)
            #expect(limited.headers[.retryAfter] != nil)
            #expect(try await Self.pull(client, alice).status == .ok, "another user's device of the same id has its own bucket")

            let revoke = try await client.execute(
                uri: "/admin/v1/revocations", method: .post, headers: HostileHarness.headers(h.adminToken),
                body: ByteBuffer(string: #"{"user": "mallory"}"#)
            )
            #expect(revoke.status == .ok)
            let refused = try await Self.pull(client, mallory)
            #expect(refused.status == .unauthorized, "the identity's refusal comes before the rate's")
            #expect(try refused.errorDetail.code == .tokenRevoked)
        }
    }
}

extension Sequence {
    func asyncMap<Value>(_ transform: (Element) async throws -> Value) async rethrows -> [Value] {
        var values: [Value] = []
        for element in self { values.append(try await transform(element)) }
        return values
    }
}
