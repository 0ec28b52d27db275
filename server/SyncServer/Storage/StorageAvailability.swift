import GRDB

/// Failures that say the database cannot serve now but may in a moment, answered 503
/// `storage_unavailable` with `Retry-After` rather than 500: PostgreSQL unreachable, restarting
/// or shutting down, or a SQLite file still locked by another process when the busy timeout
/// ran out (two `sync-server` processes on one data folder, a backup holding a lock). Nothing
/// of the request was applied (SQLite) or, when a connection dropped at the commit, perhaps all
/// of it (a push sent again is answered from what was stored, never applied twice).
enum StorageAvailability {
    static func isUnavailable(_ error: any Error) -> Bool {
        if PostgresStorage.isUnavailable(error) { return true }
        if let error = error as? DatabaseError {
            return error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED
        }
        return false
    }
}
