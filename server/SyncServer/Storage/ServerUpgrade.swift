import ContractRuntime
import SyncProtocol

/// Changes to the server's own tables after their first release (`server.v1.sync_tables`), in
/// order. Each runs once per database, after the generated contract migrations, in both storages;
/// a released upgrade never changes (PostgreSQL records a checksum of its statements).
struct ServerUpgrade {
    let identifier: String
    let sqlite: [String]
    let postgres: [String]

    static let all: [ServerUpgrade] = [
        clientOwners, rateWindows, auditSeal, identity, auditDetails, erasuresAndUrgentChanges, horizons, pushResultRecords, changeFeed,
        sinks, deviceCensus, consoleSessions, deviceKeys, consoleSessionKeys, subscriptionMoves, files,
    ]

    /// The files rows name (``FileService``): what the server holds and who uploaded it, the
    /// uploads under way, who may name a file, which rows name which file (written by triggers
    /// the storage derives from the contracts, ``FileReferenceTriggers``), and the chunks of a
    /// blob store kept in the database (``DatabaseBlobStore``).
    static let files = ServerUpgrade(
        identifier: "server.v12.files",
        sqlite: fileTables(integer: "INTEGER", bytes: "BLOB"),
        postgres: fileTables(integer: "BIGINT", bytes: "BYTEA")
    )

    private static func fileTables(integer: String, bytes: String) -> [String] {
        typealias Table = EngineNames.ServerTable
        let (files, uploads, grants) = (Table.files.rawValue, Table.fileUploads.rawValue, Table.fileGrants.rawValue)
        let (references, chunks) = (Table.fileReferences.rawValue, Table.fileChunks.rawValue)
        return [
            """
            CREATE TABLE "\(files)" (
                "tenant" TEXT NOT NULL,
                "sha256" TEXT NOT NULL,
                "size" \(integer) NOT NULL,
                "content_type" TEXT NOT NULL,
                "uploaded_by" TEXT NOT NULL,
                "stored_at" \(integer) NOT NULL,
                PRIMARY KEY ("tenant", "sha256")
            )
            """,
            "CREATE INDEX \"\(files)_by_uploader\" ON \"\(files)\" (\"tenant\", \"uploaded_by\")",
            """
            CREATE TABLE "\(uploads)" (
                "id" TEXT NOT NULL PRIMARY KEY,
                "tenant" TEXT NOT NULL,
                "user_id" TEXT NOT NULL,
                "device_id" TEXT NOT NULL,
                "sha256" TEXT NOT NULL,
                "size" \(integer) NOT NULL,
                "content_type" TEXT NOT NULL,
                "name" TEXT,
                "created_at" \(integer) NOT NULL,
                "updated_at" \(integer) NOT NULL
            )
            """,
            "CREATE UNIQUE INDEX \"\(uploads)_by_user\" ON \"\(uploads)\" (\"tenant\", \"user_id\", \"sha256\")",
            "CREATE INDEX \"\(uploads)_by_age\" ON \"\(uploads)\" (\"updated_at\")",
            """
            CREATE TABLE "\(grants)" (
                "tenant" TEXT NOT NULL,
                "sha256" TEXT NOT NULL,
                "user_id" TEXT NOT NULL,
                "granted_at" \(integer) NOT NULL,
                PRIMARY KEY ("tenant", "sha256", "user_id")
            )
            """,
            "CREATE INDEX \"\(grants)_by_user\" ON \"\(grants)\" (\"tenant\", \"user_id\")",
            """
            CREATE TABLE "\(references)" (
                "tenant" TEXT NOT NULL,
                "table_name" TEXT NOT NULL,
                "row_id" TEXT NOT NULL,
                "field_name" TEXT NOT NULL,
                "sha256" TEXT NOT NULL,
                "scope_key" TEXT NOT NULL,
                PRIMARY KEY ("tenant", "table_name", "row_id", "field_name")
            )
            """,
            "CREATE INDEX \"\(references)_by_file\" ON \"\(references)\" (\"tenant\", \"sha256\")",
            """
            CREATE TABLE "\(chunks)" (
                "owner" TEXT NOT NULL,
                "chunk" \(integer) NOT NULL,
                "data" \(bytes) NOT NULL,
                PRIMARY KEY ("owner", "chunk")
            )
            """,
        ]
    }

