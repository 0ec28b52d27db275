import Crypto
public import Foundation
import JWTKit
import SyncProtocol

/// Signs and verifies device and admin tokens: JSON Web Tokens (RFC 7519) with a `kid`.
///
/// - The server signs with its current HS256 key (a secret in the data folder, see
///   ``TokenKey``); earlier keys stay accepted until retired, so keys rotate without logging
///   anyone out. A signer made from a data folder reads its keys again when `sync-server keys
///   rotate` or `keys retire` changes them, so a running server needs no restart.
/// - An app's own identity provider can issue device tokens instead: its ES256, RS256 or EdDSA
///   public keys (PEM files, a JWKS file, or a JWKS URL fetched again as its keys change) are
///   added with ``addPublicKey(pem:kid:)``, ``addJWKS(_:)`` and ``addJWKS(url:)``.
///
/// Every token is verified by jwt-kit, the server's own HS256 keys as HMAC keys beside the
/// identity provider's public keys, after the checks that give each refusal its code.
///
/// A signer is a small value holding its keys behind a lock: copies share them, so keys read
/// again or fetched while the server runs reach every copy at once. A copy changed with one of
/// the `add` methods gets keys of its own; ``audience`` is each copy's own.
///
/// Claims: `sub` (the user), `tenant`, `device`, `exp`, `iat`, `aud` (``audience``), `role`
/// (`integration` for a backend service reading the change feed, honoured like `admin`), `admin`
/// for admin tokens (honoured only under the server's own HS256 keys: an identity provider's
/// token never makes an admin), and `teams`, which only tells a device which team scopes to ask for: the
/// server authorizes teams by the memberships it holds, never by the token.
///
/// Every refusal is a 401 with its own stable code: `token_missing`, `token_malformed`,
/// `token_algorithm_refused` (`alg: none`, or an algorithm other than the key's),
/// `token_unknown_key`, `token_invalid_signature`, `token_wrong_audience`, `token_expired`,
/// `token_not_yet_valid` (issued in the future), `identifier_not_normalized` (a tenant, user,
/// device or team not in Unicode NFC, see SyncProtocol's `UnicodeIdentifier`), and `token_revoked` (see
/// the authentication middleware).
///
/// ```swift
/// let signer = try TokenSigner(secret: keyBytes)
/// let token = signer.sign(DeviceIdentity(tenant: "acme", userID: "u-1", deviceID: "d-1", expiresAt: tomorrow))
/// let identity = try await signer.verify(token, now: Int64(Date().timeIntervalSince1970))
/// ```
public struct TokenSigner: Sendable {
    /// Secrets shorter than this are refused: HMAC-SHA256 wants at least 256 bits of key.
    public static let minimumSecretBytes = 32
    /// The audience tokens name unless the server is configured with another.
    public static let defaultAudience = "outpost-sync"
    /// How far in the future a token's `iat` may be (clocks differ a little).
    public static let issuedAtLeeway: Int64 = 60

    /// Every key tokens are accepted from, shared by this signer's copies.
    private var keyring: TokenKeyring
    /// The `aud` tokens must name.
    public var audience: String

    /// A signer with `secret` as its HMAC key, named `keyID` (by default a name derived from the
    /// secret, so the same secret always has the same kid).
    /// - Throws: ``TokenKeyError/tooShort(source:bytes:)`` when `secret` is shorter than
    ///   ``minimumSecretBytes``.
    public init(secret: Data, source: String = "the secret", keyID: String? = nil, audience: String = defaultAudience) throws(TokenKeyError) {
        guard secret.count >= Self.minimumSecretBytes else { throw .tooShort(source: source, bytes: secret.count) }
        keyring = TokenKeyring(currentKeyID: keyID ?? Self.keyID(of: secret), currentSecret: secret)
        self.audience = audience
    }

    /// The kid of the key new tokens are signed with (after a rotation in the data folder, the
    /// new key's).
    public var keyID: String { keyring.material.currentKeyID }

    /// The kid of a secret that has no name of its own: `hs-` and 12 hex digits of its SHA-256.
    public static func keyID(of secret: Data) -> String {
        "hs-" + Hex.sha256(secret).prefix(12)
    }

    /// The keyring to change: this copy's own once it is changed.
    private mutating func ownKeyring() -> TokenKeyring {
        if !isKnownUniquelyReferenced(&keyring) { keyring = keyring.copy() }
        return keyring
    }

    /// Also accepts tokens signed with `secret` (an earlier key, kept until it is retired).
    public mutating func addSecret(_ secret: Data, keyID: String) {
        ownKeyring().change { $0.secrets[keyID] = secret }
    }

