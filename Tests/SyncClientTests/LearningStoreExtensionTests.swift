import ContractRuntime
import Contracts
import Crypto
import Foundation
import GRDB
import OutpostTestSupport
import Testing

@testable import LearningClient
@testable import SyncClient

/// The learning app's own store extension (``LearningStore``): its features refuse a store
/// opened without it, and its tables, which were the store's own before they became its
/// extension, open as a fresh store's. On the sample's contracts; extensions in general are
/// `StoreExtensionTests`, on the engines' own.
@Suite("The learning app's store extension", .blockingWork)
struct LearningStoreExtensionTests {
    private func open(_ directory: TemporaryDirectory, _ extensions: [any StoreExtension]) throws(OfflineStoreError) -> OfflineStore {
        try OfflineStore(
            TestStore.configuration(directory: directory, clock: ManualClock(TestStore.start), keys: FileKeyProvider(directory: directory.keysURL)),
            contracts: ContractRegistry.self, extensions: extensions
        )
    }

    @Test("the learning features refuse a store opened without the learning tables")
    func learningNeedsItsTables() throws {
        let directory = try TemporaryDirectory()
        let store = try open(directory, [])
        #expect(throws: OfflineStoreError.invalidExtension(name: "learning", reason: "the store was opened without LearningStore()")) {
            try store.cachedUnits()
        }
        try store.close()
    }

    /// The store's first migration as it was released, when it also created the learning app's
    /// `assets` table (now ``LearningStore``'s, created only if missing).
    private static var releasedSyncTables: [String] {
        let engine = ClientSchema.syncTablesV1Statements
        let assets = LearningStore.assetsStatements.map { $0.replacingOccurrences(of: " IF NOT EXISTS", with: "") }
        return Array(engine.dropLast()) + assets + [engine.last!]
    }

    @Test("the released first migration is today's plus the learning app's assets table, byte for byte")
    func releasedFirstMigrationIsReconstructed() {
        // The checksum pinned by ReleasedEngineMigrationTests when the table was the store's.
        let released = "c110faeac5acfe490e93ec641a57e34e1ef848caa12306a41fc7dcd67efd37a3"
        let digest = SHA256.hash(data: Data(Self.releasedSyncTables.joined(separator: ";\n").utf8))
        #expect(digest.map { String(format: "%02x", $0) }.joined() == released)
    }

    @Test("a store made when the learning tables were the store's opens, with LearningStore and without, as a fresh one is")
    func storeFromBeforeTheMove() throws {
        // A database as the build before the move left it: every client migration as released.
        let old = try TemporaryDirectory()
        do {
            let queue = try DatabaseQueue(path: old.databaseURL.path)
            let released: [(String, [String])] = [
                ("client.v1.sync_tables", Self.releasedSyncTables),
                ("client.v2.unit_cache", LearningStore.unitCacheStatements),
                ("client.v3.outbox_state_seal", ClientSchema.migrations[1].statements),
                ("client.v4.row_retention", ClientSchema.rowRetentionV4Statements),
                ("client.v5.learning_attempts", LearningStore.learningAttemptsStatements),
                ("client.v6.repull", OfflineStore.repullStatements),
                ("client.v7.first_downloads", OfflineStore.firstDownloadStatements),
            ]
            #expect(ClientSchema.migrations[1].identifier == "client.v3.outbox_state_seal")
            try queue.write { db in
                try db.execute(sql: "CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)")
                for (identifier, statements) in released {
                    for statement in statements { try db.execute(sql: statement) }
                    try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES (?)", arguments: [identifier])
                }
            }
            try queue.close()
        }
        // An app without the learning code still opens it (the moved migrations are known).
        try open(old, []).close()
        let upgraded = try open(old, [LearningStore()])
        try upgraded.close()

        let fresh = try TemporaryDirectory()
        try open(fresh, [LearningStore()]).close()
        #expect(try schema(old) == schema(fresh))
    }

    /// Every table and index of a database, by name, with its SQL as SQLite keeps it.
    private func schema(_ directory: TemporaryDirectory) throws -> [String: String] {
        let queue = try DatabaseQueue(path: directory.databaseURL.path)
        defer { try? queue.close() }
        return try queue.read { db in
            Dictionary(
                uniqueKeysWithValues: try Row.fetchAll(
                    db, sql: "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name != 'grdb_migrations'"
                )
                .map { ($0["name"] as String, $0["sql"] as String) }
            )
        }
    }
}
