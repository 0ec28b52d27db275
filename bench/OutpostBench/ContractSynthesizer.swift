import Foundation

/// Writes a realistic contracts folder of any size for the codegen benchmark: a manifest with
/// five scopes, entities and events in sub-folders, 8–20 synced fields each covering every type
/// of the contract language (optional and not, with defaults, enums with fallbacks, lists,
/// refs, encrypted, `since`, renames and deprecations), client-only local fields, relations
/// both ways, and plain, composite and unique indexes.
///
/// The output depends only on the seed and the count: same input, same bytes.
struct ContractSynthesizer {
    var contractCount = 200
    /// Share of entities, in percent; the rest are events.
    var entityPercent = 65
    var seed: UInt64 = 0x0075_7470_6F73_7421  // "\0utpost!"

    /// One file of the folder, relative to it.
    struct File: Sendable {
        var path: String
        var text: String
    }

    /// What was synthesized, for the benchmark's facts and a sanity check of the mix.
    struct Summary: Sendable {
        var entities = 0
        var events = 0
        var fields = 0
        var localFields = 0
        var relations = 0
        var indexes = 0
        var minFields = Int.max
        var maxFields = 0
        /// How many fields use each type keyword (`enum`, `list`, `ref`, and the scalars).
        var typeUse: [String: Int] = [:]

        /// Type keywords no field uses; empty when the set covers the whole language.
        var missingTypes: [String] {
            TypeKind.allCases.map(\.rawValue).filter { (typeUse[$0] ?? 0) == 0 }
        }
    }

    struct Output: Sendable {
        var files: [File]
        var summary: Summary
    }

    func synthesize() -> Output {
        var run = SynthesisRun(seed: seed)
        return run.synthesize(count: contractCount, entityPercent: entityPercent)
    }
}

// MARK: - The model the YAML is rendered from

/// The type keywords of the contract language, for coverage.
enum TypeKind: String, CaseIterable, Sendable {
    case id, string, int, double, bool, timestamp, date, uuid, json, bytes
    case enumeration = "enum"
    case list, ref
}

private struct FieldPlan {
    var name: String
    /// The type as written, with `?` when optional: `string?`, `list<ref<FleetVehicle>>`.
    var type: String
    var kind: TypeKind
    /// Further keys in the order they are written, values already in YAML (flow) syntax.
    var attributes: [(String, String)] = []
    /// A scalar, unencrypted field an index may name.
    var indexable: Bool
    var isOptional: Bool
    var hasDefault = false
    var isEncrypted = false
    /// The entity a scalar `ref<...>` points at.
    var refTarget: String?
    /// A comment line written above the field.
    var comment: String?

    init(_ name: String, _ type: String, _ kind: TypeKind) {
        self.name = name
        self.type = type
        self.kind = kind
        self.isOptional = type.hasSuffix("?")
        switch kind {
        case .json, .bytes, .list: self.indexable = false
        default: self.indexable = true
        }
    }

    mutating func add(_ key: String, _ value: String) {
        attributes.append((key, value))
        if key == "default" { hasDefault = true }
        if key == "encrypted", value == "true" {
            isEncrypted = true
            indexable = false
        }
    }
}

private struct ContractPlan {
    enum Kind { case entity, event }

    var kind: Kind
    var name: String
    var folder: String
    var scope: String
    var table: String?
    var swiftName: String?
    var summary: String
    var doc: String?
    var comment: String?
    var version = 1
    var oldestSupported: Int?
    var sync: [String]?
    var compatibility: String?
    var appliesTo: String?
    var fields: [FieldPlan] = []
    var local: [FieldPlan] = []
    var relations: [(name: String, text: String)] = []
    var indexes: [String] = []
    var indexedFieldLists: Set<[String]> = []
    var primaryKeyType = "id"

    var usedNames: Set<String> { Set(fields.map(\.name) + local.map(\.name)) }

    mutating func addRelation(_ name: String, _ text: String) {
        var candidate = name
        var suffix = 2
        while relations.contains(where: { $0.name == candidate }) {
            candidate = "\(name)_\(suffix)"
            suffix += 1
        }
        relations.append((candidate, text))
    }

    mutating func addIndex(_ fields: [String], unique: Bool = false, flowStyle: Bool = false) {
        guard !fields.isEmpty, indexedFieldLists.insert(fields).inserted else { return }
        let list = "[" + fields.joined(separator: ", ") + "]"
        if unique {
            indexes.append("{ fields: \(list), unique: true }")
        } else if flowStyle {
            indexes.append("{ fields: \(list) }")
        } else {
            indexes.append(list)
        }
    }
}

// MARK: - Vocabulary

private enum Vocabulary {
    /// Per scope: the name prefixes and nouns entities are made of, and how a summary reads.
    struct Domain {
        var scope: String
        var folder: String
        var weight: Int
        var prefixes: [String]
        var nouns: [String]
        var summary: String  // `{}` is replaced by the entity's words
    }