    /// Rows that moved off a value a subscription selects by (``RowMoves``): written by the
    /// triggers the storage derives from the contracts when it opens, read by subscription
    /// pulls by value and window, pruned by scope and `_seq`.
    static let subscriptionMoves = ServerUpgrade(
        identifier: "server.v11.subscription_moves",
        sqlite: subscriptionMoveTables(integer: "INTEGER"),
        postgres: subscriptionMoveTables(integer: "BIGINT")
    )

    private static func subscriptionMoveTables(integer: String) -> [String] {
        let table = EngineNames.ServerTable.subscriptionMoves.rawValue
        return [
            """
            CREATE TABLE "\(table)" (
                "tenant" TEXT NOT NULL,
                "scope_key" TEXT NOT NULL,
                "table_name" TEXT NOT NULL,
                "column_name" TEXT NOT NULL,
                "old_value" TEXT NOT NULL,
                "row_id" TEXT NOT NULL,
                "seq" \(integer) NOT NULL
            )
            """,
            "CREATE INDEX \"\(table)_by_value\" ON \"\(table)\" (\"tenant\", \"scope_key\", \"table_name\", \"column_name\", \"old_value\", \"seq\")",
            "CREATE INDEX \"\(table)_by_row\" ON \"\(table)\" (\"tenant\", \"scope_key\", \"table_name\", \"column_name\", \"row_id\", \"seq\")",
            "CREATE INDEX \"\(table)_by_seq\" ON \"\(table)\" (\"tenant\", \"scope_key\", \"seq\")",
        ]
    }

    /// Console sessions keep the kid of the key their admin token was signed with (a retired key
    /// ends them) and a public handle (the Sessions page ends one by it); sessions stored before
    /// have neither and are ended, and a tenant's sessions are counted by an index (the cap).
    static let consoleSessionKeys = ServerUpgrade(
        identifier: "server.v10.console_session_keys",
        sqlite: consoleSessionKeyStatements,
        postgres: consoleSessionKeyStatements
    )

    private static let consoleSessionKeyStatements = [
        "DELETE FROM \"console_sessions\"",
        "ALTER TABLE \"console_sessions\" ADD COLUMN \"key_id\" TEXT",
        "ALTER TABLE \"console_sessions\" ADD COLUMN \"handle\" TEXT",
        "CREATE INDEX \"console_sessions_by_tenant\" ON \"console_sessions\" (\"tenant\", \"created_at\")",
    ]

    /// Devices' public keys (``DeviceKeyStore``): one per (tenant, user, device), the identity of
    /// the token that registered it; a reinstalled device replaces it.
    static let deviceKeys = ServerUpgrade(
        identifier: "server.v9.device_keys",
        sqlite: deviceKeyTables(integer: "INTEGER"),
        postgres: deviceKeyTables(integer: "BIGINT")
    )

    private static func deviceKeyTables(integer: String) -> [String] {
        [
            """
            CREATE TABLE "\(EngineNames.ServerTable.deviceKeys.rawValue)" (
                "tenant" TEXT NOT NULL,
                "user_id" TEXT NOT NULL,
                "device_id" TEXT NOT NULL,
                "algorithm" TEXT NOT NULL,
                "public_key" TEXT NOT NULL,
                "fingerprint" TEXT NOT NULL,
                "registered_at" \(integer) NOT NULL,
                PRIMARY KEY ("tenant", "user_id", "device_id")
            )
            """
        ]
    }

