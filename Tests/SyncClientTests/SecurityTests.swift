import ContractRuntime
import Crypto
import EngineTestContracts
import Foundation
import GRDB
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

/// On the engines' own contracts: a note's private remark and draft body, an activity's detail.
@Suite("Security: sealed fields, sealed and signed outbox, quarantine", .blockingWork)
struct SecurityTests {
    /// Every byte of the database files.
    private func fileBytes(_ test: TestStore) throws -> Data {
        var bytes = Data()
        for suffix in ["", "-wal"] {
            let url = URL(fileURLWithPath: test.directory.databaseURL.path + suffix)
            if let data = try? Data(contentsOf: url) { bytes.append(data) }
        }
        return bytes
    }

    @Test("an encrypted field is stored sealed: the plaintext is nowhere in the SQLite files, outbox included")
    func sealedAtRest() throws {
        let test = try TestStore.engine()
        let secret = "PLAINTEXT-SECRET-7f3a9c"
        var note = EngineSamples.note("note-s")
        note.privateRemark = secret
        try test.store.create(note)
        try test.store.setLocalState(Note.self, id: "note-s", Note.LocalState(draftBody: secret + "-draft"))
        let activity = UUID(uuidString: "6f1c2a8e-4b5d-4e7f-9a0b-1c2d3e4f5a6b")!
        try test.store.create(
            ActivityRecord(
                id: activity, verb: .edited, subjectId: "card-1", detail: .string(secret + "-result"), happenedAt: EngineSamples.t0,
                happenedOn: CalendarDate(year: 2026, month: 1, day: 31)))

        #expect(try test.store.fetch(Note.self, id: "note-s")?.privateRemark == secret)
        #expect(try test.store.localState(Note.self, id: "note-s")?.draftBody == secret + "-draft")
        #expect(try test.store.fetch(ActivityRecord.self, id: activity.uuidString.lowercased())?.detail == .string(secret + "-result"))

        let stored = try test.raw { db in
            try Row.fetchOne(db, sql: "SELECT private_remark, draft_body, typeof(private_remark) AS kind FROM notes WHERE id = 'note-s'")
        }
        #expect(stored?["kind"] == "blob")
        let sealed: Data = try #require(stored?["private_remark"])
        #expect(sealed.first == 1)  // format version
        #expect(sealed.count >= 1 + 12 + secret.utf8.count + 16)
        let bytes = try fileBytes(test)
        #expect(bytes.range(of: Data(secret.utf8)) == nil)
        // The whole payload of every outbox entry is sealed too: not even the unencrypted body
        // shows in it.
        let payloads = try test.raw { db in try Data.fetchAll(db, sql: "SELECT payload FROM outbox") }
        #expect(payloads.count == 2)
        #expect(payloads.allSatisfy { $0.range(of: Data("Body of note-s".utf8)) == nil && $0.range(of: Data("note-s".utf8)) == nil })
        // … and the sender still gets the plaintext.
        let mutations = try test.store.pendingMutations()
        guard case .object(let payload)? = mutations.first?.payload else { Issue.record("no payload"); return }
        #expect(payload["private_remark"] == .string(secret))
    }

