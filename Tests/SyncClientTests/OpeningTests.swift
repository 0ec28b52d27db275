import ContractRuntime
import Crypto
import EngineTestContracts
import Foundation
import GRDB
import OutpostTestSupport
import Testing

@testable import SyncClient

/// On the engines' own contracts (opening with a store extension: `OpeningWithExtensionTests`).
@Suite("Opening the offline store", .blockingWork)
struct OpeningTests {
    @Test("a new database gets the client tables, then its extensions', then every generated migration, in WAL mode")
    func freshDatabase() throws {
        let directory = try TemporaryDirectory()
        let store = try OfflineStore(
            TestStore.configuration(directory: directory, clock: ManualClock(TestStore.start), keys: FileKeyProvider(directory: directory.keysURL)),
            contracts: ContractRegistry.self, extensions: [StoreExtensionTests.Bookmarks()]
        )
        #expect(try store.appliedMigrations() == store.migrationIdentifiers)
        #expect(store.migrationIdentifiers.first == "client.v1.sync_tables")
        #expect(
            store.migrationIdentifiers
                == ClientSchema.migrations.map(\.identifier) + ["bookmarks.v1"] + ContractRegistry.clientMigrations.map(\.identifier)
        )
        let queue = try DatabaseQueue(path: directory.databaseURL.path)
        let (tables, mode) = try queue.read { db in
            (
                try String.fetchSet(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'"),
                try String.fetchOne(db, sql: "PRAGMA journal_mode")
            )
        }
        try queue.close()
        for table in ["outbox", "conflicts", "sync_state", "bookmarks", "metadata"] + ContractRegistry.entities.map(\.table)
            + ContractRegistry.events.map(\.table)
        {
            #expect(tables.contains(table), "missing table \(table)")
        }
        #expect(mode == "wal")
        #expect(store.identity.tenantId == "acme")
        #expect(store.identity.deviceId == "device-1")
        #expect(ULID(store.identity.clientId) != nil)
        try store.close()
    }

    @Test("reopening keeps the rows, the identity and the sequence")
    func reopen() throws {
        let first = try TestStore.engine()
        try first.store.applyServerChanges(EngineSamples.everything)
        let written = try first.store.patch(Card.self, id: "card-1", [.description("bring the projector")])
        let identity = first.store.identity
        let second = try first.reopen()
        #expect(second.store.identity == identity)
        #expect(try second.store.fetch(Card.self, id: "card-1")?.description == "bring the projector")
        let next = try second.store.patch(Card.self, id: "card-2", [.description("book the room")])
        #expect(written?.seq == 1)
        #expect(next?.seq == 2)
        #expect(try second.store.appliedMigrations() == second.store.migrationIdentifiers)
    }

    @Test("a database written by an older build is migrated on open, keeps its rows and purges those below the oldest supported schema")
    func olderBuild() throws {
        let directory = try TemporaryDirectory()
        // What an older build created: the client tables and every contract at version 1
        // (Label v1 still calls `sort_index` `position` and has no `description`).
        do {
            let queue = try DatabaseQueue(path: directory.databaseURL.path)
            var migrator = DatabaseMigrator()
            for migration in ClientSchema.migrations {
                migrator.registerMigration(migration.identifier) { db in
                    for statement in migration.statements { try db.execute(sql: statement) }
                }
            }
            for migration in ContractRegistry.clientMigrations where migration.version <= 1 {
                migrator.registerMigration(migration.identifier) { db in
                    for statement in migration.statements { try db.execute(sql: statement) }
                }
            }
            try migrator.migrate(queue)
            try queue.write { db in
                try db.execute(
                    sql: """
                        INSERT INTO labels (id, name, color, position, updated_at, last_accessed_at, _schema_version, _server_version)
                        VALUES ('label-kept', 'Old label', 'red', 4, 1769846400000, 1769846500000, 2, 12),
                            ('label-old', 'Older label', 'gray', 5, 1769846400000, NULL, 1, 13)
                        """
                )
            }
            try queue.close()
        }

        let test = try TestStore.engine(directory: directory)
        #expect(try test.store.appliedMigrations().count == test.store.migrationIdentifiers.count)
        let label = try #require(try test.store.fetch(Label.self, id: "label-kept"))
        #expect(label.name == "Old label")
        #expect(label.sortIndex == 4)  // `position` renamed by labels.v3.migrate
        #expect(label.color == .red)
        #expect(label.description == nil)
        #expect(label.usageCount == 0)  // added by labels.v3.migrate with its default
        #expect(try test.store.localState(Label.self, id: "label-kept")?.lastAccessedAt == Timestamp(millisecondsSince1970: 1_769_846_500_000))
        #expect(try test.store.syncInfo(Label.self, id: "label-kept")?.schemaVersion == 2)

        // Version 1 is below OLDEST_SUPPORTED_LABEL_SCHEMA: purged when the store opened, so that
        // it is downloaded again.
        #expect(OLDEST_SUPPORTED_LABEL_SCHEMA == 2)
        #expect(try test.store.fetch(Label.self, id: "label-old") == nil)
        #expect(try test.store.purgeUnsupportedRows().isEmpty)
    }

