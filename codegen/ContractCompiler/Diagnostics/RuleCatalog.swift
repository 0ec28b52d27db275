/// What every rule means: the text `contractc explain RULE_ID` prints.
public struct RuleExplanation: Sendable {
    /// Which compatibility questions a rule answers.
    public enum Scope: String, Sendable {
        /// A validation rule of `contractc validate`: the contracts as they are.
        case validation
        /// Applies whatever the compatibility mode (except that `none` turns off compatibility checks only).
        case always
        /// New schema reading data written with an older one: modes backward and full.
        case backward
        /// Older schema reading data written with the new one: modes forward and full.
        case forward
        /// Either question, depending on the change (the rationale says which).
        case both
        /// The rollout gate: `contractc check` against a census of the device fleet
        /// (`--fleet`, `--fleet-url`). Not a compatibility rule: no allowance excuses it.
        case fleet
    }

    /// The rule explained.
    public var rule: RuleID
    /// What the rule reports, in a few words.
    public var title: String
    /// When the rule applies: validation, a compatibility direction or the fleet gate.
    public var scope: Scope
    /// Why the rule exists.
    public var rationale: String
    /// How to fix what it reports.
    public var fix: String

    /// The explanation as `contractc explain` prints it.
    public var rendered: String {
        let applies: String
        switch scope {
        case .validation: applies = "every run of `contractc validate`, `generate`, `check` and `lock`"
        case .always: applies = "`contractc check`, in every compatibility mode (it protects the release history itself)"
        case .backward:
            applies = "`contractc check` in modes backward and full: the new schema must read data written with every supported older schema"
        case .forward: applies = "`contractc check` in modes forward and full: every supported older schema must read data written with the new one"
        case .both: applies = "`contractc check` in modes backward, forward and full; which direction of reading breaks depends on the change"
        case .fleet:
            applies =
                "`contractc check --fleet` and `--fleet-url`, in every compatibility mode: the rollout gate, against a census of the device fleet (`--max-cutoff` sets the limit; no allowance excuses it)"
        }
        return """
            \(rule.rawValue): \(title)

            Applies to: \(applies).

            Why: \(rationale)

            Fix: \(fix)
            """
    }
}

/// Every rule the compiler knows, with its explanation.
public enum RuleCatalog {
    /// The explanation of a rule, or `nil` for an identifier the compiler does not know.
    public static func explanation(for rule: RuleID) -> RuleExplanation? { byID[rule] }

    /// Every rule identifier, in catalog order.
    public static var allRules: [RuleID] { entries.map(\.rule) }

    /// Compatibility rules an allowance may name.
    public static var allowableRules: Set<RuleID> {
        Set(entries.filter { $0.scope != .validation && $0.scope != .fleet }.map(\.rule))
    }

    private static let byID: [RuleID: RuleExplanation] = Dictionary(uniqueKeysWithValues: entries.map { ($0.rule, $0) })

    private static func validation(_ rule: RuleID, _ title: String, _ rationale: String, _ fix: String) -> RuleExplanation {
        RuleExplanation(rule: rule, title: title, scope: .validation, rationale: rationale, fix: fix)
    }

