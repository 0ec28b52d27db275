import ContractRuntime
import Contracts
import Crypto
import Foundation
import GRDB
import OutpostTestSupport
import Testing

@testable import LearningClient
@testable import SyncClient

/// An app's own tables beside its contracts' (``StoreExtension``), written in the same
/// transaction as its rows (``StoreTransaction``); and the learning app's tables, which were
/// the store's own before they became its extension.
@Suite("Store extensions and transactions", .blockingWork)
struct StoreExtensionTests {
    /// An app's bookmarks: one table of its own.
    struct Bookmarks: StoreExtension {
        var table = "bookmarks"
        var name: String { "bookmarks" }
        var tables: [String] { [table] }
        var migrations: [StoreMigration] {
            [
                StoreMigration(
                    "bookmarks.v1", ["CREATE TABLE \(table.quotedDatabaseIdentifier) (\"row_id\" TEXT PRIMARY KEY NOT NULL, \"at\" INTEGER NOT NULL)"]
                )
            ]
        }
    }

    private func open(_ directory: TemporaryDirectory, _ extensions: [any StoreExtension]) throws(OfflineStoreError) -> OfflineStore {
        try OfflineStore(
            TestStore.configuration(directory: directory, clock: ManualClock(TestStore.start), keys: FileKeyProvider(directory: directory.keysURL)),
            contracts: ContractRegistry.self, extensions: extensions
        )
    }

    @Test("an extension's table, a row and its outbox entry are written together, or none of them")
    func transactionIsAtomic() throws {
        let directory = try TemporaryDirectory()
        let store = try open(directory, [Bookmarks()])
        let task = FieldTask(id: "task-1", teamId: "team-1", title: "Inspect", taskKind: .inspection, revision: 0)
        try store.transaction { transaction throws(OfflineStoreError) in
            try transaction.create(task)
            try transaction.withDatabase { db in
                try db.execute(sql: #"INSERT INTO "bookmarks" ("row_id", "at") VALUES (?, ?)"#, arguments: ["task-1", transaction.now])
            }
        }
        #expect(try store.fetch(FieldTask.self, id: "task-1") != nil)
        #expect(try store.outboxCounts().unsent == 1)
        #expect(
            try store.read { reader throws(OfflineStoreError) in
                try reader.withDatabase { db in try Int.fetchOne(db, sql: #"SELECT COUNT(*) FROM "bookmarks""#) }
            } == 1)

        // The second create fails (the row exists): the bookmark written before it goes too.
        #expect(throws: OfflineStoreError.rowAlreadyExists(contract: "Task", id: "task-1")) {
            try store.transaction { transaction throws(OfflineStoreError) in
                try transaction.withDatabase { db in
                    try db.execute(sql: #"INSERT INTO "bookmarks" ("row_id", "at") VALUES (?, ?)"#, arguments: ["task-2", transaction.now])
                }
                try transaction.create(task)
            }
        }
        #expect(
            try store.read { reader throws(OfflineStoreError) in
                try reader.withDatabase { db in try Int.fetchOne(db, sql: #"SELECT COUNT(*) FROM "bookmarks""#) }
            } == 1)
        #expect(try store.outboxCounts().unsent == 1)
        #expect(try store.read { reader throws(OfflineStoreError) in try reader.unsyncedRows() } == [RowReference(contract: "Task", id: "task-1")])
        try store.close()
    }

    @Test("an extension may not take a contract's table, the store's own, another's, or a used migration id")
    func collisionsAreRefused() throws {
        let directory = try TemporaryDirectory()
        #expect(throws: OfflineStoreError.invalidExtension(name: "bookmarks", reason: "its table 'tasks' is already contract Task's")) {
            try open(directory, [Bookmarks(table: "tasks")])
        }
        #expect(throws: OfflineStoreError.invalidExtension(name: "bookmarks", reason: "its table 'outbox' is already the store's")) {
            try open(directory, [Bookmarks(table: "outbox")])
        }
        #expect(throws: OfflineStoreError.invalidExtension(name: "bookmarks", reason: "two extensions have this name")) {
            try open(directory, [Bookmarks(), Bookmarks(table: "other")])
        }
        #expect(!FileManager.default.fileExists(atPath: directory.databaseURL.path), "refused before the file is made")
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
