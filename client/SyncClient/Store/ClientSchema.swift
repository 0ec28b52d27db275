import ContractRuntime
import GRDB

/// The client's own tables and the migrator that creates them before the generated contract
/// tables.
///
/// Like the generated migrations, these are history: a released migration never changes; a
/// change to these tables is a new migration appended to ``migrations``.
enum ClientSchema {
    /// The identifier of the first client migration.
    static let syncTablesV1 = "client.v1.sync_tables"

    /// The migration that adds each outbox entry's state MAC (``OutboxSeal``); the first write
    /// after it seals the entries already there.
    static let outboxStateSealV3 = "client.v3.outbox_state_seal"

    /// The migration that adds rows the app keeps whatever their retention (`pinned_rows`) and
    /// rows the device dropped while the server still has them (`dropped_rows`).
    static let rowRetentionV4 = "client.v4.row_retention"

    /// The client's own migrations, in order.
    ///
    /// Until the learning app's client code became a target of its own, its tables were the
    /// store's: `client.v1.sync_tables` also created `assets`, and `client.v2.unit_cache` and
    /// `client.v5.learning_attempts` created its other two. Those statements are now the learning
    /// app's store extension's (which creates `assets` if it is not there yet), so a store
    /// created before and one created now hold the same tables.
    static let migrations: [(identifier: String, statements: [String])] = [
        (syncTablesV1, syncTablesV1Statements),
        (outboxStateSealV3, [#"ALTER TABLE "outbox" ADD COLUMN "state_mac" BLOB"#]),
        (rowRetentionV4, rowRetentionV4Statements),
        ("client.v6.repull", OfflineStore.repullStatements),
        ("client.v7.first_downloads", OfflineStore.firstDownloadStatements),
        ("client.v8.subscriptions", OfflineStore.subscriptionStatements),
        ("client.v9.subscription_eviction", OfflineStore.subscriptionEvictionStatements),
        ("client.v10.files", OfflineStore.fileStatements),
    ]

    static let syncTablesV1Statements = [
        """
        CREATE TABLE "\(EngineNames.ClientTable.outbox.rawValue)" (
            "seq" INTEGER PRIMARY KEY,
            "client_mutation_id" TEXT NOT NULL UNIQUE,
            "entity" TEXT NOT NULL,
            "op" TEXT NOT NULL CHECK ("op" IN ('create', 'update', 'patch', 'delete', 'event')),
            "row_id" TEXT NOT NULL,
            "payload" BLOB NOT NULL,
            "hmac" BLOB NOT NULL,
            "status" TEXT NOT NULL DEFAULT 'pending'
                CHECK ("status" IN ('pending', 'sending', 'done', 'waiting', 'conflicted', 'failed', 'quarantined')),
            "push_seq" INTEGER UNIQUE,
            "attempts" INTEGER NOT NULL DEFAULT 0,
            "next_attempt_at" INTEGER,
            "last_error" TEXT,
            "base_version" INTEGER,
            "hlc" TEXT,
            "occurred_at" INTEGER,
            "hash" TEXT,
            "schema_version" INTEGER NOT NULL,
            "created_at" INTEGER NOT NULL,
            "updated_at" INTEGER NOT NULL
        )
        """,
        #"CREATE INDEX "outbox_status_seq_idx" ON "outbox" ("status", "seq")"#,
        #"CREATE INDEX "outbox_entity_row_idx" ON "outbox" ("entity", "row_id")"#,
        """
        CREATE TABLE "\(EngineNames.ClientTable.conflicts.rawValue)" (
            "id" INTEGER PRIMARY KEY AUTOINCREMENT,
            "outbox_seq" INTEGER NOT NULL,
            "client_mutation_id" TEXT NOT NULL,
            "entity" TEXT NOT NULL,
            "row_id" TEXT NOT NULL,
            "op" TEXT NOT NULL,
            "local_row" BLOB,
            "server_row" BLOB,
            "server_version" INTEGER,
            "server_resolution" TEXT,
            "resolution" TEXT CHECK ("resolution" IN ('keep_mine', 'take_theirs', 'merged', 'discarded')),
            "detected_at" INTEGER NOT NULL,
            "resolved_at" INTEGER
        )
        """,
        #"CREATE INDEX "conflicts_open_idx" ON "conflicts" ("resolution", "entity", "row_id")"#,
        """
        CREATE TABLE "\(EngineNames.ClientTable.syncState.rawValue)" (
            "scope_key" TEXT PRIMARY KEY NOT NULL,
            "cursor" TEXT,
            "last_pull_at" INTEGER,
            "last_push_at" INTEGER,
            "last_success_at" INTEGER,
            "last_error" TEXT,
            "last_error_at" INTEGER
        )
        """,
        """
        CREATE TABLE "\(EngineNames.ClientTable.metadata.rawValue)" (
            "key" TEXT PRIMARY KEY NOT NULL,
            "value" TEXT NOT NULL
        )
        """,
    ]

    /// A pinned row is never dropped by retention or eviction. A dropped row is one the device
    /// removed (past its retention, evicted over its contract's row limit, or over its largest
    /// row) with the server version it had: a later pull brings it back only if the server
    /// changes it, and a read-through fetches it again when the app asks.
    static let rowRetentionV4Statements = [
        """
        CREATE TABLE "\(EngineNames.ClientTable.pinnedRows.rawValue)" (
            "entity" TEXT NOT NULL,
            "row_id" TEXT NOT NULL,
            "pinned_at" INTEGER NOT NULL,
            PRIMARY KEY ("entity", "row_id")
        )
        """,
        """
        CREATE TABLE "\(EngineNames.ClientTable.droppedRows.rawValue)" (
            "entity" TEXT NOT NULL,
            "row_id" TEXT NOT NULL,
            "server_version" INTEGER,
            "reason" TEXT NOT NULL CHECK ("reason" IN ('expired', 'evicted', 'too_large')),
            "dropped_at" INTEGER NOT NULL,
            PRIMARY KEY ("entity", "row_id")
        )
        """,
    ]

    /// Migrations the store ran before the learning app's tables became its extension's
    /// (``migrations``): known whether or not that extension is given, so a store created
    /// before opens in an app without it.
    static let migrationsMovedToExtensions: Set<String> = ["client.v2.unit_cache", "client.v5.learning_attempts"]

    /// Every migration this build knows: the client's own, the extensions', then the generated
    /// contract ones.
    static func migrationIdentifiers(contracts: ContractCatalog, extensions: [any StoreExtension]) -> [String] {
        migrations.map(\.identifier) + extensions.flatMap { $0.migrations.map(\.identifier) }
            + contracts.clientMigrations.map(\.identifier)
    }

    /// The migrator of this build for `contracts` and `extensions`.
    static func migrator(contracts: ContractCatalog, extensions: [any StoreExtension]) -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        for migration in migrations {
            migrator.registerMigration(migration.identifier) { db in
                for statement in migration.statements { try db.execute(sql: statement) }
            }
        }
        for migration in extensions.flatMap(\.migrations) {
            migrator.registerMigration(migration.identifier) { db in
                for statement in migration.statements { try db.execute(sql: statement) }
            }
        }
        for migration in contracts.clientMigrations {
            migrator.registerMigration(migration.identifier) { db in
                for statement in migration.statements { try db.execute(sql: statement) }
            }
        }
        return migrator
    }
}
