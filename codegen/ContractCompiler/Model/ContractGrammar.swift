import ContractRuntime

/// The contract language's mappings: the keys each one accepts, which of them are required, and
/// what each takes. ``ContractDecoder`` refuses a key that is not here, and `contractc schema`
/// writes this same description as a JSON Schema (``ContractJSONSchema``) for editors, so the
/// keys an editor completes are the keys the compiler reads.
///
/// Enumerated values come from the types the compiler reads them into (``ConflictPolicy``,
/// ``CompatibilityMode``, ``FieldKind/scalarNames``, ``RuleCatalog``), never from a list here.
enum ContractGrammar {
    /// What a key takes.
    indirect enum Value: Sendable {
        case string(pattern: String?)
        case integer(minimum: Int)
        case boolean
        /// One of these strings.
        case oneOf([String])
        /// Any YAML value (a default is checked against its field's type by the compiler).
        case any
        case mapping(Mapping)
        /// Named entries (`fields`, `scopes`), each of the same shape; names match `keyPattern`.
        case namedEntries(keyPattern: String, Value)
        case list(Value)
        /// Any of these forms (`title: string?` or `title: { type: string? }`).
        case anyOf([Value])
        /// The value, or nothing (`local:` left empty).
        case orNull(Value)

        static let string = Value.string(pattern: nil)
    }

    struct Key: Sendable {
        var name: String
        var value: Value
        var isRequired: Bool
        var summary: String

        init(_ name: String, _ value: Value, required: Bool = false, _ summary: String) {
            self.name = name
            self.value = value
            self.isRequired = required
            self.summary = summary
        }
    }

    /// A YAML mapping of the language; only its keys are allowed.
    struct Mapping: Sendable {
        /// Its name among the schema's definitions.
        var name: String
        var summary: String
        var keys: [Key]

        var keyNames: [String] { keys.map(\.name) }
    }

    /// The keys `mapping` accepts and `other` does not, each with the help a misplaced one gets.
    static func keys(of mapping: Mapping, notIn other: Mapping, help: (String) -> String) -> [String: String] {
        let accepted = Set(other.keyNames)
        return Dictionary(uniqueKeysWithValues: mapping.keyNames.filter { !accepted.contains($0) }.map { ($0, help($0)) })
    }

    static func keys(of mapping: Mapping, notIn other: Mapping, help: String) -> [String: String] {
        keys(of: mapping, notIn: other) { _ in help }
    }

    // MARK: Values shared by several mappings

    static let upperCamelCase = "^[A-Z][A-Za-z0-9]*$"
    static let lowerSnakeCase = "^[a-z][a-z0-9_]*$"
    static let calendarDate = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
    /// `30d`, `12h`, `90m`, `45s`, `2w` or `forever`.
    static let duration = "^([1-9][0-9]*[smhdw]|forever)$"
    /// `500`, `800B`, `64kB`, `10MB`, `1GB`: bytes, in decimal units.
    static let size = "^[1-9][0-9]*(B|kB|MB|GB)?$"

    /// A content type pattern: `type/subtype`, `type/*` or `*/*`, lowercase, in RFC 9110's token
    /// characters (but `*`, which stands only for a whole subtype or for anything).
    static let contentTypePattern: String = {
        let token = "[a-z0-9!#$%&'+.^_`|~-]+"
        return "^(\\*/\\*|" + token + "/(\\*|" + token + "))$"
    }()

    /// A type spelling: a scalar, `list<scalar>` or `ref<Entity>`, with `?` for optional.
    static var typeSpelling: String {
        let reference = "ref<\\s*[A-Z][A-Za-z0-9]*\\s*>"
        let scalar = "(" + FieldKind.scalarNames.joined(separator: "|") + "|" + reference + ")"
        // A list holds scalars: not json, bytes or files (`TypeParser`).
        let notListed: Set = [FieldKind.json.spelling, FieldKind.bytes.spelling, FieldKind.file.spelling]
        let element = "(" + FieldKind.scalarNames.filter { !notListed.contains($0) }.joined(separator: "|") + "|" + reference + ")"
        return "^\\s*(" + scalar + "|list<\\s*" + element + "\\s*>)\\s*\\??\\s*$"
    }

