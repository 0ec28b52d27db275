import ContractRuntime
import Foundation

/// Turns contract names into Swift and SQL names, and knows which names are keywords. Every
/// generated identifier goes through here, so the rules live in one place. (The names the
/// engines keep for their own tables and columns are the runtime's: `EngineNames`.)
package enum Names {
    /// `learner_level` → `learnerLevel`.
    package static func camelCase(_ snake: String) -> String {
        var result = ""
        var upperNext = false
        for character in snake {
            if character == "_" {
                upperNext = !result.isEmpty
            } else if upperNext {
                result += character.uppercased()
                upperNext = false
            } else {
                result.append(character)
            }
        }
        return result
    }

    /// `learner_level` → `LearnerLevel`.
    package static func upperCamelCase(_ snake: String) -> String {
        let camel = camelCase(snake)
        return camel.prefix(1).uppercased() + camel.dropFirst()
    }

    /// `AssessmentResponse` → `assessment_response`.
    package static func snakeCase(_ camel: String) -> String {
        var result = ""
        let characters = Array(camel)
        for (index, character) in characters.enumerated() {
            if character.isUppercase {
                let previousIsLower = index > 0 && (characters[index - 1].isLowercase || characters[index - 1].isNumber)
                let nextIsLower = index + 1 < characters.count && characters[index + 1].isLowercase
                if index > 0 && (previousIsLower || (nextIsLower && characters[index - 1].isUppercase)) {
                    result += "_"
                }
                result += character.lowercased()
            } else {
                result.append(character)
            }
        }
        return result
    }

    /// `AssessmentResponse` → `ASSESSMENT_RESPONSE`.
    package static func screamingSnakeCase(_ camel: String) -> String { snakeCase(camel).uppercased() }

    /// A lower snake-case guess for a name written some other way, for "did you mean" help.
    package static func suggestedSnakeCase(_ text: String) -> String {
        let cleaned = text.map { $0.isLetter || $0.isNumber ? $0 : "_" }
        var snake = snakeCase(String(cleaned))
        while snake.contains("__") { snake = snake.replacingOccurrences(of: "__", with: "_") }
        snake = String(snake.drop { $0 == "_" || $0.isNumber })
        while snake.hasSuffix("_") { snake.removeLast() }
        return snake.isEmpty ? "field" : snake
    }

    /// An upper camel-case guess for a contract name written some other way.
    package static func suggestedTypeName(_ text: String) -> String {
        let guess = upperCamelCase(suggestedSnakeCase(text))
        return guess.isEmpty ? "Contract" : guess
    }

    /// `true` for lower snake case: `[a-z][a-z0-9_]*`, no trailing or double underscore.
    package static func isSnakeCase(_ text: String) -> Bool {
        guard let first = text.unicodeScalars.first, ("a"..."z").contains(first) else { return false }
        guard !text.hasSuffix("_"), !text.contains("__") else { return false }
        return text.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
    }

    /// `true` for upper camel case: `[A-Z][A-Za-z0-9]*`.
    package static func isUpperCamelCase(_ text: String) -> Bool {
        guard let first = text.unicodeScalars.first, ("A"..."Z").contains(first) else { return false }
        return text.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
        }
    }

    /// PostgreSQL truncates identifiers longer than this; the compiler refuses them instead.
    package static let maximumIdentifierLength = 63

    /// Swift keywords that cannot name a property or type without backticks.
    package static let swiftKeywords: Set<String> = [
        "Any", "Protocol", "Self", "Type", "actor", "any", "as", "associatedtype", "async", "await", "borrowing",
        "break", "case", "catch", "class", "consume", "consuming", "continue", "copy", "default", "defer", "deinit",
        "discard", "do", "each", "else", "enum", "extension", "fallthrough", "false", "fileprivate", "for", "func",
        "guard", "if", "import", "in", "init", "inout", "internal", "is", "let", "macro", "nil", "open",
        "operator", "package", "precedencegroup", "private", "protocol", "public", "repeat", "rethrows", "return",
        "self", "some", "static", "struct", "subscript", "super", "switch", "throw", "throws", "true", "try",
        "typealias", "var", "where", "while",
    ]

    /// SQLite's keywords (https://sqlite.org/lang_keywords.html) plus PostgreSQL's reserved ones.
    package static let sqlKeywords: Set<String> = [
        "abort", "action", "add", "after", "all", "alter", "always", "analyse", "analyze", "and", "array", "as",
        "asc", "asymmetric", "attach", "autoincrement", "before", "begin", "between", "both", "by", "cascade",
        "case", "cast", "check", "collate", "column", "commit", "conflict", "constraint", "create", "cross",
        "current", "current_catalog", "current_date", "current_role", "current_time", "current_timestamp",
        "current_user", "database", "default", "deferrable", "deferred", "delete", "desc", "detach", "distinct",
        "do", "drop", "each", "else", "end", "escape", "except", "exclude", "exclusive", "exists", "explain",
        "fail", "fetch", "filter", "first", "following", "for", "foreign", "from", "full", "generated", "glob",
        "grant", "group", "groups", "having", "if", "ignore", "immediate", "in", "index", "indexed", "initially",
        "inner", "insert", "instead", "intersect", "into", "is", "isnull", "join", "key", "last", "lateral",
        "leading", "left", "like", "limit", "localtime", "localtimestamp", "match", "materialized", "natural",
        "no", "not", "nothing", "notnull", "null", "nulls", "of", "offset", "on", "only", "or", "order", "others",
        "outer", "over", "partition", "placing", "plan", "pragma", "preceding", "primary", "query", "raise",
        "range", "recursive", "references", "regexp", "reindex", "release", "rename", "replace", "restrict",
        "returning", "right", "rollback", "row", "rows", "savepoint", "select", "session_user", "set", "some",
        "symmetric", "table", "temp", "temporary", "then", "ties", "to", "trailing", "transaction", "trigger",
        "unbounded", "union", "unique", "update", "user", "using", "vacuum", "values", "variadic", "view",
        "virtual", "when", "where", "window", "with", "without",
    ]

    /// Type names a generated type must not take: they would shadow the standard library,
    /// Foundation, Swift concurrency, or the generated support types for every file that
    /// imports `Contracts`.
    package static let shadowedTypeNames: Set<String> = [
        "Actor", "Any", "AnyObject", "Array", "Bool", "Character", "Codable", "ContractEntity", "ContractEvent",
        "ContractMigration", "ContractRegistry", "Contracts", "CalendarDate", "Data", "Date", "Decimal",
        "Decodable", "Dictionary", "Double", "Encodable", "EntityDescriptor", "EntityFieldChange", "Equatable", "Error",
        "EventDescriptor", "EventEnvelope", "FieldDescriptor", "FieldKind", "Float", "Hashable", "Identifiable",
        "Int", "Int64", "JSONValue", "LocalStateEntity", "Never", "Optional", "PatchableEntity", "Result",
        "ScopeDescriptor", "Sendable", "Set", "String", "Substring", "SubscriptionDescriptor", "SubscriptionRequest",
        "Subscriptions", "Task", "TaskGroup", "Timestamp", "URL", "UUID", "Void",
    ]

    /// Envelope fields of every event; an event's own fields must not reuse them.
    package static let envelopeFields: [String] = [
        "event_id", "type", "schema_version", "user_id", "device_id", "occurred_at", "recorded_at", "hash",
    ]

    /// The closest candidate within a small distance, if any, for "did you mean" help.
    package static func closest(to word: String, among candidates: some Sequence<String>) -> String? {
        SpellingSuggestion.closest(to: word, among: candidates)
    }
}
