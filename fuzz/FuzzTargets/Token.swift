import Crypto
package import Foundation
import SyncProtocol
import SyncServer

/// The signer tokens are verified with: a fixed secret under kid `fuzz-key`.
private let tokenSecret = Data("outpost-fuzz-secret-0123456789abcdef".utf8)
private let signer: TokenSigner = {
    do {
        return try TokenSigner(secret: tokenSecret, keyID: "fuzz-key")
    } catch {
        fatalError("the fuzz secret is refused: \(error)")
    }
}()

/// The server's clock for verification: 2027-01-15.
private let now: Int64 = 1_800_000_000

/// A bearer token as the server reads it (``TokenSigner/verify(_:now:)``), bridged to a
/// synchronous call for the harness: with only HS256 secrets configured verification never
/// waits, and it runs here on a task of its own while this thread (not one of the concurrency
/// pool's) waits for it.
package func fuzzToken(_ data: Data) throws(PropertyViolation) {
    let outcome = Outcome()
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        do throws(PropertyViolation) {
            try await verifyToken(data)
        } catch {
            outcome.violation = error
        }
        done.signal()
    }
    done.wait()
    if let violation = outcome.violation { throw violation }
}

/// What the detached verification found; written by it before the semaphore is signalled and
/// read only after.
private final class Outcome: @unchecked Sendable {
    var violation: PropertyViolation?
}

/// The token checks: the input read as a token; then the input as a header and claims (split
/// at its first newline) signed with the server's secret, so the fuzzer gets past the
/// signature to the JSON of both. Properties: nothing traps; every refusal is a 401; an
/// identity that verifies has its sub, tenant and device, and signs into a token that
/// verifies to the same identity; base64url decodes what it encodes.
func verifyToken(_ data: Data) async throws(PropertyViolation) {
    let text = String(decoding: data, as: UTF8.self)
    try await verify(text)

    let newline = data.firstIndex(of: 0x0A) ?? data.endIndex
    let header = Data(data[data.startIndex..<newline])
    let claims = Data(data[min(newline + 1, data.endIndex)...])
    let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(claims)
    let mac = HMAC<SHA256>.authenticationCode(for: Data(signingInput.utf8), using: SymmetricKey(data: tokenSecret))
    let token = signingInput + "." + Base64URL.encode(Data(mac))
    if let identity = try await verify(token) {
        let again = try await verify(signer.sign(identity, issuedAt: identity.issuedAt))
        try check(again == identity, "\(identity) verifies, is signed again and verifies as \(String(describing: again))")
    }

    for part in [header, claims] where !part.isEmpty {
        let encoded = Base64URL.encode(part)
        try check(Base64URL.decode(encoded) == part, "base64url \(encoded) does not decode to the bytes it encodes")
    }
    if let decoded = Base64URL.decode(text) {
        try check(Base64URL.decode(Base64URL.encode(decoded)) == decoded, "base64url \(text) decodes to bytes that do not survive encoding")
    }
}

/// The identity `token` verifies to, `nil` when it is refused (always with a 401).
@discardableResult
private func verify(_ token: String) async throws(PropertyViolation) -> DeviceIdentity? {
    let identity: DeviceIdentity
    do {
        identity = try await signer.verify(token, now: now)
    } catch {
        try check(error.status == 401, "token \(token) is refused with \(error.status), not 401")
        return nil
    }
    try check(
        !identity.tenant.isEmpty && !identity.userID.isEmpty && !identity.deviceID.isEmpty,
        "token \(token) verifies to \(identity), with an empty name"
    )
    return identity
}
