import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

@Suite("Push: payload validation, direction, scopes and schema versions", .blockingWork)
struct PushValidationTests {
    /// Pushes one Task create with `payload` and returns its result.
    private func createTask(_ payload: [String: JSONValue], in h: PushHarness) async throws -> MutationResult {
        try #require(try await h.push([h.mutation(1, "Task", .create, "task-1", payload)]).results.first)
    }

    private func problems(_ result: MutationResult) -> [String: JSONValue] {
        guard case .object(let details)? = result.error?.details, case .object(let fields)? = details["fields"] else { return [:] }
        return fields
    }

    @Test(
        "each kind of invalid payload is rejected as invalid_payload, naming the field, and nothing is written",
        arguments: StorageKind.allCases,
        [
            ("type", "title", JSONValue.int(42), "must be text"),
            ("enum", "task_kind", .string("teleport"), "must be one of"),
            ("length", "title", .string(String(repeating: "x", count: 161)), "longer than 160"),
            ("required", "title", .null, "is required"),
            ("unknown field", "colour", .string("red"), "is not a field of Task version \(FieldTask.descriptor.currentVersion)"),
            ("list element", "checklist", .array([.string("a"), .int(2)]), "must be text"),
            ("date", "due_on", .string("2026-02-30"), "must be a date"),
        ]
    )
    func invalidPayload(_ storage: StorageKind, _ example: (kind: String, field: String, value: JSONValue, message: String)) async throws {
        let (kind, field, value, message) = example
        let h = try await PushHarness(storage)
        defer { h.remove() }
        var payload = h.taskPayload("task-1")
        payload[field] = value
        let result = try await createTask(payload, in: h)
        #expect(result.status == .rejected, "\(kind)")
        #expect(result.error?.code == .invalidPayload)
        let fieldProblem = problems(result)[field]
        guard case .string(let text)? = fieldProblem else {
            Issue.record("no problem reported for \(field): \(String(describing: result.error))")
            return
        }
        #expect(text.contains(message), "\(kind): \(text)")
        #expect(try await h.row(FieldTask.descriptor, "task-1") == nil)
    }

    @Test("a missing required field is reported; every problem is listed, not only the first", arguments: StorageKind.allCases)
    func everyProblem(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        let result = try await createTask(["id": .string("task-1"), "team_id": .string("red"), "estimated_minutes": .string("ten")], in: h)
        #expect(result.error?.code == .invalidPayload)
        #expect(Set(problems(result).keys) == ["title", "task_kind", "estimated_minutes"])
    }

    @Test("an id in the payload that differs from the mutation's is refused", arguments: StorageKind.allCases)
    func idMismatch(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        let result = try await createTask(h.taskPayload("task-2"), in: h)
        #expect(result.error?.code == .invalidPayload)
        #expect(problems(result)["id"] != nil)
    }

    @Test("an unknown entity is rejected per mutation as unknown_entity", arguments: StorageKind.allCases)
    func unknownEntity(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        let result = try #require(try await h.push([h.mutation(1, "Spaceship", .create, "s-1", ["id": .string("s-1")])]).results.first)
        #expect(result.status == .rejected)
        #expect(result.error?.code == .unknownEntity)
    }

    @Test("entities travelling down, and server-authoritative ones, are not writable by devices", arguments: StorageKind.allCases)
    func notWritable(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        let unit: [String: JSONValue] = [
            "id": .string("unit-1"), "title": .string("Unit"), "learner_level": .string("beginner"),
            "updated_at": .string("2026-01-01T00:00:00.000Z"),
        ]
        let attempt: [String: JSONValue] = ["id": .string("a-1")]
        let response = try await h.push(
            [h.mutation(1, "Unit", .create, "unit-1", unit), h.mutation(2, "Attempt", .create, "a-1", attempt)], as: PushHarness.admin
        )
        #expect(response.results.map(\.status) == [.rejected, .rejected])
        #expect(response.results.map(\.error?.code) == [.notWritable, .notWritable])
        #expect(try await h.row(Unit.descriptor, "unit-1") == nil)

        // A both-ways contract whose policy is server_authoritative is refused all the same.
        var entity = FieldTask.descriptor
        entity.conflict = .serverAuthoritative
        let refusal = ConflictResolution.requirements(of: entity, operation: .create, mutation: h.mutation(1, "Task", .create, "t"))
        #expect(refusal?.code == .notWritable)
    }