    static let version = Value.integer(minimum: 1)
    static let compatibility = Value.oneOf(CompatibilityMode.allCases.map(\.rawValue))
    static let sizeValue = Value.anyOf([.integer(minimum: 1), .string(pattern: size)])
    static let rowMaxBytes = Key(
        "max_bytes", sizeValue,
        "The largest row a writer may store, as stored (`2MB`: decimal units); default 1MB, or twice the largest field limit; at most 4MB."
    )

    static func allowances(field: Bool) -> Value {
        .list(.mapping(field ? fieldAllowance : contractAllowance))
    }

    // MARK: The manifest (contracts/contracts.yaml)

    static let manifest = Mapping(
        name: "manifest", summary: "contracts/contracts.yaml: the sync scopes and the compatibility defaults.",
        keys: [
            Key("scopes", .namedEntries(keyPattern: lowerSnakeCase, .mapping(scope)), required: true, "The sync scopes, by name."),
            Key("compatibility", .mapping(compatibilityDefaults), "The compatibility mode of entities and of events."),
            Key(
                "subscriptions", .orNull(.namedEntries(keyPattern: lowerSnakeCase, .mapping(subscription))),
                "Named subscriptions: the rows of one entity a device syncs instead of a whole scope."),
            Key("doc", .string, "Notes for readers."),
        ]
    )

    static let subscription = Mapping(
        name: "subscription", summary: "The rows of one entity that meet a filter, with the rows its includes reach.",
        keys: [
            Key("entity", .string, required: true, "The entity whose rows the filter selects."),
            Key("doc", .string, required: true, "What the subscription is for; the generated constructor's documentation."),
            Key(
                "parameters", .orNull(.namedEntries(keyPattern: lowerSnakeCase, .any)),
                "Typed parameters, by name: a scalar type, `list<T>` for `in`, or `{ type: list<id>, max_count: 50 }`."),
            Key(
                "where", .namedEntries(keyPattern: lowerSnakeCase, .any), required: true,
                "Conditions on the entity's fields: `\"{param}\"`, `\"{token.user_id}\"`, a value, or `{ in: \"{list}\" }` / `{ in: [a, b] }`."),
            Key("include", .orNull(.any), "Relations whose rows come along: a list of names, or a mapping of name to nested includes."),
            Key("ttl", .string, required: true, "How long a device keeps the rows after it unsubscribes: `7d`, `12h`, at most `365d`."),
            Key("priority", .oneOf(SyncPriority.allCases.map(\.rawValue)), "The tier it is pulled at (default `normal`)."),
        ]
    )

    static let scope = Mapping(
        name: "scope", summary: "A sync scope: the partition of data a device subscribes to.",
        keys: [
            Key(
                "key", .string(pattern: "^[^{}]*(\\{(" + ScopePlaceholder.allCases.map(\.rawValue).joined(separator: "|") + ")\\}[^{}]*)*$"),
                required: true, "The key template, for example `progress:user:{user_id}`."
            ),
            Key("access", .oneOf(ScopeDescriptor.Access.allCases.map(\.rawValue)), "Who writes: `read` (the server only) or `read_write`."),
            Key("doc", .string, "Notes for readers."),
        ]
    )

    static let compatibilityDefaults = Mapping(
        name: "compatibility_defaults", summary: "The compatibility mode of every entity and every event, unless a contract says otherwise.",
        keys: [
            Key("entities", compatibility, "Entities' mode (default `full`)."),
            Key("events", compatibility, "Events' mode (default `backward`)."),
        ]
    )

    // MARK: Contracts

    static let entity = Mapping(
        name: "entity", summary: "An entity: rows a device stores and syncs.",
        keys: [
            Key("entity", .string(pattern: upperCamelCase), required: true, "The contract's name, upper camel case."),
            Key("summary", .string, "One sentence: the generated type's doc comment."),
            Key("doc", .string, "More for readers of the contract and the generated code."),
            Key("version", version, required: true, "The contract's version: raise it with every change."),
            Key("oldest_supported", version, "The oldest version a device may still run."),
            Key("table", .string(pattern: lowerSnakeCase), required: true, "The SQLite table."),
            Key("scope", .string(pattern: lowerSnakeCase), required: true, "A scope of contracts/contracts.yaml."),
            Key("sync", .mapping(entitySync), required: true, "How rows travel and how conflicts resolve."),
            Key("fields", .namedEntries(keyPattern: lowerSnakeCase, field), required: true, "The synced fields, by name."),
            Key("local", .orNull(.namedEntries(keyPattern: lowerSnakeCase, localField)), "Columns that live on the device only."),
            Key("relations", .orNull(.namedEntries(keyPattern: lowerSnakeCase, .mapping(relation))), "Links to other entities."),
            Key("indexes", .orNull(.list(.anyOf([.list(.string(pattern: lowerSnakeCase)), .mapping(index)]))), "Indexes, each a list of fields."),
            rowMaxBytes,
            signed,
            Key("compatibility", compatibility, "This contract's compatibility mode, instead of the manifest's."),
            Key("swift_name", .string(pattern: upperCamelCase), "The generated type's name, when the contract name would shadow a Swift type."),
            Key("allow", allowances(field: false), "Compatibility rules this change may break, each with a reason and a last day."),
        ]
    )

