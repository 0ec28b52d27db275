import ContractRuntime
import EngineTestContracts
import Foundation
import GRDB
import OutpostTestSupport
import Testing

@testable import SyncClient

/// An app's own tables beside its contracts' (``StoreExtension``), written in the same
/// transaction as its rows (``StoreTransaction``), on the engines' own contracts. The learning
/// app's own extension is `LearningStoreExtensionTests`, on the sample's contracts.
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
        let card = Card(id: "card-1", teamId: "team-1", boardId: "board-1", title: "Plan the launch", revision: 0)
        try store.transaction { transaction throws(OfflineStoreError) in
            try transaction.create(card)
            try transaction.withDatabase { db in
                try db.execute(sql: #"INSERT INTO "bookmarks" ("row_id", "at") VALUES (?, ?)"#, arguments: ["card-1", transaction.now])
            }
        }
        #expect(try store.fetch(Card.self, id: "card-1") != nil)
        #expect(try store.outboxCounts().unsent == 1)
        #expect(
            try store.read { reader throws(OfflineStoreError) in
                try reader.withDatabase { db in try Int.fetchOne(db, sql: #"SELECT COUNT(*) FROM "bookmarks""#) }
            } == 1)

        // The second create fails (the row exists): the bookmark written before it goes too.
        #expect(throws: OfflineStoreError.rowAlreadyExists(contract: "Card", id: "card-1")) {
            try store.transaction { transaction throws(OfflineStoreError) in
                try transaction.withDatabase { db in
                    try db.execute(sql: #"INSERT INTO "bookmarks" ("row_id", "at") VALUES (?, ?)"#, arguments: ["card-2", transaction.now])
                }
                try transaction.create(card)
            }
        }
        #expect(
            try store.read { reader throws(OfflineStoreError) in
                try reader.withDatabase { db in try Int.fetchOne(db, sql: #"SELECT COUNT(*) FROM "bookmarks""#) }
            } == 1)
        #expect(try store.outboxCounts().unsent == 1)
        #expect(try store.read { reader throws(OfflineStoreError) in try reader.unsyncedRows() } == [RowReference(contract: "Card", id: "card-1")])
        try store.close()
    }

    @Test("an extension may not take a contract's table, the store's own, another's, or a used migration id")
    func collisionsAreRefused() throws {
        let directory = try TemporaryDirectory()
        #expect(throws: OfflineStoreError.invalidExtension(name: "bookmarks", reason: "its table 'cards' is already contract Card's")) {
            try open(directory, [Bookmarks(table: "cards")])
        }
        #expect(throws: OfflineStoreError.invalidExtension(name: "bookmarks", reason: "its table 'outbox' is already the store's")) {
            try open(directory, [Bookmarks(table: "outbox")])
        }
        #expect(throws: OfflineStoreError.invalidExtension(name: "bookmarks", reason: "two extensions have this name")) {
            try open(directory, [Bookmarks(), Bookmarks(table: "other")])
        }
        #expect(!FileManager.default.fileExists(atPath: directory.databaseURL.path), "refused before the file is made")
    }
}