    /// The fleet census (``FleetCensus``): one row per device, what its requests said of it.
    static let deviceCensus = ServerUpgrade(
        identifier: "server.v7.device_census",
        sqlite: deviceCensusTables(integer: "INTEGER"),
        postgres: deviceCensusTables(integer: "BIGINT")
    )

    private static func deviceCensusTables(integer: String) -> [String] {
        let telemetry = DeviceTelemetry.allCases.map { name in
            name.isGauge ? "\"t_\(name.rawValue)\" \(integer)" : "\"t_\(name.rawValue)\" \(integer) NOT NULL DEFAULT 0"
        }
        return [
            """
            CREATE TABLE "\(EngineNames.ServerTable.deviceCensus.rawValue)" (
                "tenant" TEXT NOT NULL,
                "user_id" TEXT NOT NULL,
                "device_id" TEXT NOT NULL,
                "first_seen_at" \(integer) NOT NULL,
                "last_seen_at" \(integer) NOT NULL,
                "app_version" TEXT,
                "schema" TEXT NOT NULL,
                "last_outcome" TEXT,
                "last_status" \(integer),
                "last_route" TEXT,
                "pushes" \(integer) NOT NULL DEFAULT 0,
                "pulls" \(integer) NOT NULL DEFAULT 0,
                "failures" \(integer) NOT NULL DEFAULT 0,
                "recent" TEXT NOT NULL,
                \(telemetry.joined(separator: ",\n    ")),
                PRIMARY KEY ("tenant", "user_id", "device_id")
            )
            """,
            "CREATE INDEX \"device_census_by_last_seen\" ON \"device_census\" (\"tenant\", \"last_seen_at\")",
        ]
    }

    /// The operator console's sessions (``ConsoleSessionStore``): only the SHA-256 of a session's
    /// id is stored, with the admin it belongs to, the issue time of the token it was opened
    /// with (revocations are checked against it on every request), its CSRF token and its expiry.
    static let consoleSessions = ServerUpgrade(
        identifier: "server.v8.console_sessions",
        sqlite: consoleSessionTables(integer: "INTEGER"),
        postgres: consoleSessionTables(integer: "BIGINT")
    )

    private static func consoleSessionTables(integer: String) -> [String] {
        [
            """
            CREATE TABLE "\(EngineNames.ServerTable.consoleSessions.rawValue)" (
                "id_sha256" TEXT PRIMARY KEY,
                "tenant" TEXT NOT NULL,
                "user_id" TEXT NOT NULL,
                "device_id" TEXT NOT NULL,
                "token_issued_at" \(integer) NOT NULL,
                "csrf_token" TEXT NOT NULL,
                "created_at" \(integer) NOT NULL,
                "expires_at" \(integer) NOT NULL
            )
            """,
            "CREATE INDEX \"console_sessions_by_expiry\" ON \"console_sessions\" (\"expires_at\")",
        ]
    }

    /// Sinks (``SinkStore``): where applied changes are delivered, each with its place in the
    /// change feed, its batch in flight and its lease; and the batches a sink refused.
    static let sinks = ServerUpgrade(
        identifier: "server.v6.sinks",
        sqlite: sinkTables(integer: "INTEGER", serial: "INTEGER PRIMARY KEY"),
        postgres: sinkTables(integer: "BIGINT", serial: "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY")
    )

