import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

@Suite("The outbox lifecycle a push loop drives", .blockingWork)
struct OutboxLifecycleTests {
    let test: TestStore
    var store: OfflineStore { test.store }

    init() throws {
        test = try TestStore()
        try test.store.applyServerChanges(Samples.everything)
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
        try store.patch(FieldTask.self, id: "task-1", [.notes("a")])
        try store.patch(Incident.self, id: "inc-low", [.state(.onHold)])
        let request = try #require(try store.nextPushRequest(limit: 10))
        #expect(request.clientId == store.identity.clientId)
        #expect(request.schema["Unit"] == CURRENT_UNIT_SCHEMA)
        #expect(request.schema["TaskStarted"] == CURRENT_TASK_STARTED_SCHEMA)
        #expect(request.mutations.map(\.seq) == [1, 2])
        #expect(try store.outboxEntries().map(\.status) == [.sending, .sending])
        #expect(try store.outboxEntries().map(\.attempts) == [1, 1])
    }

    @Test("applied → done, with the server version; the next version_check write waits for it and is rebased")
    func appliedAndRebased() throws {
        try store.patch(FieldTask.self, id: "task-1", [.status(.enRoute)])
        try store.patch(FieldTask.self, id: "task-1", [.status(.inProgress)])
        try store.patch(FieldTask.self, id: "task-2", [.notes("x")])
        // Two version_check writes of one row never travel together: the second needs the first's answer.
        let first = try store.pendingMutations()
        #expect(first.map(\.id) == ["task-1"])
        #expect(first[0].baseVersion == 7)
        let report = try store.markResults([result(first[0], .applied, version: 8)])
        #expect(report.done == 1)
        #expect(try store.syncInfo(FieldTask.self, id: "task-1")?.serverVersion == 8)
        let second = try store.pendingMutations()
        #expect(second.map(\.id) == ["task-1", "task-2"])
        #expect(second[0].baseVersion == 8)  // rebased on the version the first write made
        #expect(second[0].seq == 2)
        try store.applyPushResponse(PushResponse(results: second.map { result($0, .applied, version: 9) }, lastSeq: 3))
        #expect(try store.outboxCounts()[.done] == 3)
        #expect(try store.scopeKey(contract: "Task", id: "task-1") == "ops:team:team-1")
        #expect(try store.syncStates().map(\.scopeKey) == ["ops:team:team-1"])
        #expect(try store.syncStates().first?.lastPushAt == TestStore.start)
        #expect(try store.outboxCounts().unsent == 0)
        #expect(try store.pendingMutations().isEmpty)
    }

