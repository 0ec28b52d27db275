package import Foundation

/// Reads a JSON document that came from outside (a request body) in one pass, refusing what no
/// legitimate sender writes and what would cost the server out of proportion: containers nested
/// deeper than a limit, and U+0000 in any string (SQLite cuts text at it, so two different ids
/// would become one).
package enum BoundedJSON {
    /// How deep a request's containers may nest: a push is four levels to a payload's fields,
    /// so 64 leaves a `json` field plenty and keeps a hostile document's cost linear.
    package static let defaultMaximumDepth = 64

    /// Why a document was refused.
    package enum Refusal: Error, Hashable, Sendable {
        /// Not one whole JSON value.
        case malformed
        /// Containers nested deeper than `limit`.
        case tooDeep(limit: Int)
        /// A string holds U+0000.
        case nulCharacter
    }

    /// The document's value.
    package static func parse(_ data: Data, maximumDepth: Int = defaultMaximumDepth) throws(Refusal) -> JSONValue {
        let result: Result<JSONValue, Refusal> = data.withUnsafeBytes { raw in
            var parser = JSONParser.Parser(bytes: raw.bindMemory(to: UInt8.self))
            parser.maximumDepth = maximumDepth
            let value = parser.value(depth: 0)
            if parser.tooDeep { return .failure(.tooDeep(limit: maximumDepth)) }
            guard let value else { return .failure(.malformed) }
            parser.skipWhitespace()
            guard parser.index == raw.count else { return .failure(.malformed) }
            if parser.sawNUL { return .failure(.nulCharacter) }
            return .success(value)
        }
        return try result.get()
    }
}
