import ContractRuntime
import OutpostTestSupport
import Testing

@testable import ContractCompiler

@Suite("Validation rules", .blockingWork)
struct ValidationTests {
    private func entity(_ fields: String, extra: String = "", sync: String = "{ direction: both, conflict: last_writer_wins }") -> String {
        """
        entity: Thing
        summary: A thing.
        version: 2
        table: things
        scope: user
        sync: \(sync)
        fields:
        \(fields)
        \(extra)
        """
    }

    private func rules(_ files: [String: String]) throws -> [RuleID] {
        let folder = try ContractFolder(files: files)
        defer { folder.remove() }
        return folder.load().diagnostics.sorted.filter { $0.severity == .error }.map(\.rule)
    }

    @Test(
        "each rule fires on its own mistake",
        arguments: [
            ("  id: { type: id, primary_key: true, encrypted: true }", RuleID.encryptedNotAllowed),
            ("  id: { type: id, primary_key: true }\n  hash_value: string", .generatedNameClash),
            ("  id: { type: id, primary_key: true }\n  sort_1: int\n  sort1: int", .generatedNameClash),
            ("  id: { type: id, primary_key: true }\n  local_state: { type: enum, values: [a] }", .generatedNameClash),
            ("  id: { type: id, primary_key: true }\n  title: { type: string, renamed_from: { name: title, version: 2 } }", .invalidRename),
            ("  id: { type: id, primary_key: true }\n  title: { type: string, since: 2, renamed_from: { name: name, version: 2 } }", .invalidRename),
            ("  id: { type: id, primary_key: true }\n  title: { type: string, renamed_from: old_title }", .unexpectedNode),
            ("  id: { type: json, primary_key: true }", .invalidPrimaryKey),
            ("  id: { type: id?, primary_key: true }", .invalidPrimaryKey),
            (
                "  id: { type: id, primary_key: true }\n  a: { type: int, version_field: true }\n  b: { type: int, version_field: true }",
                .multipleVersionFields
            ),
            ("  id: { type: id, primary_key: true }\n  kind: { type: enum, values: [a, b], fallback: c }", .invalidEnumFallback),
            ("  id: { type: id, primary_key: true }\n  n: { type: int, default: 1.5 }", .defaultTypeMismatch),
            ("  id: { type: id, primary_key: true }\n  d: { type: date, default: \"2026-02-30\" }", .defaultTypeMismatch),
            ("  id: { type: id, primary_key: true }\n  s: { type: string, default: null }", .defaultTypeMismatch),
            ("  id: { type: id, primary_key: true }\n  name: { type: string, deprecated: \"\" }", .deprecatedWithoutReason),
            ("  id: { type: id, primary_key: true }\n  class: string", .reservedWord),
            ("  id: { type: id, primary_key: true }\n  t: list<json>", .unknownType),
            ("  id: { type: id, primary_key: true, server_only: true }", .serverOnlyNotAllowed),
            ("  id: { type: id, primary_key: true }\n  at: { type: timestamp, version_field: true, server_only: true }", .serverOnlyNotAllowed),
            ("  id: { type: id, primary_key: true }\n  k: { type: json?, server_only: true, encrypted: true }", .serverOnlyNotAllowed),
            ("  id: { type: id, primary_key: true }\n  grade: { type: double, server_only: true }", .serverOnlyNotAllowed),
        ]
    )
    func rule(fields: String, expected: RuleID) throws {
        #expect(try rules(["thing.yaml": entity(fields)]).contains(expected))
    }

    @Test("server_only: allowed on an optional or defaulted field, refused on an index and on events")
    func serverOnly() throws {
        let fine = entity(
            "  id: { type: id, primary_key: true }\n  grade: { type: double?, server_only: true }\n  answers: { type: json, server_only: true, default: {} }"
        )
        #expect(try rules(["thing.yaml": fine]).isEmpty)
        let downOnly = entity(
            "  id: { type: id, primary_key: true }\n  grade: { type: double, server_only: true }",
            sync: "{ direction: down, conflict: server_authoritative }")
        #expect(try rules(["thing.yaml": downOnly]).isEmpty)
        let indexed = entity("  id: { type: id, primary_key: true }\n  grade: { type: double?, server_only: true }", extra: "indexes:\n  - [grade]")
        #expect(try rules(["thing.yaml": indexed]).contains(.serverOnlyNotAllowed))
    }

    @Test("a read-only scope allows only `down`")
    func readOnlyScope() throws {
        let text = entity("  id: { type: id, primary_key: true }").replacingOccurrences(of: "scope: user", with: "scope: content")
        #expect(try rules(["thing.yaml": text]) == [.policyDirectionMismatch])
    }

    @Test("an entity must say how it syncs")
    func syncRequired() throws {
        let text = entity("  id: { type: id, primary_key: true }").replacingOccurrences(
            of: "sync: { direction: both, conflict: last_writer_wins }\n", with: ""
        )
        #expect(try rules(["thing.yaml": text]) == [.missingKey])
    }

    @Test("events accept only direction and conflict in their sync block")
    func eventSyncKeys() throws {
        let event = """
            event: Happened
            summary: Something happened.
            version: 1
            scope: user
            sync: { direction: up, retention: 30d }
            fields:
              at: timestamp
            """
        #expect(try rules(["happened.yaml": event]) == [.unknownKey])
    }

