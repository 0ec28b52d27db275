import ContractRuntime
import Contracts
import Foundation
import GRDB
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

@Suite("Writes into the outbox", .blockingWork)
struct WriteTests {
    let test: TestStore
    var store: OfflineStore { test.store }

    init() throws {
        test = try TestStore()
        try test.store.applyServerChanges(Samples.everything)
    }

    @Test("create (last_writer_wins): the row at once, the whole row queued with a clock")
    func createLastWriterWins() throws {
        let asset = ServiceAsset(
            id: "sa-2", teamId: "team-1", assetTag: "SCOOT-2", displayName: "Scooter 2", category: .vehicle, updatedAt: Samples.t0)
        let queued = try store.create(asset)
        #expect(queued.seq == 1)
        #expect(queued.op == .create)
        #expect(ULID(queued.clientMutationId) != nil)
        #expect(try store.fetch(ServiceAsset.self, id: "sa-2") == asset)
        let mutation = try #require(try store.onlyPendingMutation())
        #expect(mutation.seq == 1)
        #expect(mutation.entity == "ServiceAsset")
        #expect(mutation.op == .create)
        #expect(mutation.id == "sa-2")
        #expect(mutation.payload == Samples.wire(asset))
        let clock = try #require(mutation.hlc.flatMap(HybridLogicalClock.init))
        #expect(clock.milliseconds == Samples.t0.millisecondsSince1970)
        #expect(clock.node == store.identity.clientId)
        #expect(mutation.baseVersion == nil)
        #expect(mutation.base == nil)
        #expect(throws: OfflineStoreError.rowAlreadyExists(contract: "ServiceAsset", id: "sa-2")) { try store.create(asset) }
    }

    @Test("update (version_check): the whole row with the base version it was read at")
    func updateVersionCheck() throws {
        var task = try #require(try store.fetch(FieldTask.self, id: "task-1"))
        #expect(try store.syncInfo(FieldTask.self, id: "task-1")?.serverVersion == 7)
        task.notes = "gate code 1234"
        task.status = .enRoute
        let queued = try #require(try store.update(task))
        #expect(queued.op == .update)
        #expect(try store.fetch(FieldTask.self, id: "task-1") == task)
        let mutation = try #require(try store.onlyPendingMutation())
        #expect(mutation.op == .update)
        #expect(mutation.baseVersion == 7)
        #expect(mutation.hlc == nil)
        #expect(mutation.payload == Samples.wire(task))
        #expect(mutation.base == nil)  // base values travel with patches only
        // Nothing changed: nothing queued.
        #expect(try store.update(task) == nil)
    }

    @Test("patch (field_merge): only the changed fields, their base values and a clock")
    func patchFieldMerge() throws {
        let queued = try #require(try store.patch(Incident.self, id: "inc-low", [.state(.inProgress), .priority(.low), .assigneeId("u-1")]))
        #expect(queued.op == .patch)
        let incident = try #require(try store.fetch(Incident.self, id: "inc-low"))
        #expect(incident.state == .inProgress)
        #expect(incident.assigneeId == "u-1")
        let mutation = try #require(try store.onlyPendingMutation())
        #expect(mutation.op == .patch)
        // priority did not change: left out.
        #expect(mutation.payload == .object(["id": .string("inc-low"), "state": .string("in_progress"), "assignee_id": .string("u-1")]))
        #expect(mutation.base == ["state": .string("new"), "assignee_id": .null])
        #expect(mutation.hlc != nil)
    }

