import ContractRuntime
import Foundation

/// Turns parsed YAML into the contract model, reporting every problem it can see in one file.
/// Problems that need other files (references, scopes, duplicate names) are the validator's.
/// The keys each mapping accepts are ``ContractGrammar``'s.
struct ContractDecoder {
    var diagnostics = DiagnosticCollector()

    // MARK: Manifest

    mutating func decodeManifest(_ root: YAMLNode, file: String) -> Manifest? {
        guard let reader = MappingReader(root, context: "manifest", diagnostics: &diagnostics) else { return nil }
        reader.rejectUnknownKeys(known: ContractGrammar.manifest.keyNames, diagnostics: &diagnostics)
        var scopes: [Scope] = []
        if let scopesNode = reader.require(
            "scopes", help: "declare the sync scopes, for example `scopes: { user: { key: \"progress:user:{user_id}\" } }`",
            diagnostics: &diagnostics
        ), let scopesReader = MappingReader(scopesNode, context: "scopes", diagnostics: &diagnostics) {
            for entry in scopesReader.entries {
                guard let name = entry.key.scalar else { continue }
                if !Names.isSnakeCase(name) {
                    diagnostics.error(
                        .invalidIdentifier, "scope name '\(name)' is not lower snake case", at: entry.key.location,
                        help: "rename it to '\(Names.suggestedSnakeCase(name))'"
                    )
                }
                guard let scopeReader = MappingReader(entry.value, context: "scope '\(name)'", diagnostics: &diagnostics)
                else { continue }
                scopeReader.rejectUnknownKeys(known: ContractGrammar.scope.keyNames, diagnostics: &diagnostics)
                let key = scopeReader.require(
                    "key", help: "give the scope key template, for example `key: \"ops:team:{team_id}\"`",
                    diagnostics: &diagnostics
                ).flatMap { ScalarReader.string($0, "a scope key", diagnostics: &diagnostics) }
                let access =
                    scopeReader.value("access").flatMap {
                        ScalarReader.oneOf($0, "the scope's access", Scope.Access.self, diagnostics: &diagnostics)
                    } ?? .readWrite
                let doc = scopeReader.value("doc").flatMap { ScalarReader.string($0, "doc", diagnostics: &diagnostics) }
                if let key {
                    let scope = Scope(name: name, key: key, access: access, doc: doc, location: entry.key.location)
                    for placeholder in scope.placeholders where ScopePlaceholder(rawValue: placeholder) == nil {
                        diagnostics.error(
                            .invalidValue, "scope key placeholder '{\(placeholder)}' is not known", at: entry.value.location,
                            help: "placeholders come from the device token: {tenant_id}, {user_id}, {team_id} or {device_id}"
                        )
                    }
                    scopes.append(scope)
                }
            }
        }
        var compatibility = CompatibilityDefaults(entities: .full, events: .backward)
        if let compatibilityNode = reader.value("compatibility"),
            let compatibilityReader = MappingReader(compatibilityNode, context: "compatibility block", diagnostics: &diagnostics)
        {
            compatibilityReader.rejectUnknownKeys(known: ContractGrammar.compatibilityDefaults.keyNames, diagnostics: &diagnostics)
            if let node = compatibilityReader.value("entities"),
                let mode = ScalarReader.oneOf(node, "the entities' compatibility", CompatibilityMode.self, diagnostics: &diagnostics)
            {
                compatibility.entities = mode
            }
            if let node = compatibilityReader.value("events"),
                let mode = ScalarReader.oneOf(node, "the events' compatibility", CompatibilityMode.self, diagnostics: &diagnostics)
            {
                compatibility.events = mode
            }
        }
        let subscriptions = reader.value("subscriptions").map { decodeSubscriptions($0) } ?? []
        return Manifest(file: file, scopes: scopes, compatibility: compatibility, subscriptions: subscriptions)
    }

    // MARK: Contracts

