import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import OutpostTestSupport
import SampleServerApps
import SyncProtocol
import Testing

@testable import SyncServer

/// Tokens a hostile device (or a stolen one) might present, and what the server holds about
/// identities: revocation and team membership, both storages.
@Suite("Token attacks, revocation and membership")
struct TokenAttackTests {
    static let now: Int64 = 1_800_000_000
    static let identity = DeviceIdentity(tenant: "acme", userID: "mallory", deviceID: "mallory-phone", expiresAt: now + 3600)

    static func code(_ signer: TokenSigner, _ token: String, now: Int64 = TokenAttackTests.now) async -> ErrorCode? {
        do {
            _ = try await signer.verify(token, now: now)
            return nil
        } catch {
            #expect(error.status == 401)
            return error.detail.code
        }
    }

    /// A JWT with any header and claims, signed by `sign` over its signing input.
    static func jwt(header: String, claims: [String: Any], sign: (Data) throws -> Data) rethrows -> String {
        let payload = try! JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys])
        let input = Base64URL.encode(Data(header.utf8)) + "." + Base64URL.encode(payload)
        return input + "." + Base64URL.encode(try sign(Data(input.utf8)))
    }

    static var claims: [String: Any] {
        ["sub": "mallory", "tenant": "acme", "device": "mallory-phone", "exp": now + 3600, "iat": now, "aud": "outpost-sync"]
    }

    @Test("alg none, an unknown kid, another audience, an expired or future-dated token: 401, each with its code")
    func refusals() async throws {
        let signer = try TokenSigner(secret: Data(repeating: 3, count: 32))
        #expect(await Self.code(signer, signer.sign(Self.identity, issuedAt: Self.now)) == nil)

        let none = Self.jwt(header: #"{"alg":"none","kid":"\#(signer.keyID)"}"#, claims: Self.claims) { _ in Data() }
        #expect(await Self.code(signer, none) == .tokenAlgorithmRefused)
        let noneNoSignature = String(none.dropLast(0))
        #expect(await Self.code(signer, noneNoSignature) == .tokenAlgorithmRefused)

        let otherKey = try TokenSigner(secret: Data(repeating: 4, count: 32))
        #expect(await Self.code(signer, otherKey.sign(Self.identity, issuedAt: Self.now)) == .tokenUnknownKey)

        var otherAudience = try TokenSigner(secret: Data(repeating: 3, count: 32))
        otherAudience.audience = "someone-else"
        #expect(await Self.code(signer, otherAudience.sign(Self.identity, issuedAt: Self.now)) == .tokenWrongAudience)

        #expect(await Self.code(signer, signer.sign(Self.identity, issuedAt: Self.now), now: Self.now + 3600) == .tokenExpired)
        #expect(await Self.code(signer, signer.sign(Self.identity, issuedAt: Self.now + 600)) == .tokenNotYetValid)
        #expect(await Self.code(signer, signer.sign(Self.identity, issuedAt: Self.now + 30)) == nil, "a little clock difference is allowed")

        // HS256 claimed for a key that is not HS256: refused before any signature is tried.
        var withPublic = signer
        let ec = P256.Signing.PrivateKey()
        try await withPublic.addPublicKey(pem: ec.publicKey.pemRepresentation, kid: "idp-ec")
        let confused = Self.jwt(header: #"{"alg":"HS256","kid":"idp-ec"}"#, claims: Self.claims) { input in
            Data(HMAC<SHA256>.authenticationCode(for: input, using: SymmetricKey(data: Data(ec.publicKey.pemRepresentation.utf8))))
        }
        #expect(await Self.code(withPublic, confused) == .tokenAlgorithmRefused)
    }

    @Test("an identity provider's ES256 key from PEM, RS256 from PEM and EdDSA from a JWKS sign device tokens")
    func identityProviderKeys() async throws {
        var signer = try TokenSigner(secret: Data(repeating: 3, count: 32))
        let ec = P256.Signing.PrivateKey()
        try await signer.addPublicKey(pem: ec.publicKey.pemRepresentation, kid: "idp-ec")
        let ed = Curve25519.Signing.PrivateKey()
        let jwks =
            #"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"\#(Base64URL.encode(ed.publicKey.rawRepresentation))","kid":"idp-ed","alg":"EdDSA"}]}"#
        try await signer.addJWKS(jwks)

        let es256 = try Self.jwt(header: #"{"alg":"ES256","kid":"idp-ec","typ":"JWT"}"#, claims: Self.claims) {
            try ec.signature(for: $0).rawRepresentation
        }
        let verified = try await signer.verify(es256, now: Self.now)
        #expect(verified.userID == "mallory" && verified.tenant == "acme" && verified.deviceID == "mallory-phone")

        let eddsa = try Self.jwt(header: #"{"alg":"EdDSA","kid":"idp-ed"}"#, claims: Self.claims) { try ed.signature(for: $0) }
        #expect(try await signer.verify(eddsa, now: Self.now).userID == "mallory")

        // Signed by another EC key under the same kid: the signature does not hold.
        let forged = try Self.jwt(header: #"{"alg":"ES256","kid":"idp-ec"}"#, claims: Self.claims) {
            try P256.Signing.PrivateKey().signature(for: $0).rawRepresentation
        }
        #expect(await Self.code(signer, forged) == .tokenInvalidSignature)

        await #expect(throws: TokenKeyError.self) { try await signer.addPublicKey(pem: "not a key", kid: "bad") }
    }

    @Test("keys rotate without logging anyone out; a retired key is refused")
    func rotation() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-keys-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let first = try TokenKey.signer(secretFile: nil, dataDirectory: folder, environment: [:])
        let oldToken = first.sign(Self.identity, issuedAt: Self.now)

        let kid = try TokenKey.rotate(dataDirectory: folder)
        let rotated = try TokenKey.signer(secretFile: nil, dataDirectory: folder, environment: [:])
        #expect(rotated.keyID == kid)
        #expect(await Self.code(rotated, oldToken) == nil, "a token of the earlier key still works")
        let newToken = rotated.sign(Self.identity, issuedAt: Self.now)
        #expect(await Self.code(rotated, newToken) == nil)

        #expect(throws: TokenKeyError.self) { try TokenKey.retire(kid: kid, dataDirectory: folder) }
        try TokenKey.retire(kid: first.keyID, dataDirectory: folder)
        let afterRetire = try TokenKey.signer(secretFile: nil, dataDirectory: folder, environment: [:])
        #expect(await Self.code(afterRetire, oldToken) == .tokenUnknownKey)
        #expect(await Self.code(afterRetire, newToken) == nil)
    }

    @Test("a revoked device or user gets 401 token_revoked on its next request; a newer token works again", arguments: StorageKind.allCases)
    func revocation(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            let pull = { (token: String) in
                try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(token))
            }
            let issued = Int64(Date().timeIntervalSince1970) - 5
            let phone = h.signer.sign(
                DeviceIdentity(tenant: "acme", userID: "mallory", deviceID: "mallory-phone", expiresAt: issued + 3600), issuedAt: issued)
            let tablet = h.signer.sign(
                DeviceIdentity(tenant: "acme", userID: "mallory", deviceID: "mallory-tablet", expiresAt: issued + 3600), issuedAt: issued)
            #expect(try await pull(phone).status == .ok)

            let revoke = try await client.execute(
                uri: "/admin/v1/revocations", method: .post, headers: HostileHarness.headers(h.adminToken),
                body: ByteBuffer(string: #"{"device": "mallory-phone"}"#)
            )
            #expect(revoke.status == .ok)
            let refused = try await pull(phone)
            #expect(refused.status == .unauthorized)
            #expect(try refused.errorDetail.code == .tokenRevoked)
            #expect(try await pull(tablet).status == .ok, "another device of the user is not revoked")

            // A token dated within the issuer clock leeway after the revocation could be one
            // dated ahead to outlive it: refused too.
            let soon = Int64(Date().timeIntervalSince1970) + 2
            let tooSoon = h.signer.sign(
                DeviceIdentity(tenant: "acme", userID: "mallory", deviceID: "mallory-phone", expiresAt: soon + 3600), issuedAt: soon)
            #expect(try await pull(tooSoon).errorDetail.code == .tokenRevoked)

            // A token issued more than the leeway after a revocation re-enrols the device.
            let now = Int64(Date().timeIntervalSince1970)
            try await h.storage.write { try await $0.revoke(tenant: "acme", kind: .device, subject: "mallory-watch", at: now - 200) }
            let reissued = now - 100
            let fresh = h.signer.sign(
                DeviceIdentity(tenant: "acme", userID: "mallory", deviceID: "mallory-watch", expiresAt: reissued + 3600), issuedAt: reissued)
            #expect(try await pull(fresh).status == .ok, "a token issued after the revocation re-enrols the device")

            try await h.storage.write { try await $0.revoke(tenant: "acme", kind: .user, subject: "mallory", at: now) }
            #expect(try await pull(tablet).errorDetail.code == .tokenRevoked)
            #expect(try await pull(fresh).errorDetail.code == .tokenRevoked)
            #expect(try await pull(h.ownerToken).status == .ok, "another user is untouched")

            let deviceToken = try await client.execute(
                uri: "/admin/v1/revocations", method: .post, headers: HostileHarness.headers(h.ownerToken),
                body: ByteBuffer(string: #"{"user": "mallory"}"#)
            )
            #expect(deviceToken.status == .forbidden, "a device token cannot revoke")
        }
    }

    @Test("a revocation on one process is seen by another at once (PostgreSQL)")
    func revocationAcrossProcesses() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-revoke-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let storages = try await StorageKind.postgres.makeSharedStorages(2, in: folder)
        let signer = try TokenSigner(secret: HostileHarness.secret)
        let issued = Int64(Date().timeIntervalSince1970) - 5
        let token = signer.sign(DeviceIdentity(tenant: "acme", userID: "u", deviceID: "stolen", expiresAt: issued + 3600), issuedAt: issued)
        var configuration = ServerConfiguration(rateLimit: nil)
        configuration.peerLimit = nil
        let second = buildApplication(
            configuration: configuration,
            environment: ServerEnvironment(
                storage: storages[1], signer: signer,
                apps: SampleServerApps.all)
        )
        try await storages[0].write { try await $0.revoke(tenant: "acme", kind: .device, subject: "stolen", at: issued + 1) }
        try await second.test(.router) { client in
            let response = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(token))
            #expect(response.status == .unauthorized)
            #expect(try response.errorDetail.code == .tokenRevoked)
        }
    }

    @Test("team scope follows the server's memberships, whatever the token says", arguments: StorageKind.allCases)
    func membership(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            // The token claims team-1; the server has no such membership yet.
            let token = h.hostileToken
            let pull = { try await client.execute(uri: "/sync/v1/pull?scope=ops:team:team-1", method: .get, headers: HostileHarness.headers(token)) }
            #expect(try await pull().status == .forbidden)
            let add = try await client.execute(
                uri: "/admin/v1/teams/team-1/members/mallory", method: .put, headers: HostileHarness.headers(h.adminToken))
            #expect(add.status == .noContent)
            #expect(try await pull().status == .ok)
            let remove = try await client.execute(
                uri: "/admin/v1/teams/team-1/members/mallory", method: .delete, headers: HostileHarness.headers(h.adminToken))
            #expect(remove.status == .noContent)
            #expect(try await pull().status == .forbidden, "removed from the team: the scope is gone at once")
            #expect(try await h.storage.read { try await $0.teamMemberships(tenant: "acme") }.isEmpty)
        }
    }
}
