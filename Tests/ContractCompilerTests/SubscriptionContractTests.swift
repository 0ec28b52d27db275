import ContractRuntime
import Foundation
import OutpostTestSupport
import Testing

@testable import ContractCompiler

/// Subscriptions in the contract language: decoded from the manifest, checked against the
/// contracts they name (each refusal with its rule, file, line and column), generated as
/// descriptors, typed constructors and server indexes, and held to the compatibility gate.
@Suite("Subscriptions in the contracts", .blockingWork)
struct SubscriptionContractTests {
    static let incident = """
        entity: Incident
        summary: An incident.
        version: 1
        table: incidents
        scope: team
        sync: { direction: both, conflict: last_writer_wins }
        fields:
          id: { type: id, primary_key: true }
          team_id: id
          state: { type: enum, values: [new, open, closed] }
          assignee_id: id?
          asset_id: ref<Asset>?
          probe_id: ref<Probe>?
          tracking: uuid?
          notes: { type: string?, encrypted: true }
          internal_code: { type: string?, server_only: true }
          score: { type: int, default: 0 }
          updated_at: { type: timestamp, version_field: true }
        local:
          pinned: { type: bool, default: false }
        relations:
          asset: { belongs_to: Asset, foreign_key: asset_id }
          visits: { has_many: Visit, foreign_key: incident_id }
          tasks: { has_many: Job, foreign_key: incident_id }
          readings: { has_many: Reading, foreign_key: incident_id }
        """
    static let asset = """
        entity: Asset
        summary: An asset.
        version: 1
        table: assets
        scope: team
        sync: { direction: both, conflict: last_writer_wins }
        fields:
          id: { type: id, primary_key: true }
          team_id: id
          updated_at: { type: timestamp, version_field: true }
        relations:
          incidents: { has_many: Incident, foreign_key: asset_id }
        """
    static let visit = """
        entity: Visit
        summary: A visit to an incident.
        version: 1
        table: visits
        scope: team
        sync: { direction: both, conflict: last_writer_wins }
        fields:
          id: { type: id, primary_key: true }
          team_id: id
          incident_id: ref<Incident>
          updated_at: { type: timestamp, version_field: true }
        """
    static let job = """
        entity: Job
        summary: A job on an incident, in another scope.
        version: 1
        table: jobs
        scope: user
        sync: { direction: both, conflict: last_writer_wins }
        fields:
          id: { type: id, primary_key: true }
          incident_id: ref<Incident>
          updated_at: { type: timestamp, version_field: true }
        """
    static let reading = """
        entity: Reading
        summary: A reading devices send and never pull.
        version: 1
        table: readings
        scope: team
        sync: { direction: up, conflict: append_only, tombstones: false }
        fields:
          id: { type: id, primary_key: true }
          team_id: id
          incident_id: ref<Incident>
          updated_at: { type: timestamp, version_field: true }
        """
    static let probe = """
        entity: Probe
        summary: A probe keyed by a UUID.
        version: 1
        table: probes
        scope: team
        sync: { direction: down, conflict: server_authoritative }
        fields:
          id: { type: uuid, primary_key: true }
          team_id: id
          updated_at: { type: timestamp, version_field: true }
        """
    static let seen = """
        event: IncidentSeen
        summary: Someone looked at an incident.
        version: 1
        scope: team
        fields:
          team_id: id
          incident_id: ref<Incident>
        """

    static var files: [String: String] {
        [
            "entities/incident.yaml": incident, "entities/asset.yaml": asset, "entities/visit.yaml": visit, "entities/job.yaml": job,
            "entities/reading.yaml": reading, "entities/probe.yaml": probe, "events/incident_seen.yaml": seen,
        ]
    }

    static func manifest(_ subscriptions: String) -> String {
        ContractFolder.defaultManifest + "\nsubscriptions:\n" + subscriptions
    }

    static func folder(_ subscriptions: String, incident: String = incident) throws -> ContractFolder {
        var files = Self.files
        files["entities/incident.yaml"] = incident
        return try ContractFolder(files: files, manifest: manifest(subscriptions))
    }

    static let valid = """
          incident:
            doc: One incident with its asset and visits.
            entity: Incident
            parameters: { id: id }
            where: { id: "{id}" }
            include: [asset, visits]
            ttl: 7d
            priority: high
          mine:
            doc: Mine, in some states.
            entity: Incident
            parameters: { states: { type: list<string>, max_count: 3 } }
            where: { assignee_id: "{token.user_id}", state: { in: "{states}" } }
            ttl: 12h
        """

    // MARK: Decoding and generation

