import ContractRuntime
import Crypto
import EngineTestContracts
import Foundation
import GRDB
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

@Suite("Keys at rest: data key rotation, the passphrase-derived key, the database passphrase", .blockingWork)
struct KeyRotationTests {
    /// Everything sealed a store can hold: sealed fields (a contract field and a local one),
    /// queued writes, and a conflict's recorded rows.
    private static func fill(_ store: OfflineStore) throws {
        try store.applyServerChanges(EngineSamples.everything)
        var note = EngineSamples.note("note-mine")
        note.privateRemark = "remark written on the device"
        try store.create(note)
        try store.setLocalState(Note.self, id: "note-1", Note.LocalState(draftBody: "a draft"))
        try store.create(
            ActivityRecord(
                id: activityID, verb: .edited, subjectId: "card-1", detail: .string("the answer"), happenedAt: EngineSamples.t0,
                happenedOn: CalendarDate(year: 2026, month: 1, day: 31)))
        try store.patch(Card.self, id: "card-1", [.lane(.doing)])
        let batch = try store.pendingMutations(limit: 100)
        let patch = try #require(batch.first { $0.entity == "Card" })
        var theirs = EngineSamples.cards[1]
        theirs.revision = 9
        try store.markResults([
            MutationResult(
                seq: patch.seq, clientMutationId: patch.clientMutationId, status: .conflicted, serverVersion: 9,
                serverRow: EngineSamples.wire(theirs), resolution: nil, error: nil)
        ])
        try store.patch(Note.self, id: "note-2", [.privateRemark("changed on the device")])
    }

    private static let activityID = UUID(uuidString: "6f1c2a8e-4b5d-4e7f-9a0b-1c2d3e4f5a6b")!

    /// What the app reads back of everything sealed.
    private struct Readings: Equatable {
        var notes: [Note?]
        var draft: String?
        var activity: ActivityRecord?
        var mutations: [Mutation]
        var conflicts: [ConflictRecord]
    }

    private static func read(_ store: OfflineStore) throws -> Readings {
        Readings(
            notes: try (EngineSamples.notes.map(\.id) + ["note-mine"]).map { try store.fetch(Note.self, id: $0) },
            draft: try store.localState(Note.self, id: "note-1")?.draftBody,
            activity: try store.fetch(ActivityRecord.self, id: activityID.uuidString.lowercased()),
            mutations: try store.pendingMutations(limit: 100),
            conflicts: try store.conflicts(includeResolved: true)
        )
    }

    /// The first bytes of every sealed value in the file: what key version sealed each one.
    private static func sealedHeaders(_ test: TestStore) throws -> [String] {
        try test.raw { db in
            try String.fetchAll(
                db,
                sql: """
                    SELECT hex(substr(private_remark, 1, 5)) FROM notes WHERE private_remark IS NOT NULL
                    UNION ALL SELECT hex(substr(draft_body, 1, 5)) FROM notes WHERE draft_body IS NOT NULL
                    UNION ALL SELECT hex(substr(detail, 1, 5)) FROM activities WHERE detail IS NOT NULL
                    UNION ALL SELECT hex(substr(payload, 1, 5)) FROM outbox
                    UNION ALL SELECT hex(substr(local_row, 1, 5)) FROM conflicts WHERE local_row IS NOT NULL
                    UNION ALL SELECT hex(substr(server_row, 1, 5)) FROM conflicts WHERE server_row IS NOT NULL
                    """)
        }
    }

    private static let version2 = "0200000002"

    @Test("a rotation seals every value again under the new version; everything reads back, before and after a reopen without the old key")
    func rotationResealsEverything() throws {
        let keys = InMemoryKeyProvider()
        var test = try TestStore.engine(keys: keys)
        try Self.fill(test.store)
        let before = try Self.read(test.store)
        #expect(before.conflicts.count == 1 && before.mutations.count >= 3 && before.activity?.detail == .string("the answer"))
        #expect(try Self.sealedHeaders(test).allSatisfy { $0.hasPrefix("01") })

        let report = try test.store.rotateDataKey(batchSize: 3)
        #expect(report.fromVersion == 1 && report.toVersion == 2)
        #expect(report.unreadableValues == 0)
        let sealedCount = try Self.sealedHeaders(test).count
        #expect(report.resealedValues == sealedCount)
        #expect(report.batches > 3)
        #expect(test.store.dataKeyStatus().version == 2 && test.store.dataKeyStatus().rotatingFrom == nil)
        #expect(try Self.read(test.store) == before)
        let headers = try Self.sealedHeaders(test)
        #expect(headers.count > 10 && headers.allSatisfy { $0 == Self.version2 })
        // The outbox's seal and MACs moved too: nothing is quarantined or reported.
        #expect(try test.store.outboxIntegrityProblem() == nil)
        #expect(try test.store.quarantinedEntries().isEmpty)

        // The old version is no longer needed.
        try keys.deleteKey(forTenant: "acme", version: 1)
        test = try test.reopen()
        #expect(try Self.read(test.store) == before)
        #expect(try test.store.quarantinedEntries().isEmpty)
        #expect(try test.store.outboxIntegrityProblem() == nil)
        // Writes go on under the new version, and a second rotation goes to version 3.
        try test.store.patch(Note.self, id: "note-1", [.privateRemark("after")])
        #expect(try test.store.rotateDataKey().toVersion == 3)
        #expect(try test.store.fetch(Note.self, id: "note-1")?.privateRemark == "after")
        #expect(try Self.sealedHeaders(test).allSatisfy { $0 == "0200000003" })
    }

