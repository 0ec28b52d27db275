import Crypto
import Foundation

/// Public keys a client accepts from its server, each the SHA-256 of a SubjectPublicKeyInfo in
/// base64 (the `pin-sha256` form: `openssl x509 -pubkey -noout | openssl pkey -pubin -outform der
/// | openssl dgst -sha256 -binary | base64`).
///
/// A connection passes when the key of any certificate of its validated chain (the server's, an
/// intermediate's or the root's) is one of the pins, checked after the usual validation of the
/// chain and the host name, never instead of it. Keep a backup pin (a key not yet in use, or the
/// issuing CA's) beside the current one, so a certificate can be replaced without locking the
/// devices out.
public struct PublicKeyPins: Sendable, Hashable, CustomStringConvertible {
    /// The pins, base64 of 32 bytes each, sorted.
    public let sha256: [String]

    /// Pins from their base64 forms (a `sha256/` prefix, as some tools print, is accepted).
    /// Throws when there is none or one is not the base64 of a SHA-256.
    public init(sha256 pins: [String]) throws(PublicKeyPinsError) {
        var normalized: Set<String> = []
        for pin in pins {
            let text = pin.hasPrefix("sha256/") ? String(pin.dropFirst("sha256/".count)) : pin
            guard let bytes = Data(base64Encoded: text), bytes.count == SHA256.byteCount else {
                throw PublicKeyPinsError("'\(pin)' is not a pin: a pin is the base64 of the SHA-256 of a public key (44 characters ending in '=')")
            }
            normalized.insert(bytes.base64EncodedString())
        }
        guard !normalized.isEmpty else { throw PublicKeyPinsError("no pin given: pinning needs at least one public key pin") }
        sha256 = normalized.sorted()
    }

    /// The pin of a public key: base64 of the SHA-256 of its DER SubjectPublicKeyInfo.
    public static func pin(subjectPublicKeyInfo: some Sequence<UInt8>) -> String {
        Data(SHA256.hash(data: Array(subjectPublicKeyInfo))).base64EncodedString()
    }

    /// Whether one of `pins` (as ``pin(subjectPublicKeyInfo:)`` makes them) is a pin of this set.
    public func matches(anyOf pins: [String]) -> Bool {
        pins.contains { sha256.contains($0) }
    }

    /// The pins, comma-separated.
    public var description: String { sha256.joined(separator: ", ") }
}

/// Why pins were refused (``PublicKeyPins/init(sha256:)``).
public struct PublicKeyPinsError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Why the pins were refused.
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}
