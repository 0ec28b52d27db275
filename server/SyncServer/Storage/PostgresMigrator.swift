import ContractRuntime
import Foundation
import PostgresNIO

/// Applies the server's tables and the generated PostgreSQL migrations, each once, in order,
/// all in one transaction under an advisory lock, so processes starting together do it once.
struct PostgresMigrator {
    let schema: String?
    let contracts: ContractCatalog
    let logger: Logger

    /// The advisory lock of one schema's migrations (`pg_advisory_xact_lock(hashtext(…))`).
    var lockName: String { "outpost.migrations." + (schema ?? "default") }

    struct Migration {
        var identifier: String
        var statements: [String]
        var checksum: String
    }

    var migrations: [Migration] {
        [
            Migration(
                identifier: "server.v1.sync_tables", statements: PostgresServerTables.statements,
                checksum: Hex.sha256(Data(PostgresServerTables.statements.joined(separator: ";\n").utf8)))
        ]
            + contracts.serverPostgresMigrations.map { Migration(identifier: $0.identifier, statements: $0.statements, checksum: $0.checksum) }
            + ServerUpgrade.all.map {
                Migration(identifier: $0.identifier, statements: $0.postgres, checksum: Hex.sha256(Data($0.postgres.joined(separator: ";\n").utf8)))
            }
    }

    func migrate(_ client: PostgresClient) async throws {
        try await client.withConnection { connection in
            try await connection.query("BEGIN", logger: logger)
            do {
                try await connection.query("SELECT pg_advisory_xact_lock(hashtext(\(lockName)))", logger: logger)
                if let schema { try await connection.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA IF NOT EXISTS \"\(schema)\""), logger: logger) }
                try await connection.query(
                    """
                    CREATE TABLE IF NOT EXISTS outpost_migrations (
                        identifier TEXT PRIMARY KEY,
                        checksum TEXT NOT NULL,
                        applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
                    )
                    """, logger: logger)
                var applied: [String: String] = [:]
                for try await (identifier, checksum) in try await connection.query(
                    "SELECT identifier, checksum FROM outpost_migrations", logger: logger
                ).decode((String, String).self) {
                    applied[identifier] = checksum
                }
                for migration in migrations {
                    if let checksum = applied[migration.identifier] {
                        guard checksum == migration.checksum else { throw PostgresStorageError.migrationChanged(migration.identifier) }
                        continue
                    }
                    for statement in migration.statements {
                        try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                    }
                    try await connection.query(
                        "INSERT INTO outpost_migrations (identifier, checksum) VALUES (\(migration.identifier), \(migration.checksum))",
                        logger: logger
                    )
                }
                // The triggers recording rows that move off a subscription's values, derived
                // from the contracts again each time (``RowMoves``).
                var existing: [(trigger: String, table: String)] = []
                for try await (trigger, table) in try await connection.query(
                    PostgresQuery(unsafeSQL: RowMoves.existingTriggersSQL(.postgres)), logger: logger
                ).decode((String, String).self) {
                    existing.append((trigger, table))
                }
                for statement in RowMoves.statements(for: contracts, dialect: .postgres, existing: existing) {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                // And those recording which rows name which file (``FileReferenceTriggers``).
                var fileTriggers: [(trigger: String, table: String)] = []
                for try await (trigger, table) in try await connection.query(
                    PostgresQuery(unsafeSQL: FileReferenceTriggers.existingTriggersSQL(.postgres)), logger: logger
                ).decode((String, String).self) {
                    fileTriggers.append((trigger, table))
                }
                for statement in FileReferenceTriggers.statements(for: contracts, dialect: .postgres, existing: fileTriggers) {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                // The record of when each field last changed (``FieldSeqs``), on tables made before it.
                // Looked up first: an ALTER TABLE would lock the table even when it has the column.
                var withColumn: Set<String> = []
                for try await table in try await connection.query(
                    "SELECT table_name::text FROM information_schema.columns WHERE table_schema = current_schema() AND column_name = \(FieldSeqs.column)",
                    logger: logger
                ).decode(String.self) {
                    withColumn.insert(table)
                }
                for statement in FieldSeqs.addColumnStatements(contracts: contracts, dialect: .postgres, existing: withColumn) {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.query("COMMIT", logger: logger)
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                throw error
            }
        }
    }
}
