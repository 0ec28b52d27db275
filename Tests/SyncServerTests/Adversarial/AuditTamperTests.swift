import ContractRuntime
import Contracts
import Foundation
import GRDB
import OutpostTestSupport
import PostgresNIO
import SampleServerApps
import Testing

@testable import SyncServer

/// Someone who can write the database but does not hold the audit key edits the log behind the
/// server's back; verification names the first bad position, on both storages.
@Suite("Audit log tampering")
struct AuditTamperTests {
    /// A seeded storage and a way to run SQL on its database as that someone would.
    struct Setup {
        let storage: any SyncStorage
        let folder: URL
        let execute: @Sendable (String) async throws -> Void
        let entries: Int64

        static func make(_ kind: StorageKind) async throws -> Setup {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-audit-\(UUID().uuidString)")
            // On PostgreSQL nothing of the storage lives in it: the archive tests write their files there.
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let schema = StorageKind.uniqueSchema()
            let storage = try await kind.makeSharedStorages(1, in: folder, schema: schema)[0]
            _ = try await SampleContent.seed(
                storage: storage, tenant: "acme", team: "team-1", clock: SystemClock()
            )
            let execute: @Sendable (String) async throws -> Void
            switch kind {
            case .sqlite:
                let queue = try DatabaseQueue(path: folder.appendingPathComponent("server.sqlite").path)
                execute = { sql in try await queue.write { try $0.execute(sql: sql) } }
            case .postgres:
                let probe = try PostgresProbe(schema: schema)
                execute = { sql in _ = try await probe.client.query(PostgresQuery(unsafeSQL: sql)).collect() }
            }
            let entries = try await storage.read { try await $0.auditHead()?.lastID ?? 0 }
            #expect(entries > 6)
            return Setup(storage: storage, folder: folder, execute: execute, entries: entries)
        }

        func verify() async throws -> AuditChain.Verification { try await AuditChain.verify(storage, pageSize: 4) }

        func entries(from id: Int64) async throws -> [AuditEntry] {
            try await storage.read { try await $0.auditEntries(after: id - 1, limit: 10_000) }
        }

        func remove() { try? FileManager.default.removeItem(at: folder) }
    }

