import ContractRuntime
import Contracts
import Crypto
import Foundation
import GRDB
import LearningClient
import OutpostTestSupport
import Testing

@testable import SyncClient

@Suite("Opening the offline store", .blockingWork)
struct OpeningTests {
    @Test("a new database gets the client tables, then its extensions', then every generated migration, in WAL mode")
    func freshDatabase() throws {
        let test = try TestStore()
        #expect(try test.store.appliedMigrations() == test.store.migrationIdentifiers)
        #expect(test.store.migrationIdentifiers.first == "client.v1.sync_tables")
        let extensionMigrations = LearningStore().migrations.map(\.identifier)
        #expect(
            test.store.migrationIdentifiers
                == ClientSchema.migrations.map(\.identifier) + extensionMigrations + ContractRegistry.clientMigrations.map(\.identifier)
        )
        let (tables, mode) = try test.raw { db in
            (
                try String.fetchSet(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'"),
                try String.fetchOne(db, sql: "PRAGMA journal_mode")
            )
        }
        for table in ["outbox", "conflicts", "sync_state", "assets", "metadata"] + ContractRegistry.entities.map(\.table)
            + ContractRegistry.events.map(\.table)
        {
            #expect(tables.contains(table), "missing table \(table)")
        }
        #expect(mode == "wal")
        #expect(test.store.identity.tenantId == "acme")
        #expect(test.store.identity.deviceId == "device-1")
        #expect(ULID(test.store.identity.clientId) != nil)
    }

    @Test("reopening keeps the rows, the identity and the sequence")
    func reopen() throws {
        let first = try TestStore()
        try first.store.applyServerChanges(Samples.everything)
        let written = try first.store.patch(FieldTask.self, id: "task-1", [.notes("bring a ladder")])
        let identity = first.store.identity
        let second = try first.reopen()
        #expect(second.store.identity == identity)
        #expect(try second.store.fetch(FieldTask.self, id: "task-1")?.notes == "bring a ladder")
        let next = try second.store.patch(FieldTask.self, id: "task-2", [.notes("spare battery")])
        #expect(written?.seq == 1)
        #expect(next?.seq == 2)
        #expect(try second.store.appliedMigrations() == second.store.migrationIdentifiers)
    }

    @Test("a database written by an older build is migrated on open, keeps its rows and purges those below the oldest supported schema")
    func olderBuild() throws {
        let directory = try TemporaryDirectory()
        // What an older build created: the client tables and every contract at version 1
        // (Unit v1 still calls `sort_index` `position` and has no `description`).
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
                        INSERT INTO units (id, title, learner_level, is_global, position, tags, updated_at, download_status,
                            _schema_version, _server_version)
                        VALUES ('unit-kept', 'Old unit', 'beginner', 1, 4, '["a"]', 1769846400000, 'downloaded', 2, 12),
                            ('unit-old', 'Older unit', 'beginner', 0, 5, '[]', 1769846400000, 'none', 1, 13)
                        """
                )
            }
            try queue.close()
        }

        let test = try TestStore(directory: directory)
        #expect(try test.store.appliedMigrations().count == test.store.migrationIdentifiers.count)
        let unit = try #require(try test.store.fetch(Unit.self, id: "unit-kept"))
        #expect(unit.title == "Old unit")
        #expect(unit.sortIndex == 4)  // `position` renamed by units.v3.migrate
        #expect(unit.isGlobal)
        #expect(unit.description == nil)
        #expect(unit.tags == ["a"])
        #expect(try test.store.localState(Unit.self, id: "unit-kept")?.downloadStatus == .downloaded)
        #expect(try test.store.syncInfo(Unit.self, id: "unit-kept")?.schemaVersion == 2)

        // Version 1 is below OLDEST_SUPPORTED_UNIT_SCHEMA: purged when the store opened, so that
        // it is downloaded again.
        #expect(OLDEST_SUPPORTED_UNIT_SCHEMA == 2)
        #expect(try test.store.fetch(Unit.self, id: "unit-old") == nil)
        #expect(try test.store.purgeUnsupportedRows().isEmpty)
    }

    @Test("a database written by a newer build is refused, and the file is left untouched")
    func newerBuild() throws {
        let directory = try TemporaryDirectory()
        let keys = InMemoryKeyProvider()
        let clock = ManualClock(TestStore.start)
        do {
            let store = try OfflineStore(
                TestStore.configuration(directory: directory, clock: clock, keys: keys), contracts: ContractRegistry.self,
                extensions: [LearningStore()])
            try store.applyServerChanges(Samples.everything)
            try store.close()
            let queue = try DatabaseQueue(path: directory.databaseURL.path)
            try queue.write { db in
                try db.execute(sql: "CREATE TABLE units_v4_extra (id TEXT)")
                try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('units.v4.migrate')")
            }
            try queue.close()
        }
        let before = try snapshot(directory)

        #expect(throws: OfflineStoreError.createdByNewerBuild(unknownMigrations: ["units.v4.migrate"])) {
            try OfflineStore(
                TestStore.configuration(directory: directory, clock: clock, keys: keys), contracts: ContractRegistry.self,
                extensions: [LearningStore()])
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
            try TestStore(directory: directory)
        }
    }

    @Test("another tenant or user cannot open the database")
    func anotherAccount() throws {
        let first = try TestStore()
        try first.store.close()
        #expect(throws: OfflineStoreError.belongsToAnotherAccount(tenantId: "acme", userId: "u-1")) {
            try TestStore(directory: first.directory, keys: first.keys, userId: "u-2")
        }
    }

    @Test("a lost or replaced tenant key is detected at open")
    func keyMismatch() throws {
        let first = try TestStore()
        try first.store.close()
        #expect(throws: OfflineStoreError.keyMismatch(tenantId: "acme")) {
            try TestStore(directory: first.directory, keys: InMemoryKeyProvider())
        }
    }

    @Test("a closed store refuses calls with a typed error")
    func closed() throws {
        let test = try TestStore()
        try test.store.close()
        #expect(throws: OfflineStoreError.signedOut) { try test.store.units() }
    }
}