    static let domains: [Domain] = [
        Domain(
            scope: "content", folder: "learning", weight: 27, prefixes: ["Course", "Catalog", "Library", "Curriculum", "Media"],
            nouns: [
                "Module", "Chapter", "Quiz", "Glossary", "Track", "Badge", "Exercise", "Flashcard", "Deck", "Podcast",
                "Article", "Playlist", "Skill", "Topic", "Rubric",
            ],
            summary: "A published {} that every learner downloads and reads offline."
        ),
        Domain(
            scope: "user", folder: "progress", weight: 27, prefixes: ["Learner", "Study", "Personal"],
            nouns: [
                "Enrollment", "Bookmark", "Streak", "Highlight", "Reminder", "Goal", "Note", "Review", "Submission",
                "Preference", "Milestone", "Journal", "Portfolio", "Schedule",
            ],
            summary: "One learner's {}, kept in step between their devices."
        ),
        Domain(
            scope: "team", folder: "field", weight: 27, prefixes: ["Fleet", "Depot", "Field", "Crew"],
            nouns: [
                "Vehicle", "Route", "Shift", "Inspection", "WorkOrder", "Part", "Charger", "Station", "Permit",
                "Checklist", "Handover", "Defect", "Delivery", "Tool",
            ],
            summary: "A {} shared by the members of one field team and edited offline."
        ),
        Domain(
            scope: "tenant", folder: "organisation", weight: 11, prefixes: ["Org", "Tenant"],
            nouns: [
                "Policy", "Holiday", "Region", "Site", "Department", "CostCenter", "Supplier", "Calendar", "Role",
                "Announcement",
            ],
            summary: "The organisation's {}, the same for every member of a tenant."
        ),
        Domain(
            scope: "device", folder: "device", weight: 8, prefixes: ["Device"],
            nouns: [
                "Setting", "Download", "CacheEntry", "SyncLog", "Diagnostic", "Sensor", "Printer", "Pairing",
                "Location", "Profile", "Camera", "Quota",
            ],
            summary: "This device's own {}, backed up to the server but never shared."
        ),
    ]

    static let verbs = [
        "Created", "Updated", "Completed", "Started", "Reported", "Flagged", "Reviewed", "Archived", "Scanned",
        "Acknowledged", "Shared", "Synced", "Assigned", "Cancelled", "Submitted", "Approved",
    ]

    static let stringNames = [
        "title", "display_name", "notes", "label", "headline", "details_text", "comment_text", "location_name",
        "contact_name", "reference_code", "external_ref", "caption", "instructions", "address_line", "short_name",
        "subtitle", "summary_text", "remarks",
    ]
    static let idNames = [
        "owner_id", "assignee_id", "external_id", "batch_id", "author_id", "reviewer_id", "source_id", "parent_key",
        "route_key", "course_key",
    ]
    static let intNames = [
        "sort_index", "attempt_count", "duration_seconds", "size_bytes", "retry_count", "quantity", "odometer_km",
        "estimated_minutes", "page_count", "score_points", "sequence_number", "priority_rank", "capacity",
    ]
    static let doubleNames = [
        "latitude", "longitude", "progress_ratio", "battery_level", "weight_kg", "temperature_c", "rating",
        "completion_share", "cost_amount", "accuracy_m",
    ]
    static let boolNames = [
        "is_active", "is_archived", "is_pinned", "requires_review", "is_verified", "has_attachments", "is_public",
        "is_mandatory", "is_flagged",
    ]
    static let timestampNames = [
        "created_at", "started_at", "ended_at", "due_at", "last_seen_at", "opened_at", "closed_at", "scheduled_at",
        "published_at", "acknowledged_at",
    ]
    static let dateNames = [
        "due_on", "effective_on", "expires_on", "installed_on", "valid_from", "valid_until", "observed_on",
        "scheduled_on",
    ]
    static let uuidNames = ["session_id", "correlation_id", "batch_uuid", "request_id", "trace_id", "upload_id"]
    static let jsonNames = ["attributes", "metadata", "payload", "settings", "extra_fields", "layout", "answers"]
    static let bytesNames = ["thumbnail", "signature", "photo", "attachment", "voice_memo", "sketch"]

    /// Enum fields: name, values, and a fallback for values a newer peer may send.
    static let enums: [(name: String, values: [String], fallback: String?)] = [
        ("status", ["draft", "active", "paused", "completed", "cancelled"], "paused"),
        ("state", ["new", "in_progress", "on_hold", "resolved", "closed"], "in_progress"),
        ("severity", ["low", "medium", "high", "critical"], "medium"),
        ("visibility", ["private", "team", "public"], "private"),  // Swift keywords: generated in backticks
        ("channel", ["email", "sms", "push", "in_app"], nil),
        ("difficulty", ["beginner", "intermediate", "advanced"], nil),
        ("category", ["hardware", "software", "safety", "other"], "other"),
        ("media_kind", ["audio", "image", "video", "document"], "document"),
        ("weather", ["clear", "rain", "snow", "fog", "storm"], nil),
        ("layout_mode", ["default", "compact", "expanded"], "default"),
    ]