    @Test("a sealed value moved to another row does not open")
    func boundToItsRow() throws {
        let test = try TestStore.engine()
        try test.store.applyServerChanges(EngineSamples.everything)
        try test.raw { db in
            try db.execute(
                sql: "UPDATE notes SET private_remark = (SELECT private_remark FROM notes WHERE id = 'note-2') WHERE id = 'note-1'")
        }
        #expect(throws: OfflineStoreError.unsealFailed(table: "notes", column: "private_remark", id: "note-1")) {
            try test.store.fetch(Note.self, id: "note-1")
        }
        #expect(try test.store.fetch(Note.self, id: "note-2")?.privateRemark == "private remark of note-2")
    }

    @Test("a tampered outbox entry is quarantined, reported, never sent, and leaves no gap in the wire seq")
    func tampered() throws {
        let test = try TestStore.engine()
        try test.store.applyServerChanges(EngineSamples.everything)
        try test.store.patch(Card.self, id: "card-1", [.description("one")])
        try test.store.patch(Card.self, id: "card-2", [.description("two")])
        try test.store.patch(Board.self, id: "board-paused", [.status(.archived)])
        // Someone with the file rewrites entry 1 to be based on another version, and flips a
        // byte of entry 3's sealed payload.
        try test.raw { db in
            try db.execute(sql: "UPDATE outbox SET base_version = 99 WHERE seq = 1")
            // Flipped, not overwritten: a byte set to a fixed value is already that value once in 256 runs.
            var payload = try #require(try Data.fetchOne(db, sql: "SELECT payload FROM outbox WHERE seq = 3"))
            payload[payload.startIndex + 20] ^= 0xFF
            try db.execute(sql: "UPDATE outbox SET payload = ? WHERE seq = 3", arguments: [payload])
        }
        let mutations = try test.store.pendingMutations()
        #expect(mutations.map(\.id) == ["card-2"])
        #expect(mutations.map(\.seq) == [1])  // the wire seq continues without a gap
        let quarantined = try test.store.quarantinedEntries()
        #expect(quarantined.map(\.seq) == [1, 3])
        #expect(quarantined.allSatisfy { $0.lastError?.code == ErrorCode("outbox_tampered") })
        #expect(try test.store.outboxCounts()[.quarantined] == 2)
        #expect(try test.store.pendingMutations().map(\.id) == ["card-2"])  // still never sent

        // The app can discard it (it is not trusted, so nothing is undone).
        try test.store.discardQuarantined(seq: 1)
        #expect(try test.store.quarantinedEntries().map(\.seq) == [3])
        #expect(throws: OfflineStoreError.invalidOutboxState(seq: 2, status: "sending", expected: ["quarantined"])) {
            try test.store.discardQuarantined(seq: 2)
        }
    }

    @Test("verifyOutbox finds a swapped HMAC")
    func swappedMAC() throws {
        let test = try TestStore.engine()
        try test.store.applyServerChanges(EngineSamples.everything)
        try test.store.patch(Card.self, id: "card-1", [.description("one")])
        try test.store.patch(Card.self, id: "card-2", [.description("two")])
        try test.raw { db in try db.execute(sql: "UPDATE outbox SET hmac = (SELECT hmac FROM outbox WHERE seq = 1) WHERE seq = 2") }
        #expect(try test.store.verifyOutbox() == [2])
        #expect(try test.store.verifyOutbox().isEmpty)
    }

    @Test("the file key provider keeps one 32-byte key per tenant, readable only by its owner")
    func fileKeys() throws {
        let directory = try TemporaryDirectory()
        let provider = FileKeyProvider(directory: directory.keysURL)
        let key = try provider.key(forTenant: "acme")
        let again = try FileKeyProvider(directory: directory.keysURL).key(forTenant: "acme")
        let other = try provider.key(forTenant: "globex")
        #expect(key.withUnsafeBytes { Data($0) } == again.withUnsafeBytes { Data($0) })
        #expect(key.withUnsafeBytes { Data($0) } != other.withUnsafeBytes { Data($0) })
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.keysURL.path).filter { $0.hasSuffix(".key") }
        #expect(files.count == 2)
        #expect(!files.contains { $0.contains("acme") })
        let attributes = try FileManager.default.attributesOfItem(atPath: directory.keysURL.appendingPathComponent(files[0]).path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        #expect((attributes[.size] as? Int) == 32)
        try provider.deleteKey(forTenant: "acme")
        let replaced = try provider.key(forTenant: "acme")
        #expect(replaced.withUnsafeBytes { Data($0) } != key.withUnsafeBytes { Data($0) })
    }
}
