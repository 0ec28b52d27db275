import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

/// The outbox lifecycle, on the engines' own contracts: Card (version_check), Board (field_merge),
/// Note (last_writer_wins) and the CardCommented event.
@Suite("The outbox lifecycle a push loop drives", .blockingWork)
struct OutboxLifecycleTests {
    let test: TestStore
    var store: OfflineStore { test.store }

    init() throws {
        test = try TestStore.engine()
        try test.store.applyServerChanges(EngineSamples.everything)
    }

    private func result(
        _ mutation: Mutation, _ status: MutationStatus, version: Int64? = nil, row: JSONValue? = nil,
        resolution: String? = nil, error: ErrorDetail? = nil
    ) -> MutationResult {
        MutationResult(
            seq: mutation.seq, clientMutationId: mutation.clientMutationId, status: status, serverVersion: version,
            serverRow: row, resolution: resolution, error: error)
    }

    @Test("a push request carries the client id, this build's schema and the mutations, oldest first")
    func pushRequest() throws {
        #expect(try store.nextPushRequest() == nil)
        try store.patch(Card.self, id: "card-1", [.description("a")])
        try store.patch(Board.self, id: "board-paused", [.status(.archived)])
        let request = try #require(try store.nextPushRequest(limit: 10))
        #expect(request.clientId == store.identity.clientId)
        #expect(request.schema["Label"] == CURRENT_LABEL_SCHEMA)
        #expect(request.schema["NoteViewed"] == CURRENT_NOTE_VIEWED_SCHEMA)
        #expect(request.mutations.map(\.seq) == [1, 2])
        #expect(try store.outboxEntries().map(\.status) == [.sending, .sending])
        #expect(try store.outboxEntries().map(\.attempts) == [1, 1])
    }

    @Test("applied → done, with the server version; the next version_check write waits for it and is rebased")
    func appliedAndRebased() throws {
        try store.patch(Card.self, id: "card-1", [.lane(.doing)])
        try store.patch(Card.self, id: "card-1", [.lane(.review)])
        try store.patch(Card.self, id: "card-2", [.description("x")])
        // Two version_check writes of one row never travel together: the second needs the first's answer.
        let first = try store.pendingMutations()
        #expect(first.map(\.id) == ["card-1"])
        #expect(first[0].baseVersion == 7)
        let report = try store.markResults([result(first[0], .applied, version: 8)])
        #expect(report.done == 1)
        #expect(try store.syncInfo(Card.self, id: "card-1")?.serverVersion == 8)
        let second = try store.pendingMutations()
        #expect(second.map(\.id) == ["card-1", "card-2"])
        #expect(second[0].baseVersion == 8)  // rebased on the version the first write made
        #expect(second[0].seq == 2)
        try store.applyPushResponse(PushResponse(results: second.map { result($0, .applied, version: 9) }, lastSeq: 3))
        #expect(try store.outboxCounts()[.done] == 3)
        #expect(try store.scopeKey(contract: "Card", id: "card-1") == "workspace:team:team-1")
        #expect(try store.syncStates().map(\.scopeKey) == ["workspace:team:team-1"])
        #expect(try store.syncStates().first?.lastPushAt == TestStore.start)
        #expect(try store.outboxCounts().unsent == 0)
        #expect(try store.pendingMutations().isEmpty)
    }

    @Test("network failure → waiting until next_attempt_at, order kept")
    func deferred() throws {
        try store.patch(Card.self, id: "card-1", [.description("a")])
        let batch = try store.pendingMutations()
        let error = ErrorDetail(code: ErrorCode("network"), message: "offline")
        try store.deferMutations(batch.map(\.clientMutationId), until: TestStore.start.addingTimeInterval(30), error: error)
        try store.patch(Card.self, id: "card-2", [.description("b")])
        let entry = try #require(try store.outboxEntry(seq: 1))
        #expect(entry.status == .waiting)
        #expect(entry.nextAttemptAt == TestStore.start.addingTimeInterval(30))
        #expect(entry.lastError == error)
        #expect(try store.pendingMutations().isEmpty)  // the oldest is not due: nothing overtakes it
        test.clock.advance(by: 30)
        let retried = try store.pendingMutations()
        #expect(retried.map(\.seq) == [1, 2])
        #expect(retried[0].clientMutationId == batch[0].clientMutationId)  // the same idempotency key
        #expect(try store.outboxEntry(seq: 1)?.attempts == 2)
    }