    @Test("a contract with tombstones: false refuses a device's delete, and nothing else for that reason")
    func tombstonesOffRefusesDeletes() throws {
        var entity = ServiceAsset.descriptor
        entity.tombstones = false
        let delete = Mutation(
            seq: 1, clientMutationId: "m-1", entity: "ServiceAsset", op: .delete, id: "sa-1",
            hlc: HybridLogicalClock(milliseconds: 1_000, counter: 0, node: "c-1").description
        )
        let refusal = ConflictResolution.requirements(of: entity, operation: .delete, mutation: delete)
        #expect(refusal?.code == .notWritable)
        #expect(refusal?.message.contains("tombstones: false") == true)
        #expect(ConflictResolution.requirements(of: ServiceAsset.descriptor, operation: .delete, mutation: delete) == nil)
        var update = delete
        update.op = .update
        #expect(ConflictResolution.requirements(of: entity, operation: .update, mutation: update) == nil)
    }

    @Test("events and entities must use their own operations", arguments: StorageKind.allCases)
    func operationsMatchContracts(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        let response = try await h.push([
            h.mutation(1, "Task", .event, "task-1", h.taskPayload("task-1")),
            h.mutation(2, "TaskStarted", .create, "ev-1", ["team_id": .string("red"), "task_id": .string("task-1")]),
        ])
        #expect(response.results.map(\.error?.code) == [.invalidPayload, .invalidPayload])
    }

    @Test("a device writes only the scopes its token grants, and a row never moves scope", arguments: StorageKind.allCases)
    func scopes(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        // Alice is in team red only.
        let blue = try await h.push([h.mutation(1, "Task", .create, "task-b", h.taskPayload("task-b", team: "blue"))])
        #expect(blue.results.first?.error?.code == .notWritable)

        // Bob (red and blue) creates a blue task; Alice cannot touch it.
        try await h.push([h.mutation(1, "Task", .create, "task-b", h.taskPayload("task-b", team: "blue"))], as: PushHarness.bob)
        let edit = try await h.push([h.mutation(2, "Task", .update, "task-b", h.taskPayload("task-b", team: "red"), baseVersion: 1)])
        #expect(edit.results.first?.error?.code == .notWritable)

        // Bob cannot move it to red either.
        let move = try await h.push(
            [h.mutation(2, "Task", .update, "task-b", h.taskPayload("task-b", team: "red"), baseVersion: 1)], as: PushHarness.bob
        )
        #expect(move.results.first?.error?.code == .notWritable)
        #expect(try await h.row(FieldTask.descriptor, "task-b")?.text("_scope_key") == "ops:team:blue")
    }

