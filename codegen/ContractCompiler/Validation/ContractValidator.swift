import ContractRuntime
import Foundation

/// Rules that look at one contract as a whole, or at several contracts together.
/// Runs after decoding; adds diagnostics and never stops at the first problem.
struct ContractValidator {
    let set: ContractSet
    var diagnostics = DiagnosticCollector()
    /// Off when the manifest could not be read, so a broken manifest does not also flag every scope.
    var checkScopes = true
    /// Today's date (`YYYY-MM-DD`, UTC) for allowance expiry.
    var today: String = ContractValidator.currentDate()

    static func currentDate() -> String {
        TypeMapping.iso8601(Int64(Date().timeIntervalSince1970 * 1000)).prefix(10).description
    }

    init(_ set: ContractSet) {
        self.set = set
    }

    mutating func run() {
        checkUniqueNames()
        for contract in set.contracts {
            checkContract(contract)
        }
        checkSubscriptions()
    }

    // MARK: Names across contracts

    private mutating func checkUniqueNames() {
        var byName: [String: Contract] = [:]
        var bySwiftName: [String: Contract] = [:]
        var byTable: [String: Contract] = [:]
        for contract in set.contracts.sorted(by: { ($0.file, $0.location) < ($1.file, $1.location) }) {
            if let first = byName[contract.name] {
                diagnostics.error(
                    .duplicateContract, "contract '\(contract.name)' is declared twice", at: contract.location,
                    help: "rename one of them, or delete the copy",
                    notes: [.init("first declared here", at: first.location)]
                )
            } else {
                byName[contract.name] = contract
                if let first = bySwiftName[contract.swiftName] {
                    diagnostics.error(
                        .duplicateContract, "contracts '\(first.name)' and '\(contract.name)' generate the same Swift type '\(contract.swiftName)'",
                        at: contract.location, help: "give one of them a different `swift_name`",
                        notes: [.init("'\(first.name)' declared here", at: first.location)]
                    )
                } else {
                    bySwiftName[contract.swiftName] = contract
                }
            }
            guard !contract.table.isEmpty else { continue }
            if let first = byTable[contract.table], first.name != contract.name {
                diagnostics.error(
                    .duplicateTable, "table '\(contract.table)' is used by '\(first.name)' and '\(contract.name)'",
                    at: contract.tableLocation, help: "give each contract a table of its own",
                    notes: [.init("'\(first.name)' uses it here", at: first.tableLocation)]
                )
            } else {
                byTable[contract.table] = contract
            }
        }
    }

    // MARK: One contract

    private mutating func checkContract(_ contract: Contract) {
        checkTable(contract)
        checkVersions(contract)
        checkScopeAndPolicy(contract)
        checkFields(contract)
        checkGeneratedNames(contract)
        checkKeys(contract)
        checkReferences(contract)
        checkRelations(contract)
        checkIndexes(contract)
        checkServerOnly(contract)
        checkAllowances(contract)
    }

    /// A server-only field never reaches a device: nothing a device looks rows up by, orders or
    /// joins on, and nothing it must fill in on a write.
    private mutating func checkServerOnly(_ contract: Contract) {
        let indexed = Set(contract.indexes.flatMap(\.fields))
        let deviceWrites = contract.kind == .event || contract.sync.direction != .down
        for field in contract.serverOnlyFields {
            var problem: String?
            if contract.kind == .event {
                problem = "event field '\(field.name)' cannot be server_only: devices write events whole"
            } else if field.isPrimaryKey {
                problem = "primary key '\(field.name)' cannot be server_only: devices look rows up by it"
            } else if field.isVersionField {
                problem = "version field '\(field.name)' cannot be server_only: devices order rows by it"
            } else if field.isEncrypted {
                problem = "field '\(field.name)' cannot be both server_only and encrypted: devices never store it"
            } else if indexed.contains(field.name) {
                problem = "field '\(field.name)' is indexed and server_only; devices keep no such column to index"
            } else if deviceWrites, !field.type.isOptional, field.defaultValue == nil {
                problem = "required field '\(field.name)' is server_only, but devices write \(contract.name) and cannot fill it in"
            }
            if let problem {
                diagnostics.error(
                    .serverOnlyNotAllowed, problem, at: field.location,
                    help: "remove `server_only: true`, or make the field optional (`?`) or give it a default"
                )
            }
        }
    }