    private static func sinkTables(integer: String, serial: String) -> [String] {
        [
            """
            CREATE TABLE "\(EngineNames.ServerTable.sinks.rawValue)" (
                "tenant" TEXT NOT NULL,
                "id" TEXT NOT NULL,
                "kind" TEXT NOT NULL,
                "url" TEXT NOT NULL,
                "contracts" TEXT,
                "sealed_secret" TEXT NOT NULL,
                "options" TEXT NOT NULL,
                "created_at" \(integer) NOT NULL,
                "cursor" TEXT NOT NULL,
                "pending_until" TEXT,
                "pending_key" TEXT,
                "attempts" \(integer) NOT NULL DEFAULT 0,
                "next_attempt_at" \(integer) NOT NULL DEFAULT 0,
                "last_error" TEXT,
                "delivered" \(integer) NOT NULL DEFAULT 0,
                "delivered_at" \(integer),
                "lease_holder" TEXT,
                "lease_until" \(integer) NOT NULL DEFAULT 0,
                PRIMARY KEY ("tenant", "id")
            )
            """,
            """
            CREATE TABLE "\(EngineNames.ServerTable.sinkDeadLetters.rawValue)" (
                "id" \(serial),
                "tenant" TEXT NOT NULL,
                "sink_id" TEXT NOT NULL,
                "idempotency_key" TEXT NOT NULL,
                "body" TEXT NOT NULL,
                "changes" \(integer) NOT NULL,
                "status" \(integer) NOT NULL,
                "response" TEXT NOT NULL,
                "failed_at" \(integer) NOT NULL
            )
            """,
            "CREATE INDEX \"sink_dead_letters_by_sink\" ON \"sink_dead_letters\" (\"tenant\", \"sink_id\", \"id\")",
        ]
    }

    /// The change feed (``ChangeFeed``) reads a tenant's audit entries in order.
    static let changeFeed = ServerUpgrade(
        identifier: "server.v5.change_feed",
        sqlite: ["CREATE INDEX \"audit_log_by_tenant\" ON \"audit_log\" (\"tenant\", \"id\")"],
        postgres: ["CREATE INDEX \"audit_log_by_tenant\" ON \"audit_log\" (\"tenant\", \"id\")"]
    )

    /// Users whose data was erased (a token issued at or before is told `user_erased`), and the
    /// changes an operator marked urgent, which a device takes before any pull page.
    static let erasuresAndUrgentChanges = ServerUpgrade(
        identifier: "server.v3.erasures_urgent_changes",
        sqlite: [
            """
            CREATE TABLE "\(EngineNames.ServerTable.erasures.rawValue)" (
                "tenant" TEXT NOT NULL,
                "user_id" TEXT NOT NULL,
                "erased_at" INTEGER NOT NULL,
                PRIMARY KEY ("tenant", "user_id")
            )
            """,
            """
            CREATE TABLE "\(EngineNames.ServerTable.urgentChanges.rawValue)" (
                "tenant" TEXT NOT NULL,
                "scope_key" TEXT NOT NULL,
                "seq" INTEGER NOT NULL,
                "table_name" TEXT NOT NULL,
                "row_id" TEXT NOT NULL,
                "marked_at" INTEGER NOT NULL,
                PRIMARY KEY ("tenant", "scope_key", "seq")
            )
            """,
        ],
        postgres: [
            """
            CREATE TABLE "\(EngineNames.ServerTable.erasures.rawValue)" (
                "tenant" TEXT NOT NULL,
                "user_id" TEXT NOT NULL,
                "erased_at" BIGINT NOT NULL,
                PRIMARY KEY ("tenant", "user_id")
            )
            """,
            """
            CREATE TABLE "\(EngineNames.ServerTable.urgentChanges.rawValue)" (
                "tenant" TEXT NOT NULL,
                "scope_key" TEXT NOT NULL,
                "seq" BIGINT NOT NULL,
                "table_name" TEXT NOT NULL,
                "row_id" TEXT NOT NULL,
                "marked_at" BIGINT NOT NULL,
                PRIMARY KEY ("tenant", "scope_key", "seq")
            )
            """,
        ]
    )

