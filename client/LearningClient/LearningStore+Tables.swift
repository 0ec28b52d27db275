import GRDB
import SyncClient

/// The learning app's tables, read and written through the store's public transaction API.
extension OfflineStore {
    /// Runs `body` against one snapshot of the store, for the learning tables beside the rows.
    func readTables<T>(_ body: (Database) throws -> T) throws(OfflineStoreError) -> T {
        try readTables(withReader: { _, db in try body(db) })
    }

    /// Runs `body` in one write transaction.
    func writeTables<T>(_ body: (Database) throws -> T) throws(OfflineStoreError) -> T {
        try writeTables(withTransaction: { _, db in try body(db) })
    }

    /// Runs `body` against one snapshot, with its reader for the rows.
    func readTables<T>(withReader body: (StoreReader, Database) throws -> T) throws(OfflineStoreError) -> T {
        try requireLearningTables()
        return try read { reader throws(OfflineStoreError) in try reader.withDatabase { db in try body(reader, db) } }
    }

    /// Runs `body` in one write transaction, with the transaction for the store's writes.
    func writeTables<T>(withTransaction body: (StoreTransaction, Database) throws -> T) throws(OfflineStoreError) -> T {
        try requireLearningTables()
        return try transaction { transaction throws(OfflineStoreError) in try transaction.withDatabase { db in try body(transaction, db) } }
    }

    /// Refuses to work on a store opened without the learning tables.
    func requireLearningTables() throws(OfflineStoreError) {
        guard extensions.contains(where: { $0.name == LearningStore.name }) else {
            throw .invalidExtension(name: LearningStore.name, reason: "the store was opened without LearningStore()")
        }
    }
}