    private mutating func checkAllowances(_ contract: Contract) {
        let all = contract.allowances + (contract.fields + contract.localFields).flatMap(\.allowances)
        for allowance in all {
            if !RuleCatalog.allowableRules.contains(allowance.rule) {
                let guess = Names.closest(to: allowance.rule.rawValue, among: RuleCatalog.allowableRules.map(\.rawValue))
                diagnostics.error(
                    .invalidAllowance, "'\(allowance.rule.rawValue)' is not a compatibility rule an allowance can name",
                    at: allowance.location,
                    help: guess.map { "did you mean '\($0)'?" } ?? "allowances name the rules of `contractc check`; see `contractc explain`"
                )
            } else if allowance.until < today {
                diagnostics.error(
                    .allowanceExpired, "the allowance for \(allowance.rule.rawValue) expired on \(allowance.until)",
                    at: allowance.location,
                    help: "fix the change so the rule passes and remove the allowance, or review it and extend `until`"
                )
            }
        }
    }

    private mutating func checkTable(_ contract: Contract) {
        let table = contract.table
        guard !table.isEmpty else { return }
        if !Names.isSnakeCase(table) {
            diagnostics.error(
                .invalidIdentifier, "table name '\(table)' is not lower snake case", at: contract.tableLocation,
                help: "rename it to '\(Names.suggestedSnakeCase(table))'"
            )
        } else if Names.sqlKeywords.contains(table) {
            diagnostics.error(
                .reservedWord, "table name '\(table)' is an SQL keyword", at: contract.tableLocation,
                help: "choose another name, for example '\(table)_records'"
            )
        } else if EngineNames.isReservedTable(table) {
            diagnostics.error(
                .reservedName, "table name '\(table)' is reserved for the sync engine's own tables",
                at: contract.tableLocation, help: "choose another name, for example '\(Names.snakeCase(contract.name))_records'"
            )
        } else if table.count > Names.maximumIdentifierLength - 8 {
            diagnostics.error(
                .invalidIdentifier, "table name '\(table)' is longer than \(Names.maximumIdentifierLength - 8) characters",
                at: contract.tableLocation, help: "shorten it; generated index names add to it and PostgreSQL cuts names at 63"
            )
        }
    }

    private mutating func checkVersions(_ contract: Contract) {
        if contract.oldestSupported > contract.version {
            diagnostics.error(
                .oldestSupportedAboveVersion,
                "oldest_supported \(contract.oldestSupported) is above the current version \(contract.version)",
                at: contract.oldestSupportedLocation ?? contract.versionLocation,
                help: "oldest_supported names a version that exists: lower it to at most \(contract.version)"
            )
        }
        for field in contract.fields where field.since > contract.version {
            diagnostics.error(
                .sinceAboveVersion, "field '\(field.name)' is added in version \(field.since), after the current version \(contract.version)",
                at: field.sinceLocation ?? field.location,
                help: "bump the contract to `version: \(field.since)`, or set `since: \(contract.version)`"
            )
        }
    }

