import ContractRuntime

/// `contractc check`: compares the contracts with their released history and reports every
/// change that would break a device still in the field.
///
/// Compatibility has two questions. *Backward*: can the new schema read data written with an
/// older one (the server reading pushes from old devices)? *Forward*: can an older schema read
/// data written with the new one (old devices reading pulled rows)? A contract's mode says which
/// questions must pass — `backward`, `forward`, `full` (both) or `none` — and its direction can
/// make one moot: devices never read an `up` contract, so forward does not apply to it.
/// The new version must pass against **every** released version from `oldest_supported` on.
package struct CompatibilityChecker {
    /// One accepted exception, for the report.
    package struct AppliedAllowance: Hashable, Sendable {
        package var allowance: Allowance
        package var contract: String
        package var field: String?
    }

    let set: ContractSet
    /// Released versions per contract (ascending).
    let released: [String: [(version: Int, contract: Contract, location: SourceLocation)]]
    package private(set) var diagnostics = DiagnosticCollector()
    package private(set) var applied: [AppliedAllowance] = []
    /// Contracts whose released version changed or went down; their migrations differ as a consequence.
    package private(set) var contractsWithVersionErrors: Set<String> = []

    package init(set: ContractSet, lock: LockFile) {
        self.set = set
        self.released = lock.contracts.mapValues { $0.map { ($0.version, $0.contract, $0.location) } }
    }

    /// Checks against contracts at another revision, each counting as released.
    package init(set: ContractSet, previous: ContractSet) {
        self.set = set
        self.released = Dictionary(uniqueKeysWithValues: previous.contracts.map { ($0.name, [($0.version, $0, $0.location)]) })
    }

    package mutating func run() {
        for name in released.keys.sorted() where set.contract(named: name) == nil {
            // A contract whose every entry was unreadable has been reported as LOCK_UNREADABLE.
            guard let latest = released[name]?.last else { continue }
            diagnostics.error(
                .contractDeleted, "contract '\(name)' was released (version \(latest.version)) and is gone from the contracts",
                at: latest.location,
                help: "restore \(latest.contract.kind.rawValue) '\(name)'; devices in the field still sync it"
            )
        }
        for contract in set.contracts {
            guard let history = released[contract.name], let latest = history.last else { continue }
            check(contract, history: history, latest: latest)
        }
    }

    // MARK: One contract

    private mutating func check(
        _ contract: Contract, history: [(version: Int, contract: Contract, location: SourceLocation)],
        latest: (version: Int, contract: Contract, location: SourceLocation)
    ) {
        if contract.version < latest.version {
            contractsWithVersionErrors.insert(contract.name)
            report(
                .versionDecreased, "version \(contract.version) is below the released version \(latest.version)",
                at: contract.versionLocation, in: contract, field: nil,
                help: "set `version: \(latest.version + 1)` for a new version",
                notes: [.init("version \(latest.version) released here", at: latest.location)])
            return
        }
        if let same = history.first(where: { $0.version == contract.version }) {
            if ContractSnapshot.text(contract) != ContractSnapshot.text(same.contract) {
                contractsWithVersionErrors.insert(contract.name)
                report(
                    .versionNotBumped, "\(contract.kind.rawValue) '\(contract.name)' changed, but version \(contract.version) is already released",
                    at: contract.versionLocation, in: contract, field: nil,
                    help: "bump to `version: \(latest.version + 1)`; a released version never changes",
                    notes: [.init("version \(contract.version) released here", at: same.location)])
            }
            return
        }
        checkStructure(contract, against: latest.contract, at: latest.location)
        checkSignatures(contract, history: history)
        checkHistory(contract, history: history.map(\.contract))
        let mode = contract.effectiveCompatibility(set.manifest.compatibility)
        guard mode != .none else { return }
        let backward = mode == .backward || mode == .full
        let forward = (mode == .forward || mode == .full) && contract.sync.direction != .up
        var seen = Set<String>()
        for old in history.map(\.contract) where old.version >= contract.oldestSupported {
            compareFields(old: old, new: contract, backward: backward, forward: forward, seen: &seen)
            if backward { compareRowLimits(old: old, new: contract, seen: &seen) }
        }
    }

    /// The row limits in force (written or default): rows stored under the old one may be
    /// larger than a lower new one. Between two defaults, a lower one follows from lower field
    /// limits (reported at the field) or a removed field (whose values old rows lose): not news.
    private mutating func compareRowLimits(old: Contract, new: Contract, seen: inout Set<String>) {
        let (oldLimit, newLimit) = (old.effectiveMaxBytes, new.effectiveMaxBytes)
        guard newLimit < oldLimit, old.maxBytes != nil || new.maxBytes != nil else { return }
        once(&seen, .maxBytesReduced, "") {
            report(
                .maxBytesReduced,
                "the row limit of '\(new.name)' went down to \(Self.limitText(newLimit, written: new.maxBytes != nil)) from \(Self.limitText(oldLimit, written: old.maxBytes != nil)) in version \(old.version)",
                at: new.maxBytesLocation ?? new.location, in: new, field: nil,
                help: "keep the contract's `max_bytes` at \(ContractSnapshot.sizeText(oldLimit)) or more",
                notes: [.init("version \(old.version) has it here", at: old.maxBytesLocation ?? old.location)])
        }
    }

    /// `256kB` for a written limit, `256kB (the default)` for one that is not.
    private static func limitText(_ bytes: Int, written: Bool) -> String {
        ContractSnapshot.sizeText(bytes) + (written ? "" : " (the default)")
    }

    /// Settings that may never change between released versions, whatever the mode.
    private mutating func checkStructure(_ contract: Contract, against old: Contract, at lockLocation: SourceLocation) {
        let released = Diagnostic.Note("version \(old.version) released here", at: lockLocation)
        if contract.primaryKey?.name != old.primaryKey?.name || contract.primaryKey?.type != old.primaryKey?.type {
            report(
                .primaryKeyChanged,
                "primary key changed from '\(old.primaryKey?.name ?? "none")' (\(old.primaryKey?.type.spelling ?? "-")) to '\(contract.primaryKey?.name ?? "none")' (\(contract.primaryKey?.type.spelling ?? "-"))",
                at: contract.primaryKey?.location ?? contract.location, in: contract, field: nil,
                help: "keep the primary key of version \(old.version)", notes: [released])
        }
        if contract.table != old.table {
            report(
                .tableRenamed, "table renamed from '\(old.table)' to '\(contract.table)'", at: contract.tableLocation,
                in: contract, field: nil, help: "keep `table: \(old.table)`", notes: [released])
        }
        if contract.scope != old.scope {
            report(
                .scopeChanged, "scope changed from '\(old.scope)' to '\(contract.scope)'", at: contract.scopeLocation,
                in: contract, field: nil, help: "keep `scope: \(old.scope)`, or introduce a new contract", notes: [released])
        }
        if contract.sync.direction != old.sync.direction {
            report(
                .directionChanged, "direction changed from \(old.sync.direction.rawValue) to \(contract.sync.direction.rawValue)",
                at: contract.sync.location, in: contract, field: nil,
                help: "keep `direction: \(old.sync.direction.rawValue)`", notes: [released])
        }
        if contract.sync.conflict != old.sync.conflict {
            report(
                .conflictPolicyChanged, "conflict policy changed from \(old.sync.conflict.rawValue) to \(contract.sync.conflict.rawValue)",
                at: contract.sync.location, in: contract, field: nil,
                help: "keep `conflict: \(old.sync.conflict.rawValue)`", notes: [released])
        }
        if contract.oldestSupported < old.oldestSupported {
            report(
                .oldestSupportedDecreased, "oldest_supported went down from \(old.oldestSupported) to \(contract.oldestSupported)",
                at: contract.oldestSupportedLocation ?? contract.versionLocation, in: contract, field: nil,
                help: "keep `oldest_supported: \(old.oldestSupported)` or higher", notes: [released])
        }
    }

    /// A signed contract refuses every unsigned write, so every supported version before it must
    /// have been signed too: a device built with an unsigned one never signs, and its queue
    /// would stop at its first write. Raising `oldest_supported` past them tells those devices
    /// to update instead (426). Turning `signed` off breaks nobody: signatures sent are still checked.
    private mutating func checkSignatures(
        _ contract: Contract, history: [(version: Int, contract: Contract, location: SourceLocation)]
    ) {
        guard contract.isSigned,
            let unsigned = history.first(where: { $0.version >= contract.oldestSupported && !$0.contract.isSigned })
        else { return }
        report(
            .signedTurnedOn,
            "'\(contract.name)' turns `signed` on, but version \(unsigned.version), which does not sign, is still supported (oldest_supported \(contract.oldestSupported))",
            at: contract.signedLocation ?? contract.location, in: contract, field: nil,
            help: "raise `oldest_supported` to \(contract.version), so devices that do not sign are told to update",
            notes: [.init("version \(unsigned.version) released here, unsigned", at: unsigned.location)])
    }

    /// `since` and `renamed_from` must agree with what the history shows.
    private mutating func checkHistory(_ contract: Contract, history: [Contract]) {
        let latest = history.last!
        for field in contract.fields {
            let nameInLatest = oldName(of: field, at: latest.version)
            if let released = latest.field(named: nameInLatest) {
                if field.since != released.since {
                    report(
                        .sinceRewritten,
                        "field '\(field.name)' says `since: \(field.since)`, but version \(latest.version) released it with `since: \(released.since)`",
                        at: field.sinceLocation ?? field.location, in: contract, field: field.name,
                        help: "write `since: \(released.since)`; `since` never changes once released",
                        notes: [.init("version \(latest.version) has it here", at: released.location)])
                }
            } else if !history.contains(where: { $0.field(named: oldName(of: field, at: $0.version)) != nil }),
                field.since <= latest.version
            {
                report(
                    .sinceRewritten, "field '\(field.name)' is new after version \(latest.version), but says `since: \(field.since)`",
                    at: field.sinceLocation ?? field.location, in: contract, field: field.name,
                    help: "write `since: \(contract.version)`: devices on earlier versions do not know the field")
            }
            if let rename = field.renamedFrom,
                let stale = history.first(where: {
                    $0.version >= rename.version && $0.field(named: rename.name) != nil && $0.field(named: field.name) == nil
                })
            {
                report(
                    .renamedFromUnknown,
                    "renamed_from says '\(rename.name)' became '\(field.name)' in version \(rename.version), but version \(stale.version) was released with '\(rename.name)'",
                    at: rename.location, in: contract, field: field.name,
                    help: "date the rename at the version that introduces the new name: `version: \(contract.version)`",
                    notes: [.init("version \(stale.version) released here", at: stale.location)])
            } else if let rename = field.renamedFrom {
                let before = history.filter { $0.version < rename.version }
                if let previous = before.last, previous.field(named: rename.name) == nil {
                    report(
                        .renamedFromUnknown,
                        "renamed_from '\(rename.name)' names a field that version \(previous.version) does not have",
                        at: rename.location, in: contract, field: field.name,
                        help: Names.closest(to: rename.name, among: previous.fields.map(\.name)).map { "did you mean '\($0)'?" }
                            ?? "name the field as it was called before version \(rename.version)",
                        notes: [.init("version \(previous.version) released here", at: previous.location)])
                }
            }
        }
    }

    /// The name a field had at a given version (before a rename, its old name).
    private func oldName(of field: Field, at version: Int) -> String {
        if let rename = field.renamedFrom, version < rename.version { return rename.name }
        return field.name
    }

    // MARK: Fields

    private mutating func compareFields(old: Contract, new: Contract, backward: Bool, forward: Bool, seen: inout Set<String>) {
        var matched = Set<String>()
        let against = "version \(old.version)"
        for field in new.fields {
            let name = oldName(of: field, at: old.version)
            guard let previous = old.field(named: name) else {
                if backward, !field.type.isOptional, field.defaultValue == nil {
                    once(&seen, .requiredFieldAdded, field.name) {
                        report(
                            .requiredFieldAdded, "required field '\(field.name)' has no default, and data written with \(against) does not have it",
                            at: field.location, in: new, field: field.name,
                            help: field.type.type == .file
                                ? "make it optional (`file?`): a file field has no default"
                                : "make it optional (`\(field.type.type.spelling)?`) or give it a `default`")
                    }
                }
                continue
            }
            matched.insert(previous.name)
            let note = Diagnostic.Note("\(against) has it here", at: previous.location)
            compareTypes(previous, field, in: new, against: against, note: note, backward: backward, forward: forward, seen: &seen)
            // After an incompatible type change, a different default or length is a consequence, not news.
            if Self.wireRelation(from: previous.type.type, to: field.type.type) == .incompatible { continue }
            // An optional field's `default: null` and no default read the same: not a change.
            let nullDefaultDropped = previous.defaultValue == .null && field.defaultValue == nil && field.type.isOptional
            if backward, let oldDefault = previous.defaultValue, !Self.sameValue(oldDefault, field.defaultValue), !nullDefaultDropped {
                once(&seen, .defaultChanged, field.name) {
                    report(
                        .defaultChanged,
                        field.defaultValue == nil
                            ? "field '\(field.name)' lost the default it has in \(against)"
                            : "default of '\(field.name)' changed from \(describe(previous.defaultValue!)) in \(against) to \(describe(field.defaultValue!))",
                        at: field.defaultLocation ?? field.location, in: new, field: field.name,
                        help: "keep `default: \(describe(previous.defaultValue!))`", notes: [note])
                }
            }
            let lengthReduced = field.maxLength.map { $0 < (previous.maxLength ?? Int.max) } ?? false
            if backward, lengthReduced, let newLimit = field.maxLength {
                once(&seen, .maxLengthReduced, field.name) {
                    report(
                        .maxLengthReduced,
                        "max_length of '\(field.name)' went down to \(newLimit) from \(previous.maxLength.map(String.init) ?? "no limit") in \(against)",
                        at: field.location, in: new, field: field.name,
                        help: "keep max_length at \(previous.maxLength.map(String.init) ?? "no limit") or more", notes: [note])
                }
            }
            if backward, field.type.type == .file {
                compareFiles(previous, field, in: new, against: against, note: note, seen: &seen)
                continue
            }
            // The byte limits in force (written or default). A lower max_length that lowers the
            // default is reported as such, not twice.
            if backward, !(lengthReduced && field.maxBytes == nil), let newLimit = field.effectiveMaxBytes,
                let oldLimit = previous.effectiveMaxBytes, newLimit < oldLimit
            {
                once(&seen, .maxBytesReduced, field.name) {
                    report(
                        .maxBytesReduced,
                        "max_bytes of '\(field.name)' went down to \(Self.limitText(newLimit, written: field.maxBytes != nil)) from \(Self.limitText(oldLimit, written: previous.maxBytes != nil)) in \(against)",
                        at: field.maxBytesLocation ?? field.location, in: new, field: field.name,
                        help: "keep max_bytes at \(ContractSnapshot.sizeText(oldLimit)) or more", notes: [note])
                }
            }
        }
        guard forward else { return }
        for previous in old.fields where !matched.contains(previous.name) {
            // A deprecated field may go once no supported device would misread a row without it:
            // a version that has it optional, or with a default, reads its absence as null or the
            // default (as Avro's readers do); one that requires it without a default cannot
            // decode the row until oldest_supported passes that version.
            let deprecatedIn = released[new.name]?.first { $0.contract.field(named: previous.name)?.deprecated != nil }?.version
            let windowPassed = deprecatedIn.map { $0 <= new.oldestSupported } ?? false
            let tolerated = previous.type.isOptional || previous.defaultValue != nil
            if deprecatedIn != nil && tolerated { continue }
            once(&seen, .fieldRemoved, previous.name) {
                let help: String
                if windowPassed {
                    help =
                        "\(against) requires the field and has no default for it; give it a `default` in a released version at or above oldest_supported first"
                } else if let deprecatedIn {
                    help =
                        "the field is deprecated since version \(deprecatedIn); raise `oldest_supported` to \(deprecatedIn) or more before removing it"
                } else {
                    help = "deprecate it first (`deprecated: \"reason\"`), release, raise `oldest_supported` past that version, then remove it"
                }
                report(
                    .fieldRemoved, "field '\(previous.name)' was removed, but \(against) still reads it",
                    at: new.location, in: new, field: previous.name, removed: true, help: help,
                    notes: [.init("\(against) has it here", at: previous.location)])
            }
        }
    }

    /// A file field may accept more, never less, while older versions are supported: their
    /// devices name files up to the old size and of every old type, and a write the new version
    /// refuses would stop their queue.
    private mutating func compareFiles(
        _ old: Field, _ new: Field, in contract: Contract, against: String, note: Diagnostic.Note, seen: inout Set<String>
    ) {
        if let oldLimit = old.maxBytes, let newLimit = new.maxBytes, newLimit < oldLimit {
            once(&seen, .fileMaxBytesReduced, new.name) {
                report(
                    .fileMaxBytesReduced,
                    "file field '\(new.name)' takes files of at most \(ContractSnapshot.sizeText(newLimit)) now, but \(ContractSnapshot.sizeText(oldLimit)) in \(against), whose devices may name larger ones",
                    at: new.maxBytesLocation ?? new.location, in: contract, field: new.name,
                    help: "keep max_bytes at \(ContractSnapshot.sizeText(oldLimit)) or more", notes: [note])
            }
        }
        let dropped = old.contentTypes.filter { !FileReference.contentType($0, isIn: new.contentTypes) }
        if !dropped.isEmpty {
            let them = dropped.count == 1 ? "it" : "them"
            once(&seen, .fileContentTypesNarrowed, new.name) {
                report(
                    .fileContentTypesNarrowed,
                    "file field '\(new.name)' no longer accepts \(dropped.map { "'\($0)'" }.joined(separator: ", ")), which \(against) accepts",
                    at: new.contentTypesLocation ?? new.location, in: contract, field: new.name,
                    help: "keep \(them) in `content_types` (or a pattern that covers \(them))",
                    notes: [note])
            }
        }
    }

    private mutating func compareTypes(
        _ old: Field, _ new: Field, in contract: Contract, against: String, note: Diagnostic.Note, backward: Bool,
        forward: Bool, seen: inout Set<String>
    ) {
        let (oldType, newType) = (old.type.type, new.type.type)
        // Optional → required breaks reading old data whatever else changed (old rows may lack it).
        if old.type.isOptional && !new.type.isOptional && new.defaultValue == nil {
            if backward {
                once(&seen, .optionalMadeRequired, new.name) {
                    report(
                        .optionalMadeRequired, "field '\(new.name)' is required now but optional in \(against), whose data may leave it out",
                        at: new.typeLocation, in: contract, field: new.name,
                        help: "keep it optional, or give it a `default`", notes: [note])
                }
            }
        }
        var backwardBreaks = false, forwardBreaks = false
        let detail = "\(old.type.spelling) in \(against) to \(new.type.spelling)"
        switch Self.wireRelation(from: oldType, to: newType) {
        case .same: break
        case .widened: forwardBreaks = true
        case .narrowed: backwardBreaks = true
        case .incompatible: backwardBreaks = true; forwardBreaks = true
        }
        if !backwardBreaks && !forwardBreaks {
            // Enum values (also of list<enum>).
            let oldValues = Self.enumValues(oldType), newValues = Self.enumValues(newType)
            if let oldValues, let newValues {
                let removed = oldValues.values.filter { !newValues.values.contains($0) }
                let added = newValues.values.filter { !oldValues.values.contains($0) }
                if backward, !removed.isEmpty, newValues.fallback == nil {
                    once(&seen, .enumValueRemoved, new.name) {
                        report(
                            .enumValueRemoved,
                            "enum '\(new.name)' no longer has \(removed.map { "'\($0)'" }.joined(separator: ", ")), which data written with \(against) may hold",
                            at: new.typeLocation, in: contract, field: new.name,
                            help: "keep the value, or name a `fallback` that unknown values decode to", notes: [note])
                    }
                }
                if forward, !added.isEmpty, oldValues.fallback == nil {
                    once(&seen, .enumValueAdded, new.name) {
                        report(
                            .enumValueAdded,
                            "enum '\(new.name)' adds \(added.map { "'\($0)'" }.joined(separator: ", ")), which \(against) cannot decode: it has no fallback",
                            at: new.typeLocation, in: contract, field: new.name,
                            help:
                                "ship a `fallback` first and raise `oldest_supported` to that version, or use compatibility backward if old devices never read it",
                            notes: [note])
                    }
                }
            }
            // Optionality (optional → required is reported above).
            if !old.type.isOptional && new.type.isOptional && old.defaultValue == nil {
                forwardBreaks = true
            }
        }
        let breaks = (backward && backwardBreaks) || (forward && forwardBreaks)
        guard breaks else { return }
        let which =
            backward && backwardBreaks && forward && forwardBreaks
            ? "neither side can read the other's data"
            : backward && backwardBreaks
                ? "the new schema cannot read data written with \(against)" : "\(against) cannot read data written with the new schema"
        once(&seen, .fieldTypeChanged, new.name) {
            report(
                .fieldTypeChanged, "type of '\(new.name)' changed from \(detail): \(which)",
                at: new.typeLocation, in: contract, field: new.name,
                help: "keep `\(old.type.spelling)`; add a new field with the new type and deprecate this one", notes: [note])
        }
    }

    enum WireRelation { case same, widened, narrowed, incompatible }

    /// How values of two field types relate on the wire: `widened` when every old value reads
    /// as a new one but not the other way (int → double, enum → string).
    static func wireRelation(from old: FieldType, to new: FieldType) -> WireRelation {
        func text(_ type: FieldType) -> Bool {
            switch type {
            case .id, .string: return true
            case .ref: return true
            default: return false
            }
        }
        switch (old, new) {
        case (.enumeration, .enumeration): return .same
        case (.list(let a), .list(let b)): return wireRelation(from: a, to: b)
        case (.int, .double): return .widened
        case (.double, .int): return .narrowed
        case (.enumeration, _) where text(new): return .widened
        case (_, .enumeration) where text(old): return .narrowed
        // Dates, UUIDs and timestamps are text on the wire: any text reads them, not the reverse.
        case (.date, _) where text(new), (.uuid, _) where text(new), (.timestamp, _) where text(new): return .widened
        case (_, .date) where text(old), (_, .uuid) where text(old), (_, .timestamp) where text(old): return .narrowed
        default:
            if old == new { return .same }
            if text(old) && text(new) { return .same }
            return .incompatible
        }
    }

    /// Defaults compare by value: `0` (int) and `0.0` (after an int → double promotion) are the same.
    static func sameValue(_ old: DefaultValue, _ new: DefaultValue?) -> Bool {
        guard let new else { return false }
        switch (old, new) {
        case (.int(let a), .double(let b)), (.double(let b), .int(let a)): return Double(a) == b
        case (.array(let a), .array(let b)): return a.count == b.count && zip(a, b).allSatisfy { sameValue($0, $1) }
        default: return old == new
        }
    }

    static func enumValues(_ type: FieldType) -> (values: [String], fallback: String?)? {
        switch type {
        case .enumeration(let values, let fallback), .list(.enumeration(let values, let fallback)): return (values, fallback)
        default: return nil
        }
    }

    private func describe(_ value: DefaultValue) -> String {
        CanonicalJSON.text(value)
    }

    private func once(_ seen: inout Set<String>, _ rule: RuleID, _ field: String, _ body: () -> Void) {
        if seen.insert(rule.rawValue + "/" + field).inserted { body() }
    }

    // MARK: Reporting and allowances

    private mutating func report(
        _ rule: RuleID, _ message: String, at location: SourceLocation, in contract: Contract, field: String?,
        removed: Bool = false, help: String, notes: [Diagnostic.Note] = []
    ) {
        if let allowance = allowance(for: rule, in: contract, field: field, removed: removed) {
            applied.append(AppliedAllowance(allowance: allowance, contract: contract.name, field: field))
            return
        }
        diagnostics.error(rule, message, at: location, help: help + " (see `contractc explain \(rule.rawValue)`)", notes: notes)
    }

    private func allowance(for rule: RuleID, in contract: Contract, field: String?, removed: Bool) -> Allowance? {
        if let field, !removed, let declared = (contract.fields + contract.localFields).first(where: { $0.name == field }) {
            return declared.allowances.first { $0.rule == rule }
        }
        // A contract-level allowance names the removed field it excuses; without `field` it
        // excuses only findings about the contract itself.
        return contract.allowances.first { $0.rule == rule && $0.field == field }
    }
}