    static let weekdays = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]

    static let fieldDocs = [
        "As the device last saw it; the server may correct it.", "In the tenant's own terms, shown as written.",
        "Shown on the detail screen.", "Used to sort lists on the device.", "As reported by the technician.",
        "Summed up in the weekly report.", "Filled in by the server; devices only read it.",
        "Entered on the device, possibly offline.",
    ]
}

// MARK: - Synthesis

private struct SynthesisRun {
    var rng: SeededGenerator
    var summary = ContractSynthesizer.Summary()
    var entities: [ContractPlan] = []
    var events: [ContractPlan] = []

    init(seed: UInt64) {
        rng = SeededGenerator(seed: seed)
    }

    mutating func synthesize(count: Int, entityPercent: Int) -> ContractSynthesizer.Output {
        let entityCount = max(1, count * entityPercent / 100)
        let eventCount = count - entityCount
        for (name, domain) in entityNames(entityCount) {
            planEntity(name: name, domain: domain)
        }
        var taken = Set(entities.map(\.name))
        for _ in 0..<eventCount {
            planEvent(taken: &taken)
        }

        var files = [ContractSynthesizer.File(path: "contracts.yaml", text: manifest())]
        for plan in entities + events {
            files.append(.init(path: "\(plan.folder)/\(SynthNames.snake(plan.name)).yaml", text: render(plan)))
            tally(plan)
        }
        files.sort { $0.path < $1.path }
        return .init(files: files, summary: summary)
    }

    // MARK: Names

    /// `count` unique entity names spread over the domains by weight, in a shuffled order so
    /// refs (which point at earlier entities) cross scopes.
    private mutating func entityNames(_ count: Int) -> [(String, Vocabulary.Domain)] {
        let totalWeight = Vocabulary.domains.reduce(0) { $0 + $1.weight }
        var result: [(String, Vocabulary.Domain)] = []
        for (index, domain) in Vocabulary.domains.enumerated() {
            let share =
                index == Vocabulary.domains.count - 1
                ? count - result.count : count * domain.weight / totalWeight
            var candidates: [String] = []
            for prefix in domain.prefixes {
                for noun in domain.nouns { candidates.append(prefix + noun) }
            }
            candidates = rng.shuffled(candidates)
            for offset in 0..<share {
                // More entities than the vocabulary has: number the extra ones.
                let round = offset / candidates.count
                let name = candidates[offset % candidates.count] + (round == 0 ? "" : "V\(round + 1)")
                result.append((name, domain))
            }
        }
        return rng.shuffled(result)
    }

    // MARK: Entities

    private mutating func planEntity(name: String, domain: Vocabulary.Domain) {
        var plan = ContractPlan(
            kind: .entity, name: name, folder: "entities/\(domain.folder)", scope: domain.scope,
            summary: domain.summary.replacingOccurrences(of: "{}", with: SynthNames.words(name))
        )
        plan.table = SynthNames.plural(SynthNames.snake(name))
        plan.version = rng.weighted([(1, 60), (2, 25), (3, 15)])
        if plan.version > 1, rng.chance(50) { plan.oldestSupported = rng.int(in: 1...plan.version) }
        if rng.chance(4) { plan.swiftName = name + "Model" }
        if rng.chance(30) { plan.doc = longDoc(for: name) }
        if rng.chance(15) { plan.comment = "Synthesized \(domain.folder) entity; the shape is typical, the names are not." }
        if rng.chance(12) { plan.compatibility = rng.pick(["backward", "forward", "full", "none"]) }
        plan.sync = entitySync(scope: domain.scope)

        // Primary key first, then references, the other fields, and the version field last.
        let keyType = rng.weighted([("id", 70), ("uuid", 15), ("string", 10), ("int", 5)])
        plan.primaryKeyType = keyType
        var key = FieldPlan("id", keyType, keyType == "id" ? .id : TypeKind(rawValue: keyType)!)
        key.add("primary_key", "true")
        if keyType == "string" { key.add("max_length", "64") }
        if rng.chance(15) { key.add("doc", quoted("Made on the device; the same id twice is the same row.")) }
        plan.fields.append(key)
        if let field = scopeKeyField(scope: plan.scope) { plan.fields.append(field) }

        let fieldTarget = rng.int(in: 8...20)
        let versionByRevision = rng.chance(20)

        let targets = entities.filter { [domain.scope, "content", "tenant"].contains($0.scope) }
        let refCount = min(targets.count, rng.weighted([(0, 20), (1, 40), (2, 30), (3, 10)]))
        for target in rng.shuffled(targets).prefix(refCount) {
            plan.fields.append(refField(to: target.name, in: plan, listChance: 12))
        }
        fillFields(&plan, upTo: fieldTarget - 1)

        var version = FieldPlan(
            versionByRevision ? "revision" : "updated_at", versionByRevision ? "int" : "timestamp",
            versionByRevision ? .int : .timestamp)
        version.add("version_field", "true")
        if versionByRevision { version.add("doc", quoted("Raised by the server on every accepted change.")) }
        plan.fields.append(version)

        addEvolution(&plan)
        if rng.chance(55) { addLocalFields(&plan) }
        addRelations(&plan)
        addIndexes(&plan)
        entities.append(plan)
    }