    mutating func decodeContract(_ root: YAMLNode, file: String) -> Contract? {
        guard let mapping = root.mapping else {
            diagnostics.error(
                .notAContract, "a contract file must be a mapping, found \(root.kindDescription)", at: root.location,
                help: "start the file with `entity: Name` or `event: Name`"
            )
            return nil
        }
        let hasEntity = mapping.contains { $0.key.scalar == "entity" }
        let hasEvent = mapping.contains { $0.key.scalar == "event" }
        if hasEntity == hasEvent {
            diagnostics.error(
                .notAContract,
                hasEntity ? "a contract is either an entity or an event, not both" : "this file declares neither an entity nor an event",
                at: root.location, help: "start the file with `entity: Name` or `event: Name`"
            )
            return nil
        }
        let kind: Contract.Kind = hasEntity ? .entity : .event
        guard let reader = MappingReader(root, context: kind.rawValue, diagnostics: &diagnostics) else { return nil }
        reader.rejectUnknownKeys(
            known: kind == .entity ? ContractGrammar.entity.keyNames : ContractGrammar.event.keyNames,
            misplaced: kind == .entity
                ? ["applies_to": "only events have `applies_to`; an entity is what events apply to"]
                : [
                    "local": "events have no client-only columns; put local state on an entity",
                    "relations": "events refer to entities with `ref<Entity>` fields",
                    "indexes": "events are looked up by id; index the entity they apply to",
                ],
            diagnostics: &diagnostics
        )

        let nameNode = reader.value(kind.rawValue)!
        let name = ScalarReader.string(nameNode, "the contract name", diagnostics: &diagnostics) ?? ""
        if !name.isEmpty, !Names.isUpperCamelCase(name) {
            diagnostics.error(
                .invalidIdentifier, "contract name '\(name)' is not upper camel case", at: nameNode.location,
                help: "rename it to '\(Names.suggestedTypeName(name))'"
            )
        }
        var swiftName = name
        if let node = reader.value("swift_name"), let text = ScalarReader.string(node, "swift_name", diagnostics: &diagnostics) {
            if Names.isUpperCamelCase(text) {
                swiftName = text
            } else {
                diagnostics.error(
                    .invalidIdentifier, "swift_name '\(text)' is not an upper camel case Swift type name",
                    at: node.location, help: "write it as '\(Names.suggestedTypeName(text))'"
                )
            }
        }
        if Names.shadowedTypeNames.contains(swiftName) || Names.swiftKeywords.contains(swiftName) {
            diagnostics.error(
                .shadowsSwiftType,
                "the generated type '\(swiftName)' would shadow Swift's own '\(swiftName)' in every file that imports Contracts",
                at: reader.value("swift_name")?.location ?? nameNode.location,
                help: "keep the contract name and add `swift_name: \(name)Record` (any name that is not taken)"
            )
        }

        let summary: String
        if let node = reader.value("summary"), let text = ScalarReader.string(node, "summary", diagnostics: &diagnostics) {
            summary = text.trimmingCharacters(in: .whitespacesAndNewlines)
        } else {
            summary = ""
            if reader.value("summary") == nil {
                diagnostics.warning(
                    .missingSummary, "\(kind.rawValue) '\(name)' has no summary", at: nameNode.location,
                    help: "add `summary:` with one sentence; it becomes the generated type's doc comment"
                )
            }
        }
        let doc = reader.value("doc").flatMap { ScalarReader.string($0, "doc", diagnostics: &diagnostics) }
            .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }

        let versionNode = reader.require(
            "version", help: "add `version: 1` for a new contract", diagnostics: &diagnostics
        )
        let version = versionNode.flatMap { ScalarReader.int($0, "version", diagnostics: &diagnostics) } ?? 1
        let oldestNode = reader.value("oldest_supported")
        let oldestSupported =
            oldestNode.flatMap {
                ScalarReader.int($0, "oldest_supported", diagnostics: &diagnostics)
            } ?? 1

        let table: String
        let tableNode = reader.value("table")
        if let tableNode {
            table = ScalarReader.string(tableNode, "the table name", diagnostics: &diagnostics) ?? ""
        } else if kind == .event {
            table = Names.snakeCase(name) + "_events"
        } else {
            _ = reader.require(
                "table", help: "name the SQLite table, for example `table: \(Names.snakeCase(name))s`",
                diagnostics: &diagnostics
            )
            table = ""
        }

        let scopeNode = reader.require(
            "scope", help: "name one of the scopes declared in contracts/contracts.yaml, for example `scope: user`",
            diagnostics: &diagnostics
        )
        let scope = scopeNode.flatMap { ScalarReader.string($0, "the scope", diagnostics: &diagnostics) } ?? ""

        let sync = decodeSync(reader.value("sync"), kind: kind, at: reader.keyLocation("sync") ?? nameNode.location)

        var fields: [Field] = []
        if let fieldsNode = reader.require(
            "fields", help: "list the fields, for example `fields: { id: { type: id, primary_key: true } }`",
            diagnostics: &diagnostics
        ) {
            fields = decodeFields(fieldsNode, local: false)
        }
        var localFields: [Field] = []
        if kind == .entity, let localNode = reader.value("local"), !localNode.isNull {
            localFields = decodeFields(localNode, local: true)
        }
        let relations = kind == .entity ? decodeRelations(reader.value("relations")) : []
        let indexes = kind == .entity ? decodeIndexes(reader.value("indexes")) : []

        var appliesTo: String?
        if kind == .event, let node = reader.value("applies_to"), !node.isNull {
            appliesTo = ScalarReader.string(node, "applies_to", diagnostics: &diagnostics)
        }
        let compatibility = reader.value("compatibility").flatMap {
            ScalarReader.oneOf($0, "the contract's compatibility", CompatibilityMode.self, diagnostics: &diagnostics)
        }