    @Test("a database written by a newer build is refused, and the file is left untouched")
    func newerBuild() throws {
        let directory = try TemporaryDirectory()
        let keys = InMemoryKeyProvider()
        let clock = ManualClock(TestStore.start)
        do {
            let store = try OfflineStore(TestStore.configuration(directory: directory, clock: clock, keys: keys), contracts: ContractRegistry.self)
            try store.applyServerChanges(EngineSamples.everything)
            try store.close()
            let queue = try DatabaseQueue(path: directory.databaseURL.path)
            try queue.write { db in
                try db.execute(sql: "CREATE TABLE labels_v4_extra (id TEXT)")
                try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('labels.v4.migrate')")
            }
            try queue.close()
        }
        let before = try snapshot(directory)

        #expect(throws: OfflineStoreError.createdByNewerBuild(unknownMigrations: ["labels.v4.migrate"])) {
            try OfflineStore(TestStore.configuration(directory: directory, clock: clock, keys: keys), contracts: ContractRegistry.self)
        }
        let after = try snapshot(directory)
        #expect(after == before, "files before: \(before.mapValues(\.count)), after: \(after.mapValues(\.count))")
    }

    /// The bytes of every file of the database.
    private func snapshot(_ directory: TemporaryDirectory) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let path = directory.databaseURL.path + suffix
            if FileManager.default.fileExists(atPath: path) { files[suffix] = try Data(contentsOf: URL(fileURLWithPath: path)) }
        }
        return files
    }

    @Test("a file that is not a database is refused with a typed error")
    func notADatabase() throws {
        let directory = try TemporaryDirectory()
        try Data(repeating: 0x42, count: 4096).write(to: directory.databaseURL)
        #expect(throws: OfflineStoreError.notADatabase(path: directory.databaseURL.path)) {
            try TestStore.engine(directory: directory)
        }
    }

    @Test("another tenant or user cannot open the database")
    func anotherAccount() throws {
        let first = try TestStore.engine()
        try first.store.close()
        #expect(throws: OfflineStoreError.belongsToAnotherAccount(tenantId: "acme", userId: "u-1")) {
            try TestStore.engine(directory: first.directory, keys: first.keys, userId: "u-2")
        }
    }

    @Test("a lost or replaced tenant key is detected at open")
    func keyMismatch() throws {
        let first = try TestStore.engine()
        try first.store.close()
        #expect(throws: OfflineStoreError.keyMismatch(tenantId: "acme")) {
            try TestStore.engine(directory: first.directory, keys: InMemoryKeyProvider())
        }
    }

    @Test("a closed store refuses calls with a typed error")
    func closed() throws {
        let test = try TestStore.engine()
        try test.store.close()
        #expect(throws: OfflineStoreError.signedOut) { try test.store.all(Label.self) }
    }
}
