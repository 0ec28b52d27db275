import ContractRuntime
import Foundation
import PostgresNIO

/// The server's own tables (not contracts) in PostgreSQL: clients, stored push results, scope
/// sequences, the audit log and the head of its chain. No identity column or sequence: audit ids
/// are numbered under the head's lock, so they are gap-free and in commit order, which a
/// PostgreSQL sequence (non-transactional, handed out before commit) cannot promise.
enum PostgresServerTables {
    static let statements = [
        """
        CREATE TABLE "\(EngineNames.ServerTable.clients.rawValue)" (
            "tenant" TEXT NOT NULL,
            "client_id" TEXT NOT NULL,
            "last_seq" BIGINT NOT NULL,
            "updated_at" BIGINT NOT NULL,
            PRIMARY KEY ("tenant", "client_id")
        )
        """,
        """
        CREATE TABLE "\(EngineNames.ServerTable.pushResults.rawValue)" (
            "tenant" TEXT NOT NULL,
            "client_id" TEXT NOT NULL,
            "seq" BIGINT NOT NULL,
            "client_mutation_id" TEXT NOT NULL,
            "result" TEXT NOT NULL,
            PRIMARY KEY ("tenant", "client_id", "seq")
        )
        """,
        """
        CREATE TABLE "\(EngineNames.ServerTable.scopeSequences.rawValue)" (
            "tenant" TEXT NOT NULL,
            "scope_key" TEXT NOT NULL,
            "last_seq" BIGINT NOT NULL,
            PRIMARY KEY ("tenant", "scope_key")
        )
        """,
        """
        CREATE TABLE "\(EngineNames.ServerTable.auditLog.rawValue)" (
            "id" BIGINT PRIMARY KEY,
            "tenant" TEXT NOT NULL,
            "recorded_at" BIGINT NOT NULL,
            "user_id" TEXT NOT NULL,
            "device_id" TEXT NOT NULL,
            "entity" TEXT NOT NULL,
            "row_id" TEXT NOT NULL,
            "operation" TEXT NOT NULL,
            "outcome" TEXT NOT NULL,
            "detail" TEXT NOT NULL,
            "previous_hash" TEXT NOT NULL,
            "hash" TEXT NOT NULL
        )
        """,
        """
        CREATE TABLE "\(EngineNames.ServerTable.auditHead.rawValue)" (
            "singleton" BOOLEAN PRIMARY KEY DEFAULT true CHECK ("singleton"),
            "last_id" BIGINT NOT NULL,
            "last_hash" TEXT NOT NULL
        )
        """,
        "INSERT INTO \"audit_head\" (\"singleton\", \"last_id\", \"last_hash\") VALUES (true, 0, '\(AuditChain.genesis)')",
    ]
}

// MARK: - Shared rate windows
