import ContractRuntime
import EngineTestContracts
import Foundation
import GRDB
import SyncProtocol
import Testing

@testable import SyncServer

/// A database from before push streams had owners: the upgrade gives each stream the identity
/// of its first audited push, so a hostile device cannot claim an existing stream afterwards. On a
/// database of the engines' own contracts.
@Suite("Push stream owners on an upgraded database")
struct ClientOwnerUpgradeTests {
    @Test("streams get the identity of their first audited push; one without any is claimed by its next push")
    func backfill() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-upgrade-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        // The database as the last release left it: every migration before the owners.
        let lastBefore = try #require(ContractRegistry.serverMigrations.last?.identifier)
        let queue = try DatabaseQueue(path: folder.appendingPathComponent("server.sqlite").path)
        try SQLiteStorage.migrator(contracts: ContractCatalog(ContractRegistry.self)).migrate(queue, upTo: lastBefore)
        try await queue.write { db in
            try db.execute(
                sql:
                    "INSERT INTO clients (tenant, client_id, last_seq, updated_at) VALUES ('acme', 'alice-client', 3, 0), ('acme', 'silent-client', 0, 0)"
            )
            for (id, user, device) in [(1, "alice", "alice-phone"), (2, "mallory", "mallory-phone")] {
                try db.execute(
                    sql: """
                        INSERT INTO audit_log (id, tenant, recorded_at, user_id, device_id, entity, row_id, operation, outcome, detail, previous_hash, hash)
                        VALUES (?, 'acme', 0, ?, ?, 'Activity', 'r', 'create', 'applied', ?, '', '')
                        """,
                    arguments: [id, user, device, #"{"client_id":"alice-client","seq":\#(id)}"#]
                )
            }
        }
        let storage = try SQLiteStorage(directory: folder, contracts: ContractRegistry.self)
        let owner = try await storage.read { try await $0.clientOwner(tenant: "acme", clientID: "alice-client") }
        #expect(owner == ClientOwner(userID: "alice", deviceID: "alice-phone"))
        #expect(try await storage.read { try await $0.clientOwner(tenant: "acme", clientID: "silent-client") } == nil)

        let hostile = ClientOwner(userID: "mallory", deviceID: "mallory-phone")
        #expect(try await storage.write { try await $0.lockClient(tenant: "acme", clientID: "alice-client", owner: hostile) } == .ownedByOther)
        #expect(try await storage.write { try await $0.lockClient(tenant: "acme", clientID: "silent-client", owner: hostile) } == .owned(lastSeq: 0))
        #expect(try await storage.read { try await $0.clientOwner(tenant: "acme", clientID: "silent-client") } == hostile)
    }
}
