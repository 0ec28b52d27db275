import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOConcurrencyHelpers
import SyncProtocol
import Testing

@testable import SyncServer

/// An identity provider's JWKS on loopback, in the test's process: it serves the ES256 keys it
/// is given with `Cache-Control: max-age`, counts its hits, and can be made to fail.
final class TestIdentityProvider: Sendable {
    private struct State {
        var keys: [(kid: String, key: P256.Signing.PrivateKey)] = []
        var hits = 0
        var isDown = false
    }

    private let state = NIOLockedValueBox(State())
    let maxAge: Int
    /// How long each answer takes (so that requests meanwhile would pile up).
    let delay: Duration

    init(maxAge: Int, delay: Duration = .zero) {
        self.maxAge = maxAge
        self.delay = delay
    }

    var hits: Int { state.withLockedValue { $0.hits } }

    /// Publishes exactly these keys from now on.
    func publish(_ keys: [(kid: String, key: P256.Signing.PrivateKey)]) { state.withLockedValue { $0.keys = keys } }

    func setDown(_ isDown: Bool) { state.withLockedValue { $0.isDown = isDown } }

    /// A token of ``TokenAttackTests/claims`` signed by `key` under `kid`.
    static func token(kid: String, key: P256.Signing.PrivateKey) throws -> String {
        try TokenAttackTests.jwt(header: #"{"alg":"ES256","kid":"\#(kid)","typ":"JWT"}"#, claims: TokenAttackTests.claims) {
            try key.signature(for: $0).rawRepresentation
        }
    }

    /// Serves while `body` runs, with the JWKS URL.
    func run<Value: Sendable>(_ body: @Sendable (URL) async throws -> Value) async throws -> Value {
        let router = Router()
        router.get("/jwks.json") { _, _ in try await self.answer() }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        return try await app.test(.live) { client in try await body(URL(string: "http://127.0.0.1:\(client.port!)/jwks.json")!) }
    }

    private func answer() async throws -> Response {
        if delay > .zero { try await Task.sleep(for: delay) }
        let (keys, isDown) = state.withLockedValue { state in
            state.hits += 1
            return (state.keys, state.isDown)
        }
        guard !isDown else { return Response(status: .serviceUnavailable) }
        let jwks = keys.map { kid, key in
            let point = key.publicKey.x963Representation
            return #"{"kty":"EC","crv":"P-256","use":"sig","kid":"\#(kid)","#
                + #""x":"\#(Base64URL.encode(point.dropFirst().prefix(32)))","y":"\#(Base64URL.encode(point.suffix(32)))"}"#
        }
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "public, max-age=\(maxAge)"
        return Response(
            status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: #"{"keys":[\#(jwks.joined(separator: ","))]}"#)))
    }
}

/// `--jwks-url`: an identity provider's keys fetched by URL, fetched again as they rotate,
/// without flooding the identity provider.
@Suite("JWKS by URL: fetched, cached, fetched again on rotation")
struct JwksRefreshTests {
    static func code(_ signer: TokenSigner, _ token: String) async -> ErrorCode? {
        await TokenAttackTests.code(signer, token)
    }

    /// Intervals short enough for a test: the answer's max-age of 1 s is kept 1 s.
    static func policy(retry: Duration) -> JWKSRefreshPolicy {
        var policy = JWKSRefreshPolicy()
        policy.shortestLifetime = .milliseconds(100)
        policy.retryInterval = retry
        policy.timeout = .seconds(5)
        // The identity provider is on loopback, which outbound requests refuse unless allowed.
        policy.outbound = OutboundAddressPolicy(allowList: [CIDRBlock("127.0.0.1/32")!])
        return policy
    }

