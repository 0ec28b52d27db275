import ContractRuntime
import Foundation

/// Checks a `default:` against the field's type and turns it into a ``DefaultValue``.
enum DefaultParser {
    static func parse(
        _ node: YAMLNode, for type: TypeReference, fieldName: String, diagnostics: inout DiagnosticCollector
    ) -> DefaultValue? {
        if node.isNull {
            if type.isOptional { return .null }
            diagnostics.error(
                .defaultTypeMismatch, "default of '\(fieldName)' is null but the field is not optional",
                at: node.location, help: "make the type `\(type.type.spelling)?`, or give a \(type.type.spelling) default"
            )
            return nil
        }
        if let value = value(node, type.type) { return value }
        let shown = node.scalar.map { "'\($0)'" } ?? node.kindDescription
        diagnostics.error(
            .defaultTypeMismatch, "default \(shown) of '\(fieldName)' does not match its type `\(type.type.spelling)`", at: node.location,
            help: example(for: type.type)
        )
        return nil
    }

    private static func value(_ node: YAMLNode, _ type: FieldType) -> DefaultValue? {
        switch type {
        case .json:
            return jsonValue(node)
        case .list(let element):
            guard let items = node.sequence else { return nil }
            var values: [DefaultValue] = []
            for item in items {
                guard let value = value(item, element) else { return nil }
                values.append(value)
            }
            return .array(values)
        default:
            break
        }
        guard case .scalar(let text, let style) = node.content else { return nil }
        switch type {
        case .bool:
            guard style == .plain else { return nil }
            return text == "true" ? .bool(true) : text == "false" ? .bool(false) : nil
        case .int:
            guard style == .plain, let value = Int64(text) else { return nil }
            return .int(value)
        case .double:
            guard style == .plain, let value = Double(text), value.isFinite else { return nil }
            return .double(value)
        case .string, .id, .ref:
            return .string(text)
        case .enumeration(let values, _):
            return values.contains(text) ? .string(text) : nil
        case .timestamp:
            return Timestamp(iso8601: text).map { .int($0.millisecondsSince1970) }
        case .date:
            return CalendarDate(text) != nil ? .string(text) : nil
        case .uuid:
            return UUID(uuidString: text).map { .string($0.uuidString.lowercased()) }
        case .bytes:
            return Data(base64Encoded: text) != nil ? .string(text) : nil
        case .json, .list, .file:
            return nil
        }
    }

    private static func example(for type: FieldType) -> String {
        switch type {
        case .bool: return "write `true` or `false` without quotes"
        case .int: return "write a whole number without quotes, for example `0`"
        case .double: return "write a number without quotes, for example `0.5`"
        case .timestamp: return "write an ISO-8601 UTC time such as \"2026-01-31T08:00:00.000Z\""
        case .date: return "write a date such as \"2026-01-31\""
        case .uuid: return "write a UUID such as \"6f1c2a8e-4b5d-4e7f-9a0b-1c2d3e4f5a6b\""
        case .bytes: return "write base64 text"
        case .enumeration(let values, _): return "use one of the enum's values: \(values.joined(separator: ", "))"
        case .list(let element): return "write a list of \(element.spelling) values, for example `[]`"
        default: return "write a \(type.spelling) value"
        }
    }

    /// YAML to a JSON value, plain scalars typed as YAML 1.2's core schema does.
    static func jsonValue(_ node: YAMLNode) -> DefaultValue {
        switch node.content {
        case .scalar(let text, let style):
            if style == .plain {
                if node.isNull { return .null }
                if text == "true" || text == "false" { return .bool(text == "true") }
                if let int = Int64(text) { return .int(int) }
                if let double = Double(text), double.isFinite, text.first != "." { return .double(double) }
            }
            return .string(text)
        case .sequence(let items):
            return .array(items.map(jsonValue))
        case .mapping(let entries):
            var object: [String: DefaultValue] = [:]
            for entry in entries {
                if let key = entry.key.scalar, object[key] == nil { object[key] = jsonValue(entry.value) }
            }
            return .object(object)
        }
    }

    /// YAML to canonical JSON text (the runtime's ``CanonicalJSON``: sorted keys, no spaces),
    /// plain scalars typed as YAML 1.2 core does.
    static func canonicalJSON(_ node: YAMLNode) -> String {
        CanonicalJSON.text(jsonValue(node))
    }

    /// A JSON string literal, as the runtime's JSON writer escapes it.
    static func quote(_ text: String) -> String {
        CanonicalJSON.text(.string(text))
    }
}
