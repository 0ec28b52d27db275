import ContractRuntime
import Foundation
import GRDB

/// Pulling a scope again from scratch after the server answered its cursor with 410
/// `cursor_expired` (the server compacted deletes the device had not pulled yet; docs/client.md).
///
/// The re-pull is recorded in the store, so a crash part-way resumes it: ``beginRepull(scopes:)``
/// clears the scopes' cursors and marks them (`repull_scopes`); every pulled page of a marked
/// scope records, in the same transaction as its rows, which rows it delivered
/// (`repull_rows`); when the last page of every marked scope of one contract scope is applied,
/// ``finishRepull(scope:)`` deletes the synced rows of that scope's contracts the fresh pull did
/// not deliver (the server deleted them), except rows with an unsynced write (pending, sending,
/// waiting, conflicted, failed) or an open conflict, which stay as they are.
///
/// The keys of one contract scope (`ops:team:t-1`, `ops:team:t-2`) share their tables, so they are
/// re-pulled together and the rows are swept once all of them have delivered theirs.
///
/// A first download cut short is re-pulled the same way: its pages stored rows but no cursor, so
/// the next sync starts it again from scratch, and a row the server deleted and compacted in
/// between would never reach the device as a tombstone. ``beginFirstDownload(scope:siblings:)``
/// records each first download (`first_downloads`) until ``endFirstDownload(scope:)``; finding
/// one recorded when the scope still has no cursor means the last one never finished. A device
/// whose own writes are in the scope's tables before its first download at all is reconciled the
/// same way.
extension OfflineStore {
    static let repullStatements = [
        """
        CREATE TABLE "\(EngineNames.ClientTable.repullScopes.rawValue)" (
            "scope_key" TEXT PRIMARY KEY NOT NULL,
            "scope_name" TEXT NOT NULL,
            "started_at" INTEGER NOT NULL,
            "done" INTEGER NOT NULL DEFAULT 0
        )
        """,
        """
        CREATE TABLE "\(EngineNames.ClientTable.repullRows.rawValue)" (
            "scope_name" TEXT NOT NULL,
            "entity" TEXT NOT NULL,
            "row_id" TEXT NOT NULL,
            PRIMARY KEY ("scope_name", "entity", "row_id")
        ) WITHOUT ROWID
        """,
    ]

    static let firstDownloadStatements = [
        """
        CREATE TABLE "\(EngineNames.ClientTable.firstDownloads.rawValue)" (
            "scope_key" TEXT PRIMARY KEY NOT NULL,
            "started_at" INTEGER NOT NULL
        )
        """
    ]

