import ContractRuntime
import EngineTestContracts
import Foundation
import GRDB
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

/// Writes into the outbox, on the engines' own contracts: one entity per conflict policy.
@Suite("Writes into the outbox", .blockingWork)
struct WriteTests {
    let test: TestStore
    var store: OfflineStore { test.store }

    init() throws {
        test = try TestStore.engine()
        try test.store.applyServerChanges(EngineSamples.everything)
    }

    @Test("create (last_writer_wins): the row at once, the whole row queued with a clock")
    func createLastWriterWins() throws {
        let note = EngineSamples.note("note-3", body: "Bring the slides")
        let queued = try store.create(note)
        #expect(queued.seq == 1)
        #expect(queued.op == .create)
        #expect(ULID(queued.clientMutationId) != nil)
        #expect(try store.fetch(Note.self, id: "note-3") == note)
        let mutation = try #require(try store.onlyPendingMutation())
        #expect(mutation.seq == 1)
        #expect(mutation.entity == "Note")
        #expect(mutation.op == .create)
        #expect(mutation.id == "note-3")
        #expect(mutation.payload == EngineSamples.wire(note))
        let clock = try #require(mutation.hlc.flatMap(HybridLogicalClock.init))
        #expect(clock.milliseconds == EngineSamples.t0.millisecondsSince1970)
        #expect(clock.node == store.identity.clientId)
        #expect(mutation.baseVersion == nil)
        #expect(mutation.base == nil)
        #expect(throws: OfflineStoreError.rowAlreadyExists(contract: "Note", id: "note-3")) { try store.create(note) }
    }

    @Test("update (version_check): the whole row with the base version it was read at")
    func updateVersionCheck() throws {
        var card = try #require(try store.fetch(Card.self, id: "card-1"))
        #expect(try store.syncInfo(Card.self, id: "card-1")?.serverVersion == 7)
        card.description = "Bring the projector"
        card.lane = .doing
        let queued = try #require(try store.update(card))
        #expect(queued.op == .update)
        #expect(try store.fetch(Card.self, id: "card-1") == card)
        let mutation = try #require(try store.onlyPendingMutation())
        #expect(mutation.op == .update)
        #expect(mutation.baseVersion == 7)
        #expect(mutation.hlc == nil)
        #expect(mutation.payload == EngineSamples.wire(card))
        #expect(mutation.base == nil)  // base values travel with patches only
        // Nothing changed: nothing queued.
        #expect(try store.update(card) == nil)
    }

    @Test("patch (field_merge): only the changed fields, their base values and a clock")
    func patchFieldMerge() throws {
        let queued = try #require(try store.patch(Board.self, id: "board-paused", [.status(.active), .ownerId("u-2"), .color(.green)]))
        #expect(queued.op == .patch)
        let board = try #require(try store.fetch(Board.self, id: "board-paused"))
        #expect(board.status == .active)
        #expect(board.color == .green)
        let mutation = try #require(try store.onlyPendingMutation())
        #expect(mutation.op == .patch)
        // owner_id did not change: left out.
        #expect(mutation.payload == .object(["id": .string("board-paused"), "status": .string("active"), "color": .string("green")]))
        #expect(mutation.base == ["status": .string("paused"), "color": .null])
        #expect(mutation.hlc != nil)
    }