    private mutating func checkScopeAndPolicy(_ contract: Contract) {
        let sync = contract.sync
        let scope = set.manifest.scope(named: contract.scope)
        if checkScopes, !contract.scope.isEmpty, scope == nil {
            let guess = Names.closest(to: contract.scope, among: set.manifest.scopes.map(\.name))
            diagnostics.error(
                .unknownScope, "scope '\(contract.scope)' is not declared in \(set.manifest.file)", at: contract.scopeLocation,
                help: guess.map { "did you mean '\($0)'?" }
                    ?? "declare it under `scopes:` in \(set.manifest.file), or use one of: \(set.manifest.scopes.map(\.name).joined(separator: ", "))"
            )
        }
        if let scope {
            // Placeholders the token does not fill come from the row itself.
            for placeholder in scope.placeholders where !ScopePlaceholder.filledByToken.contains(placeholder) {
                let field = contract.field(named: placeholder)
                let usable = field.map { !$0.type.isOptional && !$0.isEncrypted && [.id, .string, .uuid].contains($0.type.type) } ?? false
                if !usable {
                    diagnostics.error(
                        .scopeKeyFieldMissing,
                        "scope '\(scope.name)' keys rows by {\(placeholder)}, but '\(contract.name)' has no required, unencrypted id field '\(placeholder)'",
                        at: field?.location ?? contract.scopeLocation,
                        help: "add `\(placeholder): id` to the fields; the server files each row under its \(placeholder)"
                    )
                }
            }
        }
        if contract.kind == .event {
            if sync.conflict != .appendOnly {
                diagnostics.error(
                    .eventPolicy, "events are immutable facts; their conflict policy is append_only, not \(sync.conflict.rawValue)",
                    at: sync.location, help: "remove `conflict` from the event's sync block, or model the state as an entity"
                )
            }
            if sync.direction == .down {
                diagnostics.error(
                    .eventPolicy, "events are recorded on devices, so their direction is `up` or `both`, not `down`",
                    at: sync.location, help: "use `direction: up` (or `both` when other devices read them)"
                )
            }
        } else {
            switch (sync.direction, sync.conflict) {
            case (.down, .serverAuthoritative):
                break
            case (.up, _), (.both, _):
                if sync.conflict == .serverAuthoritative {
                    diagnostics.error(
                        .policyDirectionMismatch,
                        "`server_authoritative` means devices never push, but direction `\(sync.direction.rawValue)` lets them",
                        at: sync.location,
                        help:
                            "use `direction: down`, or pick a policy devices can write with (last_writer_wins, version_check, field_merge, append_only)"
                    )
                }
            case (.down, let policy):
                diagnostics.error(
                    .policyDirectionMismatch,
                    "`\(policy.rawValue)` resolves pushes from devices, but direction `down` never receives any",
                    at: sync.location, help: "use `conflict: server_authoritative` for a down-only entity, or `direction: both`"
                )
            }
        }
        if contract.isSigned {
            if contract.kind == .entity, sync.conflict != .appendOnly {
                diagnostics.error(
                    .signedNotAllowed, "`signed: true` needs an append-only entity; '\(contract.name)' is \(sync.conflict.rawValue)",
                    at: contract.signedLocation ?? contract.location,
                    help: "remove `signed`, or make the entity `conflict: append_only` (its rows never change once written)"
                )
            } else if sync.direction == .down {
                diagnostics.error(
                    .signedNotAllowed, "`signed: true` on a contract devices never write (direction `down`)",
                    at: contract.signedLocation ?? contract.location, help: "remove `signed`"
                )
            }
        }
        if let scope, scope.access == .read, sync.direction != .down {
            diagnostics.error(
                .policyDirectionMismatch,
                "scope '\(scope.name)' is read-only for devices, but direction `\(sync.direction.rawValue)` lets them write",
                at: contract.scopeLocation,
                help: "use `direction: down` with `conflict: server_authoritative`, or a scope with `access: read_write`"
            )
        }
    }

    // MARK: Fields

    private mutating func checkFields(_ contract: Contract) {
        var seen: [String: Field] = [:]
        for field in contract.fields + contract.localFields {
            checkFieldName(field)
            if let first = seen[field.name] {
                diagnostics.error(
                    .duplicateField, "field '\(field.name)' is declared twice in '\(contract.name)'", at: field.location,
                    help: field.isLocal != first.isLocal
                        ? "a local field cannot share a name with a synced field; rename one"
                        : "rename or remove one of them",
                    notes: [.init("first declared here", at: first.location)]
                )
            } else {
                seen[field.name] = field
            }
            if contract.kind == .event, Names.envelopeFields.contains(field.name) {
                diagnostics.error(
                    .envelopeFieldShadowed, "field '\(field.name)' is already part of every event's envelope",
                    at: field.location,
                    help: "remove it (the envelope carries \(Names.envelopeFields.joined(separator: ", "))) or rename it"
                )
            }
            if field.isLocal, field.hasValidType, !field.type.isOptional, field.defaultValue == nil {
                diagnostics.error(
                    .localFieldNeedsDefault,
                    "local field '\(field.name)' is required but has no default; rows arriving from the server cannot fill it",
                    at: field.location, help: "add a `default:`, or make the type `\(field.type.type.spelling)?`"
                )
            }
            if let rename = field.renamedFrom {
                checkRename(rename, of: field, in: contract, names: Set(contract.fields.map(\.name)))
            }
        }
    }

    /// Members every generated type has; a field must not generate the same Swift name.
    static let generatedMemberNames: Set<String> = [
        "contractPrimaryKey", "descriptor", "hashValue", "init", "encode", "fieldName", "wireValue",
    ]
    /// Nested types every generated type may have; an enum field must not generate the same name.
    static let generatedNestedTypes: Set<String> = ["CodingKeys", "LocalState", "Envelope", "Change"]

