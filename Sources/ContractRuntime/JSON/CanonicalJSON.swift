package import Foundation

/// One JSON text per value, the same on every platform: object keys sorted by their UTF-8
/// bytes, no insignificant whitespace, integers in decimal, other numbers in Swift's shortest
/// round-trip form, `/` and non-ASCII characters unescaped.
///
/// `JSONEncoder`'s `.sortedKeys` is not enough: its order differs between Apple platforms and
/// Linux, so a hash computed on a device would not match the server's.
package enum CanonicalJSON {
    /// The canonical JSON text of any `Encodable` value.
    package static func encode<Value: Encodable>(_ value: Value) throws -> Data {
        Data(bytes(try JSONTreeEncoder.encode(value)))
    }

    /// The canonical JSON text of a JSON value.
    package static func text(_ value: JSONValue) -> String {
        String(decoding: bytes(value), as: UTF8.self)
    }

    /// The canonical JSON text of a JSON value, as UTF-8 bytes.
    package static func bytes(_ value: JSONValue) -> [UInt8] {
        var writer = JSONWriter(capacity: 256)
        writer.value(value)
        return writer.bytes
    }
}