    @Test("a valid subscription decodes with its parameters, filter, includes, ttl and priority")
    func decoding() throws {
        let folder = try Self.folder(Self.valid)
        defer { folder.remove() }
        let result = folder.load()
        #expect(!result.diagnostics.hasErrors, "\(folder.report())")
        let set = try #require(result.contracts)
        #expect(set.manifest.subscriptions.map(\.name) == ["incident", "mine"])
        let mine = ContractValidator.descriptor(of: set.manifest.subscriptions[1], in: set)
        // A parameter that feeds an enum field takes the field's kind: the engines check its values.
        let state = FieldKind.enumeration(values: ["new", "open", "closed"], fallback: nil)
        #expect(mine.parameters == [.init(name: "states", kind: .list(state), maxCount: 3)])
        #expect(mine.filter == [.init(field: "assignee_id", operand: .token("user_id")), .init(field: "state", operand: .parameter("states"))])
        #expect(mine.defaultTTLSeconds == 12 * 3600)
        #expect(mine.priority == .normal)
        #expect(mine.includes.isEmpty)
        let incident = ContractValidator.descriptor(of: set.manifest.subscriptions[0], in: set)
        #expect(incident.parameters == [.init(name: "id", kind: .id, maxCount: 1)])
        #expect(incident.defaultTTLSeconds == 7 * 86_400)
        #expect(incident.priority == .high)
        #expect(
            incident.includes == [
                .init(relation: "asset", kind: .belongsTo, target: "Asset", foreignKey: "asset_id"),
                .init(relation: "visits", kind: .hasMany, target: "Visit", foreignKey: "incident_id"),
            ])
        #expect(incident.entities == ["Incident", "Asset", "Visit"])
        #expect(set.manifest.subscriptions[0].shape == "Incident(id: id) where id = {id} include asset, visits")
        #expect(set.manifest.subscriptions[1].shape == "Incident(states: list<string> ≤3) where assignee_id = {token.user_id} and state in {states}")
    }

    @Test("long-form parameters, literal filters, nested includes and the defaults")
    func grammar() throws {
        let folder = try Self.folder(
            """
              open_visits:
                doc: |
                  Open incidents of some assets,
                  with their visits.
                entity: Incident
                parameters:
                  assets: list<id>
                  who: { type: id }
                where:
                  asset_id: { in: "{ assets }" }
                  assignee_id: "{who}"
                  state: { in: [new, open] }
                include: { asset: { incidents: [visits] } }
                ttl: 2w
            """)
        defer { folder.remove() }
        let result = folder.load()
        #expect(!result.diagnostics.hasErrors, "\(folder.report())")
        let set = try #require(result.contracts)
        let subscription = try #require(set.manifest.subscriptions.first)
        #expect(subscription.doc == "Open incidents of some assets,\nwith their visits.")
        let descriptor = ContractValidator.descriptor(of: subscription, in: set)
        #expect(descriptor.parameters == [.init(name: "assets", kind: .list(.id), maxCount: 100), .init(name: "who", kind: .id, maxCount: 1)])
        #expect(descriptor.filter.last == .init(field: "state", operand: .values([.string("new"), .string("open")])))
        #expect(descriptor.defaultTTLSeconds == 14 * 86_400)
        #expect(descriptor.priority == .normal)
        #expect(descriptor.entities == ["Incident", "Asset", "Incident", "Visit"])

        let constructors = try #require(ContractCompiler.generate(set).first { $0.path == "Subscriptions.swift" }?.contents)
        #expect(constructors.contains("    /// Open incidents of some assets,\n    /// with their visits.\n"))
        #expect(constructors.contains("public static func openVisits(assets: [String], who: String, scope: String? = nil) -> SubscriptionRequest {"))
        #expect(
            constructors.contains(
                #"SubscriptionRequest(name: "open_visits", parameters: ["assets": .array(assets.map(JSONValue.string)), "who": .string(who)], scope: scope)"#
            ))
    }

    @Test("the registry lists the descriptors in manifest order; each gets a typed constructor with the DTOs' types")
    func generation() throws {
        let folder = try Self.folder(
            Self.valid + """

                  everyone:
                    doc: Every incident of a state.
                    entity: Incident
                    parameters: { state: string }
                    where: { state: "{state}" }
                    ttl: 1d
                """)
        defer { folder.remove() }
        let result = folder.load()
        #expect(!result.diagnostics.hasErrors, "\(folder.report())")
        let set = try #require(result.contracts)
        let files = Dictionary(uniqueKeysWithValues: ContractCompiler.generate(set).map { ($0.path, $0.contents) })
        let constructors = try #require(files["Subscriptions.swift"])
        #expect(constructors.contains("public enum Subscriptions {"))
        #expect(constructors.contains("    /// One incident with its asset and visits.\n"))
        #expect(constructors.contains("public static func incident(id: String, scope: String? = nil) -> SubscriptionRequest {"))
        #expect(constructors.contains(#"SubscriptionRequest(name: "incident", parameters: ["id": .string(id)], scope: scope)"#))
        // Enum fields are typed with the DTO's nested enum; the request carries the raw values.
        #expect(constructors.contains("public static func mine(states: [Incident.State], scope: String? = nil) -> SubscriptionRequest {"))
        #expect(constructors.contains(#"parameters: ["states": .array(states.map { .string($0.rawValue) })]"#))
        #expect(constructors.contains("public static func everyone(state: Incident.State, scope: String? = nil) -> SubscriptionRequest {"))
        #expect(constructors.contains(#"parameters: ["state": .string(state.rawValue)]"#))

        let registry = try #require(files["ContractRegistry.swift"])
        #expect(registry.contains("public static let subscriptions: [SubscriptionDescriptor] = ["))
        let positions = ["incident", "mine", "everyone"].compactMap { registry.range(of: "name: \"\($0)\", summary:")?.lowerBound }
        #expect(positions.count == 3 && positions == positions.sorted(), "in manifest order")
        #expect(
            registry.contains(
                #"includes: [.init(relation: "asset", kind: .belongsTo, target: "Asset", foreignKey: "asset_id", includes: []), .init(relation: "visits", kind: .hasMany, target: "Visit", foreignKey: "incident_id", includes: [])],"#
            ))
        #expect(registry.contains("defaultTTLSeconds: 604800, priority: .high"))
    }

    // MARK: Derived indexes

    @Test("the server gets an index per filter field and has_many foreign key, in both dialects; devices none")
    func derivedIndexes() throws {
        let folder = try Self.folder(Self.valid)
        defer { folder.remove() }
        let set = try #require(folder.load().contracts)
        let derived = SubscriptionGenerator(set: set).derivedIndexes()
        // `incident` selects by the primary key (indexed already) and takes the asset it names
        // (by the asset's key): only its visits need one. `state` leads no declared index here.
        #expect(
            derived.map(\.name) == [
                "visits_incident_id_subscription_idx", "incidents_assignee_id_subscription_idx", "incidents_state_subscription_idx",
            ])
        let files = Dictionary(uniqueKeysWithValues: ContractCompiler.generate(set).map { ($0.path, $0.contents) })
        for file in ["ServerMigrations.swift", "ServerPostgresMigrations.swift"] {
            let text = try #require(files[file])
            #expect(text.contains(#"identifier: "incidents.v1.assignee_id_subscription_index","#), "\(file)")
            #expect(
                text.contains(#"CREATE INDEX IF NOT EXISTS "incidents_assignee_id_subscription_idx" ON "incidents" ("_tenant_id", "assignee_id")"#),
                "\(file)")
            #expect(
                text.contains(#"CREATE INDEX IF NOT EXISTS "incidents_state_subscription_idx" ON "incidents" ("_tenant_id", "state")"#), "\(file)")
            #expect(
                text.contains(#"CREATE INDEX IF NOT EXISTS "visits_incident_id_subscription_idx" ON "visits" ("_tenant_id", "incident_id")"#),
                "\(file)")
            #expect(!text.contains(#""incidents_id_subscription_idx""#), "the primary key is indexed already")
            #expect(!text.contains(#""assets_id_subscription_idx""#), "belongs_to reaches the target's primary key")
        }
        #expect(try #require(files["ClientMigrations.swift"]).contains("subscription") == false)
        // Each is a step of its own after the table's steps: a table that exists gets the index
        // without its released create step changing.
        for side in [StorageSide.server, .serverPostgres] {
            let steps = MigrationPlanner(set: set).migrations(side: side).map(\.identifier)
            let create = try #require(steps.firstIndex(of: "incidents.v1.create"))
            let index = try #require(steps.firstIndex(of: "incidents.v1.assignee_id_subscription_index"))
            #expect(index > create)
            let createStep = try #require(MigrationPlanner(set: set).migrations(side: side).first { $0.identifier == "incidents.v1.create" })
            #expect(!createStep.statements.joined().contains("subscription"))
        }
    }

    @Test("a declared index that starts with the field serves it; one naming a local field does not")
    func declaredIndexReused() throws {
        let mine = """
              mine:
                doc: Mine.
                entity: Incident
                where: { assignee_id: "{token.user_id}" }
                ttl: 1d
            """
        let indexed = try Self.folder(mine, incident: Self.incident + "\nindexes:\n  - [assignee_id, state]\n")
        defer { indexed.remove() }
        let set = try #require(indexed.load().contracts)
        #expect(SubscriptionGenerator(set: set).derivedIndexes().isEmpty)
        let server = ContractCompiler.generate(set).first { $0.path == "ServerPostgresMigrations.swift" }?.contents ?? ""
        #expect(server.contains(#"CREATE INDEX "incidents_assignee_id_state_idx" ON "incidents" ("_tenant_id", "assignee_id", "state")"#))
        #expect(!server.contains("subscription"))

        let local = try Self.folder(mine, incident: Self.incident + "\nindexes:\n  - [assignee_id, pinned]\n")
        defer { local.remove() }
        let localSet = try #require(local.load().contracts)
        #expect(SubscriptionGenerator(set: localSet).derivedIndexes().map(\.name) == ["incidents_assignee_id_subscription_idx"])
    }

    @Test("a version that rebuilds the table on SQLite is followed by a new index step; PostgreSQL alters in place and keeps its step")
    func indexAfterRebuild() throws {
        let mine = """
              mine:
                doc: Mine.
                entity: Incident
                where: { assignee_id: "{token.user_id}" }
                ttl: 1d
            """
        let workspace = try CompatWorkspace(manifest: Self.manifest(mine))
        defer { workspace.remove() }
        for (path, text) in Self.files { try workspace.write(text, to: path) }
        try workspace.lock()
        #expect(workspace.lockText()?.contains(#"- { id: "incidents.v1.assignee_id_subscription_index", checksum: "#) == true)
        // `score` becomes optional: SQLite rebuilds the table, which drops the derived index.
        try workspace.write(
            Self.incident.replacingOccurrences(of: "version: 1", with: "version: 2")
                .replacingOccurrences(of: "score: { type: int, default: 0 }", with: "score: { type: int?, default: 0 }"),
            to: "entities/incident.yaml")
        var diagnostics = DiagnosticCollector()
        let history = ContractCompiler.history(lockPath: workspace.lockPath, diagnostics: &diagnostics)
        let planner = MigrationPlanner(set: try workspace.loadValid(), history: history)
        let sqlite = planner.migrations(side: .server).map(\.identifier)
        let rebuild = try #require(sqlite.firstIndex(of: "incidents.v2.migrate"))
        let again = try #require(sqlite.firstIndex(of: "incidents.v2.assignee_id_subscription_index"), "\(sqlite)")
        #expect(again > rebuild)
        #expect(!sqlite.contains("incidents.v1.assignee_id_subscription_index"))
        let postgres = planner.migrations(side: .serverPostgres).map(\.identifier)
        #expect(postgres.contains("incidents.v1.assignee_id_subscription_index"))
        #expect(!postgres.contains("incidents.v2.assignee_id_subscription_index"))
        // The released step SQLite no longer generates is no refusal: servers that ran it made an
        // index the rebuild dropped, and the new step makes it again.
        let result = try workspace.check()
        #expect(!result.diagnostics.hasErrors, "\(workspace.readable(result.diagnostics))")
    }

    // MARK: Refusals

    /// One refusal: the subscriptions written under `subscriptions:`, the rule, a part of the
    /// message, and the text the diagnostic points at (its first occurrence after `subscriptions:`).
    struct Refusal: Sendable, CustomTestStringConvertible {
        var name: String
        var subscriptions: String
        var rule: RuleID
        var message: String
        var at: String
        /// Which occurrence of `at` (from 1).
        var occurrence = 1
        /// Whether it is the only error (a mistake is reported once, not again by the rules after it).
        var alone = true
        var testDescription: String { name }
    }

    /// A subscription `broken` on Incident by `id`, with `lines` (each `key: value`) replacing
    /// its own keys or added to them; `nil` removes the key.
    static func broken(_ lines: [String: String?]) -> String {
        var keys: [(String, String?)] = [
            ("doc", "Broken."), ("entity", "Incident"), ("parameters", "{ id: id }"), ("where", #"{ id: "{id}" }"#), ("ttl", "1d"),
        ]
        for (key, value) in lines.sorted(by: { $0.key < $1.key }) {
            if let index = keys.firstIndex(where: { $0.0 == key }) { keys[index].1 = value } else { keys.append((key, value)) }
        }
        return "  broken:\n" + keys.compactMap { key, value in value.map { "    \(key): \($0)" } }.joined(separator: "\n")
    }

    static let refusals: [Refusal] = [
        // The entity
        Refusal(
            name: "an unknown entity", subscriptions: broken(["entity": "Incidnt"]), rule: .subscriptionEntity,
            message: "'Incidnt', which is not an entity", at: "Incidnt"),
        Refusal(
            name: "an event", subscriptions: broken(["entity": "IncidentSeen", "parameters": nil, "where": "{ incident_id: x }"]),
            rule: .subscriptionEntity, message: "names the event 'IncidentSeen'", at: "IncidentSeen"),
        Refusal(
            name: "an entity devices never pull", subscriptions: broken(["entity": "Reading"]), rule: .subscriptionEntity,
            message: "which devices never pull (direction: up)", at: "Reading"),
        Refusal(
            name: "an entity not keyed by id", subscriptions: broken(["entity": "Probe", "parameters": nil, "where": "{ team_id: t }"]),
            rule: .subscriptionEntity, message: "whose primary key is uuid", at: "Probe"),
        // The filter
        Refusal(
            name: "no condition", subscriptions: broken(["parameters": nil, "where": "{}"]), rule: .subscriptionFilter,
            message: "no condition: it would select the whole scope 'team'", at: "{}"),
        Refusal(
            name: "an unknown field", subscriptions: broken(["where": #"{ asignee_id: "{id}" }"#]), rule: .subscriptionFilter,
            message: "Incident has no field 'asignee_id'", at: "asignee_id"),
        Refusal(
            name: "a local field", subscriptions: broken(["parameters": nil, "where": "{ pinned: yes }"]), rule: .subscriptionFilter,
            message: "'pinned' is a local field of Incident", at: "pinned"),
        Refusal(
            name: "an encrypted field", subscriptions: broken(["parameters": nil, "where": "{ notes: x }"]), rule: .subscriptionFilter,
            message: "'notes' is encrypted", at: "notes"),
        Refusal(
            name: "a server-only field", subscriptions: broken(["parameters": nil, "where": "{ internal_code: x }"]), rule: .subscriptionFilter,
            message: "'internal_code' is server-only", at: "internal_code"),
        Refusal(
            name: "a number", subscriptions: broken(["parameters": nil, "where": "{ score: 3 }"]), rule: .subscriptionFilter,
            message: "'score' is int, which PostgreSQL stores as BIGINT, not as text", at: "score"),
        Refusal(
            name: "a uuid", subscriptions: broken(["parameters": nil, "where": "{ tracking: x }"]), rule: .subscriptionFilter,
            message: "'tracking' is uuid, which PostgreSQL stores as UUID", at: "tracking"),
        Refusal(
            name: "a reference to a uuid key", subscriptions: broken(["parameters": nil, "where": "{ probe_id: x }"]), rule: .subscriptionFilter,
            message: "'probe_id' is ref<Probe>, which PostgreSQL stores as UUID", at: "probe_id"),
        Refusal(
            name: "a value the enum lacks", subscriptions: broken(["parameters": nil, "where": "{ state: paused }"]), rule: .subscriptionFilter,
            message: "'paused' is not a value of Incident.state", at: "paused"),
        Refusal(
            name: "several values without in", subscriptions: broken(["parameters": nil, "where": "{ state: [new, open] }"]),
            rule: .subscriptionFilter, message: "several values need `in`", at: "[new, open]"),
        // Parameters
        Refusal(
            name: "an undeclared parameter", subscriptions: broken(["where": #"{ id: "{di}" }"#]), rule: .subscriptionParameter,
            message: "names the parameter 'di', which 'broken' does not declare", at: #""{di}""#,
            alone: false),
        Refusal(
            name: "an unknown claim", subscriptions: broken(["parameters": nil, "where": #"{ assignee_id: "{token.team}" }"#]),
            rule: .subscriptionParameter, message: "'{token.team}' is not a claim of the token", at: #""{token.team}""#),
        Refusal(
            name: "in with a scalar parameter", subscriptions: broken(["where": #"{ id: { in: "{id}" } }"#]), rule: .subscriptionParameter,
            message: "`in` needs a list parameter; 'id' is id", at: #""{id}""#),
        Refusal(
            name: "a list without in", subscriptions: broken(["parameters": "{ ids: list<id> }", "where": #"{ id: "{ids}" }"#]),
            rule: .subscriptionParameter, message: "the list parameter 'ids' needs `in`", at: #""{ids}""#),
        Refusal(
            name: "a type other than the field's", subscriptions: broken(["parameters": "{ who: int }", "where": #"{ assignee_id: "{who}" }"#]),
            rule: .subscriptionParameter, message: "parameter 'who' is int but Incident.assignee_id is id?", at: "who:"),
        Refusal(
            name: "a string for an id", subscriptions: broken(["parameters": "{ id: string }"]), rule: .subscriptionParameter,
            message: "parameter 'id' is string but Incident.id is id", at: "id: string"),
        Refusal(
            name: "a parameter never used", subscriptions: broken(["parameters": "{ id: id, extra: string }"]), rule: .subscriptionParameter,
            message: "parameter 'extra' of subscription 'broken' is never used", at: "extra"),
        Refusal(
            name: "an optional parameter", subscriptions: broken(["parameters": "{ id: id? }"]), rule: .invalidValue,
            message: "parameter 'id' cannot be optional", at: "id?"),
        Refusal(
            name: "an unknown parameter type", subscriptions: broken(["parameters": "{ id: ident }"]), rule: .unknownType,
            message: "parameter 'id' has the unknown type 'ident'", at: "ident }"),
        Refusal(
            name: "too many values",
            subscriptions: broken(["parameters": "{ ids: { type: list<id>, max_count: 1001 } }", "where": #"{ id: { in: "{ids}" } }"#]),
            rule: .invalidValue, message: "max_count must be a whole number from 1 to 1000", at: "1001"),
        Refusal(
            name: "max_count on a scalar", subscriptions: broken(["parameters": "{ id: { type: id, max_count: 5 } }"]), rule: .invalidValue,
            message: "`max_count` applies to list parameters only", at: "{ type: id"),
        // Includes
        Refusal(
            name: "an unknown relation", subscriptions: broken(["include": "[asets]"]), rule: .subscriptionInclude,
            message: "Incident has no relation 'asets'", at: "asets"),
        Refusal(
            name: "another scope", subscriptions: broken(["include": "[tasks]"]), rule: .subscriptionInclude,
            message: "'tasks' reaches Job in the scope 'user', not 'team' like Incident", at: "tasks"),
        Refusal(
            name: "rows devices never pull", subscriptions: broken(["include": "[readings]"]), rule: .subscriptionEntity,
            message: "takes rows of Reading, which devices never pull", at: "readings"),
        Refusal(
            name: "a relation twice", subscriptions: broken(["include": "[visits, visits]"]), rule: .subscriptionInclude,
            message: "'visits' is included twice under Incident", at: "visits]"),
        Refusal(
            name: "deeper than 3 levels", subscriptions: broken(["include": "{ asset: { incidents: { asset: [incidents] } } }"]),
            rule: .subscriptionInclude, message: "includes deeper than 3 levels", at: "incidents] "),
        // ttl, priority, keys
        Refusal(
            name: "a ttl over a year", subscriptions: broken(["ttl": "400d"]), rule: .invalidValue,
            message: "ttl '400d' is not a duration of at most a year", at: "400d"),
        Refusal(
            name: "no ttl", subscriptions: broken(["ttl": "0h"]), rule: .invalidValue, message: "ttl '0h' is not a duration", at: "0h"),
        Refusal(
            name: "a ttl that is not a duration", subscriptions: broken(["ttl": "soon"]), rule: .invalidValue,
            message: "ttl 'soon' is not a duration", at: "soon"),
        Refusal(
            name: "an unknown priority", subscriptions: broken(["priority": "urgent"]), rule: .invalidValue, message: "priority", at: "urgent"),
        Refusal(
            name: "a missing doc", subscriptions: broken(["doc": nil]), rule: .missingKey, message: "the required key 'doc'",
            at: "entity: Incident"),
        Refusal(
            name: "an unknown key", subscriptions: broken(["filter": "{}"]), rule: .unknownKey, message: "filter", at: "filter"),
        // Names
        Refusal(
            name: "a name not in snake case", subscriptions: broken([:]).replacingOccurrences(of: "broken:", with: "brokenOne:"),
            rule: .invalidIdentifier, message: "subscription name 'brokenOne' is not lower snake case", at: "brokenOne"),
        Refusal(
            name: "a Swift keyword", subscriptions: broken([:]).replacingOccurrences(of: "broken:", with: "default:"), rule: .reservedWord,
            message: "subscription name 'default' is a Swift keyword", at: "default"),
        Refusal(
            name: "one constructor for two names",
            subscriptions: broken([:]).replacingOccurrences(of: "broken:", with: "item_2:") + "\n"
                + broken([:]).replacingOccurrences(of: "broken:", with: "item2:"),
            rule: .generatedNameClash, message: "subscriptions 'item_2' and 'item2' generate the same constructor `Subscriptions.item2`",
            at: "item2:"),
        Refusal(
            name: "a parameter called scope", subscriptions: broken(["parameters": "{ scope: id }", "where": #"{ id: "{scope}" }"#]),
            rule: .generatedNameClash, message: "would clash with the constructor's own `scope:`", at: "scope: id"),
        Refusal(
            name: "a parameter that is a Swift keyword", subscriptions: broken(["parameters": "{ in: id }", "where": #"{ id: "{in}" }"#]),
            rule: .reservedWord, message: "parameter name 'in' is a Swift keyword", at: "in: id"),
        Refusal(
            name: "a name twice", subscriptions: broken([:]) + "\n" + broken([:]), rule: .duplicateKey, message: "key 'broken' is written twice",
            at: "broken:", occurrence: 2),
    ]

    /// Line and column (from 1) of the `occurrence`th `needle` after `subscriptions:` in `text`.
    static func position(of needle: String, in text: String, occurrence: Int = 1) -> (line: Int, column: Int)? {
        guard var from = text.range(of: "\nsubscriptions:\n")?.upperBound else { return nil }
        var found: Range<String.Index>?
        for _ in 0..<occurrence {
            found = text.range(of: needle, range: from..<text.endIndex)
            guard let found else { return nil }
            from = found.upperBound
        }
        guard let found else { return nil }
        let before = text[..<found.lowerBound]
        let line = before.filter { $0 == "\n" }.count + 1
        let lineStart = before.lastIndex(of: "\n").map { before.index(after: $0) } ?? before.startIndex
        return (line, before.distance(from: lineStart, to: before.endIndex) + 1)
    }

    @Test("each mistake is refused with its rule, at its file, line and column", arguments: refusals)
    func refusal(_ refusal: Refusal) throws {
        let folder = try Self.folder(refusal.subscriptions)
        defer { folder.remove() }
        let errors = folder.load().diagnostics.sorted.filter { $0.severity == .error }
        let found = errors.first { $0.rule == refusal.rule && $0.message.contains(refusal.message) }
        let report = folder.report()
        let match = try #require(found, "\(refusal.name): no \(refusal.rule) with '\(refusal.message)' in\n\(report)")
        let expected = try #require(
            Self.position(of: refusal.at, in: Self.manifest(refusal.subscriptions), occurrence: refusal.occurrence),
            "\(refusal.at) is not in the manifest")
        #expect(match.location.file.hasSuffix("contracts/contracts.yaml"), "\(refusal.name): \(match.location)")
        #expect(
            (match.location.line, match.location.column) == expected,
            "\(refusal.name): at \(match.location.line):\(match.location.column), expected \(expected.line):\(expected.column)\n\(report)")
        #expect(RuleCatalog.explanation(for: match.rule) != nil)
        if refusal.alone { #expect(errors.count == 1, "\(refusal.name): \(report)") }
    }

    // MARK: Compatibility

    @Test("the gate: adding is compatible; removing or changing one devices use is refused until they are no longer supported")
    func compatibility() throws {
        let workspace = try CompatWorkspace(manifest: Self.manifest(Self.valid))
        defer { workspace.remove() }
        for (path, text) in Self.files { try workspace.write(text, to: path) }
        let summary = try workspace.lock()
        #expect(summary.newVersions.contains("subscription incident") && summary.newVersions.contains("subscription mine"))
        let lock = try #require(workspace.lockText())
        #expect(
            lock.contains(
                "subscriptions:\n  incident:\n    - { entity: Incident, entity_version: 1, shape: \"Incident(id: id) where id = {id} include asset, visits\" }"
            ))
        #expect(lock.contains(#"- { id: "incidents.v1.assignee_id_subscription_index", checksum: "#))
        #expect(try workspace.check().diagnostics.sorted.isEmpty)
        #expect(try workspace.lock().wrote == false, "a second lock changes nothing")

        func check(_ subscriptions: String) throws -> [Diagnostic] {
            try workspace.write(Self.manifest(subscriptions), to: "contracts.yaml")
            return try workspace.check().diagnostics.sorted.filter { $0.severity == .error }
        }
        let another = "\n  another:\n    doc: Another.\n    entity: Asset\n    parameters: { id: id }\n    where: { id: \"{id}\" }\n    ttl: 1d\n"
        // Added: fine. ttl, priority and doc: fine. The order of parameters, conditions and includes: fine.
        #expect(try check(Self.valid + another).isEmpty)
        #expect(
            try check(
                Self.valid.replacingOccurrences(of: "ttl: 7d", with: "ttl: 30d").replacingOccurrences(of: "high", with: "low")
                    .replacingOccurrences(of: "Mine, in some states.", with: "What is mine.")
            ).isEmpty)
        #expect(
            try check(
                Self.valid.replacingOccurrences(of: "[asset, visits]", with: "[visits, asset]").replacingOccurrences(
                    of: #"{ assignee_id: "{token.user_id}", state: { in: "{states}" } }"#,
                    with: #"{ state: { in: "{states}" }, assignee_id: "{token.user_id}" }"#)
            ).isEmpty)

        // Removed: refused, at the manifest.
        let withoutIncident = "  mine:" + Self.valid.components(separatedBy: "  mine:")[1]
        let removed = try check(withoutIncident)
        #expect(removed.map(\.rule) == [.subscriptionRemoved])
        #expect(removed.first?.location.file.hasSuffix("contracts.yaml") == true)
        #expect(removed.first?.message == "subscription 'incident' was removed while devices that use it are supported")
        // Its parameters, filter or includes changed: refused, at its name.
        let changes = [
            ("parameters: { id: id }", "parameters: { key: id }", #"where: { id: "{id}" }"#, #"where: { id: "{key}" }"#),
            ("max_count: 3", "max_count: 5", "", ""),
            ("list<string>", "list<enum>", "", ""),
            ("{token.user_id}", "{token.device_id}", "", ""),
            ("include: [asset, visits]", "include: [asset]", "", ""),
        ]
        for (from, to, otherFrom, otherTo) in changes {
            let changed = try check(Self.valid.replacingOccurrences(of: from, with: to).replacingOccurrences(of: otherFrom, with: otherTo))
            #expect(changed.map(\.rule) == [.subscriptionChanged], "\(from) → \(to)")
            let name = from.hasPrefix("parameters") || from.hasPrefix("include") ? "incident:" : "mine:"
            let expected = try #require(Self.position(of: name, in: Self.manifest(Self.valid)))
            #expect(changed.first.map { "\($0.location.line):\($0.location.column)" } == "\(expected.line):\(expected.column)")
            #expect(changed.first?.message.contains("it was `") == true)
        }

        // Once Incident's oldest supported version is above the one they were locked at, both
        // are allowed, the removal of one whose derived index step was released too.
        try workspace.write(
            Self.incident.replacingOccurrences(of: "version: 1", with: "version: 2\noldest_supported: 2"), to: "entities/incident.yaml")
        let withoutMine = Self.valid.components(separatedBy: "  mine:")[0].replacingOccurrences(of: "[asset, visits]", with: "[asset]")
        #expect(try check(withoutMine).isEmpty)
        let relocked = try workspace.lock()
        #expect(relocked.newVersions.contains("subscription incident"))
        let text = try #require(workspace.lockText())
        #expect(text.contains("    - { entity: Incident, entity_version: 2, shape: \"Incident(id: id) where id = {id} include asset\" }"))
        #expect(text.contains("  mine:\n"), "the lock keeps what was released")
        #expect(!text.contains("assignee_id_subscription_index"), "the index is derived no more")
        #expect(try workspace.check().diagnostics.sorted.isEmpty)
        // And the new shape is held to the gate in turn: devices at version 2 use it.
        #expect(try check(withoutMine.replacingOccurrences(of: "[asset]", with: "[visits]")).map(\.rule) == [.subscriptionChanged])
    }

    @Test("the sample declares incident, assigned_incidents and unit, locked with their root's version")
    func sample() throws {
        let repository = Fixtures.root.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let result = ContractCompiler.load(directory: repository.appendingPathComponent("contracts").path)
        let set = try #require(result.contracts)
        #expect(set.manifest.subscriptions.map(\.name) == ["incident", "assigned_incidents", "unit"])
        var diagnostics = DiagnosticCollector()
        let lock = try #require(LockFile.read(path: repository.appendingPathComponent("contracts/contracts.lock").path, diagnostics: &diagnostics))
        for subscription in set.manifest.subscriptions {
            let record = try #require(lock.subscriptions[subscription.name]?.last, "\(subscription.name) is not locked")
            #expect(record.shape == subscription.shape)
            #expect(record.entity == subscription.entity)
            #expect(record.entityVersion <= (set.contract(named: subscription.entity)?.version ?? 0))
        }
        #expect(SubscriptionGenerator(set: set).derivedIndexes().map(\.name) == ["incidents_assignee_id_subscription_idx"])
    }
}
