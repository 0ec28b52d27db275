import Testing

@testable import ContractCompiler

/// One version of the contract the compatibility table evolves, rendered to contract YAML.
///
/// Entities are `Item` (table `items`, scope `user`), events `ItemLogged`. The table's case sets
/// the compatibility mode and the direction; a version may override the direction (to test
/// DIRECTION_CHANGED) and everything else that is not a field.
struct ContractText: Sendable, CustomStringConvertible {
    enum Kind: String, Sendable { case entity, event }

    var kind: Kind = .entity
    var version: Int
    var fields: [String]
    var oldest = 1
    /// `nil`: the table's mode (or the manifest's default when the case says so).
    var mode: String?
    var direction: String?
    var conflict: String?
    var table: String?
    var scope = "user"
    /// The primary-key line of an entity; `nil` when a field line declares the key itself.
    var key: String? = "id: { type: id, primary_key: true }"
    var summary = "An item of the compatibility table."
    /// More top-level lines (for example `allow:` or `doc:`).
    var extra: [String] = []

    var name: String { kind == .entity ? "Item" : "ItemLogged" }
    var fileName: String { kind == .entity ? "entities/item.yaml" : "events/item_logged.yaml" }

    var yaml: String {
        var lines = ["\(kind.rawValue): \(name)", "summary: \(summary)", "version: \(version)", "oldest_supported: \(oldest)"]
        if kind == .entity {
            lines.append("table: \(table ?? "items")")
        } else if let table {
            lines.append("table: \(table)")
        }
        lines.append("scope: \(scope)")
        if let mode { lines.append("compatibility: \(mode)") }
        let direction = self.direction ?? (kind == .entity ? "both" : "up")
        if kind == .entity {
            let conflict = self.conflict ?? (direction == "down" ? "server_authoritative" : "last_writer_wins")
            lines.append("sync: { direction: \(direction), conflict: \(conflict) }")
        } else {
            lines.append("sync: { direction: \(direction) }")
        }
        lines += extra
        let body = (kind == .entity ? key.map { [$0] } ?? [] : []) + fields
        lines.append(body.isEmpty ? "fields: {}" : "fields:")
        lines += body.map { "  " + $0 }
        return lines.joined(separator: "\n") + "\n"
    }

    var description: String { yaml }
}

/// A row of the compatibility table: a released history (locked in order), the new version,
/// the mode and direction, and the rule ids `contractc check` must report (empty: compatible).
struct CompatCase: Sendable, CustomTestStringConvertible {
    var name: String
    /// `backward`, `forward`, `full`, `none`, or `manifest` (no `compatibility:` key: the manifest's default).
    var mode: String
    var direction: String
    var history: [ContractText]
    /// `nil`: the contract is deleted.
    var new: ContractText?
    var expected: Set<RuleID>
    /// May also be reported when checking against the lock (not by `check(_:against:)`, which
    /// has no migrations): consequences for released migrations of a change that is already an error.
    var lockOnly: Set<RuleID> = []
    /// Set when the checker is known to get this case wrong (reported, not fixed here).
    var knownIssue: String?

    var testDescription: String { "\(name) [\(mode), \(direction)]" }

    /// The version as the case renders it: its mode and, unless the version overrides it, its direction.
    func resolved(_ text: ContractText) -> ContractText {
        var text = text
        if text.mode == nil, mode != "manifest" { text.mode = mode }
        if text.direction == nil { text.direction = direction }
        return text
    }

    /// Tolerates lock-only consequences (see `lockOnly`).
    func toleratingFromLock(_ rules: RuleID...) -> CompatCase {
        var copy = self
        copy.lockOnly = Set(rules)
        return copy
    }

    /// The common shape: version 1 with `old` fields, version 2 with `new` fields.
    static func step(
        _ name: String, _ mode: String, _ direction: String = "both", kind: ContractText.Kind = .entity,
        old: [String], new: [String], expect: RuleID..., knownIssue: String? = nil
    ) -> CompatCase {
        CompatCase(
            name: name, mode: mode, direction: direction,
            history: [ContractText(kind: kind, version: 1, fields: old)],
            new: ContractText(kind: kind, version: 2, fields: new),
            expected: Set(expect), knownIssue: knownIssue
        )
    }

    /// A longer history, or versions that change more than fields.
    static func versions(
        _ name: String, _ mode: String, direction: String = "both", _ history: [ContractText], then new: ContractText?,
        expect: RuleID..., knownIssue: String? = nil
    ) -> CompatCase {
        CompatCase(name: name, mode: mode, direction: direction, history: history, new: new, expected: Set(expect), knownIssue: knownIssue)
    }
}

/// The table: (old contract, new contract, mode, direction) → expected rule ids.
enum CompatibilityCaseTable {
    static var all: [CompatCase] {
        typePromotions + enumValues + listsOfEnums + addedFields + defaultsAndLimits + removals + renames + sinces
            + structure + modeNone + directionUp + events + files
    }

