import Crypto
public import Foundation

/// Signs and verifies device tokens.
///
/// A token is two base64url parts joined by a dot: the JSON of a ``DeviceIdentity`` (keys sorted,
/// short names `tnt`, `usr`, `dev`, `tms`, `adm`, `exp`), and the HMAC-SHA256 of that first part
/// under the server's secret key. Anyone holding the key can mint tokens, so it never leaves the
/// server's data folder (see ``TokenKey``).
///
/// ```swift
/// let signer = try TokenSigner(secret: keyBytes)
/// let token = signer.sign(DeviceIdentity(tenant: "acme", userID: "u-1", deviceID: "d-1", expiresAt: tomorrow))
/// let identity = try signer.verify(token, now: Int64(Date().timeIntervalSince1970))
/// ```
public struct TokenSigner: Sendable {
    /// Secrets shorter than this are refused: HMAC-SHA256 wants at least 256 bits of key.
    public static let minimumSecretBytes = 32

    /// The key's bytes (`SymmetricKey` is not `Sendable`; one is made per use, which is cheap).
    private let secret: Data
    private var key: SymmetricKey { SymmetricKey(data: secret) }

    /// A signer with `secret` as its HMAC key.
    /// - Throws: ``TokenKeyError/tooShort(source:bytes:)`` when `secret` is shorter than
    ///   ``minimumSecretBytes``.
    public init(secret: Data, source: String = "the secret") throws(TokenKeyError) {
        guard secret.count >= Self.minimumSecretBytes else { throw .tooShort(source: source, bytes: secret.count) }
        self.secret = secret
    }

    /// The signed token of `identity`.
    public func sign(_ identity: DeviceIdentity) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding a struct of strings, booleans and integers cannot fail.
        let claims = Base64URL.encode((try? encoder.encode(identity)) ?? Data())
        return claims + "." + Base64URL.encode(Data(signature(of: claims)))
    }

    /// The identity a token names, once its signature and expiry hold.
    /// - Parameter now: seconds since 1970.
    /// - Throws: a 401 ``ServiceError`` whose message says which check failed.
    public func verify(_ token: String, now: Int64) throws(ServiceError) -> DeviceIdentity {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, token.utf8.count <= 8192,
            let claims = Base64URL.decode(String(parts[0])), let signature = Base64URL.decode(String(parts[1]))
        else {
            throw .unauthorized("the token is malformed: expected two base64url parts joined by a dot")
        }
        guard HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: Data(parts[0].utf8), using: key) else {
            throw .unauthorized("the token's signature does not match this server's key")
        }
        guard let identity = try? JSONDecoder().decode(DeviceIdentity.self, from: claims),
            !identity.tenant.isEmpty, !identity.userID.isEmpty, !identity.deviceID.isEmpty
        else {
            throw .unauthorized("the token's claims are not a device identity")
        }
        guard now < identity.expiresAt else {
            let expiry = Date(timeIntervalSince1970: TimeInterval(identity.expiresAt))
            throw .unauthorized("the token expired at \(expiry.formatted(.iso8601)); ask for a new one")
        }
        return identity
    }

    private func signature(of claims: String) -> HMAC<SHA256>.MAC {
        HMAC<SHA256>.authenticationCode(for: Data(claims.utf8), using: key)
    }
}

/// Base64url without padding (RFC 4648 §5), as tokens use it.
enum Base64URL {
    static func encode(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func decode(_ text: String) -> Data? {
        guard !text.isEmpty, text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else {
            return nil
        }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }
}
