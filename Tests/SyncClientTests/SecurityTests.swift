import ContractRuntime
import Contracts
import Crypto
import Foundation
import GRDB
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

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
        let test = try TestStore()
        let secret = "PLAINTEXT-SECRET-7f3a9c"
        var incident = Samples.incident("inc-s", priority: .high, openedAt: 1)
        incident.reporterNotes = secret
        try test.store.create(incident)
        try test.store.setLocalState(Incident.self, id: "inc-s", Incident.LocalState(draftNote: secret + "-draft"))
        try test.store.create(Statement(id: "st-1", verb: .answered, objectId: "q-1", result: .string(secret + "-result"), statedAt: Samples.t0))

        #expect(try test.store.fetch(Incident.self, id: "inc-s")?.reporterNotes == secret)
        #expect(try test.store.localState(Incident.self, id: "inc-s")?.draftNote == secret + "-draft")
        #expect(try test.store.fetch(Statement.self, id: "st-1")?.result == .string(secret + "-result"))

        let stored = try test.raw { db in
            try Row.fetchOne(db, sql: "SELECT reporter_notes, draft_note, typeof(reporter_notes) AS kind FROM incidents WHERE id = 'inc-s'")
        }
        #expect(stored?["kind"] == "blob")
        let sealed: Data = try #require(stored?["reporter_notes"])
        #expect(sealed.first == 1)  // format version
        #expect(sealed.count >= 1 + 12 + secret.utf8.count + 16)
        let bytes = try fileBytes(test)
        #expect(bytes.range(of: Data(secret.utf8)) == nil)
        // The whole payload of every outbox entry is sealed too: not even the unencrypted short
        // description shows in it.
        let payloads = try test.raw { db in try Data.fetchAll(db, sql: "SELECT payload FROM outbox") }
        #expect(payloads.count == 2)
        #expect(payloads.allSatisfy { $0.range(of: Data("Pump inc-s".utf8)) == nil && $0.range(of: Data("inc-s".utf8)) == nil })
        // … and the sender still gets the plaintext.
        let mutations = try test.store.pendingMutations()
        guard case .object(let payload)? = mutations.first?.payload else { Issue.record("no payload"); return }
        #expect(payload["reporter_notes"] == .string(secret))
    }

    @Test("a sealed value moved to another row does not open")
    func boundToItsRow() throws {
        let test = try TestStore()
        try test.store.applyServerChanges(Samples.everything)
        try test.raw { db in
            try db.execute(
                sql: "UPDATE incidents SET reporter_notes = (SELECT reporter_notes FROM incidents WHERE id = 'inc-crit') WHERE id = 'inc-low'")
        }
        #expect(throws: OfflineStoreError.unsealFailed(table: "incidents", column: "reporter_notes", id: "inc-low")) {
            try test.store.fetch(Incident.self, id: "inc-low")
        }
        #expect(try test.store.fetch(Incident.self, id: "inc-crit")?.reporterNotes == "secret notes of inc-crit")
    }

    @Test("a tampered outbox entry is quarantined, reported, never sent, and leaves no gap in the wire seq")
    func tampered() throws {
        let test = try TestStore()
        try test.store.applyServerChanges(Samples.everything)
        try test.store.patch(FieldTask.self, id: "task-1", [.notes("one")])
        try test.store.patch(FieldTask.self, id: "task-2", [.notes("two")])
        try test.store.patch(Incident.self, id: "inc-low", [.state(.onHold)])
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
        #expect(mutations.map(\.id) == ["task-2"])
        #expect(mutations.map(\.seq) == [1])  // the wire seq continues without a gap
        let quarantined = try test.store.quarantinedEntries()
        #expect(quarantined.map(\.seq) == [1, 3])
        #expect(quarantined.allSatisfy { $0.lastError?.code == ErrorCode("outbox_tampered") })
        #expect(try test.store.outboxCounts()[.quarantined] == 2)
        #expect(try test.store.pendingMutations().map(\.id) == ["task-2"])  // still never sent

        // The app can discard it (it is not trusted, so nothing is undone).
        try test.store.discardQuarantined(seq: 1)
        #expect(try test.store.quarantinedEntries().map(\.seq) == [3])
        #expect(throws: OfflineStoreError.invalidOutboxState(seq: 2, status: "sending", expected: ["quarantined"])) {
            try test.store.discardQuarantined(seq: 2)
        }
    }

    @Test("verifyOutbox finds a swapped HMAC")
    func swappedMAC() throws {
        let test = try TestStore()
        try test.store.applyServerChanges(Samples.everything)
        try test.store.patch(FieldTask.self, id: "task-1", [.notes("one")])
        try test.store.patch(FieldTask.self, id: "task-2", [.notes("two")])
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
