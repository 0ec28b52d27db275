import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

/// On the engines' own contracts.
@Suite("Retention", .blockingWork)
struct RetentionTests {
    @Test("7 days of unsynced writes → sync needed; 14 days → read-only until a sync succeeds")
    func thresholds() throws {
        let test = try TestStore.engine()
        let store = test.store
        try store.applyServerChanges(EngineSamples.everything)
        #expect(try store.retentionState() == .ok)
        try store.patch(Card.self, id: "card-1", [.description("day 0")])
        test.clock.advance(by: 7 * 86_400 - 1)
        #expect(try store.retentionState() == .ok)
        test.clock.advance(by: 1)
        #expect(try store.retentionState() == .syncNeeded(since: TestStore.start))
        try store.patch(Card.self, id: "card-1", [.description("day 7")])  // still writable
        test.clock.advance(by: 7 * 86_400)
        #expect(try store.retentionState() == .readOnly(since: TestStore.start))
        #expect(throws: OfflineStoreError.readOnlyUntilSync(since: TestStore.start)) {
            try store.patch(Card.self, id: "card-1", [.description("day 14")])
        }
        #expect(throws: OfflineStoreError.readOnlyUntilSync(since: TestStore.start)) {
            try store.record(CardMoved(teamId: "team-1", cardId: "card-1", boardId: "board-launch", fromLane: .todo, toLane: .doing, baseRevision: 7))
        }
        #expect(try store.fetch(Card.self, id: "card-1")?.description == "day 7")  // reads go on
        try store.setLocalState(Note.self, id: "note-1", Note.LocalState(draftBody: "local only"))  // never synced: allowed
        #expect(try store.outboxEntries().count == 2)  // nothing discarded

        // The engine syncs: the push succeeds and it records the success.
        let batch = try store.pendingMutations()
        try store.markResults(batch.map { MutationResult(seq: $0.seq, clientMutationId: $0.clientMutationId, status: .applied) })
        try store.recordSyncSuccess()
        #expect(try store.retentionState() == .ok)
        #expect(try store.lastSyncSuccess() == test.clock.now())
        try store.patch(Card.self, id: "card-1", [.description("day 14, synced")])
    }

    @Test("a success while writes are still waiting restarts their clock")
    func successRestartsTheClock() throws {
        let test = try TestStore.engine()
        try test.store.applyServerChanges(EngineSamples.everything)
        try test.store.patch(Card.self, id: "card-1", [.description("a")])
        test.clock.advance(by: 15 * 86_400)
        #expect(try test.store.retentionState() == .readOnly(since: TestStore.start))
        try test.store.recordSyncSuccess()
        #expect(try test.store.retentionState() == .ok)
        test.clock.advance(by: 8 * 86_400)
        #expect(try test.store.retentionState() == .syncNeeded(since: TestStore.start.addingTimeInterval(15 * 86_400)))
    }

    @Test("the thresholds are configurable")
    func custom() throws {
        let test = try TestStore.engine(retention: RetentionPolicy(syncNeededAfter: 60, readOnlyAfter: 120))
        try test.store.applyServerChanges(EngineSamples.everything)
        try test.store.patch(Card.self, id: "card-1", [.description("a")])
        test.clock.advance(by: 120)
        #expect(throws: OfflineStoreError.readOnlyUntilSync(since: TestStore.start)) {
            try test.store.patch(Card.self, id: "card-1", [.description("b")])
        }
    }
}

/// On the engines' own contracts.
@Suite("Signing out", .blockingWork)
struct SignOutTests {
    @Test("refuses while writes are pending, changing nothing")
    func refuses() throws {
        let test = try TestStore.engine()
        try test.store.applyServerChanges(EngineSamples.everything)
        try test.store.patch(Card.self, id: "card-1", [.description("unsynced")])
        #expect(throws: OfflineStoreError.pendingWrites(count: 1)) { try test.store.signOut() }
        #expect(try test.store.fetch(Card.self, id: "card-1")?.description == "unsynced")
        #expect(FileManager.default.fileExists(atPath: test.directory.databaseURL.path))
        // A failed write is unsynced too.
        let batch = try test.store.pendingMutations()
        try test.store.markResults([MutationResult(seq: 1, clientMutationId: batch[0].clientMutationId, status: .rejected)])
        #expect(throws: OfflineStoreError.pendingWrites(count: 1)) { try test.store.signOut() }
    }

    @Test("asset files an older build downloaded beside the database are deleted when the store opens")
    func legacyAssetsFolder() throws {
        let test = try TestStore.engine()
        let legacy = test.directory.databaseURL.deletingLastPathComponent().appendingPathComponent(
            test.directory.databaseURL.deletingPathExtension().lastPathComponent + "-assets", isDirectory: true)
        try FileManager.default.createDirectory(at: legacy, withIntermediateDirectories: true)
        try Data([1, 2, 3]).write(to: legacy.appendingPathComponent("asset-1.mp3"))
        let reopened = try test.reopen()
        #expect(!FileManager.default.fileExists(atPath: legacy.path))
        #expect(try reopened.store.outboxCounts().unsent == 0)
    }

    @Test("forced, it wipes the database files and the files folder; the store is closed")
    func forced() throws {
        let test = try TestStore.engine()
        try test.store.applyServerChanges(EngineSamples.everything)
        try test.store.patch(Card.self, id: "card-1", [.description("unsynced")])
        let slip = try test.store.importFile(Data("%PDF-1.7 slip".utf8), contentType: "application/pdf")
        try test.store.create(
            Attachment(id: "attachment-1", teamId: "team-1", cardId: "card-1", uploadedBy: "u-1", file: slip, createdAt: EngineSamples.t0))
        #expect(FileManager.default.fileExists(atPath: test.store.filesDirectory.path))
        try test.store.signOut(force: true)
        for suffix in ["", "-wal", "-shm"] {
            #expect(!FileManager.default.fileExists(atPath: test.directory.databaseURL.path + suffix))
        }
        #expect(!FileManager.default.fileExists(atPath: test.store.filesDirectory.path))
        #expect(throws: OfflineStoreError.signedOut) { try test.store.all(Label.self) }
        #expect(throws: OfflineStoreError.signedOut) { try test.store.signOut(force: true) }
        // A new store starts empty, with a new client id.
        test.clock.advance(by: 1)
        let fresh = try TestStore.engine(directory: test.directory, clock: test.clock, keys: test.keys)
        #expect(try fresh.store.all(Label.self).isEmpty)
        #expect(fresh.store.identity.clientId != test.store.identity.clientId)
    }

    @Test("with nothing pending it needs no force")
    func clean() throws {
        let test = try TestStore.engine()
        try test.store.applyServerChanges(EngineSamples.everything)
        try test.store.signOut()
        #expect(!FileManager.default.fileExists(atPath: test.directory.databaseURL.path))
    }
}
