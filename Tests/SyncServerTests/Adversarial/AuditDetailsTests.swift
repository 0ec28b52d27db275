import ContractRuntime
import Contracts
import Foundation
import GRDB
import OutpostTestSupport
import Testing

@testable import SyncServer

/// Audit details a user's erasure destroys (crypto-shredding), on both storages: stored
/// encrypted under the user's data key, readable while it exists, unreadable once erased, and
/// the chain's seals verify throughout.
@Suite("Audit details: encrypted per user, erasable")
struct AuditDetailsTests {
    typealias Setup = AuditTamperTests.Setup

    /// Appends one entry per (user, detail), in one transaction.
    static func append(_ storage: any SyncStorage, _ entries: [(user: String, detail: String)], tenant: String = "acme") async throws {
        try await storage.write { transaction in
            for (index, entry) in entries.enumerated() {
                try await transaction.appendAudit(
                    AuditEntry(
                        tenant: tenant, recordedAt: Int64(Date().timeIntervalSince1970 * 1000), userID: entry.user, deviceID: "d-\(index)",
                        entity: "FieldTask", rowID: "t-\(index)", operation: .update, outcome: .applied, detail: entry.detail
                    ))
            }
        }
    }

    static func readable(_ storage: any SyncStorage, _ entries: [AuditEntry]) async throws -> [String?] {
        let key = storage.auditKey
        return try await storage.read { reader in
            var details: [String?] = []
            for entry in entries { details.append(try await AuditChain.readableDetail(of: entry, in: reader, key: key)) }
            return details
        }
    }

    @Test(
        "details are not in clear in the database; erasing a user leaves the chain intact and only that user's details unreadable",
        arguments: StorageKind.allCases)
    func eraseOneUser(_ kind: StorageKind) async throws {
        let setup = try await Setup.make(kind)
        defer { setup.remove() }
        try await Self.append(
            setup.storage,
            [
                (user: "u-1", detail: #"{"name":"Ada Lovelace"}"#), (user: "u-2", detail: #"{"name":"Grace Hopper"}"#),
                (user: "u-1", detail: #"{"note":"Ada again"}"#), (user: "", detail: #"{"note":"no one"}"#),
            ])
        let byAda = try await setup.storage.read { try await $0.auditEntries(tenant: "acme", userID: "u-1", after: 0, limit: 100) }
        let byGrace = try await setup.storage.read { try await $0.auditEntries(tenant: "acme", userID: "u-2", after: 0, limit: 100) }
        #expect(byAda.map(\.id) == [setup.entries + 1, setup.entries + 3])
        #expect(byGrace.map(\.id) == [setup.entries + 2])
        #expect(try await setup.storage.read { try await $0.auditEntries(tenant: "other", userID: "u-1", after: 0, limit: 100) }.isEmpty)

        // As stored: encrypted, for people; in clear for no one and for the server's own seeding.
        let all = try await setup.entries(from: 1)
        for entry in byAda + byGrace {
            #expect(entry.detail.hasPrefix("enc:v1:"))
            #expect(!entry.detail.contains("Ada") && !entry.detail.contains("Grace"))
        }
        #expect(all.last?.detail == #"{"note":"no one"}"#)
        #expect(all.filter { $0.userID == "sync-server" }.allSatisfy { $0.detail.hasPrefix("{") })
        let wrapped = try await setup.storage.read { try await $0.wrappedAuditUserKey(tenant: "acme", userID: "u-1") }
        #expect(wrapped != nil)
        #expect(try await Self.readable(setup.storage, byAda) == [#"{"name":"Ada Lovelace"}"#, #"{"note":"Ada again"}"#])

        #expect(try await setup.storage.write { try await $0.eraseAuditDetails(tenant: "acme", userID: "u-1") } == 2)
        #expect(try await setup.storage.write { try await $0.eraseAuditDetails(tenant: "acme", userID: "u-1") } == 0)
        #expect(try await setup.verify() == .intact(entries: Int(setup.entries) + 4, keyedFrom: 1))
        #expect(try await Self.readable(setup.storage, byAda) == [nil, nil])
        #expect(try await Self.readable(setup.storage, byGrace) == [#"{"name":"Grace Hopper"}"#])
        let key = setup.storage.auditKey
        #expect(
            try await setup.storage.read { try await AuditChain.readableDetails(of: byAda + byGrace, in: $0, key: key) } == [
                nil, nil, #"{"name":"Grace Hopper"}"#,
            ])

        // The same user audited again gets a new key: the new entry reads, the erased ones do not.
        try await Self.append(setup.storage, [(user: "u-1", detail: #"{"note":"after"}"#)])
        let again = try await setup.storage.read { try await $0.auditEntries(tenant: "acme", userID: "u-1", after: 0, limit: 100) }
        #expect(try await Self.readable(setup.storage, again) == [nil, nil, #"{"note":"after"}"#])

        // The export: in clear where readable, erased ones marked, the sealed text kept.
        var exported = Data()
        try await AuditChain.export(setup.storage) { exported += $0 }
        let lines = try exported.split(separator: UInt8(ascii: "\n")).dropLast().map {
            try JSONSerialization.jsonObject(with: Data($0)) as! [String: Any]
        }
        let ada = lines.filter { $0["user_id"] as? String == "u-1" }
        #expect(ada.count == 3)
        #expect(
            ada[0]["detail"] is NSNull && ada[0]["detail_erased"] as? Bool == true
                && (ada[0]["sealed_detail"] as? String)?.hasPrefix("enc:v1:") == true)
        #expect(ada[2]["detail"] as? String == #"{"note":"after"}"# && ada[2]["detail_erased"] == nil)
        #expect(lines.first { $0["user_id"] as? String == "u-2" }?["detail"] as? String == #"{"name":"Grace Hopper"}"#)
        #expect(try await setup.verify() == .intact(entries: Int(setup.entries) + 5, keyedFrom: 1))
    }

    @Test("a push's audit details are encrypted under the pushing user's key", arguments: StorageKind.allCases)
    func pushEncrypts(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "Statement", .create, "st-1", h.statementPayload("st-1", object: "lesson-of-ada"))])
        let stored = try await h.storage.read { try await $0.auditEntries(after: 0, limit: 10) }
        #expect(!stored.isEmpty && stored.allSatisfy { $0.detail.hasPrefix("enc:v1:") && !$0.detail.contains("lesson-of-ada") })
        #expect(try await h.audit().first?.detail.contains("st-1") == true)
        let erased = try await h.storage.write { try await $0.eraseAuditDetails(tenant: PushHarness.tenant, userID: stored[0].userID) }
        #expect(erased == stored.count)
        #expect(try await AuditChain.verify(h.storage) == .intact(entries: stored.count, keyedFrom: 1))
    }

