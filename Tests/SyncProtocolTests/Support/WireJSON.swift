import ContractRuntime
import Contracts
import Foundation
import Testing

/// JSON text as the shape tests compare it: whatever a plain `JSONEncoder` writes, read back
/// as a ``JSONValue`` and written in ``CanonicalJSON`` form, so key order and whitespace never
/// matter but every key, every value and every `null` does.
enum WireJSON {
    /// The canonical text of what a plain `JSONEncoder` writes for `value`.
    static func encoded<Value: Encodable>(_ value: Value) throws -> String {
        let data = try JSONEncoder().encode(value)
        return CanonicalJSON.text(try JSONDecoder().decode(JSONValue.self, from: data))
    }

    /// The canonical text of a JSON literal written in a test (any key order, any whitespace).
    static func canonical(_ literal: String) throws -> String {
        CanonicalJSON.text(try value(literal))
    }

    /// A JSON literal as a ``JSONValue``.
    static func value(_ literal: String) throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: Data(literal.utf8))
    }

    /// `literal` decoded with a plain `JSONDecoder`.
    static func decode<Value: Decodable>(_ type: Value.Type, from literal: String) throws -> Value {
        try JSONDecoder().decode(type, from: Data(literal.utf8))
    }

    /// The top-level keys of a JSON object literal.
    static func keys(_ literal: String) throws -> Set<String> {
        guard case .object(let members) = try value(literal) else { return [] }
        return Set(members.keys)
    }

    /// A JSON object literal without one of its top-level keys.
    static func removing(_ key: String, from literal: String) throws -> String {
        guard case .object(var members) = try value(literal) else { return literal }
        members[key] = nil
        return CanonicalJSON.text(.object(members))
    }

    /// A JSON object literal with one top-level key set to `replacement`.
    static func replacing(_ key: String, with replacement: JSONValue, in literal: String) throws -> String {
        guard case .object(var members) = try value(literal) else { return literal }
        members[key] = replacement
        return CanonicalJSON.text(.object(members))
    }
}

/// Checks both directions of a wire shape: `value` encodes to exactly `literal` (same keys, same
/// values, no extra keys and no `null`s for absent optionals), and `literal` decodes to `value`.
func expectWireShape<Value: Codable & Equatable>(
    _ value: Value, is literal: String, sourceLocation: SourceLocation = #_sourceLocation
) throws {
    let expected = try WireJSON.canonical(literal)
    let actual = try WireJSON.encoded(value)
    #expect(actual == expected, "encoded \(Value.self) differs from the wire literal", sourceLocation: sourceLocation)
    let decoded = try WireJSON.decode(Value.self, from: literal)
    #expect(decoded == value, "the wire literal does not decode to the same \(Value.self)", sourceLocation: sourceLocation)
}
