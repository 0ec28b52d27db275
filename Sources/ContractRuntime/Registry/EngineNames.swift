/// The names the sync engines keep for themselves beside the contract tables: the tables of the
/// device's store, the tables of the server's database, and the columns the engines add to every
/// contract table.
///
/// The one list of them: the contract compiler refuses a contract whose table or field takes
/// one (`RESERVED_NAME`), and the engines create their tables under these names, so a new engine
/// table is reserved by being declared here. Released migrations keep their text: a statement
/// that interpolates a name here reads exactly as it did when it was released.
public enum EngineNames {
    /// The device's own tables (SyncClient), created before the contract tables.
    public enum ClientTable: String, CaseIterable, Sendable {
        /// Local writes waiting to be pushed, one entry per write, in order.
        case outbox
        /// Writes the server answered with a conflict, until they are settled.
        case conflicts
        /// Each scope's pull cursor and the times of its last syncs.
        case syncState = "sync_state"
        /// The store's identity and settings, key to value.
        case metadata
        /// Rows the app keeps whatever their retention.
        case pinnedRows = "pinned_rows"
        /// Rows the device dropped while the server still has them.
        case droppedRows = "dropped_rows"
        /// Scopes being pulled again from scratch after an expired cursor.
        case repullScopes = "repull_scopes"
        /// The rows each page of a re-pull delivered.
        case repullRows = "repull_rows"
        /// Downloads of a scope from scratch that have not finished yet.
        case firstDownloads = "first_downloads"
        /// The subscriptions the device holds, each with its cursor.
        case subscriptions
        /// Which subscription holds which row.
        case subscriptionRows = "subscription_rows"
        /// Rows a subscription let go of, kept until their write is on the server.
        case evictionCandidates = "eviction_candidates"
        /// The files the device holds (`file` fields' bytes): waiting to upload, uploaded, or
        /// downloaded and cached, with each upload's progress.
        case files
    }

    /// The server's own tables (SyncServer), in SQLite and in PostgreSQL.
    public enum ServerTable: String, CaseIterable, Sendable {
        /// Each device's push stream: the last sequence applied and acknowledged, its owner.
        case clients
        /// The stored results of pushes, for replays.
        case pushResults = "push_results"
        /// The last sequence number of each scope, and how far its tombstones were compacted.
        case scopeSequences = "scope_sequences"
        /// The hash-chained audit log.
        case auditLog = "audit_log"
        /// The sealed head of the audit chain.
        case auditHead = "audit_head"
        /// Each user's key for their audit details, wrapped under the audit key.
        case auditUserKeys = "audit_user_keys"
        /// Users whose data was erased.
        case erasures
        /// Changes an operator marked urgent, taken before any pull page.
        case urgentChanges = "urgent_changes"
        /// Revoked devices and users.
        case revocations
        /// Team membership.
        case teamMembers = "team_members"
        /// Rate-limit counters shared by the server processes (PostgreSQL only).
        case rateWindows = "rate_windows"
        /// Where the server delivers applied changes (webhooks, a learning record store), and
        /// how far each got.
        case sinks
        /// Batches a sink refused, kept for an operator to inspect and replay.
        case sinkDeadLetters = "sink_dead_letters"
        /// What the server knows of each device from its requests: last seen, app and schema
        /// versions, latest syncs, telemetry.
        case deviceCensus = "device_census"
        /// Signed-in sessions of the operator console, by the SHA-256 of their id.
        case consoleSessions = "console_sessions"
        /// Each device's registered public key, for the signatures of its writes.
        case deviceKeys = "device_keys"
        /// Rows that moved off a value a subscription selects by (``SubscriptionDescriptor``),
        /// recorded by triggers, so devices learn which rows left a subscription.
        case subscriptionMoves = "subscription_moves"
        /// The files the server holds (``FileReference``), by tenant and SHA-256, with who
        /// uploaded each: the quotas count them.
        case files
        /// File uploads under way: how far each got is in its blob store's staging.
        case fileUploads = "file_uploads"
        /// Who may name a file in a row without holding a row that names it: its uploaders.
        case fileGrants = "file_grants"
        /// Which rows name which file, recorded by triggers: who may read a file, and which
        /// files nothing names any more.
        case fileReferences = "file_references"
        /// The bytes of files and uploads on a storage whose blob store is its database
        /// (PostgreSQL), in chunks.
        case fileChunks = "file_chunks"
        /// The PostgreSQL migrations applied, with their checksums.
        case migrations = "outpost_migrations"
        /// `push_results` while an upgrade rebuilds it (`server.v4.push_result_records`).
        case pushResultsBeforeRecords = "push_results_v3"
        /// The first pusher of each stream while an upgrade fills in the owners
        /// (`server.v2.client_owners`, SQLite).
        case firstPushers = "first_pushers"
    }

    /// Tables of the database library both engines migrate with.
    public enum LibraryTable: String, CaseIterable, Sendable {
        /// GRDB's record of the migrations applied to a SQLite database.
        case grdbMigrations = "grdb_migrations"
    }

    /// Prefixes of the databases' own tables (`sqlite_sequence`, `pg_…`).
    public static let reservedTablePrefixes = ["sqlite_", "pg_"]

    /// Columns the engines add to contract tables: the device's sync metadata, and the server's.
    public enum Column: String, CaseIterable, Sendable {
        /// The contract version a row was written at (device and server).
        case schemaVersion = "_schema_version"
        /// The server's version of the row the device last saw.
        case serverVersion = "_server_version"
        /// When the device last synced the row or event.
        case syncedAt = "_synced_at"
        /// The tenant a server row belongs to.
        case tenantID = "_tenant_id"
        /// The scope key a server row is filed under.
        case scopeKey = "_scope_key"
        /// The scope sequence number of a server row's last change, for pull cursors.
        case sequence = "_seq"
        /// The server's version of a row.
        case version = "_version"
        /// The hybrid logical clock of a row's last write.
        case hlc = "_hlc"
        /// The clock of each field's last write (`field_merge`).
        case fieldClocks = "_field_clocks"
        /// When each field of a server row last changed, in its scope's sequence (pulls of changed
        /// fields only).
        case fieldSeqs = "_field_seqs"
        /// Whether the server row is a tombstone.
        case deleted = "_deleted"
        /// When the server row last changed.
        case updatedAt = "_updated_at"
        /// Who last changed the server row.
        case updatedBy = "_updated_by"
    }

    /// Every reserved table name: the client's, the server's and the library's.
    public static let reservedTables: Set<String> = Set(
        ClientTable.allCases.map(\.rawValue) + ServerTable.allCases.map(\.rawValue) + LibraryTable.allCases.map(\.rawValue)
    )

    /// Every reserved column name.
    public static let reservedColumns: Set<String> = Set(Column.allCases.map(\.rawValue))

    /// Whether a contract must not take `name` for its table: an engine's table, or a name
    /// with the prefix of the databases' own.
    public static func isReservedTable(_ name: String) -> Bool {
        reservedTables.contains(name) || reservedTablePrefixes.contains { name.hasPrefix($0) }
    }
}