    static let entries: [RuleExplanation] = [
        // MARK: Files and YAML
        validation(
            .yamlSyntax, "the file is not valid YAML", "libyaml could not parse the file; nothing after the error can be trusted.",
            "Fix the syntax at the position shown: indentation, a missing `:`, an unclosed quote or bracket."),
        validation(
            .yamlUnsupported, "a YAML feature contracts do not use",
            "Anchors, aliases, tags and several documents per file make a contract depend on text elsewhere; reviewers must see a contract whole.",
            "Write values out in full and keep one contract per file."),
        validation(
            .fileUnreadable, "the file cannot be read as text",
            "Contract files are UTF-8 text; a binary file or a NUL byte means the wrong file is in the folder.",
            "Remove the file or save it as UTF-8."),
        validation(
            .fileTooLarge, "the file is larger than 1 MiB",
            "No contract needs that much text; the limit keeps the compiler fast and safe on any input.", "Split the contract or remove the file."),
        validation(
            .emptyFile, "the file is empty", "An empty file in the contracts folder is almost always a mistake.",
            "Write a contract or delete the file."),
        validation(
            .nestingTooDeep, "nesting deeper than 32 levels",
            "Contracts need a few levels; deeper nesting is a broken indentation or a hostile file.", "Check the indentation of the block shown."),
        validation(
            .missingManifest, "no contracts/contracts.yaml", "The manifest declares the scopes every contract refers to.",
            "Create contracts/contracts.yaml with `scopes:`."),
        validation(
            .notAContract, "the file is not an entity or an event",
            "Every file below contracts/ other than the manifest and the lock is one contract.",
            "Start the file with `entity: Name` or `event: Name`."),
        // MARK: Structure
        validation(
            .unexpectedNode, "a list, mapping or value where another kind is expected", "Each key has one shape; anything else would be guessed at.",
            "Write the value in the shape the help line shows."),
        validation(
            .unknownKey, "a key the language does not know here", "A misspelt key would otherwise be ignored silently.",
            "Use the key the help line suggests, or remove it."),
        validation(
            .missingKey, "a required key is missing", "The compiler cannot choose for you (a version, a table, a sync policy).",
            "Add the key with the value the help line suggests."),
        validation(.duplicateKey, "a key written twice", "YAML would keep one of the two values silently.", "Keep one."),
        validation(
            .invalidValue, "a value outside what the key accepts", "Values are checked so that generation never guesses.",
            "Use one of the values listed in the message."),
        // MARK: Names
        validation(
            .invalidIdentifier, "a name that is not a valid identifier",
            "Names become Swift identifiers and SQL columns: lower snake case for fields and tables, upper camel case for contracts.",
            "Rename as the help line suggests."),
        validation(
            .reservedWord, "a name that is an SQL or Swift keyword", "Keywords would need quoting everywhere and break hand-written queries.",
            "Choose a more specific name."),
        validation(
            .reservedName, "a name kept for the sync engine",
            "Names starting with `_` (the columns the engines add, such as `_deleted`) and the engines' own tables (`outbox`, `repull_rows`, …: `EngineNames`) belong to the client and server.",
            "Choose another name."),
        validation(
            .shadowsSwiftType, "a contract whose Swift type would hide a standard one",
            "A struct named `Task` would hide Swift's `Task` in every file that imports Contracts.", "Add `swift_name:` with another type name."),
        validation(
            .duplicateContract, "two contracts with the same name or Swift type", "Names identify contracts on the wire and in the registry.",
            "Rename one."),
        validation(.duplicateTable, "two contracts share a table", "Each contract owns its table.", "Give each contract its own `table`."),
        validation(.duplicateField, "a field declared twice", "Field names are wire keys and columns.", "Rename or remove one."),
        validation(.duplicateIndex, "the same index twice", "A second identical index only slows writes.", "Remove one."),
        validation(
            .generatedNameClash, "two names that generate the same Swift name",
            "Swift names are derived from contract names; a clash would not compile.", "Rename one of the fields."),
        // MARK: Types
        validation(
            .unknownType, "a type the language does not know", "Types decide the Swift type, the SQL column and the checks on the wire.",
            "Use one of id, string, int, double, bool, timestamp, date, uuid, json, bytes, enum, list<T>, ref<Entity>."),
        validation(.enumWithoutValues, "an enum without values", "An enum's values are its type.", "Add `values: [a, b]`."),
        validation(.duplicateEnumValue, "an enum value listed twice", "Values are wire strings and Swift cases.", "Remove the duplicate."),
        validation(
            .invalidEnumFallback, "a fallback that is not one of the values", "The fallback is what unknown values decode to.",
            "Name one of the enum's values."),
        validation(
            .defaultTypeMismatch, "a default that does not fit the type",
            "Defaults fill missing keys and new columns; a wrong one would corrupt data.", "Write a value of the field's type."),
        validation(
            .unknownReference, "a reference to a contract that does not exist", "`ref<X>`, `has_many`, `belongs_to` and `applies_to` name entities.",
            "Fix the name or add the contract."),
        validation(
            .maxLengthNotApplicable, "max_length on a type without a length", "Only text, ids, bytes and lists have a length.", "Remove `max_length`."
        ),
        validation(
            .maxBytesNotApplicable, "max_bytes on a type without a byte limit",
            "Only string, json, bytes and list values vary in size without bound (and a file's, whose `max_bytes` limits the file); ids are at most 256 bytes and the other types have a fixed size.",
            "Remove `max_bytes`."),
        validation(
            .invalidContentType, "a file field's content type that is not a media type pattern",
            "A file's content type is checked against the field's `content_types` on every write; a pattern no type matches, or one written in capitals or with parameters, would refuse files its author meant to accept.",
            "Write `type/subtype` (`image/png`), `type/*` (`image/*`) or `\"*/*\"` (quoted: a bare `*` starts a YAML alias), in lowercase."),
        validation(
            .duplicateContentType, "a content type listed twice", "Each content type a file field accepts is listed once.",
            "Remove the duplicate."),
        validation(
            .maxBytesAboveRowLimit, "a field may take more bytes than its row",
            "A row larger than its contract's `max_bytes` is refused, so a field limit above it would accept values no write can store.",
            "Raise the contract's `max_bytes` (at most 4MB), or lower the field's `max_bytes` (or its `max_length`)."),
        validation(
            .unknownIndexField, "an index on a field that does not exist or cannot be indexed", "Indexes are created on both sides.",
            "Index existing scalar fields."),
        validation(.unknownForeignKey, "a relation whose foreign key is not a field", "Relations join on that field.", "Name an existing field."),
        validation(
            .foreignKeyTypeMismatch, "a foreign key of the wrong type", "It must hold the other entity's primary key.", "Declare it as `ref<Entity>`."
        ),
        // MARK: Keys and versions
        validation(
            .missingPrimaryKey, "an entity without a primary key", "Rows are identified, merged and deleted by their key.",
            "Mark one field `primary_key: true`."),
        validation(
            .multiplePrimaryKeys, "more than one primary key", "Sync identifies a row by one key.", "Keep one; use a unique index for the others."),
        validation(
            .invalidPrimaryKey, "a primary key of the wrong kind",
            "Keys are required id, uuid, string or int fields; events use their envelope's event_id.",
            "Change the key's type, or remove `primary_key` from an event."),
        validation(
            .invalidVersionField, "a version field that is not a timestamp or int", "The version field orders a row's versions.",
            "Use a required timestamp or int."),
        validation(.multipleVersionFields, "more than one version field", "A row has one version.", "Keep one."),
        validation(
            .oldestSupportedAboveVersion, "oldest_supported above version", "The oldest supported version must exist.", "Lower oldest_supported."),
        validation(
            .sinceAboveVersion, "a field added after the current version", "`since` names the version that added the field.",
            "Bump the version or fix `since`."),
        validation(
            .invalidRename, "a rename that cannot be right",
            "`renamed_from` names the field's previous name and the version that introduced the new one.", "Fix the old name or the version."),
        validation(
            .serverOnlyNotAllowed, "a server-only field devices would need",
            "A `server_only` field never reaches a device: a device cannot look its row up by it, order by it, join on it, or fill it in on a write.",
            "Remove `server_only` from keys, version fields, foreign keys, indexed fields and encrypted fields; on an event, or a required field of an entity devices write, make it optional or give it a default."
        ),
        validation(
            .encryptedNotAllowed, "encryption on a field that is looked up", "Ciphertext cannot be searched, ordered or joined.",
            "Remove `encrypted` from keys, version fields, foreign keys and indexed fields."),
        validation(
            .localFieldNeedsDefault, "a required local field without a default", "Rows arriving from the server cannot fill client-only columns.",
            "Add a default or make it optional."),
        validation(
            .deprecatedWithoutReason, "deprecated without a reason", "Readers need to know what to use instead.",
            "Write `deprecated: \"use x instead\"`."),
        validation(
            .missingSummary, "a contract without a summary (warning)", "The summary becomes the generated type's documentation.",
            "Add `summary:` with one sentence."),
        // MARK: Sync
        // MARK: Subscriptions
        validation(
            .subscriptionEntity, "a subscription's entity cannot be subscribed to",
            "A subscription selects rows of one entity, and takes along rows of others, that travel down to devices (`down` or `both`), keyed by an `id` (the server selects by it as text). Events travel up and are never pulled.",
            "Name an entity of the contracts that devices pull, with an `id` primary key, and include only such entities."),
        validation(
            .subscriptionFilter, "a subscription's filter the server cannot answer from an index",
            "Rows are selected by equality or `in` on synced fields both server storages hold as text, unencrypted and known to devices (`id`, `string`, `enum`, `ref<T>` to an entity keyed by `id` or `string`); the compiler derives an index for each. A subscription without a condition would select a whole scope: pull the scope instead.",
            "Filter on such a field, with at least one condition."),
        validation(
            .subscriptionParameter, "a subscription's parameters and conditions do not agree",
            "Every parameter is given by each subscriber, so each must feed a condition of its field's type; a list parameter means `in`, and a condition may name only declared parameters or the token's `user_id` and `device_id`.",
            "Declare the parameter with the field's type (`list<T>` for `in`), use it, or remove it."),
        validation(
            .subscriptionInclude, "a subscription includes what it cannot take along",
            "Included rows come through declared relations, each once per level, of entities in the root's scope that travel down, at most three levels deep, so the token that may read the root may read them.",
            "Include a declared relation of an entity in the same scope, or subscribe to the other scope's rows separately."),
        validation(
            .unknownScope, "a scope the manifest does not declare", "Scopes decide who may read and write rows.",
            "Declare it in contracts.yaml or fix the name."),
        validation(
            .scopeKeyFieldMissing, "a scope key placeholder the contract does not carry",
            "A row's scope key is built from the device token ({tenant_id}, {user_id}, {device_id}) and from the row's own fields for any other placeholder ({team_id}); without the field the server cannot tell which scope a row belongs to.",
            "Add the field (for example `team_id: id`) to the contract."),
        validation(
            .policyDirectionMismatch, "a conflict policy that makes no sense for the direction",
            "`down` means devices never push, which is exactly `server_authoritative`; a read-only scope allows only `down`.",
            "Match the policy to the direction."),
        validation(
            .eventPolicy, "an event that is not append-only and device-recorded", "Events are immutable facts recorded on devices.",
            "Use `direction: up` or `both` and no other conflict policy."),
        validation(
            .signedNotAllowed, "`signed: true` on a contract whose rows change after they are written",
            "A signature covers one immutable write; an entity whose rows are updated, patched or deleted, or that devices never write, has nothing a device signs once and for all.",
            "Sign events and `append_only` entities with `direction: up` or `both`; leave `signed` out elsewhere."),
        validation(
            .envelopeFieldShadowed, "an event field named like an envelope field", "Every event's envelope already carries it.",
            "Rename or remove the field."),
        // MARK: Allowances
        validation(
            .invalidAllowance, "an allowance that is incomplete or names an unknown rule", "An exception must say which rule, why, and until when.",
            "Write `allow: [{ rule: RULE_ID, reason: \"...\", until: YYYY-MM-DD }]`."),
        validation(
            .allowanceExpired, "an allowance past its date", "Exceptions are temporary by design; an expired one must be reviewed, not forgotten.",
            "Remove the allowance (fix the change) or, after review, extend `until`."),

        // MARK: Compatibility: the release history
        RuleExplanation(
            rule: .contractDeleted, title: "a released contract was deleted", scope: .always,
            rationale: "Devices in the field still hold and send rows of every released contract; the server must keep reading them.",
            fix:
                "Keep the contract. To retire it, stop writing it and raise `oldest_supported` until no supported device uses it; then allow CONTRACT_DELETED on the contract's last released file with a reason."
        ),
        RuleExplanation(
            rule: .versionNotBumped, title: "the contract changed but kept a released version", scope: .always,
            rationale: "A released version is a promise to every device that runs it; two different schemas under one number cannot be told apart.",
            fix: "Bump `version` (and keep the change compatible), then run `contractc lock` when releasing."),
        RuleExplanation(
            rule: .versionDecreased, title: "the version went down", scope: .always,
            rationale: "Versions only grow; a lower number would collide with a released one.",
            fix: "Set `version` above the latest locked version."),
        RuleExplanation(
            rule: .releasedVersionModified, title: "a released version in contracts.lock was edited", scope: .always,
            rationale: "The lock is the record of what shipped; only `contractc lock` writes it, and its checksums catch edits.",
            fix: "Restore contracts.lock from version control (`git checkout contracts/contracts.lock`)."),
        RuleExplanation(
            rule: .releasedMigrationModified, title: "a released migration would change", scope: .always,
            rationale: "Devices and servers that ran a migration never run it again; changing it leaves them with another schema than new installs.",
            fix: "Revert the change that altered the released migration; express the change as a new contract version instead."),
        RuleExplanation(
            rule: .lockUnreadable, title: "contracts.lock cannot be read", scope: .always,
            rationale: "Without the lock the history cannot be checked.",
            fix: "Restore contracts.lock from version control; it is written only by `contractc lock`."),
        RuleExplanation(
            rule: .subscriptionRemoved, title: "a subscription devices still use was removed", scope: .always,
            rationale:
                "Devices built with it still subscribe to it by name; the server would answer `unknown_subscription` and their screens would stay empty.",
            fix:
                "Keep the subscription until the root entity's `oldest_supported` is above the version it was locked at (those devices are no longer served), or add a new one beside it."
        ),
        RuleExplanation(
            rule: .subscriptionChanged, title: "a subscription devices still use changed its parameters, filter or includes", scope: .always,
            rationale:
                "Devices send the parameters they were built with and hold rows and cursors of the old selection: a new filter under the old name would hand them other rows with their old cursor.",
            fix:
                "Add a subscription under a new name with the new selection; remove the old one once no supported device uses it. `ttl`, `priority` and `doc` may change freely."
        ),
        RuleExplanation(
            rule: .primaryKeyChanged, title: "the primary key changed", scope: .always,
            rationale: "Rows already on devices and on the server are identified by the old key; outbox entries and tombstones refer to it.",
            fix: "Keep the key. Model a new identity as a new contract."),
        RuleExplanation(
            rule: .tableRenamed, title: "the table was renamed", scope: .always,
            rationale: "Released migrations, hand-written queries and device databases name the table.",
            fix: "Keep `table` as it was; the Swift name can change with `swift_name`."),
        RuleExplanation(
            rule: .scopeChanged, title: "the scope changed", scope: .always,
            rationale:
                "Cursors, access rules and cached data are per scope; moving rows would hide them from devices or show them to the wrong ones.",
            fix: "Keep the scope, or introduce a new contract in the new scope."),
        RuleExplanation(
            rule: .directionChanged, title: "the sync direction changed", scope: .always,
            rationale: "Devices in the field push or pull this contract as their version says; a new direction breaks their sync loop.",
            fix: "Keep the direction, or introduce a new contract."),
        RuleExplanation(
            rule: .conflictPolicyChanged, title: "the conflict policy changed", scope: .always,
            rationale:
                "Old devices send what their policy needs (hlc, base_version, changed fields); the server would resolve their pushes with rules they cannot satisfy.",
            fix: "Keep the policy, or introduce a new contract."),
        RuleExplanation(
            rule: .oldestSupportedDecreased, title: "oldest_supported went down", scope: .always,
            rationale:
                "Devices below the old floor were told to update and purged their rows; lowering it again re-admits schemas no one checks against.",
            fix: "Keep oldest_supported at or above its released value."),
        RuleExplanation(
            rule: .signedTurnedOn, title: "`signed: true` turned on while devices that do not sign are supported", scope: .always,
            rationale:
                "A device built with a version that is not signed sends its writes without a signature, and the server refuses every one of them (`signature_invalid`): its queue stops for good.",
            fix:
                "Raise `oldest_supported` to the first signed version, so that older devices are told to update (426) instead of being refused write after write; or allow the rule with a reason and a last day."
        ),
        RuleExplanation(
            rule: .renamedFromUnknown, title: "renamed_from names a field that never existed", scope: .always,
            rationale: "A rename maps an old wire key to the new one; if the old key never existed the mapping hides a removal and an addition.",
            fix: "Write the field's real previous name and the version of the rename, or treat it as a new field."),
        RuleExplanation(
            rule: .sinceRewritten, title: "a field's `since` differs from its history", scope: .always,
            rationale:
                "`since` tells the server which devices know the field; the lock records where it first appeared. Left out, it is taken from the lock (the first version with the field, or the current version for a new one).",
            fix: "Leave `since` out, or set it to the version the lock shows the field first appeared in."),

        // MARK: Compatibility: backward (new reads old)
        RuleExplanation(
            rule: .requiredFieldAdded, title: "a required field was added without a default", scope: .backward,
            rationale: "Data written with an older schema lacks the field, and the new schema has no value to use for it.",
            fix: "Make the field optional (`type: T?`) or give it a `default`."),
        RuleExplanation(
            rule: .optionalMadeRequired, title: "an optional field became required", scope: .backward,
            rationale: "Data written with an older schema may leave it out or send null.",
            fix: "Keep it optional, or give it a `default` that fills missing values."),
        RuleExplanation(
            rule: .defaultChanged, title: "a field's default changed", scope: .backward,
            rationale:
                "Older writers that omit the field meant the old default; the new schema would read another value. An optional field that drops `default: null` is no change: null and no default read the same.",
            fix: "Keep the default. Change the value the app writes instead."),
        RuleExplanation(
            rule: .enumValueRemoved, title: "an enum value was removed", scope: .backward,
            rationale: "Data written with an older schema may hold the value; the new schema cannot decode it unless it names a `fallback`.",
            fix: "Keep the value (deprecate it in `doc`), or add a `fallback` that unknown values decode to."),
        RuleExplanation(
            rule: .maxLengthReduced, title: "max_length was lowered", scope: .backward,
            rationale: "Values written under the old limit may be longer than the new one and would be refused.",
            fix: "Keep or raise max_length."),
        RuleExplanation(
            rule: .maxBytesReduced, title: "max_bytes was lowered", scope: .backward,
            rationale:
                "Values and rows written under the old byte limit may be larger than the new one and would be refused. The limit compared is the one in force: a field or contract without `max_bytes` has the default (256kB for a field, or what its `max_length` allows; for a row, 1MB or twice its largest field limit, at most 4MB), so removing a `max_bytes` above the default lowers it too.",
            fix: "Keep or raise max_bytes, on the field or on the contract."),
        RuleExplanation(
            rule: .fileMaxBytesReduced, title: "a file field's max_bytes was lowered", scope: .backward,
            rationale:
                "Devices on an older version upload and name files up to the old limit; every write of a row naming a larger file would be refused, and the device's queue would stop on it.",
            fix:
                "Keep or raise the file field's max_bytes; to lower it, raise oldest_supported past every version with the higher limit first."),
        RuleExplanation(
            rule: .fileContentTypesNarrowed, title: "a file field no longer accepts a content type it accepted", scope: .backward,
            rationale:
                "Devices on an older version name files of every type their version accepts; every write of a row naming a file of a type the new version refuses would be refused, and the device's queue would stop on it. A pattern that covers the old one (`image/*` for `image/png`, `*/*` for anything) keeps it.",
            fix:
                "Keep the content type (or a pattern covering it); to drop it, raise oldest_supported past every version that accepts it first."),

        // MARK: Compatibility: forward (old reads new)
        RuleExplanation(
            rule: .enumValueAdded, title: "an enum value was added", scope: .forward,
            rationale: "An older schema reading the new value cannot decode it, unless that older schema already named a `fallback`.",
            fix:
                "Add a `fallback` in a version first and raise oldest_supported to it before adding values, or set the contract's compatibility to backward if old devices never read it."
        ),
        RuleExplanation(
            rule: .fieldRemoved, title: "a field was removed", scope: .forward,
            rationale:
                "Older schemas still read the field. Removal is allowed once the field was deprecated in a released version and no supported device would misread a row without it: every supported version has it optional or with a default (and reads its absence as null or the default). A version that requires it without a default cannot decode such a row until oldest_supported passes it.",
            fix:
                "Deprecate the field first (`deprecated: \"reason\"`; give it a default if it is required) and ship; remove it once every supported version reads it as optional or with a default, raising oldest_supported past any that requires it."
        ),
        RuleExplanation(
            rule: .fieldTypeChanged, title: "a field's type changed", scope: .both,
            rationale:
                "Both sides must decode each other's values. id, string and ref<…> are the same text on the wire. Widenings are safe backward only: int → double, enum → string, T → T? (which is also safe forward when the older version gives the field a default). Narrowings (double → int, string → enum) are safe forward only. Any other change breaks both ways.",
            fix: "Keep the type; add a new field with the new type and deprecate the old one."),

        // MARK: The rollout gate
        RuleExplanation(
            rule: .fleetCutoffExceeded, title: "raising oldest_supported would cut off too many active devices", scope: .fleet,
            rationale:
                "Once a raised oldest_supported ships, the server answers every device whose version of the contract is below it with 426, and the device purges the contract's rows: it stops syncing until it is updated. The fleet census says how many devices active within its window still run each version; a raise that refuses more of them than `--max-cutoff` (1 % by default) is more likely early than deliberate. Devices that never reported the contract, and stale ones, do not count.",
            fix:
                "Keep oldest_supported where it was released until more devices have updated (ship the version that needs the raise first, and raise it in a later release), or, when the cutoff is deliberate, run the gate for that release with a higher `--max-cutoff`."
        ),
    ]
}