    private mutating func entitySync(scope: String) -> [String] {
        let priority = rng.pick(["critical", "high", "normal", "low"])
        let retention: String? = rng.chance(45) ? rng.pick(["7d", "14d", "30d", "12h", "2w", "forever"]) : nil
        var pairs: [(String, String)]
        switch scope {
        case "content":
            pairs = [("direction", "down"), ("conflict", "server_authoritative"), ("tombstones", "true")]
        case "device":
            pairs =
                rng.chance(60)
                ? [("direction", "both"), ("conflict", "last_writer_wins"), ("tombstones", "true")]
                : [("direction", "up"), ("conflict", "append_only"), ("tombstones", "false")]
        default:
            pairs = rng.weighted([
                ([("direction", "down"), ("conflict", "server_authoritative"), ("tombstones", "true")], 25),
                ([("direction", "both"), ("conflict", "last_writer_wins"), ("tombstones", "true")], 30),
                ([("direction", "both"), ("conflict", "version_check"), ("tombstones", "true")], 15),
                ([("direction", "both"), ("conflict", "field_merge"), ("tombstones", "true")], 15),
                ([("direction", "up"), ("conflict", "append_only"), ("tombstones", "false")], 15),
            ])
        }
        if let retention { pairs.append(("retention", retention)) }
        pairs.append(("priority", priority))
        return syncLines(pairs)
    }

    /// A flow mapping on one line, or (one time in five) a block.
    private mutating func syncLines(_ pairs: [(String, String)]) -> [String] {
        if rng.chance(20) {
            return ["sync:"] + pairs.map { "  \($0.0): \($0.1)" }
        }
        return ["sync: { " + pairs.map { "\($0.0): \($0.1)" }.joined(separator: ", ") + " }"]
    }

    private mutating func refField(
        to target: String, in plan: ContractPlan, listChance: Int, optionalChance: Int = 45
    ) -> FieldPlan {
        let used = plan.usedNames
        let base = SynthNames.snake(target)
        if rng.chance(listChance) {
            var field = FieldPlan(unique(base + "_ids", used), "list<ref<\(target)>>", .ref)
            field.add("default", "[]")
            if rng.chance(40) { field.add("max_length", "50") }
            return field
        }
        let optional = rng.chance(optionalChance)
        var field = FieldPlan(
            unique(base + "_id", used, alternatives: ["primary_" + base + "_id"]),
            "ref<\(target)>" + (optional ? "?" : ""), .ref)
        field.refTarget = target
        if rng.chance(20) { field.add("doc", quoted("The \(SynthNames.words(target)) this belongs to.")) }
        return field
    }

    /// Adds fields until the contract has `count` synced fields, cycling through every type so
    /// each contract uses most of them.
    private mutating func fillFields(_ plan: inout ContractPlan, upTo count: Int) {
        var kinds: [TypeKind] = []
        while plan.fields.count < count {
            if kinds.isEmpty {
                kinds = rng.shuffled([
                    .id, .string, .int, .double, .bool, .timestamp, .date, .uuid, .json, .bytes,
                    .enumeration, .list, .string, .int, .timestamp, .enumeration,
                ])
            }
            let kind = kinds.removeFirst()
            plan.fields.append(field(of: kind, in: plan))
        }
    }