    /// Reads the server's own keys from `dataDirectory` again when they change there.
    package mutating func watchKeyFolder(_ dataDirectory: URL) {
        ownKeyring().watch(OwnKeyFolder(directory: dataDirectory))
    }

    /// Accepts tokens signed by the private half of a PEM public key: EC P-256 (ES256), Ed25519
    /// (EdDSA) or RSA (RS256, 2048 bits or more).
    public mutating func addPublicKey(pem: String, kid: String) async throws(TokenKeyError) {
        let algorithm: String
        if (try? ES256PublicKey(pem: pem)) != nil {
            algorithm = "ES256"
        } else if (try? EdDSA.PublicKey(pem: pem)) != nil {
            algorithm = "EdDSA"
        } else if (try? Insecure.RSA.PublicKey(pem: pem)) != nil {
            algorithm = "RS256"
        } else {
            throw .unusableKey(kid: kid, reason: "not an EC P-256, Ed25519 or RSA (2048 bits or more) public key in PEM")
        }
        ownKeyring().change { $0.publicKeys[kid] = TokenKeyring.PublicKey(pem: pem, algorithm: algorithm) }
    }

    /// Accepts tokens signed by any key of a JWKS document (each key needs its `kid` and `alg`).
    public mutating func addJWKS(_ json: String) async throws(TokenKeyError) {
        let document = try JWKSDocument.strict(json)
        do {
            try await JWTKeyCollection().add(jwksJSON: json)
        } catch {
            throw .unusableKey(kid: "?", reason: "the JWKS has a key that cannot be used (\(error))")
        }
        ownKeyring().change { $0.documents["JWKS \($0.documents.count + 1)"] = document }
    }

    /// Accepts tokens signed by the keys an identity provider publishes at `url` (a JWKS; keys
    /// without an `alg` get their kind's, encryption keys are left out).
    ///
    /// The JWKS is fetched now, again when the lifetime its answer gives ends (`Cache-Control:
    /// max-age` or `Expires`; 5 minutes when it says nothing, at least 1 minute, at most 24
    /// hours), and again when a token names a kid no key has (at most once per 30 seconds; the
    /// requests meanwhile share that fetch): an identity provider's new key is accepted without
    /// a restart, and a dropped key stops being accepted once the cache lifetime ends. A fetch
    /// that fails keeps the keys fetched before (logged) and is tried again 30 seconds later.
    ///
    /// - Parameter url: an `https` URL (`http` is meant for tests and loopback only).
    /// - Throws: ``TokenKeyError/jwksUnavailable(url:reason:)`` when this first fetch fails. The URL
    ///   stays added all the same, tried again as above: a caller that has other keys may serve
    ///   without it meanwhile.
    public mutating func addJWKS(url: URL) async throws(TokenKeyError) {
        try await addJWKS(url: url, policy: JWKSRefreshPolicy())
    }

    /// ``addJWKS(url:)`` with another refresh policy (tests shorten its intervals).
    package mutating func addJWKS(url: URL, policy: JWKSRefreshPolicy) async throws(TokenKeyError) {
        guard let scheme = url.scheme?.lowercased(), ["https", "http"].contains(scheme), url.host != nil else {
            throw .jwksUnavailable(url: url.absoluteString, reason: "is not an https (or http) URL")
        }
        if let failure = await ownKeyring().add(JWKSEndpoint(url: url, policy: policy)) { throw failure }
    }

    /// The kids accepted, with their algorithms, sorted by kid.
    public var acceptedKeys: [(kid: String, algorithm: String)] {
        let material = keyring.material
        var algorithms: [String: String] = [:]
        for document in material.documents.values { algorithms.merge(document.algorithms) { _, new in new } }
        for (kid, key) in material.publicKeys { algorithms[kid] = key.algorithm }
        for kid in material.secrets.keys { algorithms[kid] = "HS256" }
        return algorithms.sorted { $0.key < $1.key }.map { (kid: $0.key, algorithm: $0.value) }
    }

    /// Whether tokens signed with the server's own key `kid` are accepted now: it is one of the
    /// keys this signer verifies with and was not retired (the data folder's keys are read
    /// again first when they changed, as for any token). The console asks this on every request
    /// of the key its session's admin token was signed with.
    package func acceptsOwnKey(_ kid: String) async -> Bool {
        await keyring.verifier().ownKeyIDs.contains(kid)
    }