    @Test("update (field_merge) travels as a patch of the changed fields")
    func updateFieldMerge() throws {
        var board = try #require(try store.fetch(Board.self, id: "board-launch"))
        board.description = "Everything for the launch"
        board.name = "Launch day"
        try store.update(board)
        let mutation = try #require(try store.onlyPendingMutation())
        #expect(mutation.op == .patch)
        #expect(
            mutation.payload
                == .object([
                    "id": .string("board-launch"), "description": .string("Everything for the launch"), "name": .string("Launch day"),
                ]))
        #expect(mutation.base == ["description": .null, "name": .string("Launch")])
    }

    @Test("the server version pulled with a row is the base of the next write")
    func pulledServerVersion() throws {
        var row = try #require({ if case .object(let o) = EngineSamples.wire(EngineSamples.boards[0]) { return o } else { return nil } }())
        row["_server_version"] = .int(41)
        try store.applyServerChanges(ServerChanges(upserts: ["Board": [.object(row)]]))
        #expect(try store.syncInfo(Board.self, id: "board-paused")?.serverVersion == 41)
        #expect(try store.fetch(Board.self, id: "board-paused") == EngineSamples.boards[0])
        try store.patch(Board.self, id: "board-paused", [.status(.archived)])
        #expect(try store.onlyPendingMutation()?.baseVersion == 41)
    }

    @Test("patch (version_check): base version and base values, no clock")
    func patchVersionCheck() throws {
        try store.patch(Card.self, id: "card-2", [.lane(.doing)])
        let mutation = try #require(try store.onlyPendingMutation())
        #expect(mutation.baseVersion == 3)
        #expect(mutation.hlc == nil)
        #expect(mutation.base == ["lane": .string("todo")])
    }

    @Test("delete: the row goes, the policy data is queued")
    func delete() throws {
        try store.delete(Card.self, id: "card-2")
        try store.delete(Note.self, id: "note-1")
        #expect(try store.fetch(Card.self, id: "card-2") == nil)
        let mutations = try store.pendingMutations()
        #expect(mutations.map(\.op) == [.delete, .delete])
        #expect(mutations[0].baseVersion == 3)
        #expect(mutations[0].payload == nil)
        #expect(mutations[1].hlc != nil)
        #expect(throws: OfflineStoreError.rowNotFound(contract: "Card", id: "card-2")) { try store.delete(Card.self, id: "card-2") }
    }

    @Test("append_only: created, never changed; activities keep their encrypted detail sealed")
    func appendOnly() throws {
        let id = UUID(uuidString: "6f1c2a8e-4b5d-4e7f-9a0b-1c2d3e4f5a6b")!
        let activity = ActivityRecord(
            id: id, verb: .edited, subjectId: "card-1", detail: .object(["seconds": .int(9)]), happenedAt: EngineSamples.t0,
            happenedOn: CalendarDate(year: 2026, month: 1, day: 31)
        )
        try store.create(activity)
        #expect(try store.fetch(ActivityRecord.self, id: id.uuidString.lowercased()) == activity)
        #expect(throws: OfflineStoreError.notWritable(contract: "Activity", reason: "it is append-only: rows are created, never changed or deleted"))
        {
            try store.patch(ActivityRecord.self, id: id.uuidString.lowercased(), [.durationMs(1)])
        }
        let mutation = try #require(try store.onlyPendingMutation())
        #expect(mutation.hlc == nil)
        #expect(mutation.baseVersion == nil)
    }

    @Test("events: a row in the event table and an outbox entry with the envelope's id, time and hash")
    func event() throws {
        test.clock.advance(by: 60)
        let envelope = try store.record(
            CardMoved(teamId: "team-1", cardId: "card-2", boardId: "board-launch", fromLane: .todo, toLane: .doing, baseRevision: 3))
        #expect(ULID(envelope.eventId) != nil)
        #expect(envelope.userId == "u-1")
        #expect(envelope.deviceId == "device-1")
        #expect(envelope.occurredAt == Timestamp(millisecondsSince1970: EngineSamples.t0.millisecondsSince1970 + 60_000))
        #expect(try envelope.hasValidHash())
        #expect(try store.events(CardMoved.self) == [envelope])
        let mutation = try #require(try store.onlyPendingMutation())
        #expect(mutation.op == .event)
        #expect(mutation.entity == "CardMoved")
        #expect(mutation.id == envelope.eventId)
        #expect(mutation.hash == envelope.hash)
        #expect(mutation.occurredAt == envelope.occurredAt)
        #expect(mutation.payload == EngineSamples.wire(envelope.payload))
    }

    @Test("down and server-authoritative contracts are not writable")
    func notWritable() throws {
        #expect(throws: OfflineStoreError.notWritable(contract: "Label", reason: "it travels from the server to devices only (direction down)")) {
            try store.patch(Label.self, id: "label-1", [.name("Mine")])
        }
        #expect(throws: OfflineStoreError.self) { try store.delete(Profile.self, id: "u-1") }
        #expect(try store.outboxEntries().isEmpty)
    }

    @Test("values are validated against the contract before anything is written")
    func validation() throws {
        #expect(throws: OfflineStoreError.invalidValue(contract: "Board", field: "name", reason: "is longer than 120 characters")) {
            try store.patch(Board.self, id: "board-paused", [.name(String(repeating: "x", count: 121))])
        }
        var board = EngineSamples.board("board-new")
        board.laneNames = Array(repeating: "t", count: 3)
        board.description = String(repeating: "9", count: 4001)
        #expect(throws: OfflineStoreError.invalidValue(contract: "Board", field: "description", reason: "is longer than 4000 characters")) {
            try store.create(board)
        }
        #expect(try store.fetch(Board.self, id: "board-new") == nil)
        #expect(try store.fetch(Board.self, id: "board-paused")?.name == "Board board-paused")
        #expect(try store.outboxEntries().isEmpty)
    }

    @Test("atomicity: a write that fails in SQLite leaves neither the row nor an outbox entry, nor a used seq")
    func atomicity() throws {
        // SQLite refuses the insert after validation passed (a trigger stands in for any failure
        // of the database: a full disk, a constraint).
        try test.raw { db in
            try db.execute(
                sql: "CREATE TRIGGER refuse_dup BEFORE INSERT ON boards WHEN NEW.id = 'board-dup' BEGIN SELECT RAISE(ABORT, 'refused'); END")
        }
        let duplicate = EngineSamples.board("board-dup")
        #expect(throws: OfflineStoreError.self) { try store.create(duplicate) }
        #expect(try store.fetch(Board.self, id: "board-dup") == nil)
        #expect(try store.outboxEntries().isEmpty)
        let next = try store.create(EngineSamples.board("board-ok"))
        #expect(next.seq == 1)
    }

    @Test("seq and the hybrid logical clock move forward and survive a restart")
    func sequenceAndClock() throws {
        try store.patch(Note.self, id: "note-1", [.readingMinutes(0.5)])
        try store.patch(Note.self, id: "note-1", [.readingMinutes(0.4)])  // same millisecond
        let reopened = try test.reopen()
        test.clock.advance(by: -3600)  // the wall clock steps back
        try reopened.store.patch(Note.self, id: "note-1", [.readingMinutes(0.3)])
        let mutations = try reopened.store.pendingMutations()
        #expect(mutations.map(\.seq) == [1, 2, 3])
        let clocks = mutations.compactMap { $0.hlc.flatMap(HybridLogicalClock.init) }
        #expect(clocks.count == 3)
        #expect(clocks == clocks.sorted())
        #expect(Set(clocks).count == 3)
        #expect(clocks.map(\.counter) == [0, 1, 2])
        #expect(Set(mutations.map(\.clientMutationId)).count == 3)
    }
}