    private mutating func field(of kind: TypeKind, in plan: ContractPlan) -> FieldPlan {
        let used = plan.usedNames
        func name(_ pool: [String]) -> String {
            let free = pool.filter { !used.contains($0) }
            return free.isEmpty ? unique(rng.pick(pool), used) : rng.pick(free)
        }
        var field: FieldPlan
        switch kind {
        case .id:
            field = FieldPlan(name(Vocabulary.idNames), rng.chance(50) ? "id?" : "id", .id)
            if rng.chance(20) { field.add("max_length", "64") }
        case .string:
            let optional = rng.chance(40)
            field = FieldPlan(name(Vocabulary.stringNames), optional ? "string?" : "string", .string)
            switch rng.int(in: 0...4) {
            case 0: break
            case 1, 2: field.add("max_length", String(rng.pick([40, 80, 120, 160, 200, 500, 2000, 4000, 8000])))
            case 3:
                field.add("max_length", "4000")
                if optional {
                    field.add("encrypted", "true")
                    field.comment = "personal details; sealed at rest on the device"
                }
            default:
                if !optional { field.add("default", quoted("")) }
            }
        case .int:
            field = FieldPlan(name(Vocabulary.intNames), rng.chance(35) ? "int?" : "int", .int)
            if !field.isOptional, rng.chance(50) { field.add("default", String(rng.pick([0, 1, 15, 100]))) }
        case .double:
            field = FieldPlan(name(Vocabulary.doubleNames), rng.chance(50) ? "double?" : "double", .double)
            if !field.isOptional, rng.chance(50) { field.add("default", rng.pick(["0.0", "0.5", "1.0", "0.7"])) }
        case .bool:
            field = FieldPlan(name(Vocabulary.boolNames), rng.chance(20) ? "bool?" : "bool", .bool)
            if !field.isOptional, rng.chance(70) { field.add("default", rng.chance(70) ? "false" : "true") }
        case .timestamp:
            field = FieldPlan(name(Vocabulary.timestampNames), rng.chance(55) ? "timestamp?" : "timestamp", .timestamp)
            if !field.isOptional, rng.chance(15) { field.add("default", quoted("2026-01-31T08:00:00.000Z")) }
        case .date:
            field = FieldPlan(name(Vocabulary.dateNames), rng.chance(55) ? "date?" : "date", .date)
            if !field.isOptional, rng.chance(20) { field.add("default", quoted("2026-01-31")) }
        case .uuid:
            field = FieldPlan(name(Vocabulary.uuidNames), rng.chance(40) ? "uuid?" : "uuid", .uuid)
            if !field.isOptional, rng.chance(15) { field.add("default", quoted("6f1c2a8e-4b5d-4e7f-9a0b-1c2d3e4f5a6b")) }
        case .json:
            field = FieldPlan(name(Vocabulary.jsonNames), rng.chance(45) ? "json?" : "json", .json)
            if field.isOptional {
                if rng.chance(25) { field.add("encrypted", "true") }
            } else {
                field.add("default", rng.pick(["{}", "[]", "{ theme: dark, columns: 2 }", "{ steps: [], version: 1 }"]))
            }
        case .bytes:
            field = FieldPlan(name(Vocabulary.bytesNames), rng.chance(80) ? "bytes?" : "bytes", .bytes)
            if field.isOptional {
                field.add("max_length", rng.pick(["65536", "2097152"]))
                if rng.chance(30) { field.add("encrypted", "true") }
            } else {
                field.add("default", quoted("AAECAw=="))
            }
        case .enumeration:
            let template = rng.pick(Vocabulary.enums)
            let optional = template.fallback == nil && rng.chance(40)
            field = FieldPlan(name([template.name]), optional ? "enum?" : "enum", .enumeration)
            field.add("values", "[" + template.values.joined(separator: ", ") + "]")
            if let fallback = template.fallback, rng.chance(80) { field.add("fallback", fallback) }
            if !optional, rng.chance(50) { field.add("default", template.values[0]) }
        case .list:
            switch rng.int(in: 0...8) {
            case 0:
                field = FieldPlan(name(["tags", "labels", "keywords"]), "list<string>", .list)
                field.add("default", rng.chance(70) ? "[]" : "[offline, field]")
                if rng.chance(40) { field.add("max_length", "20") }
            case 1:
                field = FieldPlan(name(["scores", "step_counts"]), "list<int>", .list)
                field.add("default", rng.chance(50) ? "[]" : "[1, 2, 3]")
            case 2:
                field = FieldPlan(name(["sample_values", "readings"]), "list<double>", .list)
                field.add("default", "[]")
            case 3:
                field = FieldPlan(name(["checkpoints", "visit_times"]), "list<timestamp>", .list)
                field.add("default", rng.chance(70) ? "[]" : "[\"2026-01-31T08:00:00.000Z\"]")
            case 4:
                field = FieldPlan(name(["blackout_dates", "visit_days"]), "list<date>?", .list)
            case 5:
                field = FieldPlan(name(["member_ids", "watcher_ids"]), "list<id>", .list)
                field.add("default", "[]")
                field.add("max_length", "100")
            case 6:
                field = FieldPlan(name(["linked_sessions", "upload_ids"]), "list<uuid>?", .list)
            case 7:
                field = FieldPlan(name(["weekdays", "open_days"]), "list<enum>", .list)
                field.add("values", "[" + Vocabulary.weekdays.joined(separator: ", ") + "]")
                field.add("default", "[monday, friday]")
            default:
                field = FieldPlan(name(["toggles", "answers_correct"]), "list<bool>", .list)
                field.add("default", "[]")
            }
        case .ref:
            preconditionFailure("refs are made by refField(to:in:)")
        }
        if rng.chance(22), !field.attributes.contains(where: { $0.0 == "doc" }) {
            field.add("doc", quoted(rng.pick(Vocabulary.fieldDocs)))
        }
        return field
    }

