import ContractRuntime
import ContractRuntimeGRDB
import Foundation
import GRDB

/// The server's own tables (not contracts): clients, stored push results, scope sequences and
/// the audit log. Their names are reserved in the contract compiler.
enum ServerTables {
    static let statements = [
        """
        CREATE TABLE "\(EngineNames.ServerTable.clients.rawValue)" (
            "tenant" TEXT NOT NULL,
            "client_id" TEXT NOT NULL,
            "last_seq" INTEGER NOT NULL,
            "updated_at" INTEGER NOT NULL,
            PRIMARY KEY ("tenant", "client_id")
        )
        """,
        """
        CREATE TABLE "\(EngineNames.ServerTable.pushResults.rawValue)" (
            "tenant" TEXT NOT NULL,
            "client_id" TEXT NOT NULL,
            "seq" INTEGER NOT NULL,
            "client_mutation_id" TEXT NOT NULL,
            "result" TEXT NOT NULL,
            PRIMARY KEY ("tenant", "client_id", "seq")
        )
        """,
        """
        CREATE TABLE "\(EngineNames.ServerTable.scopeSequences.rawValue)" (
            "tenant" TEXT NOT NULL,
            "scope_key" TEXT NOT NULL,
            "last_seq" INTEGER NOT NULL,
            PRIMARY KEY ("tenant", "scope_key")
        )
        """,
        """
        CREATE TABLE "\(EngineNames.ServerTable.auditLog.rawValue)" (
            "id" INTEGER PRIMARY KEY,
            "tenant" TEXT NOT NULL,
            "recorded_at" INTEGER NOT NULL,
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
    ]
}