    /// The kid in the header of `token`, unverified: for a token ``verify(_:now:acceptingExpired:)``
    /// accepted, the key it was verified with.
    package static func keyID(ofToken token: String) -> String? {
        guard let header = token.split(separator: ".", maxSplits: 1).first, let data = Base64URL.decode(String(header)) else { return nil }
        return (try? JSONDecoder().decode(Header.self, from: data))?.kid
    }

    /// The signed token of `identity`, issued now (or at `issuedAt`).
    ///
    /// The header and claims are written here rather than by jwt-kit, whose signing is
    /// asynchronous: the same identity always gives the same token, `{"alg":"HS256","kid":…,
    /// "typ":"JWT"}` and claims with sorted keys.
    public func sign(_ identity: DeviceIdentity, issuedAt: Int64? = nil) -> String {
        let material = keyring.material
        let header = #"{"alg":"HS256","kid":"# + Self.jsonString(material.currentKeyID) + #","typ":"JWT"}"#
        let claims = DeviceClaims(identity, audience: audience, issuedAt: issuedAt ?? identity.issuedAt ?? Int64(Date().timeIntervalSince1970))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding a struct of strings, booleans and integers cannot fail.
        let signingInput = Base64URL.encode(Data(header.utf8)) + "." + Base64URL.encode((try? encoder.encode(claims)) ?? Data())
        let mac = HMAC<SHA256>.authenticationCode(for: Data(signingInput.utf8), using: SymmetricKey(data: material.currentSecret))
        return signingInput + "." + Base64URL.encode(Data(mac))
    }

    /// The identity a token names, once its key, signature, audience and times hold.
    /// - Parameters:
    ///   - token: the token as sent (`Authorization: Bearer <token>`).
    ///   - now: seconds since 1970.
    ///   - acceptingExpired: check everything but the expiry (to tell an expired token's
    ///     holder something else the server knows of it).
    /// - Throws: a 401 ``ServiceError`` whose code says which check failed.
    public func verify(_ token: String, now: Int64, acceptingExpired: Bool = false) async throws(ServiceError) -> DeviceIdentity {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard token.utf8.count <= 8192, parts.count == 3, let headerData = Base64URL.decode(String(parts[0])),
            let header = try? JSONDecoder().decode(Header.self, from: headerData)
        else {
            throw Self.refusal(.tokenMalformed, "the token is not a JWT: three base64url parts joined by dots, the first a JSON header")
        }
        guard let alg = header.alg, alg.lowercased() != "none" else {
            throw Self.refusal(.tokenAlgorithmRefused, "unsigned tokens (alg none) are refused")
        }
        var keys = await keyring.verifier()
        // A kid no key has may be a key added since (a rotation here, or at the identity provider).
        if let kid = header.kid, keys.algorithms[kid] == nil, await keyring.lookAgain(for: kid) {
            keys = await keyring.verifier()
        }
        guard let kid = header.kid, let expected = keys.algorithms[kid] else {
            throw Self.refusal(.tokenUnknownKey, "the token's key (kid \(header.kid ?? "none")) is not one this server accepts")
        }
        guard alg == expected else {
            throw Self.refusal(.tokenAlgorithmRefused, "key \(kid) signs with \(expected), not \(alg)")
        }
        let ownKey = keys.ownKeyIDs.contains(kid)
        // An HS256 signature that is not base64url cannot match: told as such, as ever.
        guard !ownKey || Base64URL.decode(String(parts[2])) != nil else {
            throw Self.refusal(.tokenInvalidSignature, "the token's signature does not match key \(kid)")
        }
        let claims: DeviceClaims
        do {
            claims = try await keys.collection.verify(token, as: DeviceClaims.self)
        } catch let error as JWTError where error.errorType == .signatureVerificationFailed {
            throw Self.refusal(.tokenInvalidSignature, "the token's signature does not match key \(kid)")
        } catch {
            throw Self.refusal(.tokenMalformed, "the token's claims are not a device identity (sub, tenant, device, exp, iat, aud)")
        }
        guard claims.audiences.contains(audience) else {
            throw Self.refusal(.tokenWrongAudience, "the token is for \(claims.audiences.joined(separator: ", ")), not \(audience)")
        }
        guard now < claims.exp || acceptingExpired else {
            let expiry = Date(timeIntervalSince1970: TimeInterval(claims.exp))
            throw Self.refusal(.tokenExpired, "the token expired at \(expiry.formatted(.iso8601)); ask for a new one")
        }
        guard claims.iat <= now + Self.issuedAtLeeway || acceptingExpired else {
            throw Self.refusal(.tokenNotYetValid, "the token is issued in the future (iat \(claims.iat)); check the issuer's clock")
        }
        guard !claims.tenant.isEmpty, !claims.sub.isEmpty, !claims.device.isEmpty else {
            throw Self.refusal(.tokenMalformed, "the token's sub, tenant and device must not be empty")
        }
        // Identities are compared byte for byte: a token naming `jose` + U+0301 must not reach
        // the data of `josé` (U+00E9) through Swift's canonical-equivalence `==`.
        for (claim, value) in [("tenant", claims.tenant), ("sub", claims.sub), ("device", claims.device)]
            + (claims.teams ?? []).map({ ("teams", $0) })
        {
            try Identifier.require(value, as: "the token's \(claim)", status: 401)
        }
        // Only the server's own keys make admins: an identity provider vouches for who a
        // device's user is, not for what this server lets them administer.
        return DeviceIdentity(
            tenant: claims.tenant, userID: claims.sub, deviceID: claims.device, teams: claims.teams ?? [], isAdmin: ownKey && claims.admin == true,
            isIntegration: ownKey && claims.role == DeviceClaims.integrationRole, expiresAt: claims.exp, issuedAt: claims.iat
        )
    }