    @Test("network failure → waiting until next_attempt_at, order kept")
    func deferred() throws {
        try store.patch(FieldTask.self, id: "task-1", [.notes("a")])
        let batch = try store.pendingMutations()
        let error = ErrorDetail(code: ErrorCode("network"), message: "offline")
        try store.deferMutations(batch.map(\.clientMutationId), until: TestStore.start.addingTimeInterval(30), error: error)
        try store.patch(FieldTask.self, id: "task-2", [.notes("b")])
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
        try store.patch(FieldTask.self, id: "task-1", [.notes("too long for the server")])
        try store.patch(FieldTask.self, id: "task-2", [.notes("kept")])
        let batch = try store.pendingMutations()
        let refusal = ErrorDetail(code: .invalidPayload, message: "notes refused")
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
        #expect(resent[0].payload == .object(["id": .string("task-1"), "notes": .string("too long for the server")]))
        try store.markResults([result(resent[0], .rejected, error: refusal)])

        try store.discardFailed(seq: 3)
        #expect(try store.fetch(FieldTask.self, id: "task-1")?.notes == nil)  // undone
        #expect(try store.fetch(FieldTask.self, id: "task-2")?.notes == "kept")
        #expect(try store.outboxCounts().needingAttention == 0)
        #expect(throws: OfflineStoreError.invalidOutboxState(seq: 2, status: "done", expected: ["failed"])) {
            try store.retryFailed(seq: 2)
        }
    }

    @Test("a failed create is discarded with its row")
    func discardCreate() throws {
        let asset = ServiceAsset(id: "sa-9", teamId: "team-1", assetTag: "X-9", displayName: "X", category: .tool, updatedAt: Samples.t0)
        try store.create(asset)
        let batch = try store.pendingMutations()
        try store.markResults([result(batch[0], .rejected, error: ErrorDetail(code: .forbidden, message: "not your team"))])
        try store.discardFailed(seq: 1)
        #expect(try store.fetch(ServiceAsset.self, id: "sa-9") == nil)
    }

    @Test("version_check conflict → both rows kept; keep mine resubmits on the server's version")
    func conflictKeepMine() throws {
        try store.patch(FieldTask.self, id: "task-1", [.status(.enRoute)])
        let batch = try store.pendingMutations()
        var theirs = Samples.tasks[1]
        theirs.revision = 9
        theirs.assigneeId = "u-9"
        let report = try store.markResults([result(batch[0], .conflicted, version: 9, row: Samples.wire(theirs))])
        #expect(report.conflicted == 1)
        #expect(try store.outboxEntry(seq: 1)?.status == .conflicted)
        let conflict = try #require(try store.conflicts().first)
        #expect(conflict.entity == "Task")
        #expect(conflict.rowId == "task-1")
        #expect(try conflict.server(as: FieldTask.self) == theirs)
        #expect(try conflict.local(as: FieldTask.self)?.status == .enRoute)
        #expect(conflict.serverVersion == 9)
        #expect(try store.fetch(FieldTask.self, id: "task-1")?.status == .enRoute)  // mine stays visible

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
        try store.patch(FieldTask.self, id: "task-1", [.status(.enRoute)])
        try store.patch(FieldTask.self, id: "task-2", [.status(.blocked)])
        var batch = try store.pendingMutations()
        var theirs1 = Samples.tasks[1]
        theirs1.revision = 8
        theirs1.notes = "server note"
        var theirs2 = Samples.tasks[0]
        theirs2.revision = 4
        theirs2.title = "Swap battery now"
        try store.markResults([
            result(batch[0], .conflicted, version: 8, row: Samples.wire(theirs1)),
            result(batch[1], .conflicted, version: 4, row: Samples.wire(theirs2)),
        ])
        let conflicts = try store.conflicts()
        #expect(conflicts.count == 2)
        #expect(try store.resolveConflict(conflicts[0].id, with: .takeTheirs) == nil)
        #expect(try store.fetch(FieldTask.self, id: "task-1") == theirs1)
        #expect(try store.syncInfo(FieldTask.self, id: "task-1")?.serverVersion == 8)

        var merged = theirs2
        merged.status = .blocked
        #expect(throws: OfflineStoreError.self) { try store.resolveConflict(conflicts[1].id, merged: theirs1) }
        try store.resolveConflict(conflicts[1].id, merged: merged)
        #expect(try store.fetch(FieldTask.self, id: "task-2") == merged)
        batch = try store.pendingMutations()
        #expect(batch.count == 1)
        #expect(batch[0].baseVersion == 4)
        #expect(batch[0].payload == Samples.wire(merged))
        #expect(throws: OfflineStoreError.conflictNotFound(id: conflicts[0].id)) {
            try store.resolveConflict(conflicts[0].id, with: .keepMine)
        }
    }

    @Test("a last-writer-wins loss is settled at once: the server's row stands, the conflict is on record")
    func lastWriterWinsLoss() throws {
        try store.patch(ServiceAsset.self, id: "sa-1", [.displayName("Mine")])
        let batch = try store.pendingMutations()
        var theirs = Samples.serviceAsset
        theirs.displayName = "Theirs"
        let report = try store.markResults([result(batch[0], .conflicted, version: 5, row: Samples.wire(theirs), resolution: "lost")])
        #expect(report.settledByServer == 1)
        #expect(try store.fetch(ServiceAsset.self, id: "sa-1")?.displayName == "Theirs")
        #expect(try store.conflicts().isEmpty)
        #expect(try store.conflicts(includeResolved: true).first?.resolution == .takeTheirs)
        #expect(try store.outboxEntry(seq: 1)?.status == .done)
    }

    @Test("a merged answer replaces the local row with the merge")
    func mergedAnswer() throws {
        try store.patch(Incident.self, id: "inc-low", [.state(.onHold)])
        let batch = try store.pendingMutations()
        var merged = Samples.incidents[0]
        merged.state = .onHold
        merged.assigneeId = "u-7"  // another device's edit of another field
        try store.markResults([result(batch[0], .applied, version: 3, row: Samples.wire(merged), resolution: "merged")])
        #expect(try store.fetch(Incident.self, id: "inc-low") == merged)
    }

    @Test("a pulled row keeps the device's unsynced edits on top")
    func rebaseOnPull() throws {
        try store.patch(Incident.self, id: "inc-low", [.state(.onHold)])
        var server = Samples.incidents[0]
        server.assigneeId = "u-7"
        server.state = .closed
        let report = try store.applyServerChanges(
            ServerChanges(upserts: ["Incident": [Samples.wire(server)]], scopeKey: "ops:team:team-1", cursor: "c-1"))
        #expect(report.rebased["Incident"] == 1)
        let local = try #require(try store.fetch(Incident.self, id: "inc-low"))
        #expect(local.state == .onHold)  // mine
        #expect(local.assigneeId == "u-7")  // theirs
        #expect(try store.cursor(forScope: "ops:team:team-1") == "c-1")
    }

    @Test("after a sequence gap, unsent entries are numbered again from the server's last seq")
    func sequenceGap() throws {
        try store.patch(FieldTask.self, id: "task-1", [.notes("a")])
        try store.patch(FieldTask.self, id: "task-2", [.notes("b")])
        #expect(try store.pendingMutations().map(\.seq) == [1, 2])
        // Suppose entry 1 turns out tampered after it was sent, and the server never got it.
        try test.raw { db in try db.execute(sql: "UPDATE outbox SET hlc = 'x' WHERE seq = 1") }
        #expect(try store.pendingMutations().map(\.seq) == [2])  // a gap: the server answers sequence_gap, last_seq 0
        try store.resetPushSequence(serverLastSeq: 0)
        #expect(try store.pendingMutations().map(\.seq) == [1])
        #expect(try store.pendingMutations().map(\.id) == ["task-2"])
    }

    @Test("events are marked synced when applied")
    func eventDone() throws {
        let envelope = try store.record(
            IssueLogged(
                teamId: "team-1", serviceAssetId: "sa-1", category: .damage,
                description: "Cracked", photo: Data([1, 2, 3]), observedOn: CalendarDate(year: 2026, month: 1, day: 30)))
        let batch = try store.pendingMutations()
        #expect(batch[0].payload.flatMap { if case .object(let o) = $0 { return o["photo"] } else { return nil } } == .string("AQID"))
        try store.markResults([result(batch[0], .applied)])
        #expect(try store.events(IssueLogged.self).first?.eventId == envelope.eventId)
        #expect(try store.outboxCounts()[.done] == 1)
        #expect(try store.pruneCompletedOutbox(before: TestStore.start.addingTimeInterval(1)) == 1)
        #expect(try store.outboxEntries().isEmpty)
    }
}