    private mutating func checkGeneratedNames(_ contract: Contract) {
        var properties: [String: Field] = [:]
        var nestedTypes: [String: Field] = [:]
        for field in contract.fields + contract.localFields {
            let property = Names.camelCase(field.name)
            if let first = properties[property], first.name != field.name {
                diagnostics.error(
                    .generatedNameClash, "fields '\(first.name)' and '\(field.name)' both become the Swift property '\(property)'",
                    at: field.location, help: "rename one of them", notes: [.init("'\(first.name)' declared here", at: first.location)]
                )
            }
            properties[property] = properties[property] ?? field
            if Self.generatedMemberNames.contains(property) {
                diagnostics.error(
                    .generatedNameClash, "field '\(field.name)' becomes '\(property)', which every generated type already has",
                    at: field.location, help: "choose another name, for example '\(field.name)_value'"
                )
            }
            guard field.type.type.isEnumeration else { continue }
            let typeName = Names.upperCamelCase(field.name)
            if Self.generatedNestedTypes.contains(typeName) || typeName == contract.swiftName {
                diagnostics.error(
                    .generatedNameClash, "enum field '\(field.name)' would generate the nested type '\(typeName)', which is taken",
                    at: field.location, help: "rename the field"
                )
            } else if let first = nestedTypes[typeName], first.name != field.name {
                diagnostics.error(
                    .generatedNameClash, "enum fields '\(first.name)' and '\(field.name)' both generate the type '\(typeName)'",
                    at: field.location, help: "rename one of them"
                )
            }
            nestedTypes[typeName] = nestedTypes[typeName] ?? field
        }
    }

    private mutating func checkFieldName(_ field: Field) {
        let name = field.name
        if EngineNames.reservedColumns.contains(name) {
            diagnostics.error(
                .reservedName, "field name '\(name)' is a column the sync engines add to contract tables",
                at: field.location, help: "rename it to '\(Names.suggestedSnakeCase(name))'"
            )
        } else if name.hasPrefix("_") {
            diagnostics.error(
                .reservedName, "field name '\(name)' starts with an underscore; those names are kept for sync metadata",
                at: field.location, help: "rename it to '\(Names.suggestedSnakeCase(name))'"
            )
        } else if !Names.isSnakeCase(name) {
            diagnostics.error(
                .invalidIdentifier, "field name '\(name)' is not lower snake case", at: field.location,
                help: "rename it to '\(Names.suggestedSnakeCase(name))'"
            )
        } else if Names.sqlKeywords.contains(name) {
            diagnostics.error(
                .reservedWord, "field name '\(name)' is an SQL keyword", at: field.location,
                help: "choose a more specific name, for example '\(name)_value'"
            )
        } else if Names.swiftKeywords.contains(Names.camelCase(name)) {
            diagnostics.error(
                .reservedWord, "field name '\(name)' is a Swift keyword", at: field.location,
                help: "choose a more specific name, for example '\(name)_value'"
            )
        } else if name.count > Names.maximumIdentifierLength {
            diagnostics.error(
                .invalidIdentifier, "field name '\(name)' is longer than \(Names.maximumIdentifierLength) characters",
                at: field.location, help: "shorten it; PostgreSQL cuts identifiers at 63 characters"
            )
        }
    }

    private mutating func checkRename(_ rename: Rename, of field: Field, in contract: Contract, names: Set<String>) {
        if !Names.isSnakeCase(rename.name) {
            diagnostics.error(
                .invalidRename, "renamed_from '\(rename.name)' is not a valid field name", at: rename.location,
                help: "write the field's previous name exactly as it was"
            )
        } else if rename.name == field.name || names.contains(rename.name) {
            diagnostics.error(
                .invalidRename, "renamed_from '\(rename.name)' names a field that exists in this version", at: rename.location,
                help: "a rename moves a field to a new name; remove `renamed_from` or fix the old name"
            )
        }
        if rename.version > contract.version {
            diagnostics.error(
                .invalidRename, "the rename takes effect in version \(rename.version), after the current version \(contract.version)",
                at: rename.location, help: "bump the contract to `version: \(rename.version)` or fix the rename's version"
            )
        } else if rename.version <= field.since {
            diagnostics.error(
                .invalidRename, "field '\(field.name)' is added in version \(field.since), so it cannot be renamed in version \(rename.version)",
                at: rename.location, help: "a renamed field existed under its old name before; check `since` and the rename's version"
            )
        }
    }

    // MARK: Keys