    @Test("update (field_merge) travels as a patch of the changed fields")
    func updateFieldMerge() throws {
        var incident = try #require(try store.fetch(Incident.self, id: "inc-crit"))
        incident.description = "Water on the floor"
        incident.reporterNotes = "new secret"
        try store.update(incident)
        let mutation = try #require(try store.onlyPendingMutation())
        #expect(mutation.op == .patch)
        #expect(
            mutation.payload
                == .object([
                    "id": .string("inc-crit"), "description": .string("Water on the floor"), "reporter_notes": .string("new secret"),
                ]))
        #expect(mutation.base == ["description": .null, "reporter_notes": .string("secret notes of inc-crit")])
    }

    @Test("the server version pulled with a row is the base of the next write")
    func pulledServerVersion() throws {
        var row = try #require({ if case .object(let o) = Samples.wire(Samples.incidents[0]) { return o } else { return nil } }())
        row["_server_version"] = .int(41)
        try store.applyServerChanges(ServerChanges(upserts: ["Incident": [.object(row)]]))
        #expect(try store.syncInfo(Incident.self, id: "inc-low")?.serverVersion == 41)
        #expect(try store.fetch(Incident.self, id: "inc-low") == Samples.incidents[0])
        try store.patch(Incident.self, id: "inc-low", [.state(.onHold)])
        #expect(try store.onlyPendingMutation()?.baseVersion == 41)
    }

    @Test("patch (version_check): base version and base values, no clock")
    func patchVersionCheck() throws {
        try store.patch(FieldTask.self, id: "task-2", [.status(.inProgress)])
        let mutation = try #require(try store.onlyPendingMutation())
        #expect(mutation.baseVersion == 3)
        #expect(mutation.hlc == nil)
        #expect(mutation.base == ["status": .string("assigned")])
    }

    @Test("delete: the row goes, the policy data is queued")
    func delete() throws {
        try store.delete(FieldTask.self, id: "task-2")
        try store.delete(ServiceAsset.self, id: "sa-1")
        #expect(try store.fetch(FieldTask.self, id: "task-2") == nil)
        let mutations = try store.pendingMutations()
        #expect(mutations.map(\.op) == [.delete, .delete])
        #expect(mutations[0].baseVersion == 3)
        #expect(mutations[0].payload == nil)
        #expect(mutations[1].hlc != nil)
        #expect(throws: OfflineStoreError.rowNotFound(contract: "Task", id: "task-2")) { try store.delete(FieldTask.self, id: "task-2") }
    }

    @Test("append_only: created, never changed; statements keep their encrypted result sealed")
    func appendOnly() throws {
        let statement = Statement(id: "st-1", verb: .completed, objectId: "lesson-a", result: .object(["score": .int(9)]), statedAt: Samples.t0)
        try store.create(statement)
        #expect(try store.fetch(Statement.self, id: "st-1") == statement)
        #expect(throws: OfflineStoreError.notWritable(contract: "Statement", reason: "it is append-only: rows are created, never changed or deleted"))
        {
            try store.patch(Statement.self, id: "st-1", [.score(1)])
        }
        let mutation = try #require(try store.onlyPendingMutation())
        #expect(mutation.hlc == nil)
        #expect(mutation.baseVersion == nil)
    }

    @Test("events: a row in the event table and an outbox entry with the envelope's id, time and hash")
    func event() throws {
        test.clock.advance(by: 60)
        let envelope = try store.record(TaskStarted(teamId: "team-1", taskId: "task-2", latitude: 52.5))
        #expect(ULID(envelope.eventId) != nil)
        #expect(envelope.userId == "u-1")
        #expect(envelope.deviceId == "device-1")
        #expect(envelope.occurredAt == Timestamp(millisecondsSince1970: Samples.t0.millisecondsSince1970 + 60_000))
        #expect(try envelope.hasValidHash())
        #expect(try store.events(TaskStarted.self) == [envelope])
        let mutation = try #require(try store.onlyPendingMutation())
        #expect(mutation.op == .event)
        #expect(mutation.entity == "TaskStarted")
        #expect(mutation.id == envelope.eventId)
        #expect(mutation.hash == envelope.hash)
        #expect(mutation.occurredAt == envelope.occurredAt)
        #expect(mutation.payload == Samples.wire(envelope.payload))
    }

    @Test("down and server-authoritative contracts are not writable")
    func notWritable() throws {
        #expect(throws: OfflineStoreError.notWritable(contract: "Unit", reason: "it travels from the server to devices only (direction down)")) {
            try store.patch(Unit.self, id: "unit-1", [.title("Mine")])
        }
        #expect(throws: OfflineStoreError.self) { try store.delete(Attempt.self, id: "att-1") }
        #expect(try store.outboxEntries().isEmpty)
    }

    @Test("values are validated against the contract before anything is written")
    func validation() throws {
        #expect(throws: OfflineStoreError.invalidValue(contract: "Incident", field: "short_description", reason: "is longer than 160 characters")) {
            try store.patch(Incident.self, id: "inc-low", [.shortDescription(String(repeating: "x", count: 161))])
        }
        var incident = Samples.incident("inc-new", priority: .high, openedAt: 1)
        incident.tags = Array(repeating: "t", count: 3)
        incident.number = String(repeating: "9", count: 41)
        #expect(throws: OfflineStoreError.invalidValue(contract: "Incident", field: "number", reason: "is longer than 40 characters")) {
            try store.create(incident)
        }
        #expect(try store.fetch(Incident.self, id: "inc-new") == nil)
        #expect(try store.fetch(Incident.self, id: "inc-low")?.shortDescription == "Pump inc-low")
        #expect(try store.outboxEntries().isEmpty)
    }

    @Test("atomicity: a write that fails in SQLite leaves neither the row nor an outbox entry, nor a used seq")
    func atomicity() throws {
        // SQLite refuses the insert after validation passed (a trigger stands in for any failure
        // of the database: a full disk, a constraint).
        try test.raw { db in
            try db.execute(
                sql: "CREATE TRIGGER refuse_dup BEFORE INSERT ON incidents WHEN NEW.id = 'inc-dup' BEGIN SELECT RAISE(ABORT, 'refused'); END")
        }
        let duplicate = Samples.incident("inc-dup", priority: .high, openedAt: 1, number: "INC-dup")
        #expect(throws: OfflineStoreError.self) { try store.create(duplicate) }
        #expect(try store.fetch(Incident.self, id: "inc-dup") == nil)
        #expect(try store.outboxEntries().isEmpty)
        let next = try store.create(Samples.incident("inc-ok", priority: .high, openedAt: 1))
        #expect(next.seq == 1)
    }

    @Test("seq and the hybrid logical clock move forward and survive a restart")
    func sequenceAndClock() throws {
        try store.patch(ServiceAsset.self, id: "sa-1", [.batteryLevel(0.5)])
        try store.patch(ServiceAsset.self, id: "sa-1", [.batteryLevel(0.4)])  // same millisecond
        let reopened = try test.reopen()
        test.clock.advance(by: -3600)  // the wall clock steps back
        try reopened.store.patch(ServiceAsset.self, id: "sa-1", [.batteryLevel(0.3)])
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
