import Contracts
import Foundation
import GRDB
import OutpostTestSupport
import SampleServerApps
import Testing

@testable import SyncServer

/// `audit archive`: the log's oldest entries move to a sealed file, the database keeps a sealed
/// base, and both verify on their own; on both storages.
@Suite("Audit log archiving")
struct AuditArchiveTests {
    typealias Setup = AuditTamperTests.Setup

    static let day: Int64 = 86_400_000

    /// Appends entries recorded at the given times (one per time, by user u-1).
    static func append(_ storage: any SyncStorage, at times: [Int64]) async throws {
        try await storage.write { transaction in
            for (index, time) in times.enumerated() {
                try await transaction.appendAudit(
                    AuditEntry(
                        tenant: "acme", recordedAt: time, userID: "u-1", deviceID: "d", entity: "FieldTask", rowID: "t-\(index)",
                        operation: .update, outcome: .applied, detail: #"{"name":"Ada"}"#
                    ))
            }
        }
    }

    static func archiveFile(_ setup: Setup, _ name: String) -> URL { setup.folder.appendingPathComponent(name) }

    @Test("archive, then the database and the archive verify on their own; a second archive chains to the first", arguments: StorageKind.allCases)
    func archiveTwice(_ kind: StorageKind) async throws {
        let setup = try await Setup.make(kind)
        defer { setup.remove() }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        try await AuditDetailsTests.append(setup.storage, [(user: "u-1", detail: #"{"name":"Ada"}"#)])
        try await Self.append(setup.storage, at: [now + Self.day, now + Self.day, now + 3 * Self.day, now + 3 * Self.day, now + 3 * Self.day])
        // An erased user's entries archive and verify as well: the seals cover the stored text.
        #expect(try await setup.storage.write { try await $0.eraseAuditDetails(tenant: "acme", userID: "u-1") } == 6)
        let total = setup.entries + 6

        // Nothing before a date before every entry: no file.
        let none = Self.archiveFile(setup, "none.jsonl")
        #expect(try await AuditChain.archive(setup.storage, before: now - 10 * Self.day, to: none, pageSize: 3) == nil)
        #expect(!FileManager.default.fileExists(atPath: none.path))

        let first = Self.archiveFile(setup, "first.jsonl")
        let one = try #require(try await AuditChain.archive(setup.storage, before: now + Self.day / 2, to: first, pageSize: 3))
        #expect(one.firstID == 1 && one.lastID == setup.entries + 1)
        #expect(try await setup.verify() == .intact(entries: 5, keyedFrom: 1))
        #expect(try await setup.entries(from: 1).first?.id == setup.entries + 2)
        let head = try #require(try await setup.storage.read { try await $0.auditHead() })
        #expect(head.base?.lastID == setup.entries + 1 && head.lastID == total)
        let firstData = try Data(contentsOf: first)
        #expect(AuditChain.verifyArchive(firstData, key: setup.storage.auditKey) == .intact(entries: Int(setup.entries) + 1, keyedFrom: 1))
        #expect(AuditCheckpoint.last(in: firstData) == one.checkpoint)
        let lines = firstData.split(separator: UInt8(ascii: "\n"))
        #expect(lines.count == Int(setup.entries) + 3)
        #expect(String(decoding: lines[0], as: UTF8.self).hasPrefix(#"{"archive_start":{"after_hash":"0000"#))
        // The archive keeps encrypted details encrypted.
        #expect(!firstData.contains(Data("Ada".utf8)))
        // The database's own checkpoint check still takes an archive's checkpoint.
        #expect(try await AuditChain.verify(setup.storage, checkpoint: one.checkpoint) == .intact(entries: 5, keyedFrom: 1))

        let second = Self.archiveFile(setup, "second.jsonl")
        let two = try #require(try await AuditChain.archive(setup.storage, before: now + 2 * Self.day, to: second, pageSize: 3))
        #expect(two.firstID == one.lastID + 1 && two.lastID == one.lastID + 2)
        let secondData = try Data(contentsOf: second)
        #expect(AuditChain.verifyArchive(secondData, key: setup.storage.auditKey) == .intact(entries: 2, keyedFrom: 1))
        let start = try JSONSerialization.jsonObject(with: Data(secondData.split(separator: UInt8(ascii: "\n"))[0])) as! [String: [String: Any]]
        #expect((start["archive_start"]?["after_id"] as? NSNumber)?.int64Value == one.checkpoint.lastID)
        #expect(start["archive_start"]?["after_hash"] as? String == one.checkpoint.lastHash)
        #expect(try await setup.verify() == .intact(entries: 3, keyedFrom: 1))

        // Entries appended afterwards chain on; a file holding another archive is not overwritten.
        try await Self.append(setup.storage, at: [now + 4 * Self.day])
        #expect(try await setup.verify() == .intact(entries: 4, keyedFrom: 1))
        await #expect(throws: AuditArchiveError.fileExists(path: first.path)) {
            try await AuditChain.archive(setup.storage, before: now + 10 * Self.day, to: first)
        }
        #expect(try Data(contentsOf: first) == firstData)
        // Everything archived: the log here is empty and whole.
        let rest = Self.archiveFile(setup, "rest.jsonl")
        #expect(try await AuditChain.archive(setup.storage, before: now + 10 * Self.day, to: rest)?.lastID == total + 1)
        #expect(try await setup.verify() == .intact(entries: 0, keyedFrom: 1))
        try await Self.append(setup.storage, at: [now + 11 * Self.day])
        #expect(try await setup.verify() == .intact(entries: 1, keyedFrom: 1))
    }

    @Test("a tampered archive line, a cut archive and an archive under another key are named", arguments: [StorageKind.sqlite])
    func tamperedArchive(_ kind: StorageKind) async throws {
        let setup = try await Setup.make(kind)
        defer { setup.remove() }
        let file = Self.archiveFile(setup, "archive.jsonl")
        _ = try #require(try await AuditChain.archive(setup.storage, before: Int64(Date().timeIntervalSince1970 * 1000) + Self.day, to: file))
        let text = try String(contentsOf: file, encoding: .utf8)
        var lines = text.split(separator: "\n").map(String.init)
        let key = setup.storage.auditKey

        var edited = lines
        edited[3] = edited[3].replacingOccurrences(of: #""outcome":""#, with: #""outcome":"x"#)
        #expect(
            AuditChain.verifyArchive(Data(edited.joined(separator: "\n").utf8), key: key)
                == .broken(entryID: 3, reason: "its content does not match its seal"))

        var removed = lines
        removed.remove(at: 4)
        #expect(
            AuditChain.verifyArchive(Data(removed.joined(separator: "\n").utf8), key: key)
                == .broken(entryID: 4, reason: "the entry is missing: the log goes from 3 to 5"))

        lines.removeLast()
        #expect(
            AuditChain.verifyArchive(Data(lines.joined(separator: "\n").utf8), key: key)
                == .broken(entryID: setup.entries + 1, reason: "the archive has no sealed checkpoint at its end: it was cut")
        )
        let other = try AuditKey(bytes: Data(repeating: 9, count: 32))
        #expect(
            AuditChain.verifyArchive(Data(text.utf8), key: other)
                == .broken(entryID: 0, reason: "the archive's start line's seal does not hold under this key"))
    }

    @Test("a forged base, and an entry cut after the base, are named", arguments: StorageKind.allCases)
    func tamperedBase(_ kind: StorageKind) async throws {
        let setup = try await Setup.make(kind)
        defer { setup.remove() }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        try await Self.append(setup.storage, at: [now + Self.day, now + Self.day, now + Self.day])
        let file = Self.archiveFile(setup, "archive.jsonl")
        let archived = try #require(try await AuditChain.archive(setup.storage, before: now + Self.day / 2, to: file))
        let base = archived.lastID
        #expect(try await setup.verify() == .intact(entries: 3, keyedFrom: 1))

        // Cutting the first entry after the base.
        let next = try #require(try await setup.entries(from: base + 1).first)
        try await setup.execute("DELETE FROM audit_log WHERE id = \(base + 1)")
        #expect(try await setup.verify() == .broken(entryID: base + 1, reason: "the entry is missing: the log goes from \(base) to \(base + 2)"))
        // Moving the base over the cut, without the key.
        try await setup.execute("UPDATE audit_head SET base_id = \(base + 1), base_hash = \(AuditTamperTests.quoted(next.hash))")
        #expect(
            try await setup.verify()
                == .broken(entryID: base + 1, reason: "the archive base's seal does not hold: it was rewritten without the audit key")
        )
        // Removing the base altogether: the log then starts at an entry that is not the first.
        try await setup.execute("UPDATE audit_head SET base_id = 0, base_hash = \(AuditTamperTests.quoted(AuditChain.genesis)), base_seal = NULL")
        #expect(try await setup.verify() == .broken(entryID: 1, reason: "the entry is missing: the log goes from 0 to \(base + 2)"))
    }

    @Test("a crash after the file was renamed, before the entries were deleted: the same command again finishes, with the same file")
    func crashBetweenFileAndDelete() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-audit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = try SQLiteStorage(directory: folder, contracts: ContractRegistry.self)
        _ = try await SampleContent.seed(
            storage: storage, tenant: "acme", team: "team-1", clock: SystemClock()
        )
        let entries = try await storage.read { try await $0.auditHead()?.lastID ?? 0 }
        // The database as it was when the crash came: a copy taken before the archive.
        let crashed = folder.appendingPathComponent("crashed")
        try FileManager.default.createDirectory(at: crashed, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: folder.appendingPathComponent("audit.key"), to: crashed.appendingPathComponent("audit.key"))
        let source = try DatabaseQueue(path: folder.appendingPathComponent("server.sqlite").path)
        try source.backup(to: DatabaseQueue(path: crashed.appendingPathComponent("server.sqlite").path))

        let file = folder.appendingPathComponent("archive.jsonl")
        let cutoff = Int64(Date().timeIntervalSince1970 * 1000) + Self.day
        let done = try #require(try await AuditChain.archive(storage, before: cutoff, to: file))
        let written = try Data(contentsOf: file)

        let restarted = try SQLiteStorage(directory: crashed, contracts: ContractRegistry.self)
        #expect(try await AuditChain.verify(restarted) == .intact(entries: Int(entries), keyedFrom: 1))
        #expect(try await AuditChain.archive(restarted, before: cutoff, to: file) == done)
        #expect(try Data(contentsOf: file) == written)
        #expect(try await AuditChain.verify(restarted) == .intact(entries: 0, keyedFrom: 1))
        #expect(AuditChain.verifyArchive(written, key: restarted.auditKey) == .intact(entries: Int(entries), keyedFrom: 1))
    }
}
