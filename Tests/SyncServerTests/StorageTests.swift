import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import Testing

@testable import SyncServer

/// Storage on the engines' own contracts: an `Activity`, a `Profile` and the events `CardCommented`
/// and `NoteViewed` for every column type, `Card`s for lookups.
@Suite("Conformance: storage", .blockingWork)
struct StorageTests {
    @Test("opening applies the server tables and every generated server migration, once", arguments: StorageKind.allCases)
    func opens(_ kind: StorageKind) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-storage-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let schema = StorageKind.uniqueSchema()
        let storage = try await kind.makeSharedStorages(1, in: folder, schema: schema, contracts: ContractRegistry.self)[0]
        let sequence = try await storage.write { transaction in try await transaction.nextScopeSequence(tenant: "t", scopeKey: "k") }
        #expect(sequence == 1)
        // Opening again (another process) migrates nothing twice and sees the same data.
        let again = try await kind.makeSharedStorages(1, in: folder, schema: schema, contracts: ContractRegistry.self)[0]
        #expect(try await again.read { try await $0.scopeSequence(tenant: "t", scopeKey: "k") } == 1)
    }

    @Test(
        "every column type reads back as it was written: text, numbers, flags, timestamps, dates, UUIDs, JSON, lists, bytes",
        arguments: StorageKind.allCases)
    func valuesRoundTrip(_ kind: StorageKind) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-storage-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = try await kind.makeStorage(in: folder, contracts: ContractRegistry.self)
        let activity = ContractRegistry.entity(named: "Activity")!, commented = ContractRegistry.event(named: "CardCommented")!
        let viewed = ContractRegistry.event(named: "NoteViewed")!
        func columns(_ contract: [FieldDescriptor], _ wire: [String: JSONValue]) throws -> StoredRow {
            var row = StoredRow()
            for field in contract { row[field.name] = try RowCodec.columnValue(wire[field.name] ?? .null, for: field) }
            return row
        }
        var entity = try columns(
            activity.fields,
            [
                "id": .string("6F1C2A8E-4B5D-4E7F-9A0B-1C2D3E4F5A6B"), "verb": .string("edited"), "subject_id": .string("card-1"),
                "board_id": .string("b-1"), "correlation_id": .string("0A1B2C3D-4E5F-4A6B-8C7D-9E0F1A2B3C4D"),
                "detail": .object(["choice": .array([.int(2), .double(0.25), .string("naïve ✓"), .null, .bool(true)]), "a": .object([:])]),
                "digest": .string(Data([0, 1, 2, 253, 254, 255]).base64EncodedString()), "duration_ms": .int(Int64.max), "succeeded": .bool(true),
                "happened_at": .string("1969-12-31T23:59:59.999Z"), "happened_on": .string("2026-01-31"),
            ])
        entity["_tenant_id"] = .text("t"); entity["_scope_key"] = .text("workspace:user:u"); entity["_seq"] = .integer(1)
        entity["_version"] = .integer(1); entity["_schema_version"] = .integer(1); entity["_hlc"] = .null
        entity["_field_clocks"] = .text("{\"detail\":\"x\"}"); entity["_deleted"] = .integer(0)
        entity["_updated_at"] = .integer(946_684_799_999); entity["_updated_by"] = .text("d"); entity["_field_seqs"] = .null
        var event = try columns(
            commented.fields,
            [
                "team_id": .string("red"), "card_id": .string("card-1"), "body": .string("Cracked mirror"),
                "sketch": .string(Data([0, 1, 2, 253, 254, 255]).base64EncodedString()), "mentions": .array([.string("u-2"), .string("u-3")]),
                "reactions": .array([.string("like"), .string("question")]), "edited_at": .string("1999-12-31T23:59:59.000Z"),
                "reply_to": .string("8E1C6F3A-2B7D-4C59-9E11-0A3B5C7D9E21"),
            ])
        for (name, value) in [
            ("_tenant_id", ColumnValue.text("t")), ("event_id", .text("01J0000000000000000000CMNT")), ("schema_version", .integer(1)),
            ("user_id", .text("u")), ("device_id", .text("d")), ("occurred_at", .integer(-1)), ("recorded_at", .null),
            ("hash", .text(String(repeating: "a", count: 64))), ("_scope_key", .text("workspace:team:red")), ("_seq", .integer(2)),
        ] { event[name] = value }
        var viewedEvent = try columns(
            viewed.fields,
            [
                "note_id": .string("note-1"), "session_id": .string("8E1C6F3A-2B7D-4C59-9E11-0A3B5C7D9E21"), "viewed_on": .string("1999-12-31"),
                "duration_ms": .int(-1), "completed": .bool(false), "scroll_depth": .double(-33.865143),
            ])
        for (name, value) in [
            ("_tenant_id", ColumnValue.text("t")), ("event_id", .text("01J0000000000000000000VIEW")), ("schema_version", .integer(2)),
            ("user_id", .text("u")), ("device_id", .text("d")), ("occurred_at", .integer(-1)), ("recorded_at", .null),
            ("hash", .text(String(repeating: "b", count: 64))), ("_scope_key", .text("workspace:user:u")), ("_seq", .integer(4)),
        ] { viewedEvent[name] = value }
        // A row read ahead and found absent goes in by another path on PostgreSQL (a plain
        // `INSERT`, once `COPY`, whose text format escaped tabs, newlines and backslashes): the
        // same values must come back.
        let profile = ContractRegistry.profile
        var copied = try columns(
            profile.fields,
            [
                "id": .string("p\t1\\N"), "display_name": .string("tab\there, newline\nthere, return\r, backslash \\ and \\N, naïve ✓"),
                "average_view_seconds": .double(1e-7), "notes_viewed": .int(Int64.min), "time_zone": .string("UTC"),
                "member_since": .string("0001-01-01"),
                "pinned_board_ids": .array([.string("b-1"), .string("")]),
                "preferences": .object(["path": .string("C:\\temp\t\n"), "big": .double(-1.5e300)]),
                "updated_at": .string("0001-01-01T00:00:00.000Z"),
            ])
        for (name, value) in [
            ("_tenant_id", ColumnValue.text("t")), ("_scope_key", .text("workspace:user:u")), ("_seq", .integer(3)), ("_version", .integer(1)),
            ("_schema_version", .integer(1)), ("_hlc", .null), ("_field_clocks", .null), ("_deleted", .integer(1)),
            ("_updated_at", .integer(253_402_300_799_999)), ("_updated_by", .text("d")), ("_field_seqs", .null),
        ] { copied[name] = value }
        let (entityRow, copiedRow, eventRow, viewedRow) = (entity, copied, event, viewedEvent)
        try await storage.write { transaction in
            try await transaction.upsert(entityRow, in: ContractTable(activity))
            try await transaction.prefetchRows(in: ContractTable(profile), tenant: "t", ids: ["p\t1\\N"])
            #expect(try await transaction.row(in: ContractTable(profile), tenant: "t", id: "p\t1\\N") == nil)
            try await transaction.upsert(copiedRow, in: ContractTable(profile))
            #expect(try await transaction.insertIfAbsent(eventRow, in: ContractTable(commented)))
            #expect(try await transaction.insertIfAbsent(viewedRow, in: ContractTable(viewed)))
        }
        let (readEntity, readCopied, readEvent, readViewed) = try await storage.read { reader in
            (
                try await reader.row(in: ContractTable(activity), tenant: "t", id: "6f1c2a8e-4b5d-4e7f-9a0b-1c2d3e4f5a6b"),
                try await reader.row(in: ContractTable(profile), tenant: "t", id: "p\t1\\N"),
                try await reader.row(in: ContractTable(commented), tenant: "t", id: "01J0000000000000000000CMNT"),
                try await reader.row(in: ContractTable(viewed), tenant: "t", id: "01J0000000000000000000VIEW")
            )
        }
        #expect(readEntity == entityRow)
        #expect(readCopied == copiedRow)
        #expect(readEvent == eventRow)
        #expect(readViewed == viewedRow)
        let found = try await storage.read { reader in
            try await reader.rows(
                in: ContractTable(activity), tenant: "t",
                where: ["succeeded": .integer(1), "detail": .text("{\"x\":1}"), "happened_at": .null], limit: 5)
        }
        #expect(found.isEmpty)
        let succeeded = try await storage.read { reader in
            try await reader.rows(in: ContractTable(activity), tenant: "t", where: ["succeeded": .integer(1), "_hlc": .null], limit: 5)
        }
        #expect(succeeded.count == 1)

        // A pull page may leave out the columns it never writes, but each row still measures
        // what the whole row does, so a page's byte budget cuts where it would with every column.
        let tables = [ContractTable(activity), ContractTable(profile)]
        let (whole, page) = try await storage.read { reader in
            (
                try await reader.changes(
                    in: tables, tenant: "t", scopeKey: "workspace:user:u", after: 0, limit: 10, byteBudget: .max, pageColumnsOnly: false),
                try await reader.changes(
                    in: tables, tenant: "t", scopeKey: "workspace:user:u", after: 0, limit: 10, byteBudget: .max, pageColumnsOnly: true)
            )
        }
        #expect(whole.map(\.row) == [entityRow, copiedRow])
        #expect(page.map(\.table.name) == whole.map(\.table.name))
        for (full, paged) in zip(whole.map(\.row), page.map(\.row)) {
            #expect(paged.storedBytes == full.storedBytes)
            for column in paged.columnNames { #expect(paged[column] == full[column], "\(column)") }
            for column in ["_seq", "_version", "_deleted", "id"] { #expect(paged[column] == full[column], "\(column)") }
        }
    }

    @Test(
        "a lookup inside a write sees the transaction's own writes: new rows, changed rows, rows that no longer match",
        arguments: StorageKind.allCases)
    func lookupsSeeTheTransactionsOwnWrites(_ kind: StorageKind) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-storage-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = try await kind.makeStorage(in: folder, contracts: ContractRegistry.self)
        let table = ContractTable(StoredCard.contract)
        func card(_ id: String, board: String, lane: String, seq: Int64) throws -> StoredRow {
            try StoredCard.row(id: id, board: board, lane: lane, seq: seq)
        }
        let ids = (0..<3).map { _ in UUID().uuidString.lowercased() }.sorted()
        let (first, second, third) = (
            try card(ids[0], board: "b-1", lane: "todo", seq: 1), try card(ids[1], board: "b-1", lane: "doing", seq: 2),
            try card(ids[2], board: "b-1", lane: "review", seq: 4)
        )
        let secondMoved = try card(ids[1], board: "b-2", lane: "doing", seq: 3)
        try await storage.write { transaction in
            try await transaction.upsert(first, in: table)
            try await transaction.upsert(second, in: table)
        }
        @Sendable func lookups(_ reader: any StorageReader) async throws -> [[String]] {
            func ids(_ conditions: [String: ColumnValue], limit: Int = 10) async throws -> [String] {
                try await reader.rows(in: table, tenant: "t", where: conditions, limit: limit).compactMap { $0.text("id") }
            }
            return [
                try await ids(["board_id": .text("b-1")]), try await ids(["board_id": .text("b-1")], limit: 1),
                try await ids(["board_id": .text("b-1"), "lane": .text("review")]), try await ids(["board_id": .text("b-2")]),
                try await ids(["board_id": .text("b-1"), "lane": .text("doing")]),
                try await ids(["board_id": .text("b-2"), "lane": .text("doing")]),
            ]
        }
        let expected = [[ids[0], ids[2]], [ids[0]], [ids[2]], [ids[1]], [], [ids[1]]]
        let inside = try await storage.write { transaction in
            // Read ahead as a push does for its uniqueness checks (answered from it on PostgreSQL).
            try await transaction.prefetchMatches(
                in: table, tenant: "t", columns: ["board_id", "lane"],
                keys: [[.text("b-1"), .text("review")], [.text("b-1"), .text("doing")], [.text("b-2"), .text("doing")], [.text("b-9"), .null]]
            )
            // The second row moves to another board, a third joins the first's.
            try await transaction.upsert(secondMoved, in: table)
            try await transaction.upsert(third, in: table)
            return try await lookups(transaction)
        }
        #expect(inside == expected)
        #expect(try await storage.read { try await lookups($0) } == expected)
    }

    @Test("a PostgreSQL URL is read with its options, and a bad one is refused with a reason")
    func postgresURL() throws {
        let configuration = try PostgresStorage.Configuration(
            url: "postgresql://sync:s3cret@db.internal:6543/outpost?sslmode=require&schema=sync_a&max_connections=7"
        )
        #expect(configuration.host == "db.internal" && configuration.port == 6543)
        #expect(configuration.username == "sync" && configuration.password == "s3cret" && configuration.database == "outpost")
        #expect(configuration.tls == .require && configuration.schema == "sync_a" && configuration.maximumConnections == 7)
        let plain = try PostgresStorage.Configuration(url: "postgres://outpost@127.0.0.1/outpost")
        #expect(plain.port == 5432 && plain.tls == .disable && plain.schema == nil && plain.password == nil)
        #expect(plain.randomPageCost == 1.1)
        #expect(try PostgresStorage.Configuration(url: "postgres://u@h/db?random_page_cost=2.5").randomPageCost == 2.5)
        #expect(try PostgresStorage.Configuration(url: "postgres://u@h/db?random_page_cost=default").randomPageCost == nil)
        for (url, reason) in [
            ("mysql://u@h/db", "is not a PostgreSQL URL"), ("postgres://h/db", "names no user"), ("postgres://u@h", "names no database"),
            ("postgres://u@h/db?sslmode=maybe", "sslmode must be"), ("postgres://u@h/db?colour=red", "unknown PostgreSQL URL parameter"),
            ("postgres://u@h/db?schema=Bad-Name", "schema must be"), ("postgres://u@h/db?random_page_cost=0", "random_page_cost must be"),
            ("postgres://u@h/db?random_page_cost=fast", "random_page_cost must be"),
        ] {
            #expect(throws: PostgresStorage.Configuration.URLError.self, "\(url)") { try PostgresStorage.Configuration(url: url) }
            do {
                _ = try PostgresStorage.Configuration(url: url)
            } catch {
                #expect(error.description.contains(reason), "\(url): \(error.description)")
            }
        }
        #expect(!PostgresStorage.Configuration.redacted("postgres://u:hunter2@h/db").contains("hunter2"))
    }
}
