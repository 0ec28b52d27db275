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
          notes: { type: string?, encrypted: true }
          score: int
          updated_at: { type: timestamp, version_field: true }
        relations:
          asset: { belongs_to: Asset, foreign_key: asset_id }
          tasks: { has_many: Job, foreign_key: incident_id }
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
        """
    static let job = """
        entity: Job
        summary: A job on an incident.
        version: 1
        table: jobs
        scope: user
        sync: { direction: both, conflict: last_writer_wins }
        fields:
          id: { type: id, primary_key: true }
          incident_id: ref<Incident>
          updated_at: { type: timestamp, version_field: true }
        """

    static func manifest(_ subscriptions: String) -> String {
        ContractFolder.defaultManifest + "\nsubscriptions:\n" + subscriptions
    }

    static func folder(_ subscriptions: String) throws -> ContractFolder {
        try ContractFolder(
            files: ["entities/incident.yaml": incident, "entities/asset.yaml": asset, "entities/job.yaml": job],
            manifest: manifest(subscriptions))
    }

    static let valid = """
          incident:
            doc: One incident with its asset.
            entity: Incident
            parameters: { id: id }
            where: { id: "{id}" }
            include: [asset]
            ttl: 7d
            priority: high
          mine:
            doc: Mine, in some states.
            entity: Incident
            parameters: { states: { type: list<string>, max_count: 3 } }
            where: { assignee_id: "{token.user_id}", state: { in: "{states}" } }
            ttl: 12h
        """

    @Test("a valid subscription becomes a descriptor, a typed constructor and the server indexes it needs")
    func generation() throws {
        let folder = try Self.folder(Self.valid)
        defer { folder.remove() }
        let result = folder.load()
        #expect(!result.diagnostics.hasErrors, "\(folder.report())")
        let set = try #require(result.contracts)
        #expect(set.manifest.subscriptions.map(\.name) == ["incident", "mine"])
        let mine = ContractValidator.descriptor(of: set.manifest.subscriptions[1], in: set)
        #expect(mine.parameters == [.init(name: "states", kind: .list(.string), maxCount: 3)])
        #expect(mine.filter == [.init(field: "assignee_id", operand: .token("user_id")), .init(field: "state", operand: .parameter("states"))])
        #expect(mine.defaultTTLSeconds == 12 * 3600)
        #expect(mine.priority == .normal)
        let incident = ContractValidator.descriptor(of: set.manifest.subscriptions[0], in: set)
        #expect(incident.includes == [.init(relation: "asset", kind: .belongsTo, target: "Asset", foreignKey: "asset_id")])

        let files = Dictionary(uniqueKeysWithValues: ContractCompiler.generate(set).map { ($0.path, $0.contents) })
        let constructors = try #require(files["Subscriptions.swift"])
        #expect(constructors.contains("public static func incident(id: String, scope: String? = nil) -> SubscriptionRequest"))
        #expect(constructors.contains("public static func mine(states: [String], scope: String? = nil) -> SubscriptionRequest"))
        #expect(try #require(files["ContractRegistry.swift"]).contains("public static let subscriptions: [SubscriptionDescriptor]"))
        // Filter fields not led by the primary key get an index on the server, both dialects; the client none.
        for file in ["ServerMigrations.swift", "ServerPostgresMigrations.swift"] {
            let text = try #require(files[file])
            #expect(
                text.contains(#"CREATE INDEX IF NOT EXISTS "incidents_assignee_id_subscription_idx" ON "incidents" ("_tenant_id", "assignee_id")"#))
            #expect(text.contains(#""incidents_state_subscription_idx""#))
            #expect(!text.contains(#""incidents_id_subscription_idx""#), "the primary key is indexed already")
        }
        #expect(try #require(files["ClientMigrations.swift"]).contains("subscription_idx") == false)
    }

    @Test("a declared index that starts with the field is used instead of a derived one")
    func declaredIndexReused() throws {
        let indexed = Self.incident + "\nindexes:\n  - [assignee_id, state]\n"
        let folder = try ContractFolder(
            files: ["entities/incident.yaml": indexed, "entities/asset.yaml": Self.asset, "entities/job.yaml": Self.job],
            manifest: Self.manifest(
                """
                  mine:
                    doc: Mine.
                    entity: Incident
                    where: { assignee_id: "{token.user_id}" }
                    ttl: 1d
                """))
        defer { folder.remove() }
        let set = try #require(folder.load().contracts)
        #expect(SubscriptionGenerator(set: set).derivedIndexes().isEmpty)
    }

    /// The rules and positions reported for one subscription written under `subscriptions:`.
    static func findings(_ subscription: String) throws -> [(rule: RuleID, line: Int, column: Int, message: String)] {
        let folder = try folder(subscription)
        defer { folder.remove() }
        return folder.load().diagnostics.sorted.filter { $0.severity == .error }.map {
            ($0.rule, $0.location.line, $0.location.column, $0.message)
        }
    }

    @Test(
        "each mistake is refused with its rule at its line and column",
        arguments: [
            ("entity: Incidnt", RuleID.subscriptionEntity, "Incidnt"),
            ("where: {}", .subscriptionFilter, "no condition"),
            ("where: { nope: \"{id}\" }", .subscriptionFilter, "no field 'nope'"),
            ("where: { notes: \"{id}\" }", .subscriptionFilter, "encrypted"),
            ("where: { score: \"{id}\" }", .subscriptionFilter, "score"),
            ("where: { state: paused }", .subscriptionFilter, "'paused' is not a value"),
            ("where: { id: \"{other}\" }", .subscriptionParameter, "does not declare"),
            ("where: { id: \"{token.team}\" }", .subscriptionParameter, "not a claim"),
            ("where: { id: { in: \"{id}\" } }", .subscriptionParameter, "needs a list parameter"),
            ("include: [tasks]", .subscriptionInclude, "scope 'user'"),
            ("include: [nothing]", .subscriptionInclude, "no relation 'nothing'"),
            ("ttl: 400d", .invalidValue, "ttl"),
        ])
    func refusals(change: String, rule: RuleID, message: String) throws {
        var lines = [
            "  broken:", "    doc: Broken.", "    entity: Incident", "    parameters: { id: id }", "    where: { id: \"{id}\" }", "    ttl: 1d",
        ]
        let key = String(change.prefix { $0 != ":" })
        if let index = lines.firstIndex(where: { $0.hasPrefix("    \(key):") }) {
            lines[index] = "    " + change
        } else {
            lines.append("    " + change)
        }
        if key == "where", change.contains("{}") || change.contains("nope") || change.contains("paused") || change.contains("token.team") {
            lines.removeAll { $0.hasPrefix("    parameters:") }
        }
        let found = try Self.findings(lines.joined(separator: "\n"))
        let match = found.first { $0.rule == rule && $0.message.contains(message) }
        #expect(match != nil, "\(change): \(found)")
        if let match {
            let changedLine =
                ContractFolder.defaultManifest.components(separatedBy: "\n").count + 2
                + lines.firstIndex { $0.contains(change) || $0.hasPrefix("    \(key):") }!
            #expect(match.line >= changedLine - 3 && match.line <= changedLine + 1, "\(change): line \(match.line), around \(changedLine)")
            #expect(match.column > 1, "\(change): a column is reported")
        }
    }

    @Test("an unused parameter, and a parameter of another type than its field, are refused")
    func parameters() throws {
        let unused = try Self.findings(
            """
              broken:
                doc: Broken.
                entity: Incident
                parameters: { id: id, extra: string }
                where: { id: "{id}" }
                ttl: 1d
            """)
        #expect(unused.contains { $0.rule == .subscriptionParameter && $0.message.contains("never used") })
        let mismatched = try Self.findings(
            """
              broken:
                doc: Broken.
                entity: Incident
                parameters: { who: int }
                where: { assignee_id: "{who}" }
                ttl: 1d
            """)
        #expect(mismatched.contains { $0.rule == .subscriptionParameter && $0.message.contains("is int but") })
    }

    @Test("the gate: adding is compatible; removing or changing one devices use is refused until they are no longer supported")
    func compatibility() throws {
        let workspace = try CompatWorkspace(manifest: Self.manifest(Self.valid))
        defer { workspace.remove() }
        try workspace.write(Self.incident, to: "entities/incident.yaml")
        try workspace.write(Self.asset, to: "entities/asset.yaml")
        try workspace.write(Self.job, to: "entities/job.yaml")
        let summary = try workspace.lock()
        #expect(summary.newVersions.contains("subscription incident"))
        #expect(try workspace.check().diagnostics.sorted.isEmpty)

        func check(_ subscriptions: String) throws -> [RuleID] {
            try workspace.write(Self.manifest(subscriptions), to: "contracts.yaml")
            return try workspace.check().diagnostics.sorted.filter { $0.severity == .error }.map(\.rule)
        }
        // Added: fine. ttl, priority and doc: fine.
        #expect(
            try check(
                Self.valid
                    + "\n  another:\n    doc: Another.\n    entity: Asset\n    parameters: { id: id }\n    where: { id: \"{id}\" }\n    ttl: 1d\n"
            ).isEmpty)
        #expect(try check(Self.valid.replacingOccurrences(of: "ttl: 7d", with: "ttl: 30d").replacingOccurrences(of: "high", with: "low")).isEmpty)
        // Removed, or its selection changed: refused.
        let withoutIncident = Self.valid.components(separatedBy: "  mine:")[1]
        #expect(try check("  mine:" + withoutIncident) == [.subscriptionRemoved])
        #expect(try check(Self.valid.replacingOccurrences(of: "include: [asset]", with: "include: []")) == [.subscriptionChanged])
        #expect(try check(Self.valid.replacingOccurrences(of: "max_count: 3", with: "max_count: 5")) == [.subscriptionChanged])

        // Once Incident's oldest supported version is above the one it was locked at, both are allowed.
        try workspace.write(
            Self.incident.replacingOccurrences(of: "version: 1", with: "version: 2\noldest_supported: 2"), to: "entities/incident.yaml")
        #expect(try check("  mine:" + withoutIncident).isEmpty)
    }
}