@Suite("ULIDs", .blockingWork)
struct ULIDTests {
    @Test("26 Crockford characters, time first, parsed back")
    func format() throws {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_769_846_400.123))
        let generator = ULIDGenerator(clock: clock, random: SeededRandomSource(seed: 7))
        let ulid = generator.next()
        #expect(ulid.description.count == 26)
        #expect(ulid.milliseconds == 1_769_846_400_123)
        #expect(ULID(ulid.description) == ulid)
        #expect(ULID(ulid.description.lowercased()) == ulid)
        #expect(ULID("8ZZZZZZZZZZZZZZZZZZZZZZZZZ") == nil)  // more than 128 bits
        #expect(ULID("01ARZ3NDEKTSV4RRFFQ69G5FAU") == nil)  // U is not in the alphabet
        #expect(ULID("7ZZZZZZZZZZZZZZZZZZZZZZZZZ") == ULID(high: .max, low: .max))
        #expect(ULID("00000000000000000000000000") == ULID(high: 0, low: 0))
    }

    @Test("strictly increasing within a millisecond and when the clock steps back; deterministic with a seed")
    func monotonic() {
        let clock = ManualClock()
        let generator = ULIDGenerator(clock: clock, random: SeededRandomSource(seed: 1))
        var previous = generator.next()
        for step in 0..<1000 {
            if step % 100 == 0 { clock.advance(by: -1) }
            let next = generator.next()
            #expect(next > previous)
            #expect(next.description > previous.description)
            previous = next
        }
        let a = ULIDGenerator(clock: ManualClock(), random: SeededRandomSource(seed: 5))
        let b = ULIDGenerator(clock: ManualClock(), random: SeededRandomSource(seed: 5))
        #expect(a.next() == b.next())
    }
}