        var contract = Contract(
            kind: kind, name: name, swiftName: swiftName, summary: summary, doc: doc, version: version,
            oldestSupported: oldestSupported, table: table, scope: scope, sync: sync, fields: fields,
            localFields: localFields, relations: relations, indexes: indexes, appliesTo: appliesTo,
            compatibility: compatibility, file: file, location: nameNode.location,
            versionLocation: versionNode?.location ?? nameNode.location, oldestSupportedLocation: oldestNode?.location,
            scopeLocation: scopeNode?.location ?? nameNode.location, appliesToLocation: reader.value("applies_to")?.location,
            tableLocation: tableNode?.location ?? nameNode.location
        )
        if let node = reader.value("max_bytes") {
            contract.maxBytes = decodeSize(node, key: "max_bytes", largest: RowSize.ceilingBytes, leftOut: "the default")
            contract.maxBytesLocation = reader.keyLocation("max_bytes")
        }
        if let node = reader.value("signed"), let signed = ScalarReader.bool(node, "signed", diagnostics: &diagnostics) {
            contract.isSigned = signed
            contract.signedLocation = reader.keyLocation("signed")
        }
        checkFieldsFitRow(contract)
        if let node = reader.value("allow") {
            contract.allowances = decodeAllowances(node, contractLevel: true)
        }
        return contract
    }

    /// A field limit the author wrote (`max_bytes`, or a `max_length` that raises the default)
    /// must fit the contract's row limit: a larger value could never be stored. The plain
    /// default is not checked: a contract may well keep its rows smaller than 256kB.
    private mutating func checkFieldsFitRow(_ contract: Contract) {
        let rowLimit = contract.effectiveMaxBytes
        let rowText = ContractSnapshot.sizeText(rowLimit)
        let written = contract.maxBytes != nil ? "its contract's max_bytes, \(rowText)" : "its contract's default row limit, \(rowText)"
        for field in contract.fields where field.hasValidType {
            guard let limit = field.storedMaxBytes, limit > rowLimit,
                field.maxBytes != nil || limit > FieldDescriptor.defaultMaximumBytes
            else { continue }
            let source = field.maxBytes != nil ? "max_bytes \(ContractSnapshot.sizeText(limit))" : "\(limit) bytes by its max_length"
            diagnostics.error(
                .maxBytesAboveRowLimit, "field '\(field.name)' may take more bytes (\(source)) than \(written)",
                at: field.maxBytesLocation ?? field.location,
                help: contract.maxBytes == nil
                    ? "a row takes at most \(ContractSnapshot.sizeText(RowSize.ceilingBytes)); lower the field's max_length, or give it a smaller `max_bytes`"
                    : "raise the contract's `max_bytes` (at most \(ContractSnapshot.sizeText(RowSize.ceilingBytes))) or lower the field's",
                notes: contract.maxBytesLocation.map { [.init("the row limit is set here", at: $0)] } ?? []
            )
        }
    }

    // MARK: Allowances

    /// `allow: [{ rule: RULE_ID, reason: "...", until: YYYY-MM-DD }]`. Whether the rule exists and
    /// the date is still ahead is the validator's question; here only the shape is checked.
    private mutating func decodeAllowances(_ node: YAMLNode, contractLevel: Bool) -> [Allowance] {
        let example = "write `allow: [{ rule: FIELD_REMOVED, reason: \"why this is safe\", until: 2026-12-31 }]`"
        guard let items = node.sequence else {
            diagnostics.error(
                .invalidAllowance, "`allow` must be a list of allowances, found \(node.kindDescription)", at: node.location,
                help: example
            )
            return []
        }
        var allowances: [Allowance] = []
        for item in items {
            guard let reader = MappingReader(item, context: "allowance", diagnostics: &diagnostics) else { continue }
            reader.rejectUnknownKeys(
                known: contractLevel ? ContractGrammar.contractAllowance.keyNames : ContractGrammar.fieldAllowance.keyNames,
                misplaced: contractLevel ? [:] : ["field": "an allowance on a field applies to that field; remove `field`"],
                diagnostics: &diagnostics
            )
            let rule = reader.require("rule", help: example, diagnostics: &diagnostics).flatMap {
                ScalarReader.string($0, "the allowance's rule", diagnostics: &diagnostics)
            }
            let reasonNode = reader.value("reason")
            let reason = reasonNode.flatMap { $0.isNull ? nil : $0.scalar }?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
            if reason.isEmpty {
                diagnostics.error(
                    .invalidAllowance, "an allowance needs a reason", at: reasonNode?.location ?? item.location,
                    help: "say why breaking this rule is safe here: `reason: \"no device below version 3 reads this field\"`"
                )
            }
            let until = reader.require(
                "until", help: "give the last day the allowance holds, for example `until: 2026-12-31`", diagnostics: &diagnostics
            ).flatMap { ScalarReader.string($0, "until", diagnostics: &diagnostics) }
            if let until, CalendarDate(until) == nil {
                diagnostics.error(
                    .invalidAllowance, "until '\(until)' is not a date", at: reader.value("until")!.location,
                    help: "write the date as YYYY-MM-DD"
                )
            }
            let field = reader.value("field").flatMap { ScalarReader.string($0, "field", diagnostics: &diagnostics) }
            guard let rule, let until, !reason.isEmpty, CalendarDate(until) != nil else { continue }
            allowances.append(Allowance(rule: RuleID(rule), reason: reason, until: until, field: field, location: item.location))
        }
        return allowances
    }

    // MARK: Sync

    private mutating func decodeSync(_ node: YAMLNode?, kind: Contract.Kind, at location: SourceLocation) -> SyncPolicy {
        var policy = SyncPolicy(
            direction: kind == .event ? .up : .both, conflict: kind == .event ? .appendOnly : .lastWriterWins,
            tombstones: kind == .entity, retentionSeconds: nil, priority: .normal, location: location
        )
        guard let node else {
            if kind == .entity {
                diagnostics.error(
                    .missingKey, "the entity is missing the required key 'sync'", at: location,
                    help: "say how rows sync, for example `sync: { direction: both, conflict: last_writer_wins }`"
                )
            }
            return policy
        }
        guard let reader = MappingReader(node, context: "sync block", diagnostics: &diagnostics) else {
            return policy
        }
        let eventOnlyHelp = "events are immutable and kept until the server folds them; only `direction` (and `conflict: append_only`) apply"
        reader.rejectUnknownKeys(
            known: kind == .entity ? ContractGrammar.entitySync.keyNames : ContractGrammar.eventSync.keyNames,
            misplaced: kind == .entity
                ? [:] : ContractGrammar.keys(of: ContractGrammar.entitySync, notIn: ContractGrammar.eventSync, help: eventOnlyHelp),
            diagnostics: &diagnostics
        )
        if kind == .entity {
            if reader.value("direction") == nil {
                diagnostics.error(
                    .missingKey, "the sync block is missing the required key 'direction'", at: node.location,
                    help: "say which way rows travel: `direction: down`, `up` or `both`"
                )
            }
            if reader.value("conflict") == nil {
                diagnostics.error(
                    .missingKey, "the sync block is missing the required key 'conflict'", at: node.location,
                    help: "choose a policy: append_only, server_authoritative, last_writer_wins, version_check or field_merge"
                )
            }
        }
        if let value = reader.value("direction"),
            let direction = ScalarReader.oneOf(value, "direction", SyncDirection.self, diagnostics: &diagnostics)
        {
            policy.direction = direction
        }
        if let value = reader.value("conflict"),
            let conflict = ScalarReader.oneOf(value, "the conflict policy", ConflictPolicy.self, diagnostics: &diagnostics)
        {
            policy.conflict = conflict
        }
        if let value = reader.value("tombstones"),
            let tombstones = ScalarReader.bool(value, "tombstones", diagnostics: &diagnostics)
        {
            policy.tombstones = tombstones
        }
        if let value = reader.value("priority"),
            let priority = ScalarReader.oneOf(value, "priority", SyncPriority.self, diagnostics: &diagnostics)
        {
            policy.priority = priority
        }
        if let value = reader.value("retention") {
            policy.retentionSeconds = decodeDuration(value)
        }
        if let value = reader.value("max_rows") {
            policy.maxRows = decodeMaxRows(value)
        }
        if let value = reader.value("max_row_bytes") {
            policy.maxRowBytes = decodeSize(value, key: "max_row_bytes", largest: Self.largestSize, leftOut: "no limit")
        }
        policy.location = node.location
        return policy
    }

    /// `max_rows`: a whole number from 1.
    private mutating func decodeMaxRows(_ node: YAMLNode) -> Int? {
        let range = 1...Int(Int32.max)
        guard case .scalar(let text, .plain) = node.content, let value = Int(text), range.contains(value) else {
            let found = (node.isNull ? nil : node.scalar).map { "'\($0)'" } ?? node.kindDescription
            diagnostics.error(
                .invalidValue, "max_rows must be a whole number from 1 to \(range.upperBound), found \(found)", at: node.location,
                help: "write the most rows a device keeps, without quotes, for example `max_rows: 50`; leave the key out for no limit"
            )
            return nil
        }
        return value
    }

    /// The largest size `max_row_bytes` takes: 1000 GB.
    static let largestSize = 1_000_000_000_000

    /// A size (`max_row_bytes`, `max_bytes`): a whole number of bytes, optionally with a decimal
    /// unit (`800B`, `64kB`, `10MB`, `1GB`), from 1 to `largest`. Binary units and other spellings
    /// are refused with the spelling meant. `leftOut` says what leaving the key out means; `nil`
    /// for a required key (a file's `max_bytes`).
    private mutating func decodeSize(_ node: YAMLNode, key: String, largest: Int, leftOut: String?) -> Int? {
        let rangeHelp = "give a size from 1B to \(ContractSnapshot.sizeText(largest))"
        let help = "write a whole number of bytes, optionally with a decimal unit: `500000`, `500kB`, `10MB`, `1GB`"
        guard let text = node.scalar, !node.isNull else {
            diagnostics.error(.invalidValue, "\(key) must be a size, found \(node.kindDescription)", at: node.location, help: help)
            return nil
        }
        let digits = text.prefix { $0.isASCII && $0.isNumber }
        let unit = String(text.dropFirst(digits.count))
        let units: [String: Int] = ["": 1, "B": 1, "kB": 1_000, "MB": 1_000_000, "GB": 1_000_000_000]
        guard let multiplier = units[unit], let amount = Int(digits), digits.first != "0" || digits == "0" else {
            let meant =
                units[unit] != nil
                ? nil : units.keys.first { !$0.isEmpty && $0.lowercased() == unit.trimmingCharacters(in: .whitespaces).lowercased() }
            let binary = ["kib", "mib", "gib"].contains(unit.trimmingCharacters(in: .whitespaces).lowercased())
            diagnostics.error(
                .invalidValue, "\(key) '\(text)' is not a size", at: node.location,
                help: !digits.isEmpty && meant != nil
                    ? "did you mean '\(digits)\(meant!)'? (units are B, kB, MB and GB, written without a space)"
                    : binary ? "binary units are not accepted; \(help)" : help
            )
            return nil
        }
        guard amount >= 1 else {
            diagnostics.error(
                .invalidValue, "\(key) must be at least 1 byte, found '\(text)'", at: node.location,
                help: leftOut.map { "leave the key out for \($0)" } ?? rangeHelp)
            return nil
        }
        guard amount <= largest / multiplier else {
            let largestText = ContractSnapshot.sizeText(largest)
            diagnostics.error(
                .invalidValue, "\(key) '\(text)' is above the largest size, \(largestText)", at: node.location,
                help: largest == Self.largestSize
                    ? leftOut.map { "leave the key out for \($0)" } ?? rangeHelp
                    : "a row travels whole in one push, which the server takes up to 5 MiB; keep larger files out of rows (upload them, and store their key)"
            )
            return nil
        }
        return amount * multiplier
    }

    /// `30d`, `12h`, `90m`, `45s`, `2w`, or `forever` (nil).
    private mutating func decodeDuration(_ node: YAMLNode) -> Int? {
        let help = "write a duration such as `30d`, `12h`, `2w`, or `forever`"
        guard let text = node.scalar, !node.isNull else {
            diagnostics.error(.invalidValue, "retention must be a duration", at: node.location, help: help)
            return nil
        }
        if text == "forever" { return nil }
        let units: [Character: Int] = ["s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800]
        guard let unit = text.last, let seconds = units[unit], let amount = Int(text.dropLast()), amount > 0,
            amount <= 36_500 * 86_400 / seconds
        else {
            diagnostics.error(.invalidValue, "retention '\(text)' is not a duration", at: node.location, help: help)
            return nil
        }
        return amount * seconds
    }

    // MARK: Fields

    private mutating func decodeFields(_ node: YAMLNode, local: Bool) -> [Field] {
        let context = local ? "local fields" : "fields"
        guard let reader = MappingReader(node, context: context, diagnostics: &diagnostics) else { return [] }
        if reader.entries.isEmpty, !local {
            diagnostics.error(
                .missingKey, "a contract needs at least one field", at: node.location,
                help: "add fields, for example `id: { type: id, primary_key: true }`"
            )
        }
        var fields: [Field] = []
        for entry in reader.entries {
            guard let name = entry.key.scalar else { continue }
            if let field = decodeField(name: name, nameLocation: entry.key.location, entry.value, local: local) {
                fields.append(field)
            }
        }
        return fields
    }

    private mutating func decodeField(
        name: String, nameLocation: SourceLocation, _ node: YAMLNode, local: Bool
    ) -> Field? {
        var field = Field(name: name, type: TypeReference(.string), isLocal: local, location: nameLocation)
        // Shorthand: `title: string?`
        if case .scalar = node.content, !node.isNull {
            guard let type = decodeType(node.scalar!, at: node.location, values: nil, fallback: nil) else {
                field.hasValidType = false
                field.typeLocation = node.location
                return field
            }
            if case .enumeration = type.type {
                diagnostics.error(
                    .enumWithoutValues, "enum field '\(name)' has no values", at: node.location,
                    help: "write `\(name): { type: enum, values: [first, second] }`"
                )
                return nil
            }
            field.type = type
            field.typeLocation = node.location
            if type.type == .file, !refuseLocalFile(&field, local: local) {
                diagnostics.error(
                    .missingKey, "file field '\(name)' is missing the required keys 'max_bytes' and 'content_types'", at: node.location,
                    help: "write `\(name): { type: \(type.spelling), max_bytes: 10MB, content_types: [image/jpeg, image/png] }`"
                )
            }
            return field
        }
        let context = local ? "local field '\(name)'" : "field '\(name)'"
        guard let reader = MappingReader(node, context: context, diagnostics: &diagnostics) else { return nil }
        reader.rejectUnknownKeys(
            known: local ? ContractGrammar.localFieldDetails.keyNames : ContractGrammar.fieldDetails.keyNames,
            misplaced: local
                ? ContractGrammar.keys(of: ContractGrammar.fieldDetails, notIn: ContractGrammar.localFieldDetails) {
                    "local fields live on the device only; `\($0)` applies to synced fields"
                }
                : [:],
            diagnostics: &diagnostics
        )
        guard
            let typeNode = reader.require(
                "type", help: "add `type:` (one of \(TypeParser.knownSpellings.joined(separator: ", ")))",
                diagnostics: &diagnostics
            ), let typeText = ScalarReader.string(typeNode, "type", diagnostics: &diagnostics)
        else { return nil }

        guard let type = decodeType(typeText, at: typeNode.location, values: reader.value("values"), fallback: reader.value("fallback"))
        else {
            field.hasValidType = false
            field.typeLocation = typeNode.location
            field.isPrimaryKey = reader.value("primary_key").flatMap { ScalarReader.bool($0, "primary_key", diagnostics: &diagnostics) } ?? false
            field.isVersionField =
                reader.value("version_field").flatMap { ScalarReader.bool($0, "version_field", diagnostics: &diagnostics) } ?? false
            return field
        }
        field.type = type
        field.typeLocation = typeNode.location
        if type.type == .file, refuseLocalFile(&field, local: local) { return field }
        if reader.value("values") != nil, !type.type.isEnumeration {
            diagnostics.error(
                .unknownKey, "`values` only applies to enum fields", at: reader.keyLocation("values")!,
                help: "make the field `type: enum`, or remove `values`"
            )
        }
        if reader.value("fallback") != nil, !type.type.isEnumeration {
            diagnostics.error(
                .unknownKey, "`fallback` only applies to enum fields", at: reader.keyLocation("fallback")!,
                help: "make the field `type: enum`, or remove `fallback`"
            )
        }

        if let node = reader.value("default"), type.type == .file {
            field.defaultLocation = node.location
            diagnostics.error(
                .defaultTypeMismatch, "file field '\(name)' cannot have a default: a row names a file that was uploaded for it",
                at: node.location, help: type.isOptional ? "remove `default`; a missing file reads as null" : "remove `default`"
            )
        } else if let node = reader.value("default") {
            field.defaultLocation = node.location
            field.defaultValue = DefaultParser.parse(node, for: type, fieldName: name, diagnostics: &diagnostics)
        }
        if let node = reader.value("since") {
            field.since = ScalarReader.int(node, "since", diagnostics: &diagnostics) ?? 1
            field.sinceLocation = node.location
        }
        if let node = reader.value("renamed_from") {
            field.renamedFrom = decodeRename(node, fieldName: name)
        }
        if let node = reader.value("deprecated") {
            if case .scalar(let text, let style) = node.content, style != .plain || (text != "true" && text != "false") {
                let reason = text.trimmingCharacters(in: .whitespacesAndNewlines)
                if reason.isEmpty {
                    diagnostics.error(
                        .deprecatedWithoutReason, "field '\(name)' is deprecated without a reason", at: node.location,
                        help: "write why and what to use instead: `deprecated: \"use full_name\"`"
                    )
                }
                field.deprecated = reason.isEmpty ? "deprecated" : reason
            } else {
                diagnostics.error(
                    .deprecatedWithoutReason, "`deprecated` takes the reason, not a flag", at: node.location,
                    help: "write why and what to use instead: `deprecated: \"use full_name\"`"
                )
                field.deprecated = "deprecated"
            }
        }
        if let node = reader.value("encrypted") {
            field.isEncrypted = ScalarReader.bool(node, "encrypted", diagnostics: &diagnostics) ?? false
        }
        if let node = reader.value("server_only") {
            field.isServerOnly = ScalarReader.bool(node, "server_only", diagnostics: &diagnostics) ?? false
        }
        if let node = reader.value("max_length") {
            field.maxLength = ScalarReader.int(node, "max_length", range: 1...(1 << 30), diagnostics: &diagnostics)
            if !type.type.acceptsMaxLength {
                diagnostics.error(
                    .maxLengthNotApplicable, "`max_length` does not apply to type `\(type.type.spelling)`",
                    at: reader.keyLocation("max_length")!,
                    help: type.type == .file
                        ? "a file's size is limited by `max_bytes`; remove `max_length`"
                        : "`max_length` limits id, string, bytes and list fields; remove it here"
                )
            }
        }
        if let node = reader.value("max_bytes") {
            // A file's limit is the size of the file, which travels apart from the row.
            field.maxBytes =
                type.type == .file
                ? decodeSize(node, key: "max_bytes", largest: Self.largestSize, leftOut: nil)
                : decodeSize(node, key: "max_bytes", largest: RowSize.ceilingBytes, leftOut: "the default")
            field.maxBytesLocation = reader.keyLocation("max_bytes")
            if !type.type.acceptsMaxBytes {
                field.maxBytes = nil
                diagnostics.error(
                    .maxBytesNotApplicable, "`max_bytes` does not apply to type `\(type.type.spelling)`",
                    at: reader.keyLocation("max_bytes")!,
                    help:
                        "`max_bytes` limits string, json, bytes, list and file fields (an id is at most \(FieldCodec.maximumIDBytes) bytes); remove it here"
                )
            }
        }
        if type.type == .file {
            decodeFileRules(reader, into: &field)
        } else if reader.value("content_types") != nil {
            diagnostics.error(
                .unknownKey, "`content_types` only applies to file fields", at: reader.keyLocation("content_types")!,
                help: "make the field `type: file`, or remove `content_types`"
            )
        }
        if let node = reader.value("primary_key") {
            field.isPrimaryKey = ScalarReader.bool(node, "primary_key", diagnostics: &diagnostics) ?? false
        }
        if let node = reader.value("version_field") {
            field.isVersionField = ScalarReader.bool(node, "version_field", diagnostics: &diagnostics) ?? false
        }
        if let node = reader.value("allow") {
            field.allowances = decodeAllowances(node, contractLevel: false)
        }
        if let node = reader.value("doc") {
            field.doc = ScalarReader.string(node, "doc", diagnostics: &diagnostics)?
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        return field
    }

    /// Whether `field` is a local `file`, refused: files travel through the server, which a
    /// local field never reaches. The field is kept without a type, so no other rule reports it.
    private mutating func refuseLocalFile(_ field: inout Field, local: Bool) -> Bool {
        guard local else { return false }
        diagnostics.error(
            .unknownType, "local field '\(field.name)' cannot be a file: files travel through the server, and local fields never leave the device",
            at: field.typeLocation, help: "declare the file among the synced `fields`, or keep a path on the device as a `string`"
        )
        field.hasValidType = false
        return true
    }

    /// A file field's own keys: `max_bytes` (the largest file) and `content_types` (the types it
    /// accepts), both required, so every file field states what it takes.
    private mutating func decodeFileRules(_ reader: MappingReader, into field: inout Field) {
        let name = field.name
        if reader.value("max_bytes") == nil {
            diagnostics.error(
                .missingKey, "file field '\(name)' is missing the required key 'max_bytes'", at: field.location,
                help: "give the most bytes a file may have, for example `max_bytes: 10MB`"
            )
        }
        let example = "list what it accepts, for example `content_types: [image/jpeg, image/png]` (or `[\"*/*\"]` for any file)"
        guard let node = reader.value("content_types") else {
            diagnostics.error(
                .missingKey, "file field '\(name)' is missing the required key 'content_types'", at: field.location, help: example
            )
            return
        }
        field.contentTypesLocation = reader.keyLocation("content_types")
        guard let items = node.sequence else {
            diagnostics.error(
                .unexpectedNode, "`content_types` must be a list, found \(node.kindDescription)", at: node.location,
                help: node.scalar.map { "write `content_types: [\($0)]`" } ?? example
            )
            return
        }
        if items.isEmpty {
            diagnostics.error(
                .missingKey, "file field '\(name)' accepts no content type: `content_types` is empty", at: node.location, help: example
            )
        }
        var seen: [String: SourceLocation] = [:]
        for item in items {
            guard let text = ScalarReader.string(item, "a content type", diagnostics: &diagnostics) else { continue }
            guard Self.isContentTypePattern(text) else {
                let meant = FileReference.normalizedContentType(text).flatMap { Self.isContentTypePattern($0) ? $0 : nil }
                diagnostics.error(
                    .invalidContentType, "'\(text)' is not a content type", at: item.location,
                    help: meant.map { "did you mean '\($0)'? (content types are lowercase, without parameters)" }
                        ?? "write `type/subtype` (`image/png`), `type/*` (`image/*`) or `\"*/*\"`, in lowercase"
                )
                continue
            }
            if let first = seen[text] {
                diagnostics.error(
                    .duplicateContentType, "content type '\(text)' is listed twice", at: item.location,
                    help: "remove the second '\(text)'", notes: [.init("first listed here", at: first)]
                )
                continue
            }
            seen[text] = item.location
            field.contentTypes.append(text)
        }
    }

    /// A pattern `content_types` takes: the runtime's (``FileReference/isContentTypePattern(_:)``)
    /// with `*` only as a whole subtype or in `*/*` (`*/png` would match nothing).
    static func isContentTypePattern(_ text: String) -> Bool {
        guard FileReference.isContentTypePattern(text) else { return false }
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].contains("*") || text == "*/*" else { return false }
        return !parts[1].contains("*") || parts[1] == "*"
    }

    private mutating func decodeRename(_ node: YAMLNode, fieldName: String) -> Rename? {
        let help = "write `renamed_from: { name: old_name, version: N }`, N being the first version with the new name"
        guard let reader = MappingReader(node, context: "renamed_from of '\(fieldName)'", diagnostics: &diagnostics) else {
            return nil
        }
        reader.rejectUnknownKeys(known: ContractGrammar.rename.keyNames, diagnostics: &diagnostics)
        let name = reader.require("name", help: help, diagnostics: &diagnostics).flatMap {
            ScalarReader.string($0, "the old name", diagnostics: &diagnostics)
        }
        let version = reader.require("version", help: help, diagnostics: &diagnostics).flatMap {
            ScalarReader.int($0, "the rename's version", range: 2...Int(Int32.max), diagnostics: &diagnostics)
        }
        guard let name, let version else { return nil }
        return Rename(name: name, version: version, location: node.location)
    }

    private mutating func decodeType(
        _ text: String, at location: SourceLocation, values: YAMLNode?, fallback: YAMLNode?
    ) -> TypeReference? {
        switch TypeParser.parse(text) {
        case .success(var reference):
            if case .enumeration = reference.type {
                reference.type = decodeEnum(values: values, fallback: fallback, at: location)
            } else if case .list(.enumeration) = reference.type {
                reference.type = .list(decodeEnum(values: values, fallback: fallback, at: location))
            }
            return reference
        case .failure(.unknown(let name)):
            let guess = Names.closest(to: name, among: FieldType.scalarNames)
            diagnostics.error(
                .unknownType, "unknown type '\(name)'", at: location,
                help: guess.map { "did you mean '\($0)'?" }
                    ?? "use one of \(TypeParser.knownSpellings.joined(separator: ", ")), with `?` for optional"
            )
        case .failure(.nestedList):
            diagnostics.error(
                .unknownType, "lists of lists are not supported", at: location,
                help: "use `json` for nested structures, or a list of scalars"
            )
        case .failure(.listOfNonScalar(FieldType.file.spelling)):
            diagnostics.error(
                .unknownType, "a list cannot hold files", at: location,
                help: "declare one `file` field for each file a row names"
            )
        case .failure(.listOfNonScalar(let element)):
            diagnostics.error(
                .unknownType, "a list cannot hold \(element) values", at: location,
                help: "lists hold scalars (id, string, int, double, bool, timestamp, date, uuid, enum, ref); use `json` instead"
            )
        case .failure(.malformed):
            diagnostics.error(
                .unknownType, "'\(text)' is not a type", at: location,
                help: "write a type such as `string`, `int?`, `list<string>` or `ref<Unit>`"
            )
        }
        return nil
    }

    private mutating func decodeEnum(values: YAMLNode?, fallback: YAMLNode?, at location: SourceLocation) -> FieldType {
        var cases: [String] = []
        if let values, let items = values.sequence {
            var seen: [String: SourceLocation] = [:]
            for item in items {
                guard let value = ScalarReader.string(item, "an enum value", diagnostics: &diagnostics) else { continue }
                if !Names.isSnakeCase(value) {
                    diagnostics.error(
                        .invalidIdentifier, "enum value '\(value)' is not lower snake case", at: item.location,
                        help: "write it as '\(Names.suggestedSnakeCase(value))'"
                    )
                }
                if let first = seen[value] {
                    diagnostics.error(
                        .duplicateEnumValue, "enum value '\(value)' is listed twice", at: item.location,
                        help: "remove the second '\(value)'", notes: [.init("first listed here", at: first)]
                    )
                    continue
                }
                seen[value] = item.location
                cases.append(value)
            }
        } else if let values {
            diagnostics.error(
                .enumWithoutValues, "enum `values` must be a list, found \(values.kindDescription)", at: values.location,
                help: "write `values: [first, second]`"
            )
        }
        if cases.isEmpty, values?.sequence != nil || values == nil {
            diagnostics.error(
                .enumWithoutValues, "enum has no values", at: values?.location ?? location,
                help: "list the values: `values: [first, second]`"
            )
        }
        var fallbackValue: String?
        if let fallback, let text = ScalarReader.string(fallback, "fallback", diagnostics: &diagnostics) {
            if cases.contains(text) {
                fallbackValue = text
            } else {
                diagnostics.error(
                    .invalidEnumFallback, "fallback '\(text)' is not one of the enum's values", at: fallback.location,
                    help: "add '\(text)' to `values`, or name one of: \(cases.joined(separator: ", "))"
                )
            }
        }
        return .enumeration(values: cases, fallback: fallbackValue)
    }

    // MARK: Relations and indexes

    private mutating func decodeRelations(_ node: YAMLNode?) -> [Relation] {
        guard let node, !node.isNull,
            let reader = MappingReader(node, context: "relations", diagnostics: &diagnostics)
        else { return [] }
        var relations: [Relation] = []
        for entry in reader.entries {
            guard let name = entry.key.scalar,
                let relationReader = MappingReader(entry.value, context: "relation '\(name)'", diagnostics: &diagnostics)
            else { continue }
            relationReader.rejectUnknownKeys(known: ContractGrammar.relation.keyNames, diagnostics: &diagnostics)
            let kinds: [Relation.Kind] = [.hasMany, .belongsTo].filter { relationReader.value($0.rawValue) != nil }
            guard kinds.count == 1, let kind = kinds.first else {
                diagnostics.error(
                    kinds.isEmpty ? .missingKey : .invalidValue,
                    kinds.isEmpty ? "relation '\(name)' names no target" : "relation '\(name)' is both has_many and belongs_to",
                    at: entry.key.location,
                    help: "write `\(name): { has_many: Entity, foreign_key: field }` or `{ belongs_to: Entity, foreign_key: field }`"
                )
                continue
            }
            let targetNode = relationReader.value(kind.rawValue)!
            guard let target = ScalarReader.string(targetNode, "the relation's target", diagnostics: &diagnostics),
                let keyNode = relationReader.require(
                    "foreign_key", help: "name the field that holds the key: `foreign_key: unit_id`", diagnostics: &diagnostics
                ),
                let foreignKey = ScalarReader.string(keyNode, "foreign_key", diagnostics: &diagnostics)
            else { continue }
            if !Names.isSnakeCase(name) {
                diagnostics.error(
                    .invalidIdentifier, "relation name '\(name)' is not lower snake case", at: entry.key.location,
                    help: "rename it to '\(Names.suggestedSnakeCase(name))'"
                )
            }
            relations.append(
                Relation(
                    name: name, kind: kind, target: target, foreignKey: foreignKey, location: entry.key.location,
                    targetLocation: targetNode.location, foreignKeyLocation: keyNode.location
                )
            )
        }
        return relations
    }

    private mutating func decodeIndexes(_ node: YAMLNode?) -> [Index] {
        guard let node, !node.isNull else { return [] }
        guard let items = node.sequence else {
            diagnostics.error(
                .unexpectedNode, "expected a list of indexes, found \(node.kindDescription)", at: node.location,
                help: "write `indexes: [[updated_at], { fields: [unit_id, position], unique: true }]`"
            )
            return []
        }
        var indexes: [Index] = []
        for item in items {
            var fieldsNode = item
            var unique = false
            if item.mapping != nil {
                guard let reader = MappingReader(item, context: "index", diagnostics: &diagnostics) else { continue }
                reader.rejectUnknownKeys(known: ContractGrammar.index.keyNames, diagnostics: &diagnostics)
                guard
                    let fields = reader.require(
                        "fields", help: "list the indexed fields: `fields: [unit_id, position]`", diagnostics: &diagnostics
                    )
                else { continue }
                fieldsNode = fields
                unique = reader.value("unique").flatMap { ScalarReader.bool($0, "unique", diagnostics: &diagnostics) } ?? false
            }
            let names: [String]
            if let sequence = fieldsNode.sequence {
                names = sequence.compactMap { ScalarReader.string($0, "an indexed field", diagnostics: &diagnostics) }
            } else if let single = fieldsNode.scalar, !fieldsNode.isNull {
                names = [single]
            } else {
                names = []
            }
            if names.isEmpty {
                diagnostics.error(
                    .missingKey, "index lists no fields", at: item.location, help: "write the fields: `[updated_at]`"
                )
                continue
            }
            indexes.append(Index(fields: names, isUnique: unique, location: item.location))
        }
        return indexes
    }
}

extension FieldType {
    var isEnumeration: Bool {
        switch self {
        case .enumeration, .list(.enumeration): return true
        default: return false
        }
    }
}