    static func refusal(_ code: ErrorCode, _ message: String) -> ServiceError {
        ServiceError(status: 401, code, message)
    }

    private struct Header: Decodable {
        var alg: String?
        var kid: String?
    }

    private static func jsonString(_ text: String) -> String {
        String(decoding: (try? JSONEncoder().encode(text)) ?? Data("\"\"".utf8), as: UTF8.self)
    }
}

/// The claims of a device or admin token.
struct DeviceClaims: JWTPayload {
    var sub: String
    var tenant: String
    var device: String
    var teams: [String]?
    var admin: Bool?
    /// `integration` for a backend service's token (``DeviceIdentity/isIntegration``).
    var role: String?
    var exp: Int64
    var iat: Int64
    var audiences: [String]

    init(_ identity: DeviceIdentity, audience: String, issuedAt: Int64) {
        sub = identity.userID
        tenant = identity.tenant
        device = identity.deviceID
        teams = identity.teams.isEmpty ? nil : identity.teams
        admin = identity.isAdmin ? true : nil
        role = identity.isIntegration ? Self.integrationRole : nil
        exp = identity.expiresAt
        iat = issuedAt
        audiences = [audience]
    }

    enum CodingKeys: String, CodingKey {
        case sub, tenant, device, teams, admin, role, exp, iat, aud
    }

    static let integrationRole = "integration"

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        sub = try container.decode(String.self, forKey: .sub)
        tenant = try container.decode(String.self, forKey: .tenant)
        device = try container.decode(String.self, forKey: .device)
        teams = try container.decodeIfPresent([String].self, forKey: .teams)
        admin = try container.decodeIfPresent(Bool.self, forKey: .admin)
        role = try container.decodeIfPresent(String.self, forKey: .role)
        exp = try container.decode(Int64.self, forKey: .exp)
        iat = try container.decode(Int64.self, forKey: .iat)
        // `aud` is one string or a list (RFC 7519 §4.1.3).
        if let one = try? container.decode(String.self, forKey: .aud) {
            audiences = [one]
        } else {
            audiences = try container.decodeIfPresent([String].self, forKey: .aud) ?? []
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(sub, forKey: .sub)
        try container.encode(tenant, forKey: .tenant)
        try container.encode(device, forKey: .device)
        try container.encodeIfPresent(teams, forKey: .teams)
        try container.encodeIfPresent(admin, forKey: .admin)
        try container.encodeIfPresent(role, forKey: .role)
        try container.encode(exp, forKey: .exp)
        try container.encode(iat, forKey: .iat)
        try container.encode(audiences.count == 1 ? .init(audiences[0]) : AudienceValue(list: audiences), forKey: .aud)
    }

    /// Claims are checked by ``TokenSigner/verify(_:now:)`` against the server's clock.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// `aud` as one string or a list.
private struct AudienceValue: Encodable {
    var one: String?
    var list: [String] = []

    init(_ one: String) { self.one = one }
    init(list: [String]) { self.list = list }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if let one { try container.encode(one) } else { try container.encode(list) }
    }
}

/// Base64url without padding (RFC 4648 §5), as tokens use it.
package enum Base64URL {
    package static func encode(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    package static func decode(_ text: String) -> Data? {
        guard !text.isEmpty, text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else {
            return nil
        }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }
}
