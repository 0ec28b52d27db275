/// Reads one YAML mapping of a contract: looks keys up, and at the end reports every key it
/// was never asked for (with "did you mean") and every key written twice.
struct MappingReader {
    let node: YAMLNode
    let entries: [YAMLNode.Entry]
    /// What the mapping is, for messages: "entity", "field", "sync block".
    let context: String

    /// Returns `nil` (with a diagnostic) when `node` is not a mapping.
    init?(_ node: YAMLNode, context: String, diagnostics: inout DiagnosticCollector) {
        guard let entries = node.mapping else {
            diagnostics.error(
                .unexpectedNode, "expected a mapping for the \(context), found \(node.kindDescription)",
                at: node.location, help: "write the \(context) as `key: value` lines"
            )
            return nil
        }
        self.node = node
        self.entries = entries
        self.context = context
        var firstSeen: [String: SourceLocation] = [:]
        for entry in entries {
            guard let key = entry.key.scalar else {
                diagnostics.error(
                    .unexpectedNode, "keys of the \(context) must be plain names, found \(entry.key.kindDescription)",
                    at: entry.key.location, help: "write `name: value`"
                )
                continue
            }
            if let first = firstSeen[key] {
                diagnostics.error(
                    .duplicateKey, "key '\(key)' is written twice in the \(context)", at: entry.key.location,
                    help: "keep one '\(key)' and delete the other", notes: [.init("first written here", at: first)]
                )
            } else {
                firstSeen[key] = entry.key.location
            }
        }
    }

    /// The value of `key` (its first occurrence).
    func value(_ key: String) -> YAMLNode? {
        entries.first { $0.key.scalar == key }?.value
    }

    /// The location of `key` itself.
    func keyLocation(_ key: String) -> SourceLocation? {
        entries.first { $0.key.scalar == key }?.key.location
    }

    /// Keys in document order (scalar keys only).
    var keys: [(name: String, location: SourceLocation)] {
        entries.compactMap { entry in entry.key.scalar.map { ($0, entry.key.location) } }
    }

    /// Reports every key not in `known`; `misplaced` explains keys that are valid elsewhere.
    func rejectUnknownKeys(
        known: [String], misplaced: [String: String] = [:], diagnostics: inout DiagnosticCollector
    ) {
        for (key, location) in keys where !known.contains(key) {
            if let reason = misplaced[key] {
                diagnostics.error(
                    .unknownKey, "key '\(key)' is not allowed in the \(context)", at: location, help: reason
                )
                continue
            }
            let help: String
            if let guess = Names.closest(to: key, among: known) {
                help = "did you mean '\(guess)'?"
            } else {
                help = "the \(context) accepts: \(known.joined(separator: ", "))"
            }
            diagnostics.error(.unknownKey, "unknown key '\(key)' in the \(context)", at: location, help: help)
        }
    }

    /// A required key; reports `MISSING_KEY` at the mapping when absent.
    func require(_ key: String, help: String, diagnostics: inout DiagnosticCollector) -> YAMLNode? {
        if let value = value(key), !value.isNull { return value }
        if let location = keyLocation(key) {
            diagnostics.error(
                .missingKey, "key '\(key)' of the \(context) has no value", at: location, help: help
            )
        } else {
            diagnostics.error(
                .missingKey, "the \(context) is missing the required key '\(key)'", at: node.location, help: help
            )
        }
        return nil
    }
}

/// Reading typed scalars out of nodes, each reporting `INVALID_VALUE` when the node does not fit.
enum ScalarReader {
    static func string(
        _ node: YAMLNode, _ what: String, diagnostics: inout DiagnosticCollector
    ) -> String? {
        guard let text = node.scalar, !node.isNull else {
            diagnostics.error(
                .invalidValue, "\(what) must be text, found \(node.kindDescription)", at: node.location,
                help: "write a single value, quoted if it contains `:` or `#`"
            )
            return nil
        }
        return text
    }

    static func int(
        _ node: YAMLNode, _ what: String, range: ClosedRange<Int> = 1...Int(Int32.max),
        diagnostics: inout DiagnosticCollector
    ) -> Int? {
        guard case .scalar(let text, .plain) = node.content, let value = Int(text), range.contains(value) else {
            diagnostics.error(
                .invalidValue, "\(what) must be a whole number from \(range.lowerBound) to \(range.upperBound)",
                at: node.location, help: "write it without quotes, for example `\(range.lowerBound)`"
            )
            return nil
        }
        return value
    }

    static func bool(_ node: YAMLNode, _ what: String, diagnostics: inout DiagnosticCollector) -> Bool? {
        if case .scalar(let text, .plain) = node.content {
            switch text {
            case "true", "True", "TRUE": return true
            case "false", "False", "FALSE": return false
            default: break
            }
        }
        diagnostics.error(
            .invalidValue, "\(what) must be `true` or `false`", at: node.location,
            help: "write `true` or `false` without quotes"
        )
        return nil
    }

    static func oneOf<Value: RawRepresentable & CaseIterable>(
        _ node: YAMLNode, _ what: String, _ type: Value.Type, diagnostics: inout DiagnosticCollector
    ) -> Value? where Value.RawValue == String {
        let allowed = Value.allCases.map(\.rawValue)
        guard let text = node.scalar, let value = Value(rawValue: text) else {
            let guess = node.scalar.flatMap { Names.closest(to: $0, among: allowed) }
            diagnostics.error(
                .invalidValue,
                "\(what) must be one of \(allowed.joined(separator: ", "))"
                    + (node.scalar.map { ", found '\($0)'" } ?? ", found \(node.kindDescription)"),
                at: node.location, help: guess.map { "did you mean '\($0)'?" } ?? "write one of the values listed"
            )
            return nil
        }
        return value
    }
}