    @Test("a rotated-in key verifies at once (unknown kid), a dropped key stops once the cache lifetime ends")
    func rotation() async throws {
        let provider = TestIdentityProvider(maxAge: 1)
        let (old, new) = (P256.Signing.PrivateKey(), P256.Signing.PrivateKey())
        provider.publish([("idp-1", old)])
        try await provider.run { url in
            var signer = try TokenSigner(secret: Data(repeating: 3, count: 32))
            try await signer.addJWKS(url: url, policy: Self.policy(retry: .milliseconds(300)))
            #expect(provider.hits == 1)
            let oldToken = try TestIdentityProvider.token(kid: "idp-1", key: old)
            let newToken = try TestIdentityProvider.token(kid: "idp-2", key: new)
            #expect(await Self.code(signer, oldToken) == nil)
            #expect(await Self.code(signer, newToken) == .tokenUnknownKey, "not published yet")

            provider.publish([("idp-1", old), ("idp-2", new)])
            try await Task.sleep(for: .milliseconds(400))
            #expect(await Self.code(signer, newToken) == nil, "the unknown kid fetched the JWKS again")
            #expect(signer.acceptedKeys.contains { $0.kid == "idp-2" && $0.algorithm == "ES256" })

            provider.publish([("idp-2", new)])
            let clock = ContinuousClock()
            let deadline = clock.now + .seconds(10)
            var refused = false
            while !refused, clock.now < deadline {
                refused = await Self.code(signer, oldToken) == .tokenUnknownKey
                if !refused { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(refused, "the dropped key's tokens are refused once the cache expired")
            #expect(await Self.code(signer, newToken) == nil)
            #expect(await Self.code(signer, signer.sign(TokenAttackTests.identity, issuedAt: TokenAttackTests.now)) == nil, "the own key stays")
        }
    }

    @Test("a flood of unknown kids fetches the JWKS at most once per interval, one fetch shared")
    func flood() async throws {
        let provider = TestIdentityProvider(maxAge: 3600, delay: .milliseconds(200))
        let key = P256.Signing.PrivateKey()
        provider.publish([("idp-1", key)])
        let interval = Duration.seconds(2)
        try await provider.run { url in
            var signer = try TokenSigner(secret: Data(repeating: 3, count: 32))
            let clock = ContinuousClock()
            let start = clock.now
            try await signer.addJWKS(url: url, policy: Self.policy(retry: interval))
            #expect(provider.hits == 1)
            let finalSigner = signer
            func flood() async throws -> [ErrorCode?] {
                try await withThrowingTaskGroup(of: ErrorCode?.self) { group in
                    for index in 0..<50 {
                        let bogus = try TestIdentityProvider.token(kid: "bogus-\(index)", key: P256.Signing.PrivateKey())
                        group.addTask { await Self.code(finalSigner, bogus) }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
            }
            /// At most the first fetch and one per interval begun since (a loaded machine may
            /// take longer than an interval over a flood); never one per request.
            func mostHits() -> Int { 1 + Int((clock.now - start) / interval) }
            #expect(try await flood().allSatisfy { $0 == .tokenUnknownKey })
            #expect(provider.hits <= mostHits(), "within the interval of the first fetch: none")
            try await Task.sleep(for: interval + .milliseconds(100))
            let before = provider.hits
            #expect(try await flood().allSatisfy { $0 == .tokenUnknownKey })
            #expect(provider.hits > before, "past the interval: fetched again")
            #expect(provider.hits <= mostHits(), "one fetch, shared by the concurrent requests")
            #expect(try await flood().allSatisfy { $0 == .tokenUnknownKey })
            #expect(provider.hits <= mostHits())
            #expect(await Self.code(signer, try TestIdentityProvider.token(kid: "idp-1", key: key)) == nil)
        }
    }

    @Test("an identity provider that fails keeps the last good keys; one that answers again is used again")
    func unreachable() async throws {
        let provider = TestIdentityProvider(maxAge: 1)
        let (first, second) = (P256.Signing.PrivateKey(), P256.Signing.PrivateKey())
        provider.publish([("idp-1", first)])
        try await provider.run { url in
            var signer = try TokenSigner(secret: Data(repeating: 3, count: 32))
            try await signer.addJWKS(url: url, policy: Self.policy(retry: .milliseconds(200)))
            let token = try TestIdentityProvider.token(kid: "idp-1", key: first)
            provider.setDown(true)
            let before = provider.hits
            let clock = ContinuousClock()
            let end = clock.now + .milliseconds(1800)
            while clock.now < end {
                #expect(await Self.code(signer, token) == nil)
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(provider.hits > before, "the expired cache was fetched again, and failed")
            #expect(provider.hits <= before + 12, "failures are tried again once per interval, not per request")

            provider.publish([("idp-1", first), ("idp-2", second)])
            provider.setDown(false)
            try await Task.sleep(for: .milliseconds(250))
            #expect(await Self.code(signer, try TestIdentityProvider.token(kid: "idp-2", key: second)) == nil)
        }
    }

    @Test("a JWKS URL that cannot be fetched at start is an error; one that is not a JWKS too")
    func unreachableAtStart() async throws {
        var signer = try TokenSigner(secret: Data(repeating: 3, count: 32))
        await #expect(throws: TokenKeyError.self) {
            try await signer.addJWKS(url: URL(string: "http://127.0.0.1:1/jwks.json")!, policy: Self.policy(retry: .seconds(30)))
        }
        await #expect(throws: TokenKeyError.self) { try await signer.addJWKS(url: URL(string: "ftp://example.com/jwks.json")!) }
        let provider = TestIdentityProvider(maxAge: 60)
        try await provider.run { url in
            var withoutKeys = try TokenSigner(secret: Data(repeating: 3, count: 32))
            await #expect(throws: TokenKeyError.self, "no key") { try await withoutKeys.addJWKS(url: url, policy: Self.policy(retry: .seconds(30))) }
        }
    }

    @Test("the cache lifetime: max-age, else Expires, else 5 minutes, within 1 minute and 24 hours")
    func lifetime() {
        let policy = JWKSRefreshPolicy()
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(policy.lifetime(cacheControl: "public, max-age=600", expires: nil, now: now) == .seconds(600))
        #expect(policy.lifetime(cacheControl: "max-age=5", expires: nil, now: now) == .seconds(60))
        #expect(policy.lifetime(cacheControl: "max-age=604800", expires: nil, now: now) == .seconds(86_400))
        #expect(policy.lifetime(cacheControl: "no-store", expires: nil, now: now) == .seconds(60))
        #expect(policy.lifetime(cacheControl: nil, expires: nil, now: now) == .seconds(300))
        let expires = "Fri, 15 Jan 2027 08:30:00 GMT"  // 1_800_000_000 is 2027-01-15T08:00:00Z
        #expect(policy.lifetime(cacheControl: nil, expires: expires, now: now) == .seconds(1800))
        #expect(policy.lifetime(cacheControl: "max-age=120", expires: expires, now: now) == .seconds(120), "max-age wins")
        #expect(policy.lifetime(cacheControl: nil, expires: "yesterday", now: now) == .seconds(300))
    }

    @Test("a JWKS URL's keys without alg get their kind's; encryption keys are left out")
    func lenientDocument() throws {
        let document = try JWKSDocument.lenient(
            #"{"keys":[{"kty":"EC","crv":"P-256","kid":"a","x":"x","y":"y"},{"kty":"RSA","kid":"b","use":"enc","n":"n","e":"AQAB"},"#
                + #"{"kty":"OKP","crv":"Ed25519","kid":"c","x":"x"},{"kty":"oct","kid":"d","k":"k"}]}"#)
        #expect(document.algorithms == ["a": "ES256", "c": "EdDSA"])
        #expect(throws: TokenKeyError.self) { try JWKSDocument.lenient(#"{"keys":[]}"#) }
    }
}

/// `sync-server keys rotate` and `keys retire` reach a signer made from the data folder while it
/// runs.
@Suite("Key rotation without a restart")
struct KeyRotationTests {
    @Test("a rotated key's token verifies at once on the same signer; a retired key's is refused within seconds")
    func sameSigner() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-keys-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let running = try TokenKey.signer(secretFile: nil, dataDirectory: folder, environment: [:])
        let firstKid = running.keyID
        let oldToken = running.sign(TokenAttackTests.identity, issuedAt: TokenAttackTests.now)

        let kid = try TokenKey.rotate(dataDirectory: folder)
        let issuer = try TokenKey.signer(secretFile: nil, dataDirectory: folder, environment: [:])
        let newToken = issuer.sign(TokenAttackTests.identity, issuedAt: TokenAttackTests.now)
        #expect(await TokenAttackTests.code(running, newToken) == nil, "the unknown kid read the folder again")
        #expect(running.keyID == kid, "the running signer signs with the new key too")
        #expect(await TokenAttackTests.code(running, oldToken) == nil)

        try TokenKey.retire(kid: firstKid, dataDirectory: folder)
        try await Task.sleep(for: OwnKeyFolder.checkInterval + .milliseconds(200))
        #expect(await TokenAttackTests.code(running, oldToken) == .tokenUnknownKey, "the retirement was read")
        #expect(await TokenAttackTests.code(running, newToken) == nil)
    }
}
