import ContractRuntime
import OutpostTestSupport
import Testing

@testable import ContractCompiler

/// A few lines of YAML in, exact Swift or SQL out.
@Suite("Snippets", .blockingWork)
struct SnippetTests {
    private let note = """
        entity: Note
        summary: A note.
        version: 2
        table: notes
        scope: user
        sync: { direction: both, conflict: last_writer_wins }
        fields:
          id: { type: id, primary_key: true }
          body: { type: string, max_length: 500 }
          pinned: { type: bool, default: false }
          color: { type: enum, values: [red, dark_blue], default: red }
          word_count: { type: int?, since: 2 }
          secret: { type: string?, encrypted: true }
          updated_at: { type: timestamp, version_field: true }
        local:
          is_open: { type: bool, default: true }
        indexes:
          - [updated_at]
        """

    @Test("client table: fields, local columns, sync metadata, sealed encrypted column")
    func clientTable() throws {
        let set = try compileValid(["note.yaml": note])
        let table = SchemaBuilder(set: set).table(for: try #require(set.contract(named: "Note")), side: .client)
        #expect(
            table.createStatements == [
                """
                CREATE TABLE "notes" (
                    "id" TEXT NOT NULL,
                    "body" TEXT NOT NULL,
                    "pinned" INTEGER NOT NULL DEFAULT 0,
                    "color" TEXT NOT NULL DEFAULT 'red',
                    "word_count" INTEGER,
                    "secret" BLOB,
                    "updated_at" INTEGER NOT NULL,
                    "is_open" INTEGER NOT NULL DEFAULT 1,
                    "_schema_version" INTEGER NOT NULL,
                    "_server_version" INTEGER,
                    "_synced_at" INTEGER,
                    PRIMARY KEY ("id")
                )
                """,
                #"CREATE INDEX "notes_updated_at_idx" ON "notes" ("updated_at")"#,
            ])
    }

    @Test("server table: tenant key, plaintext fields, sync metadata, scope index; no local columns")
    func serverTable() throws {
        let set = try compileValid(["note.yaml": note])
        let table = SchemaBuilder(set: set).table(for: try #require(set.contract(named: "Note")), side: .server)
        #expect(
            table.createStatements == [
                """
                CREATE TABLE "notes" (
                    "_tenant_id" TEXT NOT NULL,
                    "id" TEXT NOT NULL,
                    "body" TEXT NOT NULL,
                    "pinned" INTEGER NOT NULL DEFAULT 0,
                    "color" TEXT NOT NULL DEFAULT 'red',
                    "word_count" INTEGER,
                    "secret" TEXT,
                    "updated_at" INTEGER NOT NULL,
                    "_scope_key" TEXT NOT NULL,
                    "_seq" INTEGER NOT NULL,
                    "_version" INTEGER NOT NULL DEFAULT 1,
                    "_schema_version" INTEGER NOT NULL,
                    "_hlc" TEXT,
                    "_field_clocks" TEXT,
                    "_deleted" INTEGER NOT NULL DEFAULT 0,
                    "_updated_at" INTEGER NOT NULL,
                    "_updated_by" TEXT,
                    PRIMARY KEY ("_tenant_id", "id")
                )
                """,
                #"CREATE INDEX "notes_scope_seq_idx" ON "notes" ("_tenant_id", "_scope_key", "_seq")"#,
                #"CREATE INDEX "notes_updated_at_idx" ON "notes" ("_tenant_id", "updated_at")"#,
            ])
    }

    @Test("an index that uses a local field exists on the client only")
    func localFieldIndex() throws {
        let indexed = note.replacingOccurrences(of: "  - [updated_at]", with: "  - [updated_at]\n  - [is_open, updated_at]")
        let set = try compileValid(["note.yaml": indexed])
        let contract = try #require(set.contract(named: "Note"))
        let client = SchemaBuilder(set: set).table(for: contract, side: .client).createStatements
        let server = SchemaBuilder(set: set).table(for: contract, side: .server).createStatements
        #expect(client.contains { $0.contains("CREATE INDEX") && $0.contains(#"("is_open", "updated_at")"#) })
        #expect(!server.contains { $0.contains("is_open") })
        #expect(server.contains { $0.contains(#""notes_updated_at_idx""#) })
    }