    @Test("every problem of every file is reported in one run, without cascades")
    func allProblemsAtOnce() throws {
        let folder = try ContractFolder(files: [
            "a.yaml": entity("  id: { type: strnig, primary_key: true }\n  select: int"),
            "b.yaml": entity("  id: { type: id, primary_key: true }\n  owner: ref<Nothing>").replacingOccurrences(of: "Thing", with: "Other")
                .replacingOccurrences(of: "things", with: "other_things"),
            "c.yaml": "entity: [",
        ])
        defer { folder.remove() }
        #expect(
            folder.report() == """
                contracts/a.yaml:8:15: error[UNKNOWN_TYPE]: unknown type 'strnig'
                  help: did you mean 'string'?
                contracts/a.yaml:9:3: error[RESERVED_WORD]: field name 'select' is an SQL keyword
                  help: choose a more specific name, for example 'select_value'
                contracts/b.yaml:9:10: error[UNKNOWN_REFERENCE]: ref<Nothing> names 'Nothing', which is not a contract
                  help: did you mean 'Thing'?
                contracts/c.yaml:2:1: error[YAML_SYNTAX]: did not find expected node content
                  note: while parsing a flow node (contracts/c.yaml:2:1)
                  help: fix the YAML syntax at this position (indentation, a missing `:`, or an unclosed quote or bracket)
                4 errors, 0 warnings
                """)
    }

    @Test("warnings do not fail a run")
    func warningsOnly() throws {
        let folder = try ContractFolder(files: [
            "thing.yaml": entity("  id: { type: id, primary_key: true }").replacingOccurrences(of: "summary: A thing.\n", with: "")
        ])
        defer { folder.remove() }
        let result = folder.load()
        #expect(result.diagnostics.warningCount == 1)
        #expect(!result.diagnostics.hasErrors)
        #expect(result.diagnostics.diagnostics.first?.rule == .missingSummary)
    }

    @Test(
        "a table the device's store or the server's database already has is refused where it is written",
        arguments: ["repull_rows", "first_downloads", "outbox", "dropped_rows", "sync_state", "rate_windows", "sqlite_stat1"]
    )
    func engineTable(_ table: String) throws {
        let folder = try ContractFolder(files: [
            "thing.yaml": entity("  id: { type: id, primary_key: true }")
                .replacingOccurrences(of: "table: things", with: "table: \(table)")
        ])
        defer { folder.remove() }
        #expect(
            folder.report() == """
                contracts/thing.yaml:4:8: error[RESERVED_NAME]: table name '\(table)' is reserved for the sync engine's own tables
                  help: choose another name, for example 'thing_records'
                1 error, 0 warnings
                """)
    }

    @Test("every name in the engines' list is refused as a table, every reserved column as a field")
    func everyEngineName() throws {
        for table in EngineNames.reservedTables.sorted() {
            let contract = entity("  id: { type: id, primary_key: true }").replacingOccurrences(of: "table: things", with: "table: \(table)")
            #expect(try rules(["thing.yaml": contract]) == [.reservedName], "table \(table)")
        }
        for column in EngineNames.reservedColumns.sorted() {
            #expect(
                try rules(["thing.yaml": entity("  id: { type: id, primary_key: true }\n  \(column): int?")]) == [.reservedName], "field \(column)")
            let local = entity("  id: { type: id, primary_key: true }", extra: "local:\n  \(column): int?")
            #expect(try rules(["thing.yaml": local]) == [.reservedName], "local field \(column)")
        }
    }

    @Test(
        "a field named like a column the engines add is refused where it is written", arguments: ["_deleted", "_scope_key", "_version", "_synced_at"])
    func engineColumn(_ column: String) throws {
        let folder = try ContractFolder(files: ["thing.yaml": entity("  id: { type: id, primary_key: true }\n  \(column): bool")])
        defer { folder.remove() }
        #expect(
            folder.report() == """
                contracts/thing.yaml:9:3: error[RESERVED_NAME]: field name '\(column)' is a column the sync engines add to contract tables
                  help: rename it to '\(column.dropFirst())'
                1 error, 0 warnings
                """)
    }

    @Test("diagnostic text format: location, severity, rule, message, then help")
    func renderedFormat() {
        let diagnostic = Diagnostic(
            .error, .unknownKey, "unknown key 'defualt' in the field 'x'",
            at: SourceLocation(file: "contracts/x.yaml", line: 3, column: 7), help: "did you mean 'default'?"
        )
        #expect(
            diagnostic.rendered == """
                contracts/x.yaml:3:7: error[UNKNOWN_KEY]: unknown key 'defualt' in the field 'x'
                  help: did you mean 'default'?
                """)
    }

    @Test("json and github formats carry the same diagnostics")
    func machineFormats() {
        var collector = DiagnosticCollector()
        collector.error(
            .unknownType, "unknown type 'strng'", at: SourceLocation(file: "c/x.yaml", line: 2, column: 9), help: "did you mean 'string'?")
        #expect(
            DiagnosticFormat.github.render(collector)
                == "::error file=c/x.yaml,line=2,col=9,title=UNKNOWN_TYPE::[UNKNOWN_TYPE] unknown type 'strng'%0Ahelp: did you mean 'string'?")
        let json = DiagnosticFormat.json.render(collector)
        #expect(json.contains(#""rule":"UNKNOWN_TYPE""#))
        #expect(json.contains(#""line":2,"column":9"#))
        #expect(json.contains(#""errors": 1"#))
    }
}