    private typealias V = ContractText

    // MARK: Type promotions

    static let typePromotions: [CompatCase] = [
        .step("int → double: new reads old ints", "backward", old: ["a: int"], new: ["a: double"]),
        .step("int → double: old cannot read doubles", "forward", old: ["a: int"], new: ["a: double"], expect: .fieldTypeChanged),
        .step("int → double in full", "full", old: ["a: int"], new: ["a: double"], expect: .fieldTypeChanged),
        .step("double → int: new cannot read old doubles", "backward", old: ["a: double"], new: ["a: int"], expect: .fieldTypeChanged),
        .step("double → int: old reads new ints", "forward", old: ["a: double"], new: ["a: int"]),
        .step("double → int in full", "full", old: ["a: double"], new: ["a: int"], expect: .fieldTypeChanged),
        .step("string → int backward", "backward", old: ["a: string"], new: ["a: int"], expect: .fieldTypeChanged),
        .step("string → int forward", "forward", old: ["a: string"], new: ["a: int"], expect: .fieldTypeChanged),
        .step("id → string is the same wire", "full", old: ["a: id"], new: ["a: string"]),
        .step("string → id is the same wire", "full", old: ["a: string"], new: ["a: id"]),
        .step("ref → id is the same wire", "full", old: ["parent: ref<Item>?"], new: ["parent: id?"]),
        .step("enum → string: new reads old values", "backward", old: ["a: { type: enum, values: [red, green] }"], new: ["a: string"]),
        .step(
            "enum → string: old cannot read any string", "forward", old: ["a: { type: enum, values: [red, green] }"], new: ["a: string"],
            expect: .fieldTypeChanged),
        .step("enum → string in full", "full", old: ["a: { type: enum, values: [red, green] }"], new: ["a: string"], expect: .fieldTypeChanged),
        .step(
            "string → enum: new cannot read any old string", "backward", old: ["a: string"], new: ["a: { type: enum, values: [red, green] }"],
            expect: .fieldTypeChanged),
        .step("string → enum: old reads enum values as strings", "forward", old: ["a: string"], new: ["a: { type: enum, values: [red, green] }"]),
        .step("T → T?: new reads old values", "backward", old: ["a: int"], new: ["a: int?"]),
        .step("T → T?: old cannot read null", "forward", old: ["a: int"], new: ["a: int?"], expect: .fieldTypeChanged),
        .step("T → T? in full", "full", old: ["a: int"], new: ["a: int?"], expect: .fieldTypeChanged),
        .step("T → T? forward when the old field had a default", "forward", old: ["a: { type: int, default: 0 }"], new: ["a: int?"]),
        .step("T → T? full, default kept", "full", old: ["a: { type: int, default: 0 }"], new: ["a: { type: int?, default: 0 }"]),
        .step("T? → T: old data may lack it", "backward", old: ["a: int?"], new: ["a: int"], expect: .optionalMadeRequired),
        .step("T? → T with a default", "backward", old: ["a: int?"], new: ["a: { type: int, default: 0 }"]),
        .step("T? → T: old reads required values", "forward", old: ["a: int?"], new: ["a: int"]),
        .step("T? → T in full", "full", old: ["a: int?"], new: ["a: int"], expect: .optionalMadeRequired),
        .step("list<int> → list<double> backward", "backward", old: ["a: list<int>"], new: ["a: list<double>"]),
        .step("list<int> → list<double> forward", "forward", old: ["a: list<int>"], new: ["a: list<double>"], expect: .fieldTypeChanged),
        .step("bool → int", "full", old: ["a: bool"], new: ["a: int"], expect: .fieldTypeChanged),
        .step("timestamp → int (ISO text vs number on the wire)", "full", old: ["a: timestamp"], new: ["a: int"], expect: .fieldTypeChanged),
        .step("string → int in mode backward, made optional too", "backward", old: ["a: string"], new: ["a: int?"], expect: .fieldTypeChanged),
        .step("int → double?: widened and optional, backward", "backward", old: ["a: int"], new: ["a: double?"]),
        .step(
            "int? → double: widened but now required, backward", "backward", old: ["a: int?"], new: ["a: double"],
            expect: .optionalMadeRequired),
        .step(
            "enum? → string: widened but now required, backward", "backward",
            old: ["a: { type: enum?, values: [red, green] }"], new: ["a: string"], expect: .optionalMadeRequired),
        .step("date → string: any text reads a date, backward", "backward", old: ["a: date"], new: ["a: string"]),
        .step("date → string: old devices read dates only, full", "full", old: ["a: date"], new: ["a: string"], expect: .fieldTypeChanged),
        .step("string → uuid: not every old text is a UUID, backward", "backward", old: ["a: string"], new: ["a: uuid"], expect: .fieldTypeChanged),
        .step("uuid → id: forward only breaks, forward", "forward", old: ["a: uuid"], new: ["a: id"], expect: .fieldTypeChanged),
    ]

