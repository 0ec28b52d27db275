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

    /// The migration that adds the per-unit cache bookkeeping (``unitCacheV2Statements``).
    static let unitCacheV2 = "client.v2.unit_cache"

    /// The migration that adds each outbox entry's state MAC (``OutboxSeal``); the first write
    /// after it seals the entries already there.
    static let outboxStateSealV3 = "client.v3.outbox_state_seal"

    /// The migration that adds rows the app keeps whatever their retention (`pinned_rows`) and
    /// rows the device dropped while the server still has them (`dropped_rows`).
    static let rowRetentionV4 = "client.v4.row_retention"

    /// The client's own migrations, in order.
    static let migrations: [(identifier: String, statements: [String])] = [
        (syncTablesV1, syncTablesV1Statements),
        (unitCacheV2, unitCacheV2Statements),
        (outboxStateSealV3, [#"ALTER TABLE "outbox" ADD COLUMN "state_mac" BLOB"#]),
        (rowRetentionV4, rowRetentionV4Statements),
        ("client.v5.learning_attempts", learningAttemptsV5Statements),
        ("client.v6.repull", OfflineStore.repullStatements),
        ("client.v7.first_downloads", OfflineStore.firstDownloadStatements),
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
        CREATE TABLE "\(EngineNames.ClientTable.assets.rawValue)" (
            "asset_id" TEXT PRIMARY KEY NOT NULL,
            "unit_id" TEXT,
            "lesson_id" TEXT,
            "remote_url" TEXT,
            "content_type" TEXT,
            "size_bytes" INTEGER NOT NULL DEFAULT 0,
            "checksum" TEXT NOT NULL,
            "local_path" TEXT,
            "status" TEXT NOT NULL DEFAULT 'remote'
                CHECK ("status" IN ('remote', 'queued', 'downloading', 'downloaded', 'failed')),
            "downloaded_bytes" INTEGER NOT NULL DEFAULT 0,
            "etag" TEXT,
            "last_error" TEXT,
            "downloaded_at" INTEGER,
            "last_accessed_at" INTEGER,
            "updated_at" INTEGER NOT NULL
        )
        """,
        #"CREATE INDEX "assets_unit_id_idx" ON "assets" ("unit_id")"#,
        #"CREATE INDEX "assets_lesson_id_idx" ON "assets" ("lesson_id")"#,
        """
        CREATE TABLE "\(EngineNames.ClientTable.metadata.rawValue)" (
            "key" TEXT PRIMARY KEY NOT NULL,
            "value" TEXT NOT NULL
        )
        """,
    ]

    /// One row per unit the device downloaded (or began to): what cache management and the
    /// eviction order need. A table of its own rather than columns of `units`, so it never
    /// touches a generated table and outlives a unit row the server deleted (its files are then
    /// still found and freed). Sizes are not stored: they are summed from `assets`, so they
    /// cannot drift from the files.
    static let unitCacheV2Statements = [
        """
        CREATE TABLE "\(EngineNames.ClientTable.unitCache.rawValue)" (
            "unit_id" TEXT PRIMARY KEY NOT NULL,
            "added_at" INTEGER NOT NULL,
            "downloaded_at" INTEGER,
            "last_opened_at" INTEGER,
            "completed_at" INTEGER,
            "expires_at" INTEGER
        )
        """
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

    /// Every migration this build knows: the client's own, then the generated contract ones.
    static func migrationIdentifiers(contracts: ContractCatalog) -> [String] {
        migrations.map(\.identifier) + contracts.clientMigrations.map(\.identifier)
    }

    /// The migrator of this build for `contracts`.
    static func migrator(contracts: ContractCatalog) -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        for migration in migrations {
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