    @Test("a rotation stopped after any batch reads everything meanwhile, and the next open finishes it", arguments: [0, 1, 2, 4])
    func interruptedRotationFinishesAtOpen(batches: Int) throws {
        let keys = InMemoryKeyProvider()
        var test = try TestStore.engine(keys: keys)
        try Self.fill(test.store)
        let before = try Self.read(test.store)

        let (_, finished) = try test.store.rotateDataKey(batchSize: 2, stoppingAfterBatches: batches)
        #expect(!finished)
        #expect(test.store.dataKeyStatus().version == 2 && test.store.dataKeyStatus().rotatingFrom == 1)
        #expect(try Self.read(test.store) == before)
        let headers = try Self.sealedHeaders(test)
        #expect(headers.contains { $0.hasPrefix("01") })
        // A write in the middle is sealed under the new version at once.
        try test.store.patch(Note.self, id: "note-2", [.privateRemark("mid-rotation")])
        #expect(try test.store.fetch(Note.self, id: "note-2")?.privateRemark == "mid-rotation")

        test = try test.reopen()
        #expect(test.store.dataKeyStatus().version == 2 && test.store.dataKeyStatus().rotatingFrom == nil)
        #expect(try Self.sealedHeaders(test).allSatisfy { $0 == Self.version2 })
        var after = try Self.read(test.store)
        #expect(after.notes.first { $0?.id == "note-2" }??.privateRemark == "mid-rotation")
        after.notes = before.notes
        after.mutations = Array(after.mutations.prefix(before.mutations.count))
        #expect(after == before)
        #expect(try test.store.quarantinedEntries().isEmpty)
        #expect(try test.store.outboxIntegrityProblem() == nil)
        try keys.deleteKey(forTenant: "acme", version: 1)
        test = try test.reopen()
        #expect(try test.store.fetch(Note.self, id: "note-2")?.privateRemark == "mid-rotation")
    }

    @Test("reads and writes from other threads while a rotation runs")
    func readsAndWritesDuringARotation() async throws {
        let test = try TestStore.engine(keys: InMemoryKeyProvider())
        try Self.fill(test.store)
        let store = test.store
        let rotation = Task.detached { try store.rotateDataKey(batchSize: 1) }
        for round in 0..<30 {
            try store.patch(Note.self, id: "note-mine", [.privateRemark("round \(round)")])
            #expect(try store.fetch(Note.self, id: "note-mine")?.privateRemark == "round \(round)")
            #expect(try store.fetch(Note.self, id: "note-1")?.privateRemark == "private remark of note-1")
            #expect(try store.localState(Note.self, id: "note-1")?.draftBody == "a draft")
        }
        let report = try await rotation.value
        #expect(report.unreadableValues == 0)
        #expect(try Self.sealedHeaders(test).allSatisfy { $0 == Self.version2 })
        #expect(try store.fetch(Note.self, id: "note-mine")?.privateRemark == "round 29")
        #expect(try store.quarantinedEntries().isEmpty)
        #expect(try store.outboxIntegrityProblem() == nil)
    }