    // MARK: Enum values

    private static let status = "status: { type: enum, values: [open, done] }"
    private static let statusAdded = "status: { type: enum, values: [open, done, archived] }"
    private static let statusWithFallback = "status: { type: enum, values: [open, done, unknown], fallback: unknown }"
    private static let statusWithFallbackAdded = "status: { type: enum, values: [open, done, unknown, archived], fallback: unknown }"

    static let enumValues: [CompatCase] = [
        .step("enum value added, no fallback", "backward", old: [status], new: [statusAdded]),
        .step("enum value added, no fallback", "forward", old: [status], new: [statusAdded], expect: .enumValueAdded),
        .step("enum value added, no fallback", "full", old: [status], new: [statusAdded], expect: .enumValueAdded),
        .step("enum value added, no fallback", "none", old: [status], new: [statusAdded]),
        .step("enum value added, old version has a fallback", "forward", old: [statusWithFallback], new: [statusWithFallbackAdded]),
        .step("enum value added, old version has a fallback", "full", old: [statusWithFallback], new: [statusWithFallbackAdded]),
        .step(
            "enum value added with a fallback that only the new version has", "full", old: [status],
            new: ["status: { type: enum, values: [open, done, archived, unknown], fallback: unknown }"], expect: .enumValueAdded),
        .step("enum value removed, no fallback", "backward", old: [statusAdded], new: [status], expect: .enumValueRemoved),
        .step("enum value removed", "forward", old: [statusAdded], new: [status]),
        .step("enum value removed, no fallback", "full", old: [statusAdded], new: [status], expect: .enumValueRemoved),
        .step("enum value removed, no fallback", "none", old: [statusAdded], new: [status]),
        .step("enum value removed, the new version has a fallback", "backward", old: [statusAdded], new: [statusWithFallback]),
        .step(
            "enum value removed, fallback new in this version (itself an added value)", "full", old: [statusAdded], new: [statusWithFallback],
            expect: .enumValueAdded),
        .step("enum value removed, both versions have the fallback", "full", old: [statusWithFallbackAdded], new: [statusWithFallback]),
        .versions(
            "fallback shipped with oldest_supported raised to it, then a value added", "full",
            [
                V(version: 1, fields: [status]),
                V(version: 2, fields: [statusWithFallback], oldest: 2),
            ], then: V(version: 3, fields: [statusWithFallbackAdded], oldest: 2)),
    ]

    static let listsOfEnums: [CompatCase] = [
        .step(
            "list<enum> value added", "forward", old: ["tags: { type: list<enum>, values: [a, b] }"],
            new: ["tags: { type: list<enum>, values: [a, b, c] }"], expect: .enumValueAdded),
        .step(
            "list<enum> value added", "backward", old: ["tags: { type: list<enum>, values: [a, b] }"],
            new: ["tags: { type: list<enum>, values: [a, b, c] }"]),
        .step(
            "list<enum> value added, old version has a fallback", "full", old: ["tags: { type: list<enum>, values: [a, b, other], fallback: other }"],
            new: ["tags: { type: list<enum>, values: [a, b, other, c], fallback: other }"]),
        .step(
            "list<enum> value removed", "backward", old: ["tags: { type: list<enum>, values: [a, b, c] }"],
            new: ["tags: { type: list<enum>, values: [a, b] }"], expect: .enumValueRemoved),
        .step(
            "list<enum> value removed", "forward", old: ["tags: { type: list<enum>, values: [a, b, c] }"],
            new: ["tags: { type: list<enum>, values: [a, b] }"]),
    ]

    // MARK: Added fields

    static let addedFields: [CompatCase] = [
        .step(
            "required field added without default", "backward", old: ["a: int"], new: ["a: int", "b: { type: int, since: 2 }"],
            expect: .requiredFieldAdded),
        .step("required field added without default", "forward", old: ["a: int"], new: ["a: int", "b: { type: int, since: 2 }"]),
        .step(
            "required field added without default", "full", old: ["a: int"], new: ["a: int", "b: { type: int, since: 2 }"],
            expect: .requiredFieldAdded),
        .step("required field added without default", "none", old: ["a: int"], new: ["a: int", "b: { type: int, since: 2 }"]),
        .step("required field added with a default", "backward", old: ["a: int"], new: ["a: int", "b: { type: int, default: 7, since: 2 }"]),
        .step("required field added with a default", "forward", old: ["a: int"], new: ["a: int", "b: { type: int, default: 7, since: 2 }"]),
        .step("required field added with a default", "full", old: ["a: int"], new: ["a: int", "b: { type: int, default: 7, since: 2 }"]),
        .step("optional field added", "full", old: ["a: int"], new: ["a: int", "b: { type: string?, since: 2 }"]),
        .step("optional field added", "backward", old: ["a: int"], new: ["a: int", "b: { type: string?, since: 2 }"]),
        .step(
            "required field added to an up entity", "full", "up", old: ["a: int"], new: ["a: int", "b: { type: int, since: 2 }"],
            expect: .requiredFieldAdded),
    ]