    /// Versions: fields added later (`since`), one renamed field, the odd deprecation.
    /// The field a scope key's row placeholder needs: `team` rows are filed under their
    /// `{team_id}`, so a team-scoped contract must carry a required, unencrypted `team_id: id`
    /// (the compiler's SCOPE_KEY_FIELD_MISSING). The other scopes' keys are filled from the token.
    private func scopeKeyField(scope: String) -> FieldPlan? {
        guard scope == "team" else { return nil }
        var field = FieldPlan(Self.teamKeyField, "id", .id)
        field.add("doc", quoted("The team whose scope holds the row; fills {team_id} in the scope key."))
        return field
    }

    private static let teamKeyField = "team_id"

    private mutating func addEvolution(_ plan: inout ContractPlan) {
        let candidates = plan.fields.indices.filter { index in
            let field = plan.fields[index]
            // The scope key's field stays as it is in every version: rows are filed by it.
            return field.name != Self.teamKeyField && !field.attributes.contains { ["primary_key", "version_field"].contains($0.0) }
        }
        var renamed = false
        for index in candidates {
            var field = plan.fields[index]
            if plan.version > 1, field.isOptional || field.hasDefault, rng.chance(18) {
                field.add("since", String(rng.int(in: 2...plan.version)))
                field.comment = field.comment ?? "added in version \(field.attributes.last!.1); optional so older rows still read"
            } else if plan.version > 1, !renamed, rng.chance(15) {
                renamed = true
                let old = "legacy_" + field.name
                if !plan.usedNames.contains(old) {
                    field.add("renamed_from", "{ name: \(old), version: \(rng.int(in: 2...plan.version)) }")
                }
            } else if rng.chance(4) {
                field.add("deprecated", quoted("no longer shown by the apps; kept for older devices"))
            }
            plan.fields[index] = field
        }
    }

    private mutating func addLocalFields(_ plan: inout ContractPlan) {
        var pool: [FieldPlan] = []
        pool.append(FieldPlan("downloaded_at", "timestamp?", .timestamp))
        pool.append(FieldPlan("last_viewed_at", "timestamp?", .timestamp))
        var draft = FieldPlan("draft_note", "string?", .string)
        draft.add("encrypted", "true")
        draft.add("max_length", "4000")
        pool.append(draft)
        var favourite = FieldPlan("is_favourite", "bool", .bool)
        favourite.add("default", "false")
        pool.append(favourite)
        var status = FieldPlan("download_status", "enum", .enumeration)
        status.add("values", "[none, queued, downloading, downloaded, failed]")
        status.add("default", "none")
        pool.append(status)
        var views = FieldPlan("local_view_count", "int", .int)
        views.add("default", "0")
        pool.append(views)
        var cached = FieldPlan("cached_preview", "json?", .json)
        cached.add("doc", quoted("What the list screen shows before the full row is read."))
        pool.append(cached)
        var pending = FieldPlan("pending_photo", "bytes?", .bytes)
        pending.add("encrypted", "true")
        pool.append(pending)

        let used = plan.usedNames
        let count = rng.int(in: 1...4)
        plan.local = Array(rng.shuffled(pool.filter { !used.contains($0.name) }).prefix(count))
    }

    private mutating func addRelations(_ plan: inout ContractPlan) {
        for field in plan.fields {
            guard let target = field.refTarget, let targetIndex = entities.firstIndex(where: { $0.name == target })
            else { continue }
            if rng.chance(50) {
                let name = String(field.name.dropLast(3))  // `fleet_vehicle_id` → `fleet_vehicle`
                plan.addRelation(name, "{ belongs_to: \(target), foreign_key: \(field.name) }")
            }
            if rng.chance(45) {
                // The target is already planned (refs point backwards): give it the other side.
                entities[targetIndex].addRelation(
                    SynthNames.plural(SynthNames.snake(plan.name)), "{ has_many: \(plan.name), foreign_key: \(field.name) }"
                )
            }
        }
    }

