import ContractRuntime
import EngineTestContracts
import Foundation
import GRDB
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncClient

/// Someone with the device's database file edits the outbox: no entry is lost without the
/// store noticing, and nothing tampered with is sent. On the engines' own contracts.
@Suite("Outbox seal: status and order", .blockingWork)
struct OutboxSealTests {
    /// A store with three queued writes (seq 1, 2, 3).
    static func queued() throws -> TestStore {
        let test = try TestStore.engine()
        try test.store.applyServerChanges(EngineSamples.everything)
        try test.store.patch(Card.self, id: "card-1", [.description("one")])
        try test.store.patch(Card.self, id: "card-2", [.description("two")])
        try test.store.patch(Board.self, id: "board-paused", [.status(.archived)])
        return test
    }

    @Test("an entry marked done by writing the database is quarantined, not silently dropped")
    func markedDone() throws {
        let test = try Self.queued()
        try test.raw { db in try db.execute(sql: "UPDATE outbox SET status = 'done' WHERE seq = 2") }
        let mutations = try test.store.pendingMutations()
        #expect(mutations.map(\.id) == ["card-1", "board-paused"])
        let quarantined = try test.store.quarantinedEntries()
        #expect(quarantined.map(\.seq) == [2])
        #expect(quarantined.first?.lastError?.code == ErrorCode("outbox_tampered"))
        #expect(try test.store.outboxEntries().count == 3, "nothing dropped")
    }

    @Test("two entries' places swapped are both quarantined")
    func reordered() throws {
        let test = try Self.queued()
        try test.raw { db in
            try db.execute(sql: "UPDATE outbox SET seq = -1 WHERE seq = 1")
            try db.execute(sql: "UPDATE outbox SET seq = 1 WHERE seq = 2")
            try db.execute(sql: "UPDATE outbox SET seq = 2 WHERE seq = -1")
        }
        #expect(try test.store.pendingMutations().map(\.id) == ["board-paused"])
        #expect(try test.store.quarantinedEntries().map(\.seq) == [1, 2])
    }

    @Test("a deleted entry is reported as an integrity problem the app sees")
    func deleted() throws {
        let test = try Self.queued()
        #expect(try test.store.outboxIntegrityProblem() == nil)
        try test.raw { db in try db.execute(sql: "DELETE FROM outbox WHERE seq = 2") }
        _ = try test.store.pendingMutations()
        let problem = try #require(try test.store.outboxIntegrityProblem())
        #expect(problem.contains("1 outbox entry was removed outside the store"))
        // Seen once it is reported; the app clears it after showing it.
        try test.store.acknowledgeOutboxIntegrityProblem()
        #expect(try test.store.outboxIntegrityProblem() == nil)
    }

    @Test("the seal rewritten or removed by hand is reported, and a status change under it still caught")
    func sealRewritten() throws {
        let test = try Self.queued()
        try test.raw { db in
            try db.execute(sql: "UPDATE outbox SET status = 'done' WHERE seq = 1")
            try db.execute(sql: "UPDATE metadata SET value = '2:AAAA:AAAA' WHERE key = 'outbox_seal'")
        }
        _ = try test.store.pendingMutations()
        #expect(try test.store.quarantinedEntries().map(\.seq) == [1])
        #expect(try test.store.outboxIntegrityProblem() != nil)
    }

    @Test("the ordinary lifecycle raises no alarm: write, send, answers, discard, reopen")
    func noFalseAlarm() throws {
        let test = try Self.queued()
        let sent = try test.store.pendingMutations(limit: 2)
        #expect(sent.count == 2)
        try test.store.applyPushResponse(
            PushResponse(
                results: sent.map { MutationResult(seq: $0.seq, clientMutationId: $0.clientMutationId, status: .applied, serverVersion: 2) },
                lastSeq: 2
            )
        )
        try test.store.patch(Card.self, id: "card-1", [.description("again")])
        #expect(try test.store.pendingMutations().count == 2)
        let reopened = try TestStore.engine(directory: test.directory)
        #expect(try reopened.store.quarantinedEntries().isEmpty)
        #expect(try reopened.store.outboxIntegrityProblem() == nil)
        #expect(try reopened.store.verifyOutbox().isEmpty)
    }
}
