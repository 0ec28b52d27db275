public import ContractRuntime
import Contracts
import Foundation
import GRDB

/// What keeps the store bounded (docs/client.md, "Housekeeping"): rows past their contract's
/// `retention`, rows stored below the oldest supported schema, and outbox entries done long
/// ago are removed when the store opens and after every sync. Nothing the server has not
/// acknowledged is ever removed: a row with a write still waiting, failed or in conflict, and
/// a row the app pinned, stay.
extension OfflineStore {
    /// Runs every housekeeping task now, in one transaction each, and says what it removed.
    /// The store runs it when it opens and the sync engine after every sync; an app may call it
    /// too (after changing the clock in a test, say).
    @discardableResult
    public func runHousekeeping() throws(OfflineStoreError) -> HousekeepingReport {
        var report = HousekeepingReport()
        report.expiredRows = try dropExpiredRows()
        report.unsupportedRows = try purgeUnsupportedRows()
        let cutoff = now().date.addingTimeInterval(-configuration.completedWriteRetention)
        report.prunedOutboxEntries = try pruneCompletedOutbox(before: cutoff)
        return report
    }

    /// Keeps a row on the device whatever its contract's retention and whatever the cache's
    /// eviction (until ``unpin(_:id:)``). The row need not be on the device yet: a pin taken
    /// before it arrives holds it once it does.
    public func pin<E: ContractEntity>(_ type: E.Type, id: String) throws(OfflineStoreError) {
        let now = now().millisecondsSince1970
        try write { db in
            try db.execute(
                sql: #"INSERT INTO "pinned_rows" ("entity", "row_id", "pinned_at") VALUES (?, ?, ?) ON CONFLICT DO NOTHING"#,
                arguments: [E.descriptor.name, id, now]
            )
        }
    }

    /// Lets a pinned row go again: the next housekeeping drops it if its retention has passed.
    public func unpin<E: ContractEntity>(_ type: E.Type, id: String) throws(OfflineStoreError) {
        try write { db in
            try db.execute(sql: #"DELETE FROM "pinned_rows" WHERE "entity" = ? AND "row_id" = ?"#, arguments: [E.descriptor.name, id])
        }
    }

    /// The ids of the rows of `type` the app pinned.
    public func pinnedIds<E: ContractEntity>(_ type: E.Type) throws(OfflineStoreError) -> [String] {
        try read { db in
            try String.fetchAll(db, sql: #"SELECT "row_id" FROM "pinned_rows" WHERE "entity" = ? ORDER BY "row_id""#, arguments: [E.descriptor.name])
        }
    }

    /// The rows of `type` the device dropped at the end of their retention and has not received
    /// since, by id, with the server version each had. A read-through (``fetch(_:id:from:)``)
    /// brings one back; a pull does when the server changes it.
    public func expiredRows<E: ContractEntity>(_ type: E.Type) throws(OfflineStoreError) -> [String: Int64?] {
        let entity = E.descriptor
        return try read { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT "row_id", "server_version" FROM "expired_rows" WHERE "entity" = ?
                    AND "row_id" NOT IN (SELECT CAST(\(entity.primaryKey.quotedDatabaseIdentifier) AS TEXT) FROM \(entity.table.quotedDatabaseIdentifier))
                    """,
                arguments: [entity.name]
            )
            return Dictionary(uniqueKeysWithValues: rows.map { ($0["row_id"] as String, $0["server_version"] as Int64?) })
        }
    }

    // MARK: - Retention

    /// The moment a row's retention counts from: its last arrival from the server, or its last
    /// use when the contract has a local `last_accessed_at` the app sets (an assessment opened
    /// again is kept another 30 days).
    static func retentionAgeSQL(_ entity: EntityDescriptor) -> String {
        let accessed = entity.localFields.contains { $0.name == "last_accessed_at" }
        return accessed ? #"MAX("_synced_at", COALESCE("last_accessed_at", 0))"# : #""_synced_at""#
    }

    /// Deletes the synced rows older than their contract's retention that hold no unsynced
    /// write, open conflict or pin, recording each in `expired_rows`; returns how many per
    /// contract. Rows never acknowledged by the server (`_synced_at` null) are never expired.
    @discardableResult
    package func dropExpiredRows() throws(OfflineStoreError) -> [String: Int] {
        let now = now().millisecondsSince1970
        return try write { db in
            var dropped: [String: Int] = [:]
            for entity in ContractRegistry.entities {
                guard let seconds = entity.retentionSeconds else { continue }
                let table = entity.table.quotedDatabaseIdentifier
                let key = entity.primaryKey.quotedDatabaseIdentifier
                let expiring = """
                    FROM \(table) WHERE "_synced_at" IS NOT NULL AND \(Self.retentionAgeSQL(entity)) < :cutoff
                    AND CAST(\(key) AS TEXT) NOT IN (
                        SELECT "row_id" FROM "outbox" WHERE "entity" = :entity AND "status" NOT IN ('done'))
                    AND CAST(\(key) AS TEXT) NOT IN (
                        SELECT "row_id" FROM "conflicts" WHERE "entity" = :entity AND "resolution" IS NULL)
                    AND CAST(\(key) AS TEXT) NOT IN (SELECT "row_id" FROM "pinned_rows" WHERE "entity" = :entity)
                    """
                let arguments: StatementArguments = ["cutoff": now - Int64(seconds) * 1000, "entity": entity.name]
                try db.execute(
                    sql: """
                        INSERT INTO "expired_rows" ("entity", "row_id", "server_version", "expired_at")
                        SELECT :entity, CAST(\(key) AS TEXT), "_server_version", :now \(expiring)
                        ON CONFLICT ("entity", "row_id") DO UPDATE SET
                            "server_version" = excluded."server_version", "expired_at" = excluded."expired_at"
                        """,
                    arguments: arguments + ["now": now]
                )
                guard db.changesCount > 0 else { continue }
                try db.execute(sql: "DELETE \(expiring)", arguments: arguments)
                dropped[entity.name] = db.changesCount
            }
            // Rows that came back since they expired are no longer expired.
            for entity in ContractRegistry.entities where entity.retentionSeconds != nil {
                try db.execute(
                    sql: """
                        DELETE FROM "expired_rows" WHERE "entity" = ? AND "row_id" IN (
                            SELECT CAST(\(entity.primaryKey.quotedDatabaseIdentifier) AS TEXT) FROM \(entity.table.quotedDatabaseIdentifier))
                        """,
                    arguments: [entity.name]
                )
            }
            return dropped
        }
    }
}

/// What one ``OfflineStore/runHousekeeping()`` removed.
public struct HousekeepingReport: Hashable, Sendable {
    /// Rows dropped at the end of their contract's `retention`, per contract.
    public var expiredRows: [String: Int] = [:]
    /// Rows stored below their contract's oldest supported schema, per contract (pulled again).
    public var unsupportedRows: [String: Int] = [:]
    /// Outbox entries the server acknowledged longer than
    /// ``OfflineStoreConfiguration/completedWriteRetention`` ago.
    public var prunedOutboxEntries = 0

    public init() {}
}