    private mutating func addIndexes(_ plan: inout ContractPlan) {
        let indexable = plan.fields.filter { $0.indexable && !$0.attributes.contains { $0.0 == "primary_key" } }
        if let version = plan.fields.last, rng.chance(60) { plan.addIndex([version.name]) }
        for field in indexable where field.refTarget != nil && rng.chance(70) {
            plan.addIndex([field.name], flowStyle: rng.chance(20))
        }
        let leading = indexable.filter { $0.refTarget != nil || $0.kind == .enumeration || $0.kind == .id }
        let trailing = indexable.filter { [.int, .timestamp, .date].contains($0.kind) }
        if let first = leading.first, let second = trailing.first, rng.chance(40) {
            plan.addIndex([first.name, second.name], unique: first.kind == .id && second.kind == .int && rng.chance(50))
        }
        if let code = indexable.first(where: { ["reference_code", "external_ref", "external_id"].contains($0.name) }),
            !code.isOptional, rng.chance(70)
        {
            plan.addIndex([code.name], unique: true)
        }
        if let local = plan.local.first(where: { $0.indexable }), rng.chance(30) {
            plan.addIndex([local.name])
        }
    }

    // MARK: Events

    private mutating func planEvent(taken: inout Set<String>) {
        // Events are recorded on devices, so they apply mostly to entities devices write.
        let writable = entities.filter { $0.scope != "content" }
        let entity = rng.chance(85) && !writable.isEmpty ? rng.pick(writable) : rng.pick(entities)
        var name = ""
        for verb in rng.shuffled(Vocabulary.verbs) where !taken.contains(entity.name + verb) {
            name = entity.name + verb
            break
        }
        if name.isEmpty {
            var suffix = 2
            while taken.contains(entity.name + "Changed\(suffix)") { suffix += 1 }
            name = entity.name + "Changed\(suffix)"
        }
        taken.insert(name)

        let domain = Vocabulary.domains.first { $0.scope == entity.scope }!
        let verb = String(name.dropFirst(entity.name.count))
        var plan = ContractPlan(
            kind: .event, name: name, folder: "events/\(domain.folder)",
            scope: entity.scope == "content" ? "user" : entity.scope,
            summary: "A \(SynthNames.words(entity.name)) was \(SynthNames.words(verb)) on a device, possibly offline."
        )
        plan.appliesTo = entity.name
        plan.version = rng.weighted([(1, 70), (2, 20), (3, 10)])
        if plan.version > 1, rng.chance(50) { plan.oldestSupported = rng.int(in: 1...plan.version) }
        if rng.chance(40) { plan.table = SynthNames.snake(name) + rng.pick(["_events", "_log"]) }
        if rng.chance(25) {
            plan.doc = [
                "Recorded on the device when it happens, offline or not, and pushed in order when the",
                "device is online. The server folds it into the \(SynthNames.words(entity.name)) it applies to.",
            ].joined(separator: "\n")
        }
        if rng.chance(10) { plan.compatibility = rng.pick(["backward", "full"]) }
        // Events take only `direction` and `conflict: append_only`; the rest is the server's business.
        switch rng.int(in: 0...5) {
        case 0, 1, 2: plan.sync = nil  // the defaults: up, append_only
        case 3: plan.sync = syncLines([("direction", "both")])
        case 4: plan.sync = syncLines([("direction", "up"), ("conflict", "append_only")])
        default: plan.sync = syncLines([("direction", "both"), ("conflict", "append_only")])
        }

        plan.fields.append(refField(to: entity.name, in: plan, listChance: 0, optionalChance: 0))
        if let field = scopeKeyField(scope: plan.scope) { plan.fields.append(field) }
        let others = entities.filter { $0.name != entity.name && [plan.scope, "content", "tenant"].contains($0.scope) }
        if !others.isEmpty, rng.chance(40) {
            plan.fields.append(refField(to: rng.pick(others).name, in: plan, listChance: 15))
        }
        fillFields(&plan, upTo: rng.int(in: 8...20))
        addEvolution(&plan)
        events.append(plan)
    }

    // MARK: Text

    private mutating func longDoc(for name: String) -> String {
        let words = SynthNames.words(name)
        return [
            "Synthesized for the codegen benchmark. A \(words) is written on one device and read",
            "on others, so every field says what it holds and how older devices read it.",
            rng.pick([
                "Rows older than the retention are dropped from devices, never from the server.",
                "The server keeps every version for the audit log.",
                "Edits made offline are pushed in order when the device reconnects.",
            ]),
        ].joined(separator: "\n")
    }

    private func quoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    private func unique(_ base: String, _ used: Set<String>, alternatives: [String] = []) -> String {
        if !used.contains(base) { return base }
        for alternative in alternatives where !used.contains(alternative) { return alternative }
        var suffix = 2
        while used.contains("\(base)_\(suffix)") { suffix += 1 }
        return "\(base)_\(suffix)"
    }