    /// Erasable audit details and archiving (``AuditDetails``, ``AuditBase``): users' data keys,
    /// wrapped under the audit key; in the head, the first entry whose details are encrypted
    /// (entries already there keep theirs in clear) and the archive base (none: 0, the genesis
    /// hash, no seal); an index for one user's entries (export, erasure).
    static let auditDetails = ServerUpgrade(
        identifier: "server.v3.audit_details",
        sqlite: [
            """
            CREATE TABLE "\(EngineNames.ServerTable.auditUserKeys.rawValue)" (
                "tenant" TEXT NOT NULL,
                "user_id" TEXT NOT NULL,
                "wrapped_key" TEXT NOT NULL,
                "created_at" INTEGER NOT NULL,
                PRIMARY KEY ("tenant", "user_id")
            )
            """,
            "ALTER TABLE \"audit_head\" ADD COLUMN \"details_from\" INTEGER",
            "UPDATE \"audit_head\" SET \"details_from\" = \"last_id\" + 1",
            "ALTER TABLE \"audit_head\" ADD COLUMN \"base_id\" INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE \"audit_head\" ADD COLUMN \"base_hash\" TEXT NOT NULL DEFAULT '\(AuditChain.genesis)'",
            "ALTER TABLE \"audit_head\" ADD COLUMN \"base_seal\" TEXT",
            "CREATE INDEX \"audit_log_by_user\" ON \"audit_log\" (\"tenant\", \"user_id\", \"id\")",
        ],
        postgres: [
            """
            CREATE TABLE "\(EngineNames.ServerTable.auditUserKeys.rawValue)" (
                "tenant" TEXT NOT NULL,
                "user_id" TEXT NOT NULL,
                "wrapped_key" TEXT NOT NULL,
                "created_at" BIGINT NOT NULL,
                PRIMARY KEY ("tenant", "user_id")
            )
            """,
            "ALTER TABLE \"audit_head\" ADD COLUMN \"details_from\" BIGINT",
            "UPDATE \"audit_head\" SET \"details_from\" = \"last_id\" + 1",
            "ALTER TABLE \"audit_head\" ADD COLUMN \"base_id\" BIGINT NOT NULL DEFAULT 0",
            "ALTER TABLE \"audit_head\" ADD COLUMN \"base_hash\" TEXT NOT NULL DEFAULT '\(AuditChain.genesis)'",
            "ALTER TABLE \"audit_head\" ADD COLUMN \"base_seal\" TEXT",
            "CREATE INDEX \"audit_log_by_user\" ON \"audit_log\" (\"tenant\", \"user_id\", \"id\")",
        ]
    )

    /// A push's results stored as one record (``PushResultRecord``) instead of a row per
    /// mutation: `results` is the JSON array of the results of `first_seq` through `last_seq`.
    /// Each result stored before becomes a record of one.
    static let pushResultRecords = ServerUpgrade(
        identifier: "server.v4.push_result_records",
        sqlite: [
            "ALTER TABLE \"push_results\" RENAME TO \"push_results_v3\"",
            """
            CREATE TABLE "\(EngineNames.ServerTable.pushResults.rawValue)" (
                "tenant" TEXT NOT NULL,
                "client_id" TEXT NOT NULL,
                "first_seq" INTEGER NOT NULL,
                "last_seq" INTEGER NOT NULL,
                "results" TEXT NOT NULL,
                "recorded_at" INTEGER NOT NULL,
                PRIMARY KEY ("tenant", "client_id", "first_seq")
            )
            """,
            """
            INSERT INTO "push_results" ("tenant", "client_id", "first_seq", "last_seq", "results", "recorded_at")
            SELECT "tenant", "client_id", "seq", "seq", '[' || "result" || ']', "recorded_at" FROM "push_results_v3"
            """,
            "DROP TABLE \"push_results_v3\"",
        ],
        postgres: [
            "ALTER TABLE \"push_results\" RENAME TO \"push_results_v3\"",
            "ALTER TABLE \"push_results_v3\" RENAME CONSTRAINT \"push_results_pkey\" TO \"push_results_v3_pkey\"",
            """
            CREATE TABLE "\(EngineNames.ServerTable.pushResults.rawValue)" (
                "tenant" TEXT NOT NULL,
                "client_id" TEXT NOT NULL,
                "first_seq" BIGINT NOT NULL,
                "last_seq" BIGINT NOT NULL,
                "results" TEXT NOT NULL,
                "recorded_at" BIGINT NOT NULL,
                PRIMARY KEY ("tenant", "client_id", "first_seq")
            )
            """,
            """
            INSERT INTO "push_results" ("tenant", "client_id", "first_seq", "last_seq", "results", "recorded_at")
            SELECT "tenant", "client_id", "seq", "seq", '[' || "result" || ']', "recorded_at" FROM "push_results_v3"
            """,
            "DROP TABLE \"push_results_v3\"",
        ]
    )