    static let event = Mapping(
        name: "event", summary: "An event: an immutable fact a device records and the server folds.",
        keys: [
            Key("event", .string(pattern: upperCamelCase), required: true, "The contract's name, upper camel case."),
            Key("summary", .string, "One sentence: the generated type's doc comment."),
            Key("doc", .string, "More for readers of the contract and the generated code."),
            Key("version", version, required: true, "The contract's version: raise it with every change."),
            Key("oldest_supported", version, "The oldest version a device may still run."),
            Key("table", .string(pattern: lowerSnakeCase), "The SQLite table (default: the name in snake case + `_events`)."),
            Key("scope", .string(pattern: lowerSnakeCase), required: true, "A scope of contracts/contracts.yaml."),
            Key("sync", .mapping(eventSync), "Which way the events travel."),
            Key("applies_to", .orNull(.string(pattern: upperCamelCase)), "The entity the server folds the event into."),
            Key("fields", .namedEntries(keyPattern: lowerSnakeCase, field), required: true, "The payload's fields, by name."),
            rowMaxBytes,
            signed,
            Key("compatibility", compatibility, "This contract's compatibility mode, instead of the manifest's."),
            Key("swift_name", .string(pattern: upperCamelCase), "The generated type's name, when the contract name would shadow a Swift type."),
            Key("allow", allowances(field: false), "Compatibility rules this change may break, each with a reason and a last day."),
        ]
    )

    /// `signed: true`: every write carries its device's signature (events, append-only entities).
    static let signed = Key(
        "signed", .boolean,
        "Whether every write must carry its device's signature, which the server verifies (default false; events and append-only entities)."
    )

    static let entitySync = Mapping(
        name: "entity_sync", summary: "An entity's sync policy.",
        keys: [
            Key("direction", .oneOf(SyncDirection.allCases.map(\.rawValue)), required: true, "Which way rows travel."),
            Key("conflict", .oneOf(ConflictPolicy.allCases.map(\.rawValue)), required: true, "How the server resolves concurrent writes."),
            Key("tombstones", .boolean, "Whether deletes travel as tombstones (default true)."),
            Key("retention", .string(pattern: duration), "How long a device keeps synced rows (`30d`, `12h`, `forever`)."),
            Key("priority", .oneOf(SyncPriority.allCases.map(\.rawValue)), "What a device downloads first and evicts last."),
            Key(
                "max_rows", .integer(minimum: 1),
                "The most rows a device keeps; above it, housekeeping evicts completed, then least recently used rows."),
            Key(
                "max_row_bytes", sizeValue,
                "The largest row a device keeps, as stored (`500kB`, `10MB`: decimal units); a larger one is dropped."
            ),
        ]
    )

    static let eventSync = Mapping(
        name: "event_sync", summary: "An event's sync policy: events are immutable, so only the direction and `append_only`.",
        keys: [
            Key("direction", .oneOf(SyncDirection.allCases.map(\.rawValue)), "Which way events travel (default `up`)."),
            Key("conflict", .oneOf([ConflictPolicy.appendOnly.rawValue]), "Always `append_only`."),
        ]
    )

    /// A field: `name: type` or `name: { type: …, … }`.
    static let field = Value.anyOf([.string(pattern: typeSpelling), .mapping(fieldDetails)])

