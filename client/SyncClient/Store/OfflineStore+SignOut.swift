import Foundation
import GRDB

extension OfflineStore {
    /// Signs the user out: wipes the database (with its `-wal` and `-shm` files), the asset
    /// folder and the files folder the store manages, and closes the store (later calls throw
    /// ``OfflineStoreError/signedOut``).
    ///
    /// - Parameters:
    ///   - force: wipe even though some writes have not reached the server (they are lost).
    ///   - forgetKey: also delete the tenant's key from the ``KeyProvider``, every version up to
    ///     the store's (only when no other store on the device uses that tenant).
    /// - Throws: ``OfflineStoreError/pendingWrites(count:)`` without `force` while writes are
    ///   unsynced (pending, sending, waiting, failed, conflicted or quarantined); nothing is
    ///   changed then.
    public func signOut(force: Bool = false, forgetKey: Bool = false) throws(OfflineStoreError) {
        guard beginClosing() else { throw .signedOut }
        // Counted on the writer, after any write in progress; new ones are refused meanwhile.
        let unsynced: Int
        do {
            unsynced = try pool.writeWithoutTransaction { db in
                try Int.fetchOne(
                    db,
                    sql: #"SELECT COUNT(*) FROM "outbox" WHERE "status" IN \#(OutboxStatus.sql(OutboxStatus.unsynced))"#
                ) ?? 0
            }
        } catch {
            cancelClosing()
            throw Self.map(error)
        }
        if unsynced > 0, !force {
            cancelClosing()
            throw .pendingWrites(count: unsynced)
        }
        try closePool()
        let database = configuration.databaseURL.path
        for path in [
            database, database + "-wal", database + "-shm", database + "-journal", configuration.filesDirectory.path,
            configuration.legacyAssetsDirectory.path,
        ] {
            guard FileManager.default.fileExists(atPath: path) else { continue }
            do {
                try FileManager.default.removeItem(atPath: path)
            } catch {
                throw .fileSystem(path: path, reason: error.localizedDescription)
            }
        }
        if forgetKey {
            do {
                for version in 1...max(1, crypto.currentVersion) {
                    try configuration.keyProvider.deleteKey(forTenant: configuration.tenantId, version: version)
                }
            } catch {
                throw .keyUnavailable(tenantId: configuration.tenantId, reason: String(describing: error))
            }
        }
    }
}