    /// The data horizons (``ServerHousekeeping``): how far each client acknowledged its stored
    /// push results (`acked_seq`), when each result was stored (`recorded_at`, milliseconds;
    /// results stored before are 0, so old enough), and the highest `_seq` of a scope whose
    /// tombstones were compacted (`compacted_seq`): a cursor below it is expired.
    static let horizons = ServerUpgrade(
        identifier: "server.v3.horizons",
        sqlite: [
            "ALTER TABLE \"clients\" ADD COLUMN \"acked_seq\" INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE \"push_results\" ADD COLUMN \"recorded_at\" INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE \"scope_sequences\" ADD COLUMN \"compacted_seq\" INTEGER NOT NULL DEFAULT 0",
        ],
        postgres: [
            "ALTER TABLE \"clients\" ADD COLUMN \"acked_seq\" BIGINT NOT NULL DEFAULT 0",
            "ALTER TABLE \"push_results\" ADD COLUMN \"recorded_at\" BIGINT NOT NULL DEFAULT 0",
            "ALTER TABLE \"scope_sequences\" ADD COLUMN \"compacted_seq\" BIGINT NOT NULL DEFAULT 0",
        ]
    )

    /// What the server, not the token, says of an identity: revocations of devices and users
    /// (a token issued at or before one is refused) and team membership.
    static let identity = ServerUpgrade(
        identifier: "server.v2.identity",
        sqlite: [
            """
            CREATE TABLE "\(EngineNames.ServerTable.revocations.rawValue)" (
                "tenant" TEXT NOT NULL,
                "kind" TEXT NOT NULL CHECK ("kind" IN ('device', 'user')),
                "subject" TEXT NOT NULL,
                "revoked_at" INTEGER NOT NULL,
                PRIMARY KEY ("tenant", "kind", "subject")
            )
            """,
            """
            CREATE TABLE "\(EngineNames.ServerTable.teamMembers.rawValue)" (
                "tenant" TEXT NOT NULL,
                "team_id" TEXT NOT NULL,
                "user_id" TEXT NOT NULL,
                PRIMARY KEY ("tenant", "user_id", "team_id")
            )
            """,
        ],
        postgres: [
            """
            CREATE TABLE "\(EngineNames.ServerTable.revocations.rawValue)" (
                "tenant" TEXT NOT NULL,
                "kind" TEXT NOT NULL CHECK ("kind" IN ('device', 'user')),
                "subject" TEXT NOT NULL,
                "revoked_at" BIGINT NOT NULL,
                PRIMARY KEY ("tenant", "kind", "subject")
            )
            """,
            """
            CREATE TABLE "\(EngineNames.ServerTable.teamMembers.rawValue)" (
                "tenant" TEXT NOT NULL,
                "team_id" TEXT NOT NULL,
                "user_id" TEXT NOT NULL,
                PRIMARY KEY ("tenant", "user_id", "team_id")
            )
            """,
        ]
    )

