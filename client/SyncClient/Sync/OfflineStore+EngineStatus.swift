import ContractRuntime
import Foundation
import GRDB

/// What the engine's status shows of the store, read together.
struct StoreStatusReading: Sendable {
    var outbox: OutboxCounts
    var openConflicts: Int
    var retention: RetentionState
    var lastSuccess: Date?
    var updateRequired: [UpdateRequired]
    var subscriptions: SubscriptionCounts
    var syncStates: [ScopeSyncState]
}

extension OfflineStore {
    /// The outbox's counts, the open conflicts, retention, the last success, held contracts,
    /// subscriptions and every scope's bookkeeping, in one read transaction: the engine refreshes
    /// its status several times a sync, and a transaction each cost as much as the reads.
    func statusReading() throws(OfflineStoreError) -> StoreStatusReading {
        let now = now().millisecondsSince1970
        let policy = configuration.retention
        return try read { db in
            StoreStatusReading(
                outbox: try Self.outboxCounts(db),
                openConflicts: try Int.fetchOne(db.cachedStatement(sql: #"SELECT COUNT(*) FROM "conflicts" WHERE "resolution" IS NULL"#)) ?? 0,
                retention: try Self.retentionState(db, now: now, policy: policy),
                lastSuccess: try Metadata.integer(db, .lastSyncSuccessAt).map { Timestamp(millisecondsSince1970: $0).date },
                updateRequired: try Self.heldContracts(db),
                subscriptions: try Self.subscriptionCounts(db),
                syncStates: try Self.syncStates(db)
            )
        }
    }
}