    @Test("user-scope rows are filed under the caller's user", arguments: StorageKind.allCases)
    func userScope(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "Statement", .create, "st-1", h.statementPayload("st-1"))], as: PushHarness.bob)
        #expect(try await h.row(Statement.descriptor, "st-1")?.text("_scope_key") == "progress:user:bob")
    }

    @Test("rows carry the sync metadata: scope sequence, version, schema version, clock and writer", arguments: StorageKind.allCases)
    func metadata(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        try await h.push([
            h.mutation(1, "Statement", .create, "st-1", h.statementPayload("st-1")),
            h.mutation(2, "Statement", .create, "st-2", h.statementPayload("st-2")),
        ])
        let row = try #require(try await h.row(Statement.descriptor, "st-2"))
        #expect(row.integer("_seq") == 2)
        #expect(row.integer("_version") == 1)
        #expect(row.integer("_schema_version") == 1)
        #expect(row.integer("_deleted") == 0)
        #expect(row.integer("_updated_at") == PushFixedClock().time.millisecondsSince1970)
        #expect(row.text("_updated_by") == "alice-phone")
        #expect(row.text("_tenant_id") == PushHarness.tenant)
    }

    @Test("a value another row holds in a unique index is refused, and the other row survives", arguments: StorageKind.allCases)
    func uniqueIndex(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        let response = try await h.push([
            h.mutation(1, "Incident", .create, "inc-1", h.incidentPayload("inc-1", number: "INC1"), hlc: h.hlc(1000, "a")),
            h.mutation(2, "Incident", .create, "inc-2", h.incidentPayload("inc-2", number: "INC1"), hlc: h.hlc(1001, "a")),
        ])
        #expect(response.results.map(\.status) == [.applied, .rejected])
        #expect(response.results[1].error?.code == .invalidPayload)
        #expect(try await h.row(Incident.descriptor, "inc-1") != nil)
        #expect(try await h.row(Incident.descriptor, "inc-2") == nil)
    }

    @Test(
        "updates in one push: keeping a row's unique value applies, taking one another row holds is refused, taking one freed earlier in the push applies",
        arguments: StorageKind.allCases)
    func uniqueIndexUpdates(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        let created = try await h.push([
            h.mutation(1, "Incident", .create, "inc-1", h.incidentPayload("inc-1", number: "INC1"), hlc: h.hlc(1000, "a")),
            h.mutation(2, "Incident", .create, "inc-2", h.incidentPayload("inc-2", number: "INC2"), hlc: h.hlc(1001, "a")),
        ])
        #expect(created.results.map(\.status) == [.applied, .applied])

        // Whole-row updates (read ahead with their payload's keys) and patches (keys read after
        // their rows): each one is checked against the stored rows and the push's own writes.
        var keepsItsNumber = h.incidentPayload("inc-1", number: "INC1")
        keepsItsNumber["state"] = .string("in_progress")
        let response = try await h.push([
            h.mutation(3, "Incident", .patch, "inc-2", ["number": .string("INC1")], hlc: h.hlc(2000, "a"), base: ["number": .string("INC2")]),
            h.mutation(4, "Incident", .update, "inc-1", keepsItsNumber, hlc: h.hlc(2001, "a")),
            h.mutation(5, "Incident", .patch, "inc-1", ["number": .string("INC3")], hlc: h.hlc(2002, "a"), base: ["number": .string("INC1")]),
            h.mutation(6, "Incident", .patch, "inc-2", ["number": .string("INC1")], hlc: h.hlc(2003, "a"), base: ["number": .string("INC2")]),
        ])
        #expect(response.results.map(\.status) == [.rejected, .applied, .applied, .applied])
        #expect(response.results[0].error?.code == .invalidPayload)
        #expect(try await h.row(Incident.descriptor, "inc-1")?.text("number") == "INC3")
        #expect(try await h.row(Incident.descriptor, "inc-1")?.text("state") == "in_progress")
        #expect(try await h.row(Incident.descriptor, "inc-2")?.text("number") == "INC1")
    }

    // MARK: - Schema versions

    @Test("an old device's field names are mapped to the current ones (Lesson v1 length_seconds → duration_seconds)")
    func renamedField() throws {
        let lesson = PayloadContract(Lesson.descriptor)
        let old: JSONValue = .object([
            "id": .string("l-1"), "unit_id": .string("u-1"), "title": .string("Intro"), "sort_index": .int(0),
            "lesson_kind": .string("audio"), "length_seconds": .int(90),
        ])
        let validated = try PayloadValidator.validate(old, contract: lesson, schemaVersion: 1, mode: .whole, rowID: "l-1")
        #expect(validated.columns["duration_seconds"] == .integer(90))
        #expect(validated.columns["length_seconds"] == nil)
        #expect(validated.columns["body"] == .text("{}"))  // missing field with a default takes it

        // Version 1 does not know the new name; version 2 does not know the old one.
        var wrong = old
        if case .object(var fields) = old {
            fields["duration_seconds"] = .int(90)
            fields["length_seconds"] = nil
            wrong = .object(fields)
        }
        #expect(throws: ErrorDetail.self) { try PayloadValidator.validate(wrong, contract: lesson, schemaVersion: 1, mode: .whole, rowID: "l-1") }
        #expect(throws: ErrorDetail.self) { try PayloadValidator.validate(old, contract: lesson, schemaVersion: 2, mode: .whole, rowID: "l-1") }

        // Unit version 2 called sort_index `position`, and did not know estimated_minutes.
        let unit: JSONValue = .object([
            "id": .string("u-1"), "title": .string("Unit"), "learner_level": .string("beginner"), "position": .int(4),
        ])
        let unitRow = try PayloadValidator.validate(unit, contract: PayloadContract(Unit.descriptor), schemaVersion: 2, mode: .whole, rowID: "u-1")
        #expect(unitRow.columns["sort_index"] == .integer(4))
        #expect(unitRow.columns["estimated_minutes"] == .null)
    }

    @Test("an event from a device on an older version is stored with the fields added since at their defaults", arguments: StorageKind.allCases)
    func oldEventVersion(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        // LessonProgressed version 1 had no offline_minutes.
        let payload: JSONValue = .object([
            "lesson_id": .string("lesson-1"), "unit_id": .string("unit-1"), "session_id": .string("8E1C6F3A-2B7D-4C59-9E11-0A3B5C7D9E21"),
            "progress": .double(0.5), "position_ms": .int(1200), "completed": .bool(false),
        ])
        let hash = PushWriter.sha256(payload)
        var event = Mutation(
            seq: 1, clientMutationId: "cm-1", entity: "LessonProgressed", op: .event, id: "ev-1", payload: payload,
            occurredAt: Timestamp(millisecondsSince1970: 1_767_225_000_000), hash: hash
        )
        let response = try await h.push([event], schema: ["LessonProgressed": 1])
        #expect(response.results.first?.status == .applied)
        let row = try #require(try await h.eventRow(LessonProgressed.descriptor, "ev-1"))
        #expect(row.integer("schema_version") == 1)
        #expect(row["offline_minutes"] == .null)
        #expect(row.text("session_id") == "8e1c6f3a-2b7d-4c59-9e11-0a3b5c7d9e21")

        // A version 1 device sending a field of version 2 is refused.
        guard case .object(var fields) = payload else { return }
        fields["offline_minutes"] = .int(3)
        event = Mutation(
            seq: 2, clientMutationId: "cm-2", entity: "LessonProgressed", op: .event, id: "ev-2", payload: .object(fields),
            occurredAt: Timestamp(millisecondsSince1970: 1_767_225_000_000), hash: PushWriter.sha256(.object(fields))
        )
        let refused = try await h.push([event], schema: ["LessonProgressed": 1])
        #expect(refused.results.first?.error?.code == .invalidPayload)
    }

    @Test(
        "a contract version newer than the server's: that mutation is rejected schema_too_new, nothing dropped silently",
        arguments: StorageKind.allCases)
    func newerDevice(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        var payload = h.taskPayload("task-1")
        payload["priority_colour"] = .string("amber")
        let response = try await h.push(
            [h.mutation(1, "Task", .create, "task-1", payload), h.mutation(2, "Task", .create, "task-2", h.taskPayload("task-2"))],
            schema: ["Task": FieldTask.descriptor.currentVersion + 1]
        )
        #expect(response.results.map(\.status) == [.rejected, .rejected])
        #expect(response.results.first?.error?.code == .schemaTooNew)
        #expect(
            response.results.first?.error?.details
                == .object(["entity": .string("Task"), "current": .int(Int64(FieldTask.descriptor.currentVersion))]))
        let audit = try #require(try await h.auditedChanges().first)
        #expect(audit.detail.contains("schema_too_new"))
    }
}
