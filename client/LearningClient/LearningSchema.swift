public import GRDB
public import SyncClient

/// The learning app's tables in the offline store: give it when opening the store, for the unit
/// cache, asset downloads and assessments.
///
/// ```swift
/// let store = try OfflineStore(configuration, contracts: ContractRegistry.self, extensions: [LearningStore()])
/// ```
///
/// - `assets`: the download records of the asset files when the app downloaded them itself;
///   no longer written (the files are the engine's, ``SyncClient/SyncEngine/file(for:)``),
///   emptied when the store opens.
/// - `learning_attempts`: one row per attempt the learner started on this device.
///
/// Its migrations are history like the store's own. Two of them keep the identifiers they were
/// released under when these tables were the store's (`client.v2…`, `client.v5…`); `assets`
/// was created by the store's first migration then, so it is created here only if missing.
public struct LearningStore: StoreExtension {
    public init() {}

    public var name: String { Self.name }

    /// The extension's name.
    public static let name = "learning"

    public var tables: [String] { [Table.assets, Table.learningAttempts] }

    public var migrations: [StoreMigration] {
        [
            StoreMigration("learning.v1.assets", Self.assetsStatements),
            StoreMigration("client.v2.unit_cache", Self.unitCacheStatements),
            StoreMigration("client.v5.learning_attempts", Self.learningAttemptsStatements),
            StoreMigration("learning.v2.unit_subscriptions", Self.unitSubscriptionStatements),
        ]
    }

    /// Marks `failed` every unit download a killed process left `queued` or `downloading`, and
    /// empties the download records of the app's own downloads of before.
    public func storeDidOpen(_ database: Database) throws {
        try OfflineStore.markInterruptedDownloads(database)
        try database.execute(sql: #"DELETE FROM "assets""#)
    }

    enum Table {
        static let assets = "assets"
        static let learningAttempts = "learning_attempts"
    }

    /// One row per asset file: where it comes from, its checksum, and how far its download got.
    static let assetsStatements = [
        """
        CREATE TABLE IF NOT EXISTS "assets" (
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
        #"CREATE INDEX IF NOT EXISTS "assets_unit_id_idx" ON "assets" ("unit_id")"#,
        #"CREATE INDEX IF NOT EXISTS "assets_lesson_id_idx" ON "assets" ("lesson_id")"#,
    ]

    /// One row per unit the device downloaded (or began to): what cache management and the
    /// eviction order need. A table of its own rather than columns of `units`, so it never
    /// touches a generated table and outlives a unit row the server deleted (its files are then
    /// still found and freed). Sizes are not stored: they are summed from `assets`, so they
    /// cannot drift from the files.
    static let unitCacheStatements = [
        """
        CREATE TABLE "unit_cache" (
            "unit_id" TEXT PRIMARY KEY NOT NULL,
            "added_at" INTEGER NOT NULL,
            "downloaded_at" INTEGER,
            "last_opened_at" INTEGER,
            "completed_at" INTEGER,
            "expires_at" INTEGER
        )
        """
    ]

    /// Units kept for offline use became `unit` subscriptions of the store: each `unit_cache`
    /// row becomes one (made when the unit was added, used when it was last opened; a completed
    /// unit ended, kept 7 days from its last opening; one with an expiry ended, kept until
    /// then), and the table goes. Their first sync after this marks them synced.
    static let unitSubscriptionStatements = [
        """
        INSERT OR IGNORE INTO "subscriptions" ("id", "name", "parameters", "scope", "ttl_seconds", "priority", "created_at",
            "last_used_at", "unsubscribed_at")
        SELECT 'unit-cache-' || "unit_id", 'unit', '{"id":' || json_quote("unit_id") || '}', NULL,
            CASE WHEN "expires_at" IS NOT NULL THEN MAX(0, ("expires_at" - "added_at") / 1000)
                 WHEN "completed_at" IS NOT NULL THEN 604800 ELSE 2592000 END,
            'high', "added_at", "last_opened_at",
            CASE WHEN "expires_at" IS NOT NULL THEN "added_at"
                 WHEN "completed_at" IS NOT NULL THEN MAX("completed_at", COALESCE("last_opened_at", 0)) END
        FROM "unit_cache"
        """,
        #"DROP TABLE "unit_cache""#,
    ]

    /// One row per attempt the learner started on this device, with what the attempt was taken
    /// on: the assessment's `revision` (sent with the submission, so the server grades it
    /// against that revision or answers with a conflict) and its time limit then.
    /// `abandoned_at` is set when the learner gives the attempt up (a retake after a revision
    /// conflict, or the answers of a deleted assessment discarded). A table of the device's own:
    /// the `Attempt` rows are the server's, and the `attempted` statement that starts an attempt
    /// has no place for a revision.
    static let learningAttemptsStatements = [
        """
        CREATE TABLE "learning_attempts" (
            "attempt_id" TEXT PRIMARY KEY NOT NULL,
            "assessment_id" TEXT NOT NULL,
            "assessment_revision" INTEGER NOT NULL,
            "time_limit_seconds" INTEGER,
            "started_at" INTEGER NOT NULL,
            "abandoned_at" INTEGER
        )
        """,
        #"CREATE INDEX "learning_attempts_assessment_idx" ON "learning_attempts" ("assessment_id")"#,
    ]
}
