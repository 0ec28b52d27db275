import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import PostgresNIO
import Testing

@testable import SyncServer

/// The plans of the hot statements on PostgreSQL stay right as a contract table grows from empty
/// (docs/scaling.md, "Plans as a table grows").
@Suite("PostgreSQL: plans as a table grows from empty")
struct PostgresPlanTests {
    static func response(_ index: Int, scopeKey: String) throws -> StoredRow {
        try StoredResponse.row(
            id: UUID().uuidString.lowercased(), attempt: "att-\(index / 10)", question: "q-\(index % 10)", seq: Int64(index + 1), scopeKey: scopeKey)
    }

    /// A PostgreSQL storage on a schema of its own, and a probe of that schema.
    static func emptyStorage(in folder: URL) async throws -> (storage: any SyncStorage, probe: PostgresProbe, schema: String) {
        let schema = StorageKind.uniqueSchema()
        let storage = try await StorageKind.postgres.makeSharedStorages(1, in: folder, schema: schema)[0]
        return (storage, try PostgresProbe(schema: schema), schema)
    }

    @Test("a table written from empty gets statistics, and a uniqueness lookup then takes the unique index, not a scan of the scope")
    func uniquenessLookupsTakeTheUniqueIndex() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-plans-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let (storage, probe, schema) = try await Self.emptyStorage(in: folder)
        let table = ContractTable(StoredResponse.contract)
        // Autovacuum must not be what takes the statistics here.
        _ = try await probe.client.query(PostgresQuery(unsafeSQL: "ALTER TABLE assessment_responses SET (autovacuum_enabled = false)")).collect()
        let statistics = "SELECT count(*)::BIGINT FROM pg_stats WHERE schemaname = '\(schema)' AND tablename = 'assessment_responses'"
        #expect(try await probe.integer(statistics) == 0)

        // Three pushes' worth of rows, in one scope, each checked for uniqueness as a push does.
        for batch in 0..<3 {
            let rows = try (0..<500).map { try Self.response(batch * 500 + $0, scopeKey: "progress:user:u") }
            try await storage.write { transaction in
                for row in rows {
                    let conditions: [String: ColumnValue] = [
                        "_scope_key": row["_scope_key"], "attempt_id": row["attempt_id"], "question_id": row["question_id"],
                    ]
                    #expect(try await transaction.rows(in: table, tenant: "t", where: conditions, limit: 2).isEmpty)
                    try await transaction.upsert(row, in: table)
                }
            }
        }
        try await eventually("the table has statistics") { try await probe.integer(statistics) > 0 }

        let plan = try await probe.client.query(
            PostgresQuery(
                unsafeSQL: """
                    EXPLAIN SELECT * FROM "assessment_responses" WHERE "_tenant_id" = 't' AND "_scope_key" = 'progress:user:u'
                    AND "attempt_id" = 'att-7' AND "question_id" = 'q-3' ORDER BY "id" LIMIT 2
                    """)
        ).collect().map { try $0.decode(String.self) }.joined(separator: "\n")
        #expect(plan.contains("assessment_responses_attempt_id_question_id_key_per_scope"), "\(plan)")
        #expect(!plan.contains("scope_seq_idx"), "\(plan)")
    }

    /// A push reads its rows ahead by id, 500 at a time (`id = ANY($2)`). Under PostgreSQL's
    /// default `random_page_cost` (4.0) the planner scans the whole table for that until it
    /// holds about 40 000 rows, so between a few thousand and 40 000 rows every push grew with
    /// the table. The server's sessions take 1.1 (``PostgresStorage/Configuration/randomPageCost``).
    @Test("a push's read-ahead of 500 ids takes the primary key on a table of 20 000 rows, where the database's default setting scans it")
    func readAheadTakesThePrimaryKey() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-plans-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let (storage, probe, _) = try await Self.emptyStorage(in: folder)
        let table = ContractTable(StoredResponse.contract)
        for batch in 0..<20 {
            let rows = try (0..<1_000).map { try Self.response(batch * 1_000 + $0, scopeKey: "progress:user:u-\($0 % 50)") }
            try await storage.write { transaction in
                for row in rows { try await transaction.upsert(row, in: table) }
            }
        }
        _ = try await probe.client.query(PostgresQuery(unsafeSQL: "ANALYZE assessment_responses")).collect()
        let ids = (0..<500).map { _ in "'\(UUID().uuidString.lowercased())'" }.joined(separator: ",")
        let explain = "EXPLAIN SELECT * FROM \"assessment_responses\" WHERE \"_tenant_id\" = 't' AND \"id\" = ANY(ARRAY[\(ids)]::uuid[])"

        let setting = try await storage.read { try await $0.serverTableQuery("SHOW random_page_cost", []) }
        #expect(setting.first?.text("random_page_cost") == "1.1")
        let plan = try await storage.read { try await $0.serverTableQuery(explain, []) }.compactMap { $0.text("QUERY PLAN") }.joined(separator: "\n")
        #expect(plan.contains("assessment_responses_pkey"), "\(plan)")
        #expect(!plan.contains("Seq Scan"), "\(plan)")

        // The same statement in a session with the database's default: the scan this setting avoids.
        let defaultPlan = try await probe.client.query(PostgresQuery(unsafeSQL: explain)).collect().map { try $0.decode(String.self) }
            .joined(separator: "\n")
        #expect(defaultPlan.contains("Seq Scan"), "\(defaultPlan)")
    }
}