    private mutating func checkKeys(_ contract: Contract) {
        let primaryKeys = contract.fields.filter(\.isPrimaryKey)
        let versionFields = contract.fields.filter(\.isVersionField)
        if contract.kind == .event {
            for field in primaryKeys {
                diagnostics.error(
                    .invalidPrimaryKey, "events are identified by their envelope's event_id; '\(field.name)' cannot be a primary key",
                    at: field.location, help: "remove `primary_key` from '\(field.name)'"
                )
            }
            for field in versionFields {
                diagnostics.error(
                    .invalidVersionField, "events are immutable; '\(field.name)' cannot be a version field",
                    at: field.location, help: "remove `version_field` from '\(field.name)'"
                )
            }
            return
        }
        if primaryKeys.isEmpty {
            diagnostics.error(
                .missingPrimaryKey, "entity '\(contract.name)' has no primary key", at: contract.location,
                help: "mark one field `primary_key: true`, for example `id: { type: id, primary_key: true }`"
            )
        } else if primaryKeys.count > 1 {
            for field in primaryKeys.dropFirst() {
                diagnostics.error(
                    .multiplePrimaryKeys, "entity '\(contract.name)' has more than one primary key", at: field.location,
                    help: "keep `primary_key: true` on one field; use a unique index for the others",
                    notes: [.init("first primary key here", at: primaryKeys[0].location)]
                )
            }
        }
        for field in primaryKeys where field.hasValidType {
            switch field.type.type {
            case .id, .uuid, .string, .int: break
            default:
                diagnostics.error(
                    .invalidPrimaryKey, "primary key '\(field.name)' has type `\(field.type.type.spelling)`; keys are id, uuid, string or int",
                    at: field.typeLocation, help: "use `type: id` (a ULID or other text id made on the device)"
                )
            }
            if field.type.isOptional {
                diagnostics.error(
                    .invalidPrimaryKey, "primary key '\(field.name)' cannot be optional", at: field.typeLocation,
                    help: "remove the `?` from its type"
                )
            }
            if field.isEncrypted {
                diagnostics.error(
                    .encryptedNotAllowed, "primary key '\(field.name)' cannot be encrypted: rows are looked up by it",
                    at: field.location, help: "remove `encrypted: true` from the key; encrypt the sensitive fields instead"
                )
            }
        }
        for field in versionFields.dropFirst() {
            diagnostics.error(
                .multipleVersionFields, "entity '\(contract.name)' has more than one version field", at: field.location,
                help: "keep `version_field: true` on one field",
                notes: [.init("first version field here", at: versionFields[0].location)]
            )
        }
        for field in versionFields where field.hasValidType {
            if field.type.type != .timestamp && field.type.type != .int {
                diagnostics.error(
                    .invalidVersionField, "version field '\(field.name)' has type `\(field.type.type.spelling)`; it must be a timestamp or an int",
                    at: field.typeLocation, help: "use `type: timestamp` (for example updated_at) or `type: int`"
                )
            } else if field.type.isOptional {
                diagnostics.error(
                    .invalidVersionField, "version field '\(field.name)' cannot be optional", at: field.typeLocation,
                    help: "remove the `?`; every row has a version"
                )
            }
            if field.isEncrypted {
                diagnostics.error(
                    .encryptedNotAllowed, "version field '\(field.name)' cannot be encrypted: rows are ordered by it",
                    at: field.location, help: "remove `encrypted: true`"
                )
            }
        }
    }

    // MARK: References

    private mutating func checkReferences(_ contract: Contract) {
        for field in contract.fields + contract.localFields {
            var target: String?
            if case .ref(let name) = field.type.type { target = name }
            if case .list(.ref(let name)) = field.type.type { target = name }
            guard let target else { continue }
            checkEntityExists(target, at: field.typeLocation, what: "ref<\(target)>")
        }
        if let appliesTo = contract.appliesTo {
            checkEntityExists(appliesTo, at: contract.appliesToLocation ?? contract.location, what: "applies_to")
        }
    }

    @discardableResult
    private mutating func checkEntityExists(_ name: String, at location: SourceLocation, what: String) -> Contract? {
        if let target = set.contract(named: name) {
            if target.kind == .entity { return target }
            diagnostics.error(
                .unknownReference, "\(what) names the event '\(name)'; only entities can be referenced", at: location,
                help: "refer to the entity the event applies to"
            )
            return nil
        }
        let guess = Names.closest(to: name, among: set.entities.map(\.name))
        diagnostics.error(
            .unknownReference, "\(what) names '\(name)', which is not a contract", at: location,
            help: guess.map { "did you mean '\($0)'?" } ?? "add contracts/entities/\(Names.snakeCase(name)).yaml, or fix the name"
        )
        return nil
    }