    @Test("rejected → failed: visible, retryable as a new entry, or discardable with the local change undone")
    func rejected() throws {
        try store.patch(Card.self, id: "card-1", [.description("too long for the server")])
        try store.patch(Card.self, id: "card-2", [.description("kept")])
        let batch = try store.pendingMutations()
        let refusal = ErrorDetail(code: .invalidPayload, message: "description refused")
        let report = try store.markResults([result(batch[0], .rejected, error: refusal), result(batch[1], .applied, version: 4)])
        #expect(report.failed == 1)
        let failed = try #require(try store.outboxEntry(seq: 1))
        #expect(failed.status == .failed)
        #expect(failed.lastError == refusal)
        #expect(try store.outboxCounts().needingAttention == 1)

        let retry = try store.retryFailed(seq: 1)
        #expect(retry.seq == 3)
        #expect(retry.clientMutationId != failed.clientMutationId)
        #expect(try store.outboxEntry(seq: 1) == nil)
        let resent = try store.pendingMutations()
        #expect(resent.map(\.clientMutationId) == [retry.clientMutationId])
        #expect(resent[0].payload == .object(["id": .string("card-1"), "description": .string("too long for the server")]))
        try store.markResults([result(resent[0], .rejected, error: refusal)])

        try store.discardFailed(seq: 3)
        #expect(try store.fetch(Card.self, id: "card-1")?.description == nil)  // undone
        #expect(try store.fetch(Card.self, id: "card-2")?.description == "kept")
        #expect(try store.outboxCounts().needingAttention == 0)
        #expect(throws: OfflineStoreError.invalidOutboxState(seq: 2, status: "done", expected: ["failed"])) {
            try store.retryFailed(seq: 2)
        }
    }

    @Test("a failed create is discarded with its row")
    func discardCreate() throws {
        let note = EngineSamples.note("note-9")
        try store.create(note)
        let batch = try store.pendingMutations()
        try store.markResults([result(batch[0], .rejected, error: ErrorDetail(code: .forbidden, message: "not your team"))])
        try store.discardFailed(seq: 1)
        #expect(try store.fetch(Note.self, id: "note-9") == nil)
    }

    @Test("version_check conflict → both rows kept; keep mine resubmits on the server's version")
    func conflictKeepMine() throws {
        try store.patch(Card.self, id: "card-1", [.lane(.doing)])
        let batch = try store.pendingMutations()
        var theirs = EngineSamples.cards[1]
        theirs.revision = 9
        theirs.assigneeId = "u-9"
        let report = try store.markResults([result(batch[0], .conflicted, version: 9, row: EngineSamples.wire(theirs))])
        #expect(report.conflicted == 1)
        #expect(try store.outboxEntry(seq: 1)?.status == .conflicted)
        let conflict = try #require(try store.conflicts().first)
        #expect(conflict.entity == "Card")
        #expect(conflict.rowId == "card-1")
        #expect(try conflict.server(as: Card.self) == theirs)
        #expect(try conflict.local(as: Card.self)?.lane == .doing)
        #expect(conflict.serverVersion == 9)
        #expect(try store.fetch(Card.self, id: "card-1")?.lane == .doing)  // mine stays visible

        let queued = try #require(try store.resolveConflict(conflict.id, with: .keepMine))
        #expect(try store.conflicts().isEmpty)
        #expect(try store.conflicts(includeResolved: true).first?.resolution == .keepMine)
        #expect(try store.outboxEntry(seq: 1)?.status == .done)
        let resent = try store.pendingMutations()
        #expect(resent.map(\.clientMutationId) == [queued.clientMutationId])
        #expect(resent[0].op == .update)
        #expect(resent[0].baseVersion == 9)
    }

    @Test("take theirs replaces the local row; a merge writes and resubmits the merged row")
    func conflictTakeTheirsAndMerge() throws {
        try store.patch(Card.self, id: "card-1", [.lane(.doing)])
        try store.patch(Card.self, id: "card-2", [.lane(.done)])
        var batch = try store.pendingMutations()
        var theirs1 = EngineSamples.cards[1]
        theirs1.revision = 8
        theirs1.description = "server note"
        var theirs2 = EngineSamples.cards[0]
        theirs2.revision = 4
        theirs2.title = "Draft the plan now"
        try store.markResults([
            result(batch[0], .conflicted, version: 8, row: EngineSamples.wire(theirs1)),
            result(batch[1], .conflicted, version: 4, row: EngineSamples.wire(theirs2)),
        ])
        let conflicts = try store.conflicts()
        #expect(conflicts.count == 2)
        #expect(try store.resolveConflict(conflicts[0].id, with: .takeTheirs) == nil)
        #expect(try store.fetch(Card.self, id: "card-1") == theirs1)
        #expect(try store.syncInfo(Card.self, id: "card-1")?.serverVersion == 8)

        var merged = theirs2
        merged.lane = .done
        #expect(throws: OfflineStoreError.self) { try store.resolveConflict(conflicts[1].id, merged: theirs1) }
        try store.resolveConflict(conflicts[1].id, merged: merged)
        #expect(try store.fetch(Card.self, id: "card-2") == merged)
        batch = try store.pendingMutations()
        #expect(batch.count == 1)
        #expect(batch[0].baseVersion == 4)
        #expect(batch[0].payload == EngineSamples.wire(merged))
        #expect(throws: OfflineStoreError.conflictNotFound(id: conflicts[0].id)) {
            try store.resolveConflict(conflicts[0].id, with: .keepMine)
        }
    }

    @Test("a last-writer-wins loss is settled at once: the server's row stands, the conflict is on record")
    func lastWriterWinsLoss() throws {
        try store.patch(Note.self, id: "note-1", [.body("Mine")])
        let batch = try store.pendingMutations()
        var theirs = EngineSamples.notes[0]
        theirs.body = "Theirs"
        let report = try store.markResults([result(batch[0], .conflicted, version: 5, row: EngineSamples.wire(theirs), resolution: "lost")])
        #expect(report.settledByServer == 1)
        #expect(try store.fetch(Note.self, id: "note-1")?.body == "Theirs")
        #expect(try store.conflicts().isEmpty)
        #expect(try store.conflicts(includeResolved: true).first?.resolution == .takeTheirs)
        #expect(try store.outboxEntry(seq: 1)?.status == .done)
    }

    @Test("a merged answer replaces the local row with the merge")
    func mergedAnswer() throws {
        try store.patch(Board.self, id: "board-paused", [.status(.archived)])
        let batch = try store.pendingMutations()
        var merged = EngineSamples.boards[0]
        merged.status = .archived
        merged.ownerId = "u-7"  // another device's edit of another field
        try store.markResults([result(batch[0], .applied, version: 3, row: EngineSamples.wire(merged), resolution: "merged")])
        #expect(try store.fetch(Board.self, id: "board-paused") == merged)
    }

    @Test("a pulled row keeps the device's unsynced edits on top")
    func rebaseOnPull() throws {
        try store.patch(Board.self, id: "board-paused", [.status(.archived)])
        var server = EngineSamples.boards[0]
        server.ownerId = "u-7"
        server.status = .active
        let report = try store.applyServerChanges(
            ServerChanges(upserts: ["Board": [EngineSamples.wire(server)]], scopeKey: "workspace:team:team-1", cursor: "c-1"))
        #expect(report.rebased["Board"] == 1)
        let local = try #require(try store.fetch(Board.self, id: "board-paused"))
        #expect(local.status == .archived)  // mine
        #expect(local.ownerId == "u-7")  // theirs
        #expect(try store.cursor(forScope: "workspace:team:team-1") == "c-1")
    }

    @Test("after a sequence gap, unsent entries are numbered again from the server's last seq")
    func sequenceGap() throws {
        try store.patch(Card.self, id: "card-1", [.description("a")])
        try store.patch(Card.self, id: "card-2", [.description("b")])
        #expect(try store.pendingMutations().map(\.seq) == [1, 2])
        // Suppose entry 1 turns out tampered after it was sent, and the server never got it.
        try test.raw { db in try db.execute(sql: "UPDATE outbox SET hlc = 'x' WHERE seq = 1") }
        #expect(try store.pendingMutations().map(\.seq) == [2])  // a gap: the server answers sequence_gap, last_seq 0
        try store.resetPushSequence(serverLastSeq: 0)
        #expect(try store.pendingMutations().map(\.seq) == [1])
        #expect(try store.pendingMutations().map(\.id) == ["card-2"])
    }

    @Test("events are marked synced when applied")
    func eventDone() throws {
        let envelope = try store.record(
            CardCommented(teamId: "team-1", cardId: "card-1", body: "Looks good", reactions: [.like], sketch: Data([1, 2, 3])))
        let batch = try store.pendingMutations()
        #expect(batch[0].payload.flatMap { if case .object(let o) = $0 { return o["sketch"] } else { return nil } } == .string("AQID"))
        try store.markResults([result(batch[0], .applied)])
        #expect(try store.events(CardCommented.self).first?.eventId == envelope.eventId)
        #expect(try store.outboxCounts()[.done] == 1)
        #expect(try store.pruneCompletedOutbox(before: TestStore.start.addingTimeInterval(1)) == 1)
        #expect(try store.outboxEntries().isEmpty)
    }
}
