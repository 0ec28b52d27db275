import GRDB

/// The outbox and conflict counts the sync status shows, observed after every commit that
/// changes them (``OfflineStore/observeOutboxActivity()``).
struct OutboxActivity: Equatable, Sendable {
    /// Entries still to send (`pending`, `sending`, `waiting`).
    var unsent: Int
    /// Entries written and not yet handed to a push (`pending`): what a push after a local
    /// write sends.
    var newWrites: Int
    /// Entries the server rejected (`failed`).
    var failed: Int
    /// Unresolved conflicts.
    var conflicts: Int
}

extension OfflineStore {
    /// The outbox activity now, then after every committed change of the outbox or the
    /// conflicts that changes it.
    func observeOutboxActivity() -> StoreObservation<OutboxActivity> {
        let observation = ValueObservation.tracking { db in
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT COUNT(CASE WHEN "status" IN \(OutboxStatus.sql(OutboxStatus.unsent)) THEN 1 END) AS "unsent",
                        COUNT(CASE "status" WHEN \(OutboxStatus.pending.sql) THEN 1 END) AS "new_writes",
                        COUNT(CASE "status" WHEN \(OutboxStatus.failed.sql) THEN 1 END) AS "failed",
                        (SELECT COUNT(*) FROM "conflicts" WHERE "resolution" IS NULL) AS "conflicts"
                    FROM "outbox"
                    """
            )
            return OutboxActivity(
                unsent: row?["unsent"] ?? 0, newWrites: row?["new_writes"] ?? 0, failed: row?["failed"] ?? 0,
                conflicts: row?["conflicts"] ?? 0
            )
        }.removeDuplicates()
        return StoreObservation(base: observation.values(in: pool))
    }
}