    private func manifest() -> String {
        """
        # The manifest of a synthesized contract set: written by outpost-bench for the codegen
        # benchmark (seeded, so every run reads the same contracts). Not a real project.
        doc: Synthetic contracts shaped like the sample ones, at the scale of a large project.

        scopes:
          content:
            key: "content:global"
            access: read                  # devices only read; the server publishes
            doc: Published learning content that every learner reads.
          user:
            key: "progress:user:{user_id}"
            doc: One learner's own progress; only its owner reads and writes it.
          team:
            key: "ops:team:{team_id}"
            doc: Field-service records shared by the members of one team.
          tenant:
            key: "org:tenant:{tenant_id}"
            access: read_write
            doc: Organisation-wide records every member of a tenant shares.
          device:
            key: "device:{device_id}"
            doc: What one device keeps for itself and backs up.

        compatibility:
          entities: full
          events: backward

        """
    }

    private func render(_ plan: ContractPlan) -> String {
        var lines: [String] = []
        if let comment = plan.comment { lines.append("# " + comment) }
        lines.append("\(plan.kind == .entity ? "entity" : "event"): \(plan.name)")
        if let swiftName = plan.swiftName { lines.append("swift_name: \(swiftName)") }
        lines.append("summary: \(plan.summary)")
        if let doc = plan.doc {
            lines.append("doc: >")
            lines += doc.split(separator: "\n").map { "  " + $0 }
        }
        lines.append("version: \(plan.version)")
        if let oldest = plan.oldestSupported { lines.append("oldest_supported: \(oldest)") }
        if let table = plan.table { lines.append("table: \(table)") }
        lines.append("scope: \(plan.scope)")
        if let appliesTo = plan.appliesTo { lines.append("applies_to: \(appliesTo)") }
        if let sync = plan.sync { lines += sync }
        if let compatibility = plan.compatibility { lines.append("compatibility: \(compatibility)") }

        lines.append("")
        lines.append("fields:")
        for field in plan.fields { lines += renderField(field) }
        if !plan.local.isEmpty {
            lines.append("")
            lines.append("local:                       # client-only columns: never on the wire")
            for field in plan.local { lines += renderField(field) }
        }
        if !plan.relations.isEmpty {
            lines.append("")
            lines.append("relations:")
            for relation in plan.relations { lines.append("  \(relation.name): \(relation.text)") }
        }
        if !plan.indexes.isEmpty {
            lines.append("")
            lines.append("indexes:")
            for index in plan.indexes { lines.append("  - \(index)") }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// `name: type`, `name: { type: ..., key: value }`, or a block when it would not read on one line.
    private func renderField(_ field: FieldPlan) -> [String] {
        var lines: [String] = []
        if let comment = field.comment { lines.append("  # " + comment) }
        if field.attributes.isEmpty {
            lines.append("  \(field.name): \(field.type)")
            return lines
        }
        let pairs = [("type", field.type)] + field.attributes
        let flow = "  \(field.name): { " + pairs.map { "\($0.0): \($0.1)" }.joined(separator: ", ") + " }"
        if flow.count <= 110 && pairs.count <= 4 {
            lines.append(flow)
        } else {
            lines.append("  \(field.name):")
            lines += pairs.map { "    \($0.0): \($0.1)" }
        }
        return lines
    }

    // MARK: Summary

    private mutating func tally(_ plan: ContractPlan) {
        if plan.kind == .entity { summary.entities += 1 } else { summary.events += 1 }
        summary.fields += plan.fields.count
        summary.localFields += plan.local.count
        summary.relations += plan.relations.count
        summary.indexes += plan.indexes.count
        summary.minFields = min(summary.minFields, plan.fields.count)
        summary.maxFields = max(summary.maxFields, plan.fields.count)
        for field in plan.fields + plan.local {
            summary.typeUse[field.kind.rawValue, default: 0] += 1
            // `list<ref<T>>` counts as both a list and a ref.
            if field.kind == .ref, field.type.hasPrefix("list<") { summary.typeUse["list", default: 0] += 1 }
        }
    }
}

/// Name helpers for the synthesizer (the compiler's own are not public).
private enum SynthNames {
    /// `FleetWorkOrder` → `fleet_work_order`.
    static func snake(_ camel: String) -> String {
        var result = ""
        for character in camel {
            if character.isUppercase {
                if !result.isEmpty { result += "_" }
                result += character.lowercased()
            } else {
                result.append(character)
            }
        }
        return result
    }

    /// `FleetWorkOrder` → `fleet work order`; `display_name` → `display name`.
    static func words(_ name: String) -> String {
        snake(name).replacingOccurrences(of: "_", with: " ")
    }

    /// `fleet_work_order` → `fleet_work_orders`, `org_policy` → `org_policies`, `course_quiz` → `course_quizzes`.
    static func plural(_ snake: String) -> String {
        if snake.hasSuffix("quiz") { return snake + "zes" }
        if snake.hasSuffix("y"), let before = snake.dropLast().last, !"aeiou".contains(before) {
            return snake.dropLast() + "ies"
        }
        if snake.hasSuffix("s") || snake.hasSuffix("x") || snake.hasSuffix("ch") || snake.hasSuffix("sh") {
            return snake + "es"
        }
        return snake + "s"
    }
}