    @Test("a store that never rotated keeps the format from before key versions: same key check, 0x01 seals, no key version")
    func unrotatedFormatUnchanged() throws {
        var test = try TestStore.engine()
        try Self.fill(test.store)
        // The key check as the store computed it before key versions existed.
        let tenantKey = try test.keys.key(forTenant: "acme")
        let macKey = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: tenantKey, salt: Data("outpost.client.v1".utf8), info: Data("outbox-mac".utf8), outputByteCount: 32)
        var hmac = HMAC<SHA256>(key: macKey)
        let label = Data("outpost.key-check".utf8)
        hmac.update(data: withUnsafeBytes(of: UInt64(label.count).bigEndian) { Data($0) })
        hmac.update(data: label)
        let check = Data(hmac.finalize()).map { String(format: "%02x", $0) }.joined()
        let metadata = try test.raw { db in
            try Dictionary(
                uniqueKeysWithValues: Row.fetchAll(db, sql: "SELECT key, value FROM metadata").map { ($0["key"] as String, $0["value"] as String) })
        }
        #expect(metadata["key_check"] == check)
        #expect(metadata["key_version"] == nil && metadata["rotating_from_key_version"] == nil)
        #expect(try Self.sealedHeaders(test).allSatisfy { $0.hasPrefix("01") })
        test = try test.reopen()
        #expect(test.store.dataKeyStatus().version == 1 && test.store.dataKeyStatus().rotatingFrom == nil)
        #expect(try test.store.fetch(Note.self, id: "note-mine")?.privateRemark == "remark written on the device")
    }

    /// A provider written before key versions: only version 1.
    private struct SingleKeyProvider: KeyProvider {
        let inner = InMemoryKeyProvider()
        func key(forTenant tenantId: String) throws -> SymmetricKey { try inner.key(forTenant: tenantId) }
        func deleteKey(forTenant tenantId: String) throws { try inner.deleteKey(forTenant: tenantId) }
    }

    @Test("a provider without versions keeps working and refuses a rotation with a typed error, changing nothing")
    func providerWithoutVersions() throws {
        let test = try TestStore.engine(keys: SingleKeyProvider())
        try Self.fill(test.store)
        let before = try Self.read(test.store)
        #expect {
            try test.store.rotateDataKey()
        } throws: { error in
            guard case .keyUnavailable(tenantId: "acme", _)? = error as? OfflineStoreError else { return false }
            return true
        }
        #expect(test.store.dataKeyStatus().version == 1 && test.store.dataKeyStatus().rotatingFrom == nil)
        #expect(try Self.read(test.store) == before)
        _ = try test.reopen()
    }

    @Test("signing out with forgetKey deletes every key version")
    func signOutForgetsEveryVersion() throws {
        let directory = try TemporaryDirectory()
        let keys = FileKeyProvider(directory: directory.keysURL)
        let test = try TestStore.engine(directory: directory, keys: keys)
        try test.store.rotateDataKey()
        try test.store.rotateDataKey()
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.keysURL.path).filter { $0.hasSuffix(".key") }.count == 3)
        try test.store.signOut(force: true, forgetKey: true)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.keysURL.path).filter { $0.hasSuffix(".key") }.isEmpty)
    }

    // MARK: Passphrase

    private static func bytes(_ key: SymmetricKey) -> Data { key.withUnsafeBytes { Data($0) } }

    @Test("the passphrase provider: same passphrase and salt → same key; the salt is kept; a wrong passphrase is a typed error")
    func passphraseProvider() throws {
        let directory = try TemporaryDirectory()
        let saltFile = PassphraseKeyProvider.saltFile(besideDatabase: directory.databaseURL)
        #expect(saltFile.lastPathComponent == "store.sqlite.salt.json")
        let provider = PassphraseKeyProvider(passphrase: "correct horse battery staple", saltFile: saltFile, rounds: 1_000)
        let first = Self.bytes(try provider.key(forTenant: "acme"))
        #expect(FileManager.default.fileExists(atPath: saltFile.path))
        let again = PassphraseKeyProvider(passphrase: "correct horse battery staple", saltFile: saltFile, rounds: 1_000)
        #expect(Self.bytes(try again.key(forTenant: "acme")) == first)
        // Another tenant, or another version, has its own salt: another key.
        #expect(Self.bytes(try again.key(forTenant: "globex")) != first)
        #expect(Self.bytes(try again.key(forTenant: "acme", version: 2)) != first)
        #expect(throws: PassphraseKeyProviderError.wrongPassphrase(tenantId: "acme")) {
            try PassphraseKeyProvider(passphrase: "Correct horse battery staple", saltFile: saltFile, rounds: 1_000).key(forTenant: "acme")
        }
        // Without the salt file the key cannot be derived again.
        try FileManager.default.removeItem(at: saltFile)
        #expect(Self.bytes(try again.key(forTenant: "acme")) != first)
    }

    @Test("a store keyed by a passphrase opens again with it, refuses another with keyMismatch, and rotates")
    func storeWithPassphrase() throws {
        let directory = try TemporaryDirectory()
        let saltFile = PassphraseKeyProvider.saltFile(besideDatabase: directory.databaseURL)
        func provider(_ passphrase: String) -> PassphraseKeyProvider {
            PassphraseKeyProvider(passphrase: passphrase, saltFile: saltFile, rounds: 1_000)
        }
        var test = try TestStore.engine(directory: directory, keys: provider("open sesame"))
        try Self.fill(test.store)
        let before = try Self.read(test.store)
        try test.store.close()
        #expect(throws: OfflineStoreError.keyMismatch(tenantId: "acme")) {
            try TestStore.engine(directory: directory, keys: provider("open sesame!"))
        }
        test = try TestStore.engine(directory: directory, keys: provider("open sesame"))
        #expect(try Self.read(test.store) == before)
        #expect(try test.store.rotateDataKey().toVersion == 2)
        try provider("open sesame").deleteKey(forTenant: "acme", version: 1)
        test = try test.reopen()
        #expect(try Self.read(test.store) == before)
    }

    // MARK: Database passphrase

    @Test("a database passphrase is refused with a typed error when SQLite has no encryption, before any file is made")
    func databasePassphraseRefusedWithoutSQLCipher() throws {
        let directory = try TemporaryDirectory()
        var configuration = TestStore.configuration(directory: directory, clock: ManualClock(TestStore.start), keys: InMemoryKeyProvider())
        configuration.databasePassphrase = "secret"
        #expect {
            try OfflineStore(configuration, contracts: ContractRegistry.self)
        } throws: { error in
            guard case .databaseEncryptionUnavailable? = error as? OfflineStoreError else { return false }
            return true
        }
        #expect(!FileManager.default.fileExists(atPath: directory.databaseURL.path))
    }
}