    @Test("a database from before the upgrade: its entries keep their details in clear and still verify; new ones are encrypted")
    func upgradedDatabase() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-audit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        // A keyed log written by the release before: a storage opened on a database migrated that far.
        let queue = try DatabaseQueue(path: folder.appendingPathComponent("server.sqlite").path)
        try SQLiteStorage.migrator(contracts: ContractCatalog(ContractRegistry.self)).migrate(queue, upTo: "server.v2.identity")
        let key = try AuditKey(bytes: Data(repeating: 7, count: 32))
        try await queue.write { db in
            var previous = AuditChain.genesis
            for id in Int64(1)...3 {
                var entry = AuditEntry(
                    id: id, tenant: "acme", recordedAt: id, userID: "u-1", deviceID: "d", entity: "FieldTask", rowID: "t\(id)",
                    operation: .update, outcome: .applied, detail: #"{"name":"Ada"}"#
                )
                entry.previousHash = previous
                entry.hash = AuditChain.seal(of: entry, previousHash: previous, key: key)
                previous = entry.hash
                try db.execute(
                    sql: "INSERT INTO audit_log VALUES (?, 'acme', ?, 'u-1', 'd', 'FieldTask', ?, 'update', 'applied', ?, ?, ?)",
                    arguments: [id, id, entry.rowID, entry.detail, entry.previousHash, entry.hash]
                )
            }
            let seal = AuditChain.seal(lastID: 3, lastHash: previous, keyedFrom: 1, key: key)
            try db.execute(
                sql: "UPDATE audit_head SET last_id = 3, last_hash = ?, keyed_from = 1, key_fingerprint = ?, seal = ?",
                arguments: [previous, key.fingerprint, seal]
            )
        }
        let storage = try SQLiteStorage(directory: folder, contracts: ContractRegistry.self, auditKey: key)
        #expect(try await AuditChain.verify(storage) == .intact(entries: 3, keyedFrom: 1))
        try await Self.append(storage, [(user: "u-1", detail: #"{"name":"Ada, later"}"#)])
        let head = try #require(try await storage.read { try await $0.auditHead() })
        #expect(head.detailsFrom == 4)
        let entries = try await storage.read { try await $0.auditEntries(tenant: "acme", userID: "u-1", after: 0, limit: 10) }
        #expect(entries.map { $0.detail.hasPrefix("enc:v1:") } == [false, false, false, true])
        #expect(try await storage.write { try await $0.eraseAuditDetails(tenant: "acme", userID: "u-1") } == 1)
        #expect(try await Self.readable(storage, entries) == [#"{"name":"Ada"}"#, #"{"name":"Ada"}"#, #"{"name":"Ada"}"#, nil])
        #expect(try await AuditChain.verify(storage) == .intact(entries: 4, keyedFrom: 1))
    }

    @Test("two processes auditing a new user at once agree on one key: every detail reads", arguments: StorageKind.allCases)
    func concurrentFirstUse(_ kind: StorageKind) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-audit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let storages = try await kind.makeSharedStorages(2, in: folder)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, storage) in storages.enumerated() {
                group.addTask {
                    for round in 0..<10 {
                        try await Self.append(storage, [(user: "u-new", detail: #"{"from":\#(index),"round":\#(round)}"#)])
                    }
                }
            }
            try await group.waitForAll()
        }
        let entries = try await storages[0].read { try await $0.auditEntries(tenant: "acme", userID: "u-new", after: 0, limit: 100) }
        #expect(entries.count == 20)
        let details = try await Self.readable(storages[1], entries)
        #expect(details.allSatisfy { $0?.hasPrefix(#"{"from":"#) == true })
        #expect(try await AuditChain.verify(storages[1]) == .intact(entries: 20, keyedFrom: 1))
    }
}
