import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import Testing

@testable import SyncServer

@Suite("Conformance: storage", .blockingWork)
struct StorageTests {
    @Test("opening applies the server tables and every generated server migration, once", arguments: StorageKind.allCases)
    func opens(_ kind: StorageKind) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-storage-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let schema = StorageKind.uniqueSchema()
        let storage = try await kind.makeSharedStorages(1, in: folder, schema: schema)[0]
        let sequence = try await storage.write { transaction in try await transaction.nextScopeSequence(tenant: "t", scopeKey: "k") }
        #expect(sequence == 1)
        // Opening again (another process) migrates nothing twice and sees the same data.
        let again = try await kind.makeSharedStorages(1, in: folder, schema: schema)[0]
        #expect(try await again.read { try await $0.scopeSequence(tenant: "t", scopeKey: "k") } == 1)
    }

    @Test(
        "every column type reads back as it was written: text, numbers, flags, timestamps, dates, UUIDs, JSON, lists, bytes",
        arguments: StorageKind.allCases)
    func valuesRoundTrip(_ kind: StorageKind) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-storage-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = try await kind.makeStorage(in: folder)
        let response = ContractRegistry.entity(named: "AssessmentResponse")!, issue = ContractRegistry.event(named: "IssueLogged")!
        func columns(_ contract: [FieldDescriptor], _ wire: [String: JSONValue]) throws -> StoredRow {
            var row = StoredRow()
            for field in contract { row[field.name] = try RowCodec.columnValue(wire[field.name] ?? .null, for: field) }
            return row
        }
        var entity = try columns(
            response.fields,
            [
                "id": .string("6F1C2A8E-4B5D-4E7F-9A0B-1C2D3E4F5A6B"), "assessment_id": .string("as-1"), "attempt_id": .string("at-1"),
                "question_id": .string("q-1"),
                "answer": .object(["choice": .array([.int(2), .double(0.25), .string("naïve ✓"), .null, .bool(true)]), "a": .object([:])]),
                "time_spent_ms": .int(Int64.max), "flagged_for_review": .bool(true), "answered_at": .string("1969-12-31T23:59:59.999Z"),
                "updated_at": .string("2026-01-31T08:00:00.123Z"),
            ])
        entity["_tenant_id"] = .text("t"); entity["_scope_key"] = .text("progress:user:u"); entity["_seq"] = .integer(1)
        entity["_version"] = .integer(1); entity["_schema_version"] = .integer(1); entity["_hlc"] = .null
        entity["_field_clocks"] = .text("{\"answer\":\"x\"}"); entity["_deleted"] = .integer(0)
        entity["_updated_at"] = .integer(946_684_799_999); entity["_updated_by"] = .text("d"); entity["_field_seqs"] = .null
        var event = try columns(
            issue.fields,
            [
                "team_id": .string("red"), "service_asset_id": .string("sa-1"), "category": .string("damage"), "severity": .string("high"),
                "description": .string("Cracked mirror"), "photo": .string(Data([0, 1, 2, 253, 254, 255]).base64EncodedString()),
                "tags": .array([.string("mirror"), .string("")]), "latitude": .double(-33.865143), "longitude": .int(151),
                "observed_on": .string("1999-12-31"),
            ])
        for (name, value) in [
            ("_tenant_id", ColumnValue.text("t")), ("event_id", .text("01J0000000000000000000ISSU")), ("schema_version", .integer(1)),
            ("user_id", .text("u")), ("device_id", .text("d")), ("occurred_at", .integer(-1)), ("recorded_at", .null),
            ("hash", .text(String(repeating: "a", count: 64))), ("_scope_key", .text("ops:team:red")), ("_seq", .integer(2)),
        ] { event[name] = value }
        // A row read ahead and found absent goes in by another path on PostgreSQL (a plain
        // `INSERT`, once `COPY`, whose text format escaped tabs, newlines and backslashes): the
        // same values must come back.
        let statement = ContractRegistry.statement
        var copied = try columns(
            statement.fields,
            [
                "id": .string("st\t1\\N"), "verb": .string("passed"),
                "object_id": .string("tab\there, newline\nthere, return\r, backslash \\ and \\N, naïve ✓"),
                "score": .double(1e-7), "success": .bool(false), "duration_ms": .int(Int64.min),
                "result": .object(["path": .string("C:\\temp\t\n"), "big": .double(-1.5e300)]), "stated_at": .string("0001-01-01T00:00:00.000Z"),
            ])
        for (name, value) in [
            ("_tenant_id", ColumnValue.text("t")), ("_scope_key", .text("progress:user:u")), ("_seq", .integer(3)), ("_version", .integer(1)),
            ("_schema_version", .integer(1)), ("_hlc", .null), ("_field_clocks", .null), ("_deleted", .integer(1)),
            ("_updated_at", .integer(253_402_300_799_999)), ("_updated_by", .text("d")), ("_field_seqs", .null),
        ] { copied[name] = value }
        let (entityRow, copiedRow, eventRow) = (entity, copied, event)
        try await storage.write { transaction in
            try await transaction.upsert(entityRow, in: ContractTable(response))
            try await transaction.prefetchRows(in: ContractTable(statement), tenant: "t", ids: ["st\t1\\N"])
            #expect(try await transaction.row(in: ContractTable(statement), tenant: "t", id: "st\t1\\N") == nil)
            try await transaction.upsert(copiedRow, in: ContractTable(statement))
            #expect(try await transaction.insertIfAbsent(eventRow, in: ContractTable(issue)))
        }
        let (readEntity, readCopied, readEvent) = try await storage.read { reader in
            (
                try await reader.row(in: ContractTable(response), tenant: "t", id: "6f1c2a8e-4b5d-4e7f-9a0b-1c2d3e4f5a6b"),
                try await reader.row(in: ContractTable(statement), tenant: "t", id: "st\t1\\N"),
                try await reader.row(in: ContractTable(issue), tenant: "t", id: "01J0000000000000000000ISSU")
            )
        }
        #expect(readEntity == entityRow)
        #expect(readCopied == copiedRow)
        #expect(readEvent == eventRow)
        let found = try await storage.read { reader in
            try await reader.rows(
                in: ContractTable(response), tenant: "t",
                where: ["flagged_for_review": .integer(1), "answer": .text("{\"x\":1}"), "answered_at": .null], limit: 5)
        }
        #expect(found.isEmpty)
        let flagged = try await storage.read { reader in
            try await reader.rows(in: ContractTable(response), tenant: "t", where: ["flagged_for_review": .integer(1), "_hlc": .null], limit: 5)
        }
        #expect(flagged.count == 1)

        // A pull page may leave out the columns it never writes, but each row still measures
        // what the whole row does, so a page's byte budget cuts where it would with every column.
        let tables = [ContractTable(response), ContractTable(statement)]
        let (whole, page) = try await storage.read { reader in
            (
                try await reader.changes(
                    in: tables, tenant: "t", scopeKey: "progress:user:u", after: 0, limit: 10, byteBudget: .max, pageColumnsOnly: false),
                try await reader.changes(
                    in: tables, tenant: "t", scopeKey: "progress:user:u", after: 0, limit: 10, byteBudget: .max, pageColumnsOnly: true)
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
        let storage = try await kind.makeStorage(in: folder)
        let table = ContractTable(StoredResponse.contract)
        func response(_ id: String, attempt: String, question: String, seq: Int64) throws -> StoredRow {
            try StoredResponse.row(id: id, attempt: attempt, question: question, seq: seq)
        }
        let ids = (0..<3).map { _ in UUID().uuidString.lowercased() }.sorted()
        let (first, second, third) = (
            try response(ids[0], attempt: "att-1", question: "q-1", seq: 1), try response(ids[1], attempt: "att-1", question: "q-2", seq: 2),
            try response(ids[2], attempt: "att-1", question: "q-3", seq: 4)
        )
        let secondMoved = try response(ids[1], attempt: "att-2", question: "q-2", seq: 3)
        try await storage.write { transaction in
            try await transaction.upsert(first, in: table)
            try await transaction.upsert(second, in: table)
        }
        @Sendable func lookups(_ reader: any StorageReader) async throws -> [[String]] {
            func ids(_ conditions: [String: ColumnValue], limit: Int = 10) async throws -> [String] {
                try await reader.rows(in: table, tenant: "t", where: conditions, limit: limit).compactMap { $0.text("id") }
            }
            return [
                try await ids(["attempt_id": .text("att-1")]), try await ids(["attempt_id": .text("att-1")], limit: 1),
                try await ids(["attempt_id": .text("att-1"), "question_id": .text("q-3")]), try await ids(["attempt_id": .text("att-2")]),
                try await ids(["attempt_id": .text("att-1"), "question_id": .text("q-2")]),
                try await ids(["attempt_id": .text("att-2"), "question_id": .text("q-2")]),
            ]
        }
        let expected = [[ids[0], ids[2]], [ids[0]], [ids[2]], [ids[1]], [], [ids[1]]]
        let inside = try await storage.write { transaction in
            // Read ahead as a push does for its uniqueness checks (answered from it on PostgreSQL).
            try await transaction.prefetchMatches(
                in: table, tenant: "t", columns: ["attempt_id", "question_id"],
                keys: [[.text("att-1"), .text("q-3")], [.text("att-1"), .text("q-2")], [.text("att-2"), .text("q-2")], [.text("att-9"), .null]]
            )
            // The second row moves to another attempt, a third joins the first's.
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
