package import Foundation
import SyncServer

/// An asset request's `Range` header as the server reads it (``AssetResponse/parseRange(_:size:)``).
/// The file size comes from the input's first bytes: with the first byte even, the second byte
/// (0 to 255, where the edges are); otherwise the next eight, as a non-negative 64-bit number.
/// The rest is the header. Properties: nothing traps; a partial range lies within the file
/// (`0..<size`, so never in an empty file) and is not empty; no header means the whole file.
package func fuzzRange(_ data: Data) throws(PropertyViolation) {
    let bytes = [UInt8](data)
    guard let selector = bytes.first else { return }
    let size: Int64
    let rest: ArraySlice<UInt8>
    if selector & 1 == 0 {
        size = Int64(bytes.count > 1 ? bytes[1] : 0)
        rest = bytes.dropFirst(2)
    } else {
        var value: UInt64 = 0
        for byte in bytes.dropFirst().prefix(8) { value = value << 8 | UInt64(byte) }
        size = Int64(bitPattern: value) & .max
        rest = bytes.dropFirst(9)
    }
    let header = String(decoding: rest, as: UTF8.self)
    let range = AssetResponse.parseRange(header, size: size)
    if case .partial(let partial) = range {
        try check(
            partial.lowerBound >= 0 && partial.upperBound < size,
            "Range \(header) on \(size) bytes gives \(partial), outside the file"
        )
    }
    try check(AssetResponse.parseRange(nil, size: size) == .whole, "no Range header on \(size) bytes is not the whole file")
}
