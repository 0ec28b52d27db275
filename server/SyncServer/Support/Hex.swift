import Crypto
package import Foundation

/// Lowercase hex, the one encoding the server uses for hashes, checksums and keys.
/// A table lookup rather than `String(format:)`, which showed up in push profiles.
package enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    package static func string(_ bytes: some Sequence<UInt8>) -> String {
        var output: [UInt8] = []
        output.reserveCapacity(64)
        for byte in bytes {
            output.append(digits[Int(byte >> 4)])
            output.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Lowercase hex SHA-256 of `data`.
    package static func sha256(_ data: Data) -> String {
        string(SHA256.hash(data: data))
    }
}