    static let fieldDetails = Mapping(
        name: "field", summary: "A synced field.",
        keys: [
            Key("type", .string(pattern: typeSpelling), required: true, "The type: a scalar, `list<T>` or `ref<Entity>`, `?` for optional."),
            Key("values", .list(.string(pattern: lowerSnakeCase)), "An enum's values, in order."),
            Key("fallback", .string(pattern: lowerSnakeCase), "The enum value an unknown value decodes to."),
            Key("default", .any, "The value a device that does not send the field gets."),
            Key("since", version, "The version that added the field (the lock knows it; a wrong one is an error)."),
            Key("renamed_from", .mapping(rename), "The field's old name and the version that renamed it."),
            Key("deprecated", .string, "Why the field should not be used, and what to use instead."),
            Key("encrypted", .boolean, "Sealed at rest on the device."),
            Key("max_length", .integer(minimum: 1), "The longest id, string, bytes or list."),
            Key(
                "max_bytes", sizeValue,
                "The most bytes a string, json, bytes or list value may take as stored (`64kB`: decimal units); default 256kB; at most 4MB. For a file (required): the most bytes the file may have (`10MB`)."
            ),
            Key(
                "content_types", .list(.string(pattern: contentTypePattern)),
                "A file's accepted content types (required for a file): `image/png`, `image/*` or `\"*/*\"`, in lowercase."),
            Key("primary_key", .boolean, "The row's id."),
            Key("version_field", .boolean, "The field `version_check` compares."),
            Key("server_only", .boolean, "Kept on the server, never sent to devices."),
            Key("doc", .string, "The generated property's doc comment."),
            Key("allow", allowances(field: true), "Compatibility rules a change of this field may break."),
        ]
    )

    /// A local field: `name: type` or `name: { type: …, … }`.
    static let localField = Value.anyOf([.string(pattern: typeSpelling), .mapping(localFieldDetails)])

    static let localFieldDetails = Mapping(
        name: "local_field", summary: "A column that lives on the device only.",
        keys: [
            Key("type", .string(pattern: typeSpelling), required: true, "The type: a scalar, `list<T>` or `ref<Entity>`, `?` for optional."),
            Key("values", .list(.string(pattern: lowerSnakeCase)), "An enum's values, in order."),
            Key("fallback", .string(pattern: lowerSnakeCase), "The enum value an unknown value decodes to."),
            Key("default", .any, "The column's default."),
            Key("encrypted", .boolean, "Sealed at rest on the device."),
            Key("max_length", .integer(minimum: 1), "The longest id, string, bytes or list."),
            Key("doc", .string, "The generated property's doc comment."),
        ]
    )

    static let rename = Mapping(
        name: "rename", summary: "A field's former name.",
        keys: [
            Key("name", .string(pattern: lowerSnakeCase), required: true, "The old name."),
            Key("version", .integer(minimum: 2), required: true, "The first version with the new name."),
        ]
    )

    static let relation = Mapping(
        name: "relation", summary: "A link to another entity: `has_many` or `belongs_to`, and the field holding the key.",
        keys: [
            Key("has_many", .string(pattern: upperCamelCase), "The entity whose rows point here."),
            Key("belongs_to", .string(pattern: upperCamelCase), "The entity this row points to."),
            Key("foreign_key", .string(pattern: lowerSnakeCase), required: true, "The field that holds the key."),
            Key("doc", .string, "Notes for readers."),
        ]
    )

    static let index = Mapping(
        name: "index", summary: "An index over fields, unique or not.",
        keys: [
            Key(
                "fields", .anyOf([.list(.string(pattern: lowerSnakeCase)), .string(pattern: lowerSnakeCase)]), required: true, "The indexed fields."),
            Key("unique", .boolean, "Whether two rows of a scope may share the values."),
        ]
    )

    static let contractAllowance = Mapping(
        name: "contract_allowance", summary: "A compatibility rule this change may break.",
        keys: [
            Key("rule", .oneOf(RuleCatalog.allowableRules.map(\.rawValue).sorted()), required: true, "The rule, as `contractc check` names it."),
            Key("reason", .string, required: true, "Why breaking it is safe here."),
            Key("until", .string(pattern: calendarDate), required: true, "The last day the allowance holds (YYYY-MM-DD)."),
            Key("field", .string(pattern: lowerSnakeCase), "The field the rule is about."),
        ]
    )

    static let fieldAllowance = Mapping(
        name: "field_allowance", summary: "A compatibility rule a change of this field may break.",
        keys: contractAllowance.keys.filter { $0.name != "field" }
    )
}
