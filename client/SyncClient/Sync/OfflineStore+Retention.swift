import ContractRuntime
public import Foundation
import GRDB
public import SyncProtocol

/// Retention (docs/client.md): unsynced writes older than ``RetentionPolicy/syncNeededAfter`` raise
/// "sync needed"; older than ``RetentionPolicy/readOnlyAfter`` the store refuses new writes until
/// a sync succeeds. Nothing is ever discarded.
///
/// The age of the unsynced writes counts from the oldest one still waiting for the server
/// (`pending`, `sending`, `waiting`), or from the last successful sync when that is later.
extension OfflineStore {
    /// Whether unsynced writes have waited too long, by the store's clock now.
    public func retentionState() throws(OfflineStoreError) -> RetentionState {
        let now = now().millisecondsSince1970
        let policy = configuration.retention
        return try read { db in try Self.retentionState(db, now: now, policy: policy) }
    }

    /// Records that a sync succeeded (the sync engine calls this after a push and pull without
    /// error): the retention age restarts, so a read-only store accepts writes again.
    package func recordSyncSuccess(at date: Date? = nil) throws(OfflineStoreError) {
        let at = date.map { Timestamp($0) } ?? now()
        try write { db in
            try Metadata.set(db, .lastSyncSuccessAt, String(at.millisecondsSince1970))
            try Metadata.remove(db, .lastSyncError)
            try Metadata.remove(db, .lastSyncErrorAt)
        }
    }

    /// Records why the last sync failed (shown in the status until the next success).
    package func recordSyncFailure(_ error: ErrorDetail, at date: Date? = nil) throws(OfflineStoreError) {
        let at = date.map { Timestamp($0) } ?? now()
        try write { db in
            try Metadata.set(db, .lastSyncError, error.storedText)
            try Metadata.set(db, .lastSyncErrorAt, String(at.millisecondsSince1970))
        }
    }

    /// When the last sync succeeded, if ever.
    public func lastSyncSuccess() throws(OfflineStoreError) -> Date? {
        try read { db in try Metadata.integer(db, .lastSyncSuccessAt).map { Timestamp(millisecondsSince1970: $0).date } }
    }

    /// Why the last sync failed, and when, unless a sync succeeded since.
    public func lastSyncFailure() throws(OfflineStoreError) -> (error: ErrorDetail, at: Date)? {
        try read { db in
            guard let text = try Metadata.get(db, .lastSyncError), let at = try Metadata.integer(db, .lastSyncErrorAt) else {
                return nil
            }
            let error =
                (try? JSONDecoder().decode(ErrorDetail.self, from: Data(text.utf8)))
                ?? ErrorDetail(code: ErrorCode("unknown"), message: text)
            return (error, Timestamp(millisecondsSince1970: at).date)
        }
    }

    static func retentionState(_ db: Database, now: Int64, policy: RetentionPolicy) throws -> RetentionState {
        guard
            let oldest = try Int64.fetchOne(
                db.cachedStatement(sql: #"SELECT MIN("created_at") FROM "outbox" WHERE "status" IN \#(OutboxStatus.sql(OutboxStatus.unsent))"#)
            )
        else { return .ok }
        let since = max(oldest, try Metadata.integer(db, .lastSyncSuccessAt) ?? oldest)
        let age = Double(now - since) / 1000
        let date = Timestamp(millisecondsSince1970: since).date
        if age >= policy.readOnlyAfter { return .readOnly(since: date) }
        if age >= policy.syncNeededAfter { return .syncNeeded(since: date) }
        return .ok
    }
}