    // MARK: Defaults and max_length

    static let defaultsAndLimits: [CompatCase] = [
        .step("default changed", "backward", old: ["a: { type: int, default: 1 }"], new: ["a: { type: int, default: 2 }"], expect: .defaultChanged),
        .step("default changed", "forward", old: ["a: { type: int, default: 1 }"], new: ["a: { type: int, default: 2 }"]),
        .step("default changed", "full", old: ["a: { type: int, default: 1 }"], new: ["a: { type: int, default: 2 }"], expect: .defaultChanged),
        .step("default removed", "full", old: ["a: { type: int, default: 1 }"], new: ["a: int"], expect: .defaultChanged),
        .step("default added", "full", old: ["a: int"], new: ["a: { type: int, default: 1 }"]),
        .step(
            "optional field drops default: null (null and no default read the same)", "full",
            old: ["a: { type: int?, default: null }"], new: ["a: int?"]),
        .step(
            "optional field's default: null becomes a value", "full",
            old: ["a: { type: int?, default: null }"], new: ["a: { type: int?, default: 3 }"], expect: .defaultChanged),
        .step(
            "enum default changed", "full", old: ["c: { type: enum, values: [x, y], default: x }"],
            new: ["c: { type: enum, values: [x, y], default: y }"], expect: .defaultChanged),
        .step(
            "max_length reduced", "backward", old: ["a: { type: string, max_length: 100 }"], new: ["a: { type: string, max_length: 50 }"],
            expect: .maxLengthReduced),
        .step("max_length raised", "backward", old: ["a: { type: string, max_length: 50 }"], new: ["a: { type: string, max_length: 100 }"]),
        .step("max_length raised", "full", old: ["a: { type: string, max_length: 50 }"], new: ["a: { type: string, max_length: 100 }"]),
        .step("max_length reduced", "forward", old: ["a: { type: string, max_length: 100 }"], new: ["a: { type: string, max_length: 50 }"]),
        .step(
            "max_length added where there was none", "full", old: ["a: string"], new: ["a: { type: string, max_length: 50 }"],
            expect: .maxLengthReduced),
        .step("max_length removed", "full", old: ["a: { type: string, max_length: 50 }"], new: ["a: string"]),
        // max_bytes compares the limits in force: a field without it has the default (256kB, or
        // what its max_length allows), a contract 1MB or twice its largest field limit.
        .step(
            "max_bytes reduced", "backward", old: ["a: { type: json, max_bytes: 64kB }"], new: ["a: { type: json, max_bytes: 32kB }"],
            expect: .maxBytesReduced),
        .step("max_bytes reduced", "forward", old: ["a: { type: json, max_bytes: 64kB }"], new: ["a: { type: json, max_bytes: 32kB }"]),
        .step("max_bytes raised", "full", old: ["a: { type: json, max_bytes: 32kB }"], new: ["a: { type: json, max_bytes: 64kB }"]),
        .step(
            "max_bytes added below the default", "full", old: ["a: string"], new: ["a: { type: string, max_bytes: 1000 }"],
            expect: .maxBytesReduced),
        .step("max_bytes added above the default", "full", old: ["a: list<string>"], new: ["a: { type: list<string>, max_bytes: 512kB }"]),
        .step(
            "max_bytes above the default removed", "full", old: ["a: { type: bytes, max_bytes: 512kB }"], new: ["a: bytes"],
            expect: .maxBytesReduced),
        .step("max_bytes at the default removed", "full", old: ["a: { type: bytes, max_bytes: 256kB }"], new: ["a: bytes"]),
        .step(
            "a lower max_length that lowers the default is MAX_LENGTH_REDUCED alone", "full",
            old: ["a: { type: bytes, max_length: 1000000 }"], new: ["a: { type: bytes, max_length: 500000 }"], expect: .maxLengthReduced),
        .step(
            "max_length removed, lowering the default it raised", "full", old: ["a: { type: bytes, max_length: 1000000 }"], new: ["a: bytes"],
            expect: .maxBytesReduced),
        .versions(
            "row max_bytes reduced", "backward",
            [V(version: 1, fields: ["a: json"], extra: ["max_bytes: 2MB"])], then: V(version: 2, fields: ["a: json"], extra: ["max_bytes: 1500kB"]),
            expect: .maxBytesReduced),
        .versions(
            "row max_bytes removed, below the written one", "full",
            [V(version: 1, fields: ["a: json"], extra: ["max_bytes: 2MB"])], then: V(version: 2, fields: ["a: json"]),
            expect: .maxBytesReduced),
        .versions(
            "row max_bytes written at the default", "full",
            [V(version: 1, fields: ["a: json"])], then: V(version: 2, fields: ["a: json"], extra: ["max_bytes: 1MB"])),
        .versions(
            "row max_bytes raised", "full",
            [V(version: 1, fields: ["a: json"], extra: ["max_bytes: 1MB"])], then: V(version: 2, fields: ["a: json"], extra: ["max_bytes: 4MB"])),
        .versions(
            "row max_bytes reduced on an event", "backward",
            [V(kind: .event, version: 1, fields: ["a: json"], extra: ["max_bytes: 2MB"])],
            then: V(kind: .event, version: 2, fields: ["a: json"], extra: ["max_bytes: 1MB"]),
            expect: .maxBytesReduced),
        .versions(
            "a row limit reduced with an allowance", "full",
            [V(version: 1, fields: ["a: json"], extra: ["max_bytes: 2MB"])],
            then: V(
                version: 2, fields: ["a: json"],
                extra: [
                    "max_bytes: 1MB",
                    "allow: [{ rule: MAX_BYTES_REDUCED, reason: \"no row was ever above 1MB\", until: 2099-12-31 }]",
                ])),
    ]