    @Test("DTO properties, defaults in the initializer, and defaults when a key is missing")
    func dtoLines() throws {
        let set = try compileValid(["note.yaml": note])
        let swift = DTOGenerator(set: set).render(try #require(set.contract(named: "Note")))
        for line in [
            "public struct Note: ContractEntity, PatchableEntity, LocalStateEntity {",
            "    public var body: String",
            "    public var color: Color",
            "    public var wordCount: Int64?",
            "        pinned: Bool = false,",
            "        color: Color = .red,",
            "        case darkBlue = \"dark_blue\"",
            "        pinned = try container.decodeIfPresent(Bool.self, forKey: .pinned) ?? false",
            "        wordCount = try container.decodeIfPresent(Int64.self, forKey: .wordCount)",
            "        body = try container.decode(String.self, forKey: .body)",
            "        case wordCount = \"word_count\"",
            "    public static var descriptor: EntityDescriptor { ContractRegistry.note }",
            "        public var isOpen: Bool",
        ] {
            #expect(swift.contains(line + "\n"), "missing line: \(line)")
        }
        #expect(!swift.contains("import Foundation"), "a DTO without UUID or Data must not import Foundation")
    }

    @Test("entities declare the engines' capabilities: typed changes always, a local state with local fields")
    func conformances() throws {
        let set = try compileValid([
            "note.yaml": note,
            "tag.yaml": """
            entity: Tag
            summary: A tag with nothing but its name.
            version: 1
            table: tags
            scope: user
            sync: { direction: both, conflict: last_writer_wins }
            fields:
              name: { type: id, primary_key: true }
            """,
            "note_read.yaml": """
            event: NoteRead
            summary: Someone read a note.
            version: 1
            scope: user
            fields:
              note_id: ref<Note>
            """,
        ])
        let generator = DTOGenerator(set: set)
        let note = generator.render(try #require(set.contract(named: "Note")))
        #expect(note.contains("public struct Note: ContractEntity, PatchableEntity, LocalStateEntity {\n"))
        #expect(note.contains("    public enum Change: EntityFieldChange {\n"))
        // No field but the primary key: an empty `Change`, still an `EntityFieldChange`.
        let tag = generator.render(try #require(set.contract(named: "Tag")))
        #expect(tag.contains("public struct Tag: ContractEntity, PatchableEntity {\n"))
        #expect(tag.contains("    public enum Change: EntityFieldChange {\n"))
        let event = generator.render(try #require(set.contract(named: "NoteRead")))
        #expect(event.contains("public struct NoteRead: ContractEvent {\n"))
        #expect(!event.contains("Change"))
    }

    @Test("schema constants use the contract name in upper snake case")
    func schemaConstants() throws {
        let set = try compileValid([
            "note.yaml": note.replacingOccurrences(of: "entity: Note", with: "entity: LessonNote")
                .replacingOccurrences(of: "version: 2", with: "version: 2\noldest_supported: 2")
        ])
        #expect(
            SchemaVersionsGenerator(set: set).render().contains(
                """
                public let CURRENT_LESSON_NOTE_SCHEMA = 2
                /// The oldest `LessonNote` schema version still supported; older rows are purged and re-fetched.
                public let OLDEST_SUPPORTED_LESSON_NOTE_SCHEMA = 2
                """))
    }

    @Test("event: envelope alias, client and server event tables")
    func event() throws {
        let set = try compileValid([
            "note.yaml": note,
            "note_read.yaml": """
            event: NoteRead
            summary: Someone read a note.
            version: 1
            scope: user
            applies_to: Note
            fields:
              note_id: ref<Note>
              seconds: double
            """,
        ])
        let event = try #require(set.contract(named: "NoteRead"))
        #expect(event.table == "note_read_events")
        #expect(DTOGenerator(set: set).render(event).contains("public typealias NoteReadEnvelope = EventEnvelope<NoteRead>\n"))
        let server = SchemaBuilder(set: set).table(for: event, side: .server)
        #expect(
            server.columns.map(\.name) == [
                "_tenant_id", "event_id", "schema_version", "user_id", "device_id", "occurred_at", "recorded_at", "hash",
                "note_id", "seconds", "_scope_key", "_seq",
            ])
        #expect(server.primaryKey == ["_tenant_id", "event_id"])
    }

    @Test(
        "type mapping to Swift and SQLite",
        arguments: [
            ("id", "String", "TEXT"), ("string", "String", "TEXT"), ("int", "Int64", "INTEGER"),
            ("double", "Double", "REAL"), ("bool", "Bool", "INTEGER"), ("timestamp", "Timestamp", "INTEGER"),
            ("date", "CalendarDate", "TEXT"), ("uuid", "UUID", "TEXT"), ("json", "JSONValue", "TEXT"),
            ("bytes", "Data", "BLOB"), ("list<int>", "[Int64]", "TEXT"), ("ref<Note>", "String", "TEXT"),
            ("string?", "String?", "TEXT"),
        ]
    )
    func typeMapping(spelling: String, swift: String, sql: String) throws {
        let set = try compileValid([
            "note.yaml": note,
            "probe.yaml": """
            entity: Probe
            summary: Probe.
            version: 1
            table: probes
            scope: user
            sync: { direction: both, conflict: last_writer_wins }
            fields:
              id: { type: id, primary_key: true }
              value: \(spelling)
            """,
        ])
        let field = try #require(set.contract(named: "Probe")?.field(named: "value"))
        let mapping = TypeMapping(set: set)
        #expect(mapping.swiftOptionalType(field) == swift)
        #expect(mapping.sqlType(field.type.type) == sql)
    }

    @Test("long index names stay within 63 characters and stay stable")
    func indexNames() {
        let long = TableSchema.indexName(
            table: "very_long_table_name_for_testing", columns: ["first_long_column", "second_long_column"], unique: true
        )
        #expect(long.count <= 63)
        #expect(long.hasSuffix("_key"))
        #expect(
            long
                == TableSchema.indexName(
                    table: "very_long_table_name_for_testing", columns: ["first_long_column", "second_long_column"], unique: true
                ))
    }

    @Test("ISO-8601 timestamps convert both ways")
    func timestamps() {
        #expect(Timestamp(iso8601: "1970-01-01T00:00:00Z")?.millisecondsSince1970 == 0)
        #expect(Timestamp(iso8601: "2026-01-31T08:00:00.123Z")?.millisecondsSince1970 == 1_769_846_400_123)
        #expect(Timestamp(iso8601: "2026-02-30T00:00:00Z") == nil)
        #expect(TypeMapping.iso8601(1_769_846_400_123) == "2026-01-31T08:00:00.123Z")
        #expect(TypeMapping.iso8601(-1) == "1969-12-31T23:59:59.999Z")
    }
}