    /// The audit chain's sealed head (``AuditHead``): where it ends, where its keyed part starts
    /// (entries already there keep their plain links), the key's fingerprint and the head's seal,
    /// which the first storage opened with the audit key writes.
    static let auditSeal = ServerUpgrade(
        identifier: "server.v2.audit_seal",
        sqlite: [
            """
            CREATE TABLE "\(EngineNames.ServerTable.auditHead.rawValue)" (
                "singleton" INTEGER PRIMARY KEY CHECK ("singleton" = 1),
                "last_id" INTEGER NOT NULL,
                "last_hash" TEXT NOT NULL,
                "keyed_from" INTEGER NOT NULL,
                "key_fingerprint" TEXT,
                "seal" TEXT
            )
            """,
            """
            INSERT INTO "audit_head" ("singleton", "last_id", "last_hash", "keyed_from")
            SELECT 1, COALESCE(MAX("id"), 0),
                COALESCE((SELECT "hash" FROM "audit_log" ORDER BY "id" DESC LIMIT 1), '\(AuditChain.genesis)'),
                COALESCE(MAX("id"), 0) + 1
            FROM "audit_log"
            """,
        ],
        postgres: [
            "ALTER TABLE \"audit_head\" ADD COLUMN \"keyed_from\" BIGINT",
            "ALTER TABLE \"audit_head\" ADD COLUMN \"key_fingerprint\" TEXT",
            "ALTER TABLE \"audit_head\" ADD COLUMN \"seal\" TEXT",
            "UPDATE \"audit_head\" SET \"keyed_from\" = \"last_id\" + 1",
            "ALTER TABLE \"audit_head\" ALTER COLUMN \"keyed_from\" SET NOT NULL",
        ]
    )

    /// Rate-limit counters several processes share (PostgreSQL only; SQLite serves one process,
    /// which counts in memory). Unlogged: a count is worth nothing after a crash.
    static let rateWindows = ServerUpgrade(
        identifier: "server.v2.rate_windows",
        sqlite: [],
        postgres: [
            """
            CREATE UNLOGGED TABLE "\(EngineNames.ServerTable.rateWindows.rawValue)" (
                "key" TEXT PRIMARY KEY,
                "window_start" BIGINT NOT NULL,
                "count" BIGINT NOT NULL
            )
            """
        ]
    )

    /// A push stream belongs to the identity that first pushed with it. Streams already there get
    /// the identity of their first audited push (one pass over the log); a stream with none stays
    /// without an owner until its next push claims it.
    static let clientOwners = ServerUpgrade(
        identifier: "server.v2.client_owners",
        sqlite: [
            "ALTER TABLE \"clients\" ADD COLUMN \"user_id\" TEXT",
            "ALTER TABLE \"clients\" ADD COLUMN \"device_id\" TEXT",
            """
            CREATE TEMP TABLE "\(EngineNames.ServerTable.firstPushers.rawValue)" AS
            SELECT "tenant", json_extract("detail", '$.client_id') AS "client_id", "user_id", "device_id", MIN("id") AS "first_id"
            FROM "audit_log" WHERE json_valid("detail") AND json_extract("detail", '$.client_id') IS NOT NULL
            GROUP BY "tenant", json_extract("detail", '$.client_id')
            """,
            """
            UPDATE "clients" SET
                "user_id" = (SELECT p."user_id" FROM "first_pushers" p WHERE p."tenant" = "clients"."tenant" AND p."client_id" = "clients"."client_id"),
                "device_id" = (SELECT p."device_id" FROM "first_pushers" p WHERE p."tenant" = "clients"."tenant" AND p."client_id" = "clients"."client_id")
            """,
            "DROP TABLE \"first_pushers\"",
        ],
        postgres: [
            "ALTER TABLE \"clients\" ADD COLUMN \"user_id\" TEXT",
            "ALTER TABLE \"clients\" ADD COLUMN \"device_id\" TEXT",
            """
            UPDATE "clients" SET "user_id" = p."user_id", "device_id" = p."device_id"
            FROM (
                SELECT DISTINCT ON ("tenant", "detail"::jsonb ->> 'client_id') "tenant", "detail"::jsonb ->> 'client_id' AS "client_id", "user_id", "device_id"
                FROM "audit_log" WHERE "detail"::jsonb ? 'client_id'
                ORDER BY "tenant", "detail"::jsonb ->> 'client_id', "id"
            ) p
            WHERE p."tenant" = "clients"."tenant" AND p."client_id" = "clients"."client_id"
            """,
        ]
    )
}