    // MARK: Removed fields

    static let removals: [CompatCase] = [
        .step("required field removed", "forward", old: ["a: int", "b: int"], new: ["a: int"], expect: .fieldRemoved),
        .step("required field removed", "backward", old: ["a: int", "b: int"], new: ["a: int"]),
        .step("required field removed", "full", old: ["a: int", "b: int"], new: ["a: int"], expect: .fieldRemoved),
        .step("optional field removed", "forward", old: ["a: int", "b: int?"], new: ["a: int"], expect: .fieldRemoved),
        .step("optional field removed", "full", old: ["a: int", "b: int?"], new: ["a: int"], expect: .fieldRemoved),
        .step("field removed", "none", old: ["a: int", "b: int"], new: ["a: int"]),
        .versions(
            "field removed after deprecation at a version ≤ oldest_supported", "full",
            [
                V(version: 1, fields: ["a: int", "b: int?"]),
                V(version: 2, fields: ["a: int", #"b: { type: int?, deprecated: "use a" }"#]),
            ], then: V(version: 3, fields: ["a: int"], oldest: 2)),
        .versions(
            "deprecated optional field removed while oldest_supported is below it: old devices read null", "full",
            [
                V(version: 1, fields: ["a: int", "b: int?"]),
                V(version: 2, fields: ["a: int", #"b: { type: int?, deprecated: "use a" }"#]),
            ], then: V(version: 3, fields: ["a: int"])),
        .versions(
            "deprecated field with a default removed while oldest_supported is below it: old devices read the default", "full",
            [
                V(version: 1, fields: ["a: int", "b: { type: int, default: 0 }"]),
                V(version: 2, fields: ["a: int", #"b: { type: int, default: 0, deprecated: "use a" }"#]),
            ], then: V(version: 3, fields: ["a: int"])),
        .versions(
            "deprecated field required in a supported version removed: that version cannot decode rows without it", "full",
            [
                V(version: 1, fields: ["a: int", "b: int"]),
                V(version: 2, fields: ["a: int", #"b: { type: int, deprecated: "use a" }"#]),
            ], then: V(version: 3, fields: ["a: int"]), expect: .fieldRemoved),
        .versions(
            "deprecated required field with a default removed once outside the window", "full",
            [
                V(version: 1, fields: ["a: int", "b: { type: int, default: 0 }"]),
                V(version: 2, fields: ["a: int", #"b: { type: int, default: 0, deprecated: "use a" }"#]),
            ], then: V(version: 3, fields: ["a: int"], oldest: 2)),
        .versions(
            "deprecated required field without default: v2 devices cannot decode rows without it", "full",
            [
                V(version: 1, fields: ["a: int", "b: int"]),
                V(version: 2, fields: ["a: int", #"b: { type: int, deprecated: "use a" }"#]),
            ], then: V(version: 3, fields: ["a: int"], oldest: 2), expect: .fieldRemoved),
        .step("field removed from an up entity (devices never read it)", "full", "up", old: ["a: int", "b: int"], new: ["a: int"]),
    ]

    // MARK: Renames

    static let renames: [CompatCase] = [
        .step(
            "renamed_from keeps the field", "full", old: ["position: { type: int, default: 0 }"],
            new: ["sort_index: { type: int, default: 0, renamed_from: { name: position, version: 2 } }"]),
        .step(
            "renamed_from keeps the field", "forward", old: ["position: { type: int, default: 0 }"],
            new: ["sort_index: { type: int, default: 0, renamed_from: { name: position, version: 2 } }"]),
        .step(
            "renamed required field without default is not a new field", "backward", old: ["title: string"],
            new: ["heading: { type: string, renamed_from: { name: title, version: 2 } }"]),
        .versions(
            "rename in version 3 checked against versions 1 and 2", "full",
            [
                V(version: 1, fields: ["a: int"]),
                V(version: 2, fields: ["a: int", "b: { type: int?, since: 2 }"]),
            ], then: V(version: 3, fields: ["c: { type: int, renamed_from: { name: a, version: 3 } }", "b: { type: int?, since: 2 }"])),
        .step(
            "renamed and retyped", "full", old: ["position: int"],
            new: ["sort_index: { type: string, renamed_from: { name: position, version: 2 } }"], expect: .fieldTypeChanged),
        // The bogus name also makes the field look new (so its `since: 1` is wrong) and leaves the
        // old field unmatched (removed, in forward).
        .step(
            "renamed_from with a typo", "full", old: ["position: { type: int, default: 0 }"],
            new: ["sort_index: { type: int, default: 0, renamed_from: { name: positon, version: 2 } }"],
            expect: .renamedFromUnknown, .fieldRemoved),
        .step(
            "renamed_from naming a field that never existed", "backward", old: ["a: int"],
            new: ["a: int", "note: { type: string?, renamed_from: { name: memo, version: 2 } }"], expect: .renamedFromUnknown),
    ]

    // MARK: since

    static let sinces: [CompatCase] = [
        .versions(
            "since of a field added in 2 rewritten to 1", "backward",
            [
                V(version: 1, fields: ["a: int"]),
                V(version: 2, fields: ["a: int", "b: { type: int?, since: 2 }"]),
            ], then: V(version: 3, fields: ["a: int", "b: { type: int?, since: 1 }"]), expect: .sinceRewritten),
        .versions(
            "a field released in 2 keeps since 2 without writing it", "full",
            [
                V(version: 1, fields: ["a: int"]),
                V(version: 2, fields: ["a: int", "b: { type: int?, since: 2 }"]),
            ], then: V(version: 3, fields: ["a: int", "b: int?"])),
        .step("since of a field from version 1 raised to 2", "full", old: ["a: int"], new: ["a: { type: int, since: 2 }"], expect: .sinceRewritten),
        .step("new optional field without since: the lock knows it is new in 2", "full", old: ["a: int"], new: ["a: int", "b: int?"]),
        .step("new optional field without since", "none", old: ["a: int"], new: ["a: int", "b: int?"]),
        .step(
            "new field with a since that disagrees with the lock", "full", old: ["a: int"], new: ["a: int", "b: { type: int?, since: 1 }"],
            expect: .sinceRewritten),
        .versions(
            "sinces that match the history", "full",
            [
                V(version: 1, fields: ["a: int"]),
                V(version: 2, fields: ["a: int", "b: { type: int?, since: 2 }"]),
            ], then: V(version: 3, fields: ["a: int", "b: { type: int?, since: 2 }", "c: { type: int?, since: 3 }"])),
    ]

    // MARK: Structure and history

    static let structure: [CompatCase] = [
        .step("unchanged", "full", old: ["a: int"], new: ["a: int"]),
        .versions(
            "primary key moved to another field", "full", [V(version: 1, fields: ["code: string"])],
            then: V(version: 2, fields: ["id: id", "code: { type: string, primary_key: true }"], key: nil), expect: .primaryKeyChanged),
        .versions(
            "primary key type changed", "full", [V(version: 1, fields: ["a: int"])],
            then: V(version: 2, fields: ["a: int"], key: "id: { type: uuid, primary_key: true }"), expect: .primaryKeyChanged, .fieldTypeChanged),
        .versions(
            "table renamed", "full", [V(version: 1, fields: ["a: int"])],
            then: V(version: 2, fields: ["a: int"], table: "things"), expect: .tableRenamed),
        .versions(
            "scope changed", "full", [V(version: 1, fields: ["team_id: id", "a: int"], scope: "team")],
            then: V(version: 2, fields: ["team_id: id", "a: int"], scope: "user"), expect: .scopeChanged),
        .versions(
            "direction changed", "full", [V(version: 1, fields: ["a: int"])],
            then: V(version: 2, fields: ["a: int"], direction: "up"), expect: .directionChanged),
        .versions(
            "direction and conflict changed", "full", direction: "down", [V(version: 1, fields: ["a: int"])],
            then: V(version: 2, fields: ["a: int"], direction: "both", conflict: "last_writer_wins"),
            expect: .directionChanged, .conflictPolicyChanged),
        .versions(
            "conflict policy changed", "full", [V(version: 1, fields: ["a: int"])],
            then: V(version: 2, fields: ["a: int"], conflict: "version_check"), expect: .conflictPolicyChanged),
        .versions(
            "oldest_supported decreased", "full",
            [
                V(version: 1, fields: ["a: int"]),
                V(version: 2, fields: ["a: int"], oldest: 2),
            ], then: V(version: 3, fields: ["a: int"]), expect: .oldestSupportedDecreased),
        .versions(
            "a breaking change shipped by raising oldest_supported to the new version", "full", [V(version: 1, fields: ["a: int"])],
            then: V(version: 2, fields: ["a: string"], oldest: 2)),
        .versions(
            "content changed at a released version", "full", [V(version: 1, fields: ["a: int"])],
            then: V(version: 1, fields: ["a: string"]), expect: .versionNotBumped
        )
        .toleratingFromLock(.releasedMigrationModified),
        .versions(
            "prose changed at a released version", "full", [V(version: 1, fields: ["a: int"])],
            then: V(version: 1, fields: ["a: int"], summary: "The same item, described better.", extra: ["doc: Reworded."])),
        .versions(
            "version decreased", "full", [V(version: 1, fields: ["a: int"]), V(version: 2, fields: ["a: int", "b: { type: int?, since: 2 }"])],
            then: V(version: 1, fields: ["a: int"]), expect: .versionDecreased
        )
        .toleratingFromLock(.releasedMigrationModified),
        .versions("contract deleted", "full", [V(version: 1, fields: ["a: int"])], then: nil, expect: .contractDeleted),
        .versions(
            "version skipped: 1 → 3, field since 3", "full", [V(version: 1, fields: ["a: int"])],
            then: V(version: 3, fields: ["a: int", "b: { type: int?, since: 3 }"])),
    ]

    // MARK: Mode none: only the rules that protect the history itself

    static let modeNone: [CompatCase] = [
        .step(
            "type changed, field removed, required field added", "none", old: ["a: int", "b: string"],
            new: ["a: string", "c: { type: int, since: 2 }"]),
        .versions(
            "table renamed and conflict changed", "none", [V(version: 1, fields: ["a: int"])],
            then: V(version: 2, fields: ["a: string"], conflict: "field_merge", table: "things"), expect: .tableRenamed, .conflictPolicyChanged),
        .versions(
            "primary key changed", "none", [V(version: 1, fields: ["code: string"])],
            then: V(version: 2, fields: ["id: id", "code: { type: string, primary_key: true }"], key: nil), expect: .primaryKeyChanged),
        .versions(
            "content changed at a released version", "none", [V(version: 1, fields: ["a: int"])],
            then: V(version: 1, fields: ["a: string"]), expect: .versionNotBumped
        )
        .toleratingFromLock(.releasedMigrationModified),
    ]

    // MARK: Direction up: devices never read the contract, so forward checks do not apply

    static let directionUp: [CompatCase] = [
        .step("enum value added", "forward", "up", old: [status], new: [statusAdded]),
        .step("enum value added", "full", "up", old: [status], new: [statusAdded]),
        .step("int → double", "full", "up", old: ["a: int"], new: ["a: double"]),
        .step("double → int", "full", "up", old: ["a: double"], new: ["a: int"], expect: .fieldTypeChanged),
        .step("field removed", "forward", "up", old: ["a: int", "b: int"], new: ["a: int"]),
        .step("enum value removed", "full", "up", old: [statusAdded], new: [status], expect: .enumValueRemoved),
    ]

    // MARK: File fields: a file's size limit and content types may widen, never narrow

    /// A file field `photo` (10MB of JPEG or PNG unless said otherwise).
    private static func photo(
        _ type: String = "file?", maxBytes: String = "10MB", types contentTypes: String = "[image/jpeg, image/png]", since: Int? = nil
    ) -> String {
        "photo: { type: \(type), max_bytes: \(maxBytes), content_types: \(contentTypes)\(since.map { ", since: \($0)" } ?? "") }"
    }

    static let files: [CompatCase] = [
        .step("file: optional file added", "full", old: ["a: int"], new: ["a: int", photo(since: 2)]),
        .step("file: required file added", "full", old: ["a: int"], new: ["a: int", photo("file", since: 2)], expect: .requiredFieldAdded),
        .step("file: unchanged", "full", old: [photo()], new: [photo()]),
        .step("file: max_bytes lowered", "backward", old: [photo()], new: [photo(maxBytes: "5MB")], expect: .fileMaxBytesReduced),
        .step("file: max_bytes lowered", "full", old: [photo()], new: [photo(maxBytes: "9999999")], expect: .fileMaxBytesReduced),
        .step("file: max_bytes lowered (old devices never read what they sent)", "forward", old: [photo()], new: [photo(maxBytes: "5MB")]),
        .step("file: max_bytes raised", "full", old: [photo()], new: [photo(maxBytes: "1GB")]),
        .step(
            "file: content type removed", "full", old: [photo()], new: [photo(types: "[image/jpeg]")], expect: .fileContentTypesNarrowed),
        .step(
            "file: content type removed", "backward", old: [photo()], new: [photo(types: "[image/jpeg]")], expect: .fileContentTypesNarrowed),
        .step("file: content type removed", "forward", old: [photo()], new: [photo(types: "[image/jpeg]")]),
        .step("file: content type added", "full", old: [photo()], new: [photo(types: "[image/jpeg, image/png, application/pdf]")]),
        .step("file: content types reordered", "full", old: [photo()], new: [photo(types: "[image/png, image/jpeg]")]),
        .step("file: types widened to a pattern that covers them", "full", old: [photo()], new: [photo(types: "[\"image/*\"]")]),
        .step("file: a pattern widened to anything", "full", old: [photo(types: "[\"image/*\", text/plain]")], new: [photo(types: "[\"*/*\"]")]),
        .step(
            "file: a pattern narrowed to one of its types", "full", old: [photo(types: "[\"image/*\"]")],
            new: [photo(types: "[image/png, image/jpeg]")],
            expect: .fileContentTypesNarrowed),
        .step(
            "file: anything narrowed to a pattern", "full", old: [photo(types: "[\"*/*\"]")], new: [photo(types: "[\"image/*\"]")],
            expect: .fileContentTypesNarrowed),
        .step(
            "file: both narrowed", "full", old: [photo()], new: [photo(maxBytes: "1MB", types: "[image/png]")],
            expect: .fileMaxBytesReduced, .fileContentTypesNarrowed),
        .step("file: string → file", "full", old: ["photo: string?"], new: [photo()], expect: .fieldTypeChanged),
        .step("file: string → file", "backward", old: ["photo: string?"], new: [photo()], expect: .fieldTypeChanged),
        .step("file: file → json", "full", old: [photo()], new: ["photo: json?"], expect: .fieldTypeChanged),
        .step("file: file → bytes", "forward", old: [photo()], new: ["photo: bytes?"], expect: .fieldTypeChanged),
        .step("file: optional → required", "full", old: [photo()], new: [photo("file")], expect: .optionalMadeRequired),
        .versions(
            "file: narrowed once oldest_supported has passed the wider versions", "full", [V(version: 1, fields: [photo()])],
            then: V(version: 2, fields: [photo(maxBytes: "1MB", types: "[image/png]")], oldest: 2)),
        .versions(
            "file: narrowed in a middle version still supported", "full",
            [V(version: 1, fields: [photo()]), V(version: 2, fields: [photo(maxBytes: "20MB", types: "[image/jpeg, image/png, image/gif]")])],
            then: V(version: 3, fields: [photo(maxBytes: "15MB", types: "[image/jpeg, image/png]")], oldest: 2),
            expect: .fileMaxBytesReduced, .fileContentTypesNarrowed),
        .versions(
            "file: narrowing allowed on the field", "full", [V(version: 1, fields: [photo()])],
            then: V(
                version: 2,
                fields: [
                    "photo: { type: file?, max_bytes: 5MB, content_types: [image/jpeg], allow: ["
                        + "{ rule: FILE_MAX_BYTES_REDUCED, reason: \"no photo was ever above 5MB\", until: 2099-12-31 }, "
                        + "{ rule: FILE_CONTENT_TYPES_NARROWED, reason: \"no device ever sent a PNG\", until: 2099-12-31 }] }"
                ])),
        .step(
            "file on an event: max_bytes lowered", "backward", "up", kind: .event, old: [photo()], new: [photo(maxBytes: "1MB")],
            expect: .fileMaxBytesReduced),
        .step(
            "file on an event: content type removed", "backward", "up", kind: .event, old: [photo()], new: [photo(types: "[image/png]")],
            expect: .fileContentTypesNarrowed),
        .step("file on an event: optional file added", "backward", "up", kind: .event, old: ["a: int"], new: ["a: int", photo(since: 2)]),
    ]

    // MARK: Events (the server reads every event any supported device sends)

    static let events: [CompatCase] = [
        .step(
            "event: required field added", "backward", "up", kind: .event, old: ["a: int"], new: ["a: int", "b: { type: int, since: 2 }"],
            expect: .requiredFieldAdded),
        .step(
            "event: required field added (manifest default: backward)", "manifest", "up", kind: .event, old: ["a: int"],
            new: ["a: int", "b: { type: int, since: 2 }"], expect: .requiredFieldAdded),
        .step("event: optional field added", "backward", "up", kind: .event, old: ["a: int"], new: ["a: int", "b: { type: int?, since: 2 }"]),
        .step("event: field removed", "backward", "up", kind: .event, old: ["a: int", "b: int"], new: ["a: int"]),
        .step("event: enum value added", "backward", "up", kind: .event, old: [status], new: [statusAdded]),
        .step("event: enum value removed", "backward", "up", kind: .event, old: [statusAdded], new: [status], expect: .enumValueRemoved),
        .step("event: int → string", "backward", "up", kind: .event, old: ["a: int"], new: ["a: string"], expect: .fieldTypeChanged),
        .step("event: int → double", "backward", "up", kind: .event, old: ["a: int"], new: ["a: double"]),
        .step(
            "event read by devices: enum value added", "full", "both", kind: .event, old: [status], new: [statusAdded],
            expect: .enumValueAdded),
        .step("event read by devices, manifest mode: enum value added", "manifest", "both", kind: .event, old: [status], new: [statusAdded]),
    ]
}
