package import Foundation
import SyncProtocol

/// A pull cursor as the server reads it from `?cursor=` (``SyncCursor/init(encoded:)``).
/// Properties: nothing traps, refusals are ``SyncCursor/DecodingFailure``s; a cursor read
/// encodes into text that reads back to the same cursor; a cursor made from the input's text
/// and a sequence reads back from its encoding whenever that is within the length allowed.
package func fuzzCursor(_ data: Data) throws(PropertyViolation) {
    let text = String(decoding: data, as: UTF8.self)
    if let cursor = try? SyncCursor(encoded: text) {
        try check(cursor.sequence >= 0, "cursor \(text) reads with a negative sequence")
        let again = Result { () throws(SyncCursor.DecodingFailure) in try SyncCursor(encoded: cursor.encoded) }
        try check(again == .success(cursor), "cursor \(text) reads as \(cursor), whose encoding \(cursor.encoded) reads as \(again)")
    }
    // The other direction: any scope key and sequence survive encoding.
    var sequence: Int64 = 0
    for byte in data.prefix(8) { sequence = sequence << 8 | Int64(byte) }
    let made = SyncCursor(scopeKey: String(decoding: data.dropFirst(min(8, data.count)), as: UTF8.self), sequence: sequence & .max)
    let encoded = made.encoded
    if encoded.count <= 1024 {
        let again = Result { () throws(SyncCursor.DecodingFailure) in try SyncCursor(encoded: encoded) }
        try check(again == .success(made), "\(made) encodes as \(encoded), which reads as \(again)")
    }
}

/// The `X-Outpost-Schema` header as the server reads it (``SchemaHeader/decode(_:)``).
/// Properties: nothing traps; versions read are named and positive, and encode into a header
/// that reads back to the same versions.
package func fuzzSchemaHeader(_ data: Data) throws(PropertyViolation) {
    let text = String(decoding: data, as: UTF8.self)
    guard let versions = SchemaHeader.decode(text) else { return }
    for (name, version) in versions {
        try check(!name.isEmpty && version > 0, "header \(text) reads \(name)=\(version)")
    }
    let encoded = SchemaHeader.encode(versions)
    let again = SchemaHeader.decode(encoded)
    try check(again == versions, "header \(text) reads as \(versions), whose header \(encoded) reads as \(String(describing: again))")
}
