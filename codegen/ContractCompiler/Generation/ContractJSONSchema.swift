import Foundation

/// The JSON Schema (draft 07) of the contract language, written from `ContractGrammar`: the
/// file `contractc schema` commits beside the contracts and each contract file names on its first
/// line (`# yaml-language-server: $schema=…`), so editors complete and check keys. One schema
/// covers the three kinds of file: an entity, an event, and the manifest.
///
/// What the schema cannot say (a field named by `foreign_key` exists, a default fits its type,
/// the scope is declared) stays the compiler's; the schema refuses unknown keys, missing
/// required keys, values of the wrong kind and unknown policy, mode or rule names.
public enum ContractJSONSchema {
    /// The file name, in the contracts folder.
    public static let fileName = "contract.schema.json"

    /// The line a contract file starts with so yaml-language-server finds the schema; `relativePath`
    /// goes from the file's folder to the schema.
    public static func modeline(relativePath: String) -> String {
        "# yaml-language-server: $schema=\(relativePath)"
    }

    /// The schema as JSON text: keys sorted, two-space indentation, a final newline.
    public static func render() -> String {
        var definitions: [String: Any] = [:]
        for mapping in [ContractGrammar.entity, ContractGrammar.event, ContractGrammar.manifest] {
            collect(mapping, into: &definitions)
        }
        let root: [String: Any] = [
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "Outpost contract",
            "description":
                "An entity, an event, or the manifest (contracts.yaml). Written by `contractc schema` from the compiler's grammar; do not edit.",
            "oneOf": ["entity", "event", "manifest"].map { ["$ref": "#/definitions/\($0)"] },
            "definitions": definitions,
        ]
        // JSONSerialization cannot fail on these values (strings, numbers, arrays, dictionaries).
        let data = (try? JSONSerialization.data(withJSONObject: root, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return reindented(String(decoding: data, as: UTF8.self)) + "\n"
    }

    private static func collect(_ mapping: ContractGrammar.Mapping, into definitions: inout [String: Any]) {
        guard definitions[mapping.name] == nil else { return }
        definitions[mapping.name] = [:] as [String: Any]
        var properties: [String: Any] = [:]
        for key in mapping.keys {
            var schema = schema(for: key.value, definitions: &definitions)
            schema["description"] = key.summary
            properties[key.name] = schema
        }
        var object: [String: Any] = [
            "type": "object", "description": mapping.summary, "properties": properties, "additionalProperties": false,
        ]
        let required = mapping.keys.filter(\.isRequired).map(\.name)
        if !required.isEmpty { object["required"] = required }
        definitions[mapping.name] = object
    }

    private static func schema(for value: ContractGrammar.Value, definitions: inout [String: Any]) -> [String: Any] {
        switch value {
        case .string(let pattern):
            return pattern.map { ["type": "string", "pattern": $0] } ?? ["type": "string"]
        case .integer(let minimum):
            return ["type": "integer", "minimum": minimum]
        case .boolean:
            return ["type": "boolean"]
        case .oneOf(let values):
            return ["enum": values]
        case .any:
            return [:]
        case .mapping(let mapping):
            collect(mapping, into: &definitions)
            // Beside a $ref, draft 07 ignores other keys: the reference goes inside allOf so the
            // description stays.
            return ["allOf": [["$ref": "#/definitions/\(mapping.name)"]]]
        case .namedEntries(let keyPattern, let entry):
            return [
                "type": "object", "propertyNames": ["pattern": keyPattern],
                "additionalProperties": schema(for: entry, definitions: &definitions),
            ]
        case .list(let element):
            return ["type": "array", "items": schema(for: element, definitions: &definitions)]
        case .anyOf(let forms):
            return ["anyOf": forms.map { schema(for: $0, definitions: &definitions) }]
        case .orNull(let inner):
            return ["anyOf": [schema(for: inner, definitions: &definitions), ["type": "null"]]]
        }
    }

    /// Foundation's pretty printer indents by two spaces on Linux and by four on Apple platforms
    /// in some versions; the committed file must not depend on where it was written.
    private static func reindented(_ text: String) -> String {
        var lines: [Substring] = []
        var unit: Int?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let spaces = line.prefix { $0 == " " }.count
            if unit == nil, spaces > 0 { unit = spaces }
            let depth = unit.map { spaces / $0 } ?? 0
            lines.append(Substring(String(repeating: "  ", count: depth)) + line.dropFirst(spaces))
        }
        return lines.joined(separator: "\n").replacingOccurrences(of: "\" : ", with: "\": ")
    }
}