    private mutating func checkRelations(_ contract: Contract) {
        var seen: [String: SourceLocation] = [:]
        for relation in contract.relations {
            if let first = seen[relation.name] {
                diagnostics.error(
                    .duplicateField, "relation '\(relation.name)' is declared twice", at: relation.location,
                    help: "rename one of them", notes: [.init("first declared here", at: first)]
                )
            }
            seen[relation.name] = relation.location
            guard let target = checkEntityExists(relation.target, at: relation.targetLocation, what: relation.kind.rawValue)
            else { continue }
            let holder = relation.kind == .hasMany ? target : contract
            guard let key = holder.field(named: relation.foreignKey) else {
                diagnostics.error(
                    .unknownForeignKey, "foreign_key '\(relation.foreignKey)' is not a field of '\(holder.name)'",
                    at: relation.foreignKeyLocation,
                    help: Names.closest(to: relation.foreignKey, among: holder.fields.map(\.name)).map { "did you mean '\($0)'?" }
                        ?? "add the field to '\(holder.name)' (for example `\(relation.foreignKey): ref<\(relation.kind == .hasMany ? contract.name : target.name)>`)"
                )
                continue
            }
            let owner = relation.kind == .hasMany ? contract : target
            if key.hasValidType, let ownerKey = owner.primaryKey, ownerKey.hasValidType,
                !Self.canHold(key.type.type, keyOf: owner, keyType: ownerKey.type.type)
            {
                diagnostics.error(
                    .foreignKeyTypeMismatch,
                    "foreign key '\(holder.name).\(key.name)' has type `\(key.type.type.spelling)`, but it must hold the primary key of '\(owner.name)' (\(ownerKey.type.type.spelling))",
                    at: relation.foreignKeyLocation,
                    help: "declare it as `\(key.name): ref<\(owner.name)>`"
                )
            }
            if key.isEncrypted {
                diagnostics.error(
                    .encryptedNotAllowed, "foreign key '\(key.name)' cannot be encrypted: related rows are joined on it",
                    at: relation.foreignKeyLocation, help: "remove `encrypted: true` from '\(holder.name).\(key.name)'"
                )
            }
        }
    }

    /// Whether a field of type `type` can hold the primary key of `owner`.
    private static func canHold(_ type: FieldType, keyOf owner: Contract, keyType: FieldType) -> Bool {
        if case .ref(let target) = type { return target == owner.name }
        if type == keyType { return true }
        // Text ids and strings are interchangeable on the wire and in SQLite.
        let textual: Set<FieldType> = [.id, .string]
        return textual.contains(type) && textual.contains(keyType)
    }

    private mutating func checkIndexes(_ contract: Contract) {
        let allFields = contract.fields + contract.localFields
        var seen: [[String]: SourceLocation] = [:]
        for index in contract.indexes {
            for name in index.fields {
                guard let field = allFields.first(where: { $0.name == name }) else {
                    diagnostics.error(
                        .unknownIndexField, "index names '\(name)', which is not a field of '\(contract.name)'",
                        at: index.location,
                        help: Names.closest(to: name, among: allFields.map(\.name)).map { "did you mean '\($0)'?" }
                            ?? "index fields of this entity only"
                    )
                    continue
                }
                if !field.hasValidType { continue }
                if field.isEncrypted {
                    diagnostics.error(
                        .encryptedNotAllowed, "index on '\(name)', which is encrypted; ciphertext cannot be searched",
                        at: index.location, help: "remove the index, or store the field unencrypted"
                    )
                } else if !field.type.type.isIndexable {
                    diagnostics.error(
                        .unknownIndexField, "'\(name)' has type `\(field.type.type.spelling)` and cannot be indexed",
                        at: index.location,
                        help: field.type.type == .file
                            ? "rows are not looked up by a file reference; index a field that names what you look up"
                            : "index scalar fields only"
                    )
                }
            }
            if let first = seen[index.fields] {
                diagnostics.error(
                    .duplicateIndex, "index on [\(index.fields.joined(separator: ", "))] is declared twice", at: index.location,
                    help: "remove one of them", notes: [.init("first declared here", at: first)]
                )
            } else {
                seen[index.fields] = index.location
            }
        }
    }
}
