import ContractRuntime
import Contracts
import Foundation
import GRDB
import LearningClient
import OutpostTestSupport
import Testing

@testable import SyncClient

/// Opening a store with the learning app's extension (`LearningStore`): its migrations run
/// between the client's tables and the sample's contracts', and its tables are there. Opening in
/// general, with a test's extension, is `OpeningTests`, on the engines' own contracts.
@Suite("Opening the offline store with an extension", .blockingWork)
struct OpeningWithExtensionTests {
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
}