    /// Records that a download of `scope` from scratch starts (it has no cursor). Returns `true`
    /// when the rows the device already holds must be reconciled like a re-pull
    /// (``beginRepull(scopes:)``): an earlier first download was recorded and never ended, or no
    /// key of the scope's contract scope (`siblings`, `scope` among them) has a cursor yet the
    /// device holds rows of its contracts (its own writes, pushed before this pull, whose rows
    /// the server may have deleted and compacted since). An earlier re-pull cut short before its
    /// first cursor starts again too (what it recorded as delivered may be gone since).
    package func beginFirstDownload(scope: String, siblings: [String]) throws(OfflineStoreError) -> Bool {
        let now = now().millisecondsSince1970
        return try write { db in
            let cutShort =
                try Bool.fetchOne(
                    db.cachedStatement(sql: #"SELECT 1 FROM "first_downloads" WHERE "scope_key" = ?"#), arguments: [scope]
                ) ?? false
            // A re-pull cut short before its first cursor restarts too: the rows it recorded
            // as delivered may have been deleted since.
            if cutShort { return true }
            try db.cachedStatement(sql: #"INSERT INTO "first_downloads" ("scope_key", "started_at") VALUES (?, ?)"#).execute(arguments: [scope, now])
            if try Self.repullingScopeName(db, scopeKey: scope) != nil { return false }
            let keys = Set(siblings).union([scope])
            let withCursor = try String.fetchAll(
                db.cachedStatement(sql: #"SELECT "scope_key" FROM "sync_state" WHERE "cursor" IS NOT NULL"#)
            ).contains(where: keys.contains)
            guard !withCursor else { return false }
            let name = repullScopeName(scope)
            for entity in contracts.entities where entity.scope == name && entity.direction != .up {
                if try Bool.fetchOne(db, sql: "SELECT 1 FROM \(entity.table.quotedDatabaseIdentifier) LIMIT 1") ?? false {
                    return true
                }
            }
            return false
        }
    }

    /// Records that the download of `scope` from scratch reached its last page.
    package func endFirstDownload(scope: String) throws(OfflineStoreError) {
        try write { db in
            try db.cachedStatement(sql: #"DELETE FROM "first_downloads" WHERE "scope_key" = ?"#).execute(arguments: [scope])
        }
    }

    /// The contract scope a configured scope key belongs to (the key itself when this build
    /// does not know it).
    package func repullScopeName(_ scopeKey: String) -> String {
        priorities.scopeName(scopeKey) ?? scopeKey
    }

    /// Starts (or starts again) a re-pull of `scopes`, keys of one contract scope: their cursors
    /// are cleared and what an earlier re-pull of them recorded is forgotten.
    package func beginRepull(scopes: [String]) throws(OfflineStoreError) {
        let now = now().millisecondsSince1970
        try write { db in
            for scope in scopes {
                let name = repullScopeName(scope)
                try db.execute(
                    sql: """
                        INSERT INTO "sync_state" ("scope_key", "cursor") VALUES (?, NULL)
                        ON CONFLICT ("scope_key") DO UPDATE SET "cursor" = NULL
                        """,
                    arguments: [scope]
                )
                try db.cachedStatement(
                    sql: #"INSERT OR REPLACE INTO "repull_scopes" ("scope_key", "scope_name", "started_at", "done") VALUES (?, ?, ?, 0)"#
                ).execute(
                    arguments: [scope, name, now]
                )
                try db.cachedStatement(sql: #"DELETE FROM "repull_rows" WHERE "scope_name" = ?"#).execute(arguments: [name])
            }
        }
    }

    /// Scope keys being re-pulled (a crash left them part-way, or their siblings are not done).
    package func repullingScopes() throws(OfflineStoreError) -> Set<String> {
        try read { db in try Set(String.fetchAll(db.cachedStatement(sql: #"SELECT "scope_key" FROM "repull_scopes" WHERE "done" = 0"#))) }
    }

    /// The contract scope whose re-pull a pulled page of `scopeKey` belongs to, or `nil` when
    /// that scope is not being re-pulled.
    static func repullingScopeName(_ db: Database, scopeKey: String?) throws -> String? {
        guard let scopeKey else { return nil }
        return try String.fetchOne(
            db.cachedStatement(sql: #"SELECT "scope_name" FROM "repull_scopes" WHERE "scope_key" = ? AND "done" = 0"#), arguments: [scopeKey]
        )
    }

    /// Records, in the transaction storing a pulled page of a scope being re-pulled, the entity
    /// rows it delivered.
    static func recordRepulledRows(_ db: Database, scopeName name: String, entity: EntityDescriptor, ids: [String]) throws {
        let insert = try db.cachedStatement(sql: #"INSERT OR IGNORE INTO "repull_rows" ("scope_name", "entity", "row_id") VALUES (?, ?, ?)"#)
        for id in ids {
            try insert.execute(arguments: [name, entity.name, id])
        }
    }

    /// After the last page of a scope: marks its re-pull done and, once every key of its contract
    /// scope is done, deletes the synced rows the fresh pull did not deliver (never a row with an
    /// unsynced write or an open conflict, a row an active subscription holds (its own pulls
    /// bring its deletes), nor a row of a contract held for an app update). A row only ended
    /// subscriptions hold is pulled by nothing any more: it goes when its scope key is one that
    /// was re-pulled (the server no longer has it there).
    /// Returns the rows deleted, or `nil` when the scope was not being re-pulled or its siblings
    /// are not done yet.
    @discardableResult
    package func finishRepull(scope: String) throws(OfflineStoreError) -> Int? {
        try write { db in
            guard
                let name = try String.fetchOne(
                    db.cachedStatement(sql: #"SELECT "scope_name" FROM "repull_scopes" WHERE "scope_key" = ? AND "done" = 0"#), arguments: [scope]
                )
            else { return nil }
            try db.cachedStatement(sql: #"UPDATE "repull_scopes" SET "done" = 1 WHERE "scope_key" = ?"#).execute(arguments: [scope])
            let waiting =
                try Int.fetchOne(
                    db.cachedStatement(sql: #"SELECT COUNT(*) FROM "repull_scopes" WHERE "scope_name" = ? AND "done" = 0"#), arguments: [name]
                ) ?? 0
            guard waiting == 0 else { return nil }
            let held = try Self.heldContractNames(db)
            var deleted = 0
            for entity in contracts.entities where entity.scope == name && entity.direction != .up && !held.contains(entity.name) {
                let table = entity.table.quotedDatabaseIdentifier
                let key = entity.primaryKey.quotedDatabaseIdentifier
                try db.execute(
                    sql: """
                        DELETE FROM \(table)
                        WHERE \(key) NOT IN (SELECT "row_id" FROM "repull_rows" WHERE "scope_name" = ? AND "entity" = ?)
                        AND \(key) NOT IN (SELECT "row_id" FROM "outbox" WHERE "entity" = ? AND "status" IN \(Self.unsyncedStatusesSQL))
                        AND \(key) NOT IN (SELECT "row_id" FROM "conflicts" WHERE "entity" = ? AND "resolution" IS NULL)
                        AND \(key) NOT IN (SELECT "row_id" FROM "subscription_rows" WHERE "entity" = ?)
                        """,
                    arguments: [name, entity.name, entity.name, entity.name, entity.name]
                )
                deleted += db.changesCount
                deleted += try deleteEndedSubscriptionRowsNotRepulled(db, entity: entity, scopeName: name)
            }
            try db.cachedStatement(sql: #"DELETE FROM "repull_rows" WHERE "scope_name" = ?"#).execute(arguments: [name])
            try db.cachedStatement(sql: #"DELETE FROM "repull_scopes" WHERE "scope_name" = ?"#).execute(arguments: [name])
            return deleted
        }
    }

    /// The rows of `entity` held only by ended subscriptions, in a scope key re-pulled under
    /// `scopeName`, that the re-pull did not deliver: deleted, with what the subscriptions
    /// recorded of them. Returns how many.
    private func deleteEndedSubscriptionRowsNotRepulled(_ db: Database, entity: EntityDescriptor, scopeName name: String) throws -> Int {
        let rows = try String.fetchAll(
            db,
            sql: """
                SELECT DISTINCT sr."row_id" FROM "subscription_rows" sr
                WHERE sr."entity" = ?1
                AND NOT EXISTS (
                    SELECT 1 FROM "subscription_rows" held JOIN "subscriptions" s ON s."id" = held."subscription_id"
                    WHERE held."entity" = ?1 AND held."row_id" = sr."row_id" AND s."unsubscribed_at" IS NULL AND s."last_error" IS NULL)
                AND sr."row_id" NOT IN (SELECT "row_id" FROM "repull_rows" WHERE "scope_name" = ?2 AND "entity" = ?1)
                AND sr."row_id" NOT IN (SELECT "row_id" FROM "outbox" WHERE "entity" = ?1 AND "status" IN \(Self.unsyncedStatusesSQL))
                AND sr."row_id" NOT IN (SELECT "row_id" FROM "conflicts" WHERE "entity" = ?1 AND "resolution" IS NULL)
                """,
            arguments: [entity.name, name])
        guard !rows.isEmpty else { return 0 }
        let repulled = Set(
            try String.fetchAll(db.cachedStatement(sql: #"SELECT "scope_key" FROM "repull_scopes" WHERE "scope_name" = ?"#), arguments: [name]))
        // The scope pulled by its name (`team`) is every key of it the identity reads.
        let wholeName = repulled.contains(name)
        var deleted = 0
        for id in rows {
            // A row of a key this re-pull did not cover (or whose key is unknown) is not known gone.
            if !wholeName {
                guard let key = try scopeKey(db, contract: entity.name, id: id), repulled.contains(key) else { continue }
            }
            try db.execute(
                sql: "DELETE FROM \(entity.table.quotedDatabaseIdentifier) WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = ?",
                arguments: [id])
            deleted += db.changesCount
            try db.cachedStatement(sql: #"DELETE FROM "subscription_rows" WHERE "entity" = ? AND "row_id" = ?"#).execute(arguments: [entity.name, id])
        }
        return deleted
    }
}