    static func quoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }

    @Test("an entry rewritten and rehashed without the key (the old attack) is named", arguments: StorageKind.allCases)
    func rewrittenAndRehashed(_ kind: StorageKind) async throws {
        let setup = try await Setup.make(kind)
        defer { setup.remove() }
        #expect(try await setup.verify() == .intact(entries: Int(setup.entries), keyedFrom: 1))
        // Rewrite entry 3 and re-link everything after it with plain SHA-256, head included.
        var previous = try await setup.entries(from: 2).first!.hash
        for var entry in try await setup.entries(from: 3) {
            if entry.id == 3 { entry.outcome = AuditOutcome("tampered") }
            entry.previousHash = previous
            entry.hash = AuditChain.legacyHash(of: entry, previousHash: previous)
            previous = entry.hash
            try await setup.execute(
                "UPDATE audit_log SET outcome = \(Self.quoted(entry.outcome.rawValue)), previous_hash = \(Self.quoted(entry.previousHash)), hash = \(Self.quoted(entry.hash)) WHERE id = \(entry.id)"
            )
        }
        #expect(try await setup.verify() == .broken(entryID: 3, reason: "its content does not match its seal"))
        // Moving the head to the new last hash does not help: its seal no longer holds.
        try await setup.execute("UPDATE audit_head SET last_hash = \(Self.quoted(previous))")
        #expect(
            try await setup.verify()
                == .broken(entryID: setup.entries, reason: "the head's seal does not hold: it was rewritten without the audit key")
        )
    }

    @Test("an entry rewritten in place is named by its position", arguments: StorageKind.allCases)
    func rewrittenInPlace(_ kind: StorageKind) async throws {
        let setup = try await Setup.make(kind)
        defer { setup.remove() }
        try await setup.execute("UPDATE audit_log SET detail = '{}' WHERE id = 4")
        #expect(try await setup.verify() == .broken(entryID: 4, reason: "its content does not match its seal"))
    }

    @Test("a deleted entry in the middle is named", arguments: StorageKind.allCases)
    func deletedInTheMiddle(_ kind: StorageKind) async throws {
        let setup = try await Setup.make(kind)
        defer { setup.remove() }
        try await setup.execute("DELETE FROM audit_log WHERE id = 5")
        #expect(try await setup.verify() == .broken(entryID: 5, reason: "the entry is missing: the log goes from 4 to 6"))
    }

    @Test("the last entry deleted: the sealed head names it, and later writes keep the gap", arguments: StorageKind.allCases)
    func cutTail(_ kind: StorageKind) async throws {
        let setup = try await Setup.make(kind)
        defer { setup.remove() }
        let last = setup.entries
        try await setup.execute("DELETE FROM audit_log WHERE id = \(last)")
        #expect(
            try await setup.verify()
                == .broken(entryID: last, reason: "the log ends at entry \(last - 1) but its sealed head says \(last): entries were cut from its end")
        )
        _ = try await SampleContent.seed(
            storage: setup.storage, tenant: "other", team: "t",
            clock: SystemClock()
        )
        #expect(try await setup.verify() == .broken(entryID: last, reason: "the entry is missing: the log goes from \(last - 1) to \(last + 1)"))
    }

    @Test("a head rewritten to match a cut tail does not hold without the key", arguments: StorageKind.allCases)
    func headRewritten(_ kind: StorageKind) async throws {
        let setup = try await Setup.make(kind)
        defer { setup.remove() }
        let last = setup.entries
        let before = try await setup.entries(from: last - 1).first!
        try await setup.execute("DELETE FROM audit_log WHERE id = \(last)")
        try await setup.execute("UPDATE audit_head SET last_id = \(last - 1), last_hash = \(Self.quoted(before.hash))")
        #expect(
            try await setup.verify() == .broken(entryID: last - 1, reason: "the head's seal does not hold: it was rewritten without the audit key"))
    }

    @Test("two entries swapped are named", arguments: StorageKind.allCases)
    func reordered(_ kind: StorageKind) async throws {
        let setup = try await Setup.make(kind)
        defer { setup.remove() }
        try await setup.execute("UPDATE audit_log SET id = -1 WHERE id = 4")
        try await setup.execute("UPDATE audit_log SET id = 4 WHERE id = 5")
        try await setup.execute("UPDATE audit_log SET id = 5 WHERE id = -1")
        #expect(try await setup.verify() == .broken(entryID: 4, reason: "its previous-hash does not match the entry before it"))
    }

    @Test(
        "an encrypted detail swapped for another's, or cut, is named; a user's key deleted (erasure) is not tampering",
        arguments: StorageKind.allCases)
    func encryptedDetailSwapped(_ kind: StorageKind) async throws {
        let setup = try await Setup.make(kind)
        defer { setup.remove() }
        try await AuditDetailsTests.append(setup.storage, [(user: "u-1", detail: #"{"a":1}"#), (user: "u-2", detail: #"{"b":2}"#)])
        let entries = try await setup.entries(from: setup.entries + 1)
        try await setup.execute("DELETE FROM audit_user_keys WHERE user_id = 'u-1'")
        #expect(try await setup.verify() == .intact(entries: Int(setup.entries) + 2, keyedFrom: 1))
        try await setup.execute("UPDATE audit_log SET detail = \(Self.quoted(entries[1].detail)) WHERE id = \(entries[0].id)")
        #expect(try await setup.verify() == .broken(entryID: entries[0].id, reason: "its content does not match its seal"))
        try await setup.execute("UPDATE audit_log SET detail = 'enc:v1:' WHERE id = \(entries[0].id)")
        #expect(try await setup.verify() == .broken(entryID: entries[0].id, reason: "its content does not match its seal"))
    }

    @Test("a storage opened with another audit key refuses to start; verification with it says so", arguments: [StorageKind.sqlite])
    func anotherKey(_ kind: StorageKind) async throws {
        let setup = try await Setup.make(kind)
        defer { setup.remove() }
        let other = try AuditKey(bytes: Data(repeating: 42, count: 32))
        #expect(throws: AuditKeyError.self) { try SQLiteStorage(directory: setup.folder, contracts: ContractRegistry.self, auditKey: other) }
        guard case .broken(_, let reason) = try await AuditChain.verify(setup.storage, key: other) else {
            Issue.record("another key verified the log")
            return
        }
        #expect(reason.contains("sealed with another key"))
    }

    @Test("a log from before the key: its entries stay hash-chained, the keyed chain follows them, a rewrite of either is named")
    func upgradedLog() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-audit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let queue = try DatabaseQueue(path: folder.appendingPathComponent("server.sqlite").path)
        try SQLiteStorage.migrator(contracts: ContractCatalog(ContractRegistry.self)).migrate(queue, upTo: "server.v2.rate_windows")
        try await queue.write { db in
            var previous = AuditChain.genesis
            for id in Int64(1)...3 {
                var entry = AuditEntry(
                    id: id, tenant: "acme", recordedAt: id, userID: "u", deviceID: "d", entity: "Unit", rowID: "r\(id)", operation: .publish,
                    outcome: .published, detail: "{}"
                )
                entry.previousHash = previous
                entry.hash = AuditChain.legacyHash(of: entry, previousHash: previous)
                previous = entry.hash
                try db.execute(
                    sql: "INSERT INTO audit_log VALUES (?, 'acme', ?, 'u', 'd', 'Unit', ?, 'publish', 'published', '{}', ?, ?)",
                    arguments: [id, id, entry.rowID, entry.previousHash, entry.hash]
                )
            }
        }
        let storage = try SQLiteStorage(directory: folder, contracts: ContractRegistry.self)
        _ = try await SampleContent.seed(
            storage: storage, tenant: "acme", team: "team-1", clock: SystemClock()
        )
        let head = try #require(try await storage.read { try await $0.auditHead() })
        #expect(head.keyedFrom == 4)
        #expect(try await AuditChain.verify(storage) == .intact(entries: Int(head.lastID), keyedFrom: 4))
        try await queue.write { db in try db.execute(sql: "UPDATE audit_log SET outcome = 'x' WHERE id = 2") }
        #expect(try await AuditChain.verify(storage) == .broken(entryID: 2, reason: "its content does not match its seal"))
    }
}
