import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// Payload validation on the engines' own contracts: `Card` (version_check, team scope, version 2),
/// `Activity` (user scope), `Label` and `Profile` (down, server_authoritative; `Label` at version 3
/// renamed `position`), `Note` (last_writer_wins) and the events `CardMoved` and `NoteViewed` (version 2).
/// Unique indexes are in PushUniqueIndexTests.
@Suite("Push: payload validation, direction, scopes and schema versions", .blockingWork)
struct PushValidationTests {
    /// Pushes one Card create with `payload` and returns its result.
    private func createCard(_ payload: [String: JSONValue], in h: PushHarness) async throws -> MutationResult {
        try #require(try await h.push([h.mutation(1, "Card", .create, "card-1", payload)]).results.first)
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
            ("enum", "lane", .string("teleport"), "must be one of"),
            ("length", "title", .string(String(repeating: "x", count: 201)), "longer than 200"),
            ("required", "title", .null, "is required"),
            ("unknown field", "colour", .string("red"), "is not a field of Card version \(Card.descriptor.currentVersion)"),
            ("list element", "checklist", .array([.string("a"), .int(2)]), "must be text"),
            ("date", "due_on", .string("2026-02-30"), "must be a date"),
        ]
    )
    func invalidPayload(_ storage: StorageKind, _ example: (kind: String, field: String, value: JSONValue, message: String)) async throws {
        let (kind, field, value, message) = example
        let h = try await PushHarness.engine(storage)
        defer { h.remove() }
        var payload = h.cardPayload("card-1")
        payload[field] = value
        let result = try await createCard(payload, in: h)
        #expect(result.status == .rejected, "\(kind)")
        #expect(result.error?.code == .invalidPayload)
        let fieldProblem = problems(result)[field]
        guard case .string(let text)? = fieldProblem else {
            Issue.record("no problem reported for \(field): \(String(describing: result.error))")
            return
        }
        #expect(text.contains(message), "\(kind): \(text)")
        #expect(try await h.row(Card.descriptor, "card-1") == nil)
    }

    @Test("a missing required field is reported; every problem is listed, not only the first", arguments: StorageKind.allCases)
    func everyProblem(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        let result = try await createCard(["id": .string("card-1"), "team_id": .string("red"), "estimate_hours": .string("ten")], in: h)
        #expect(result.error?.code == .invalidPayload)
        #expect(Set(problems(result).keys) == ["title", "board_id", "estimate_hours"])
    }

    @Test("an id in the payload that differs from the mutation's is refused", arguments: StorageKind.allCases)
    func idMismatch(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        let result = try await createCard(h.cardPayload("card-2"), in: h)
        #expect(result.error?.code == .invalidPayload)
        #expect(problems(result)["id"] != nil)
    }

    @Test("an unknown entity is rejected per mutation as unknown_entity", arguments: StorageKind.allCases)
    func unknownEntity(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        let result = try #require(try await h.push([h.mutation(1, "Spaceship", .create, "s-1", ["id": .string("s-1")])]).results.first)
        #expect(result.status == .rejected)
        #expect(result.error?.code == .unknownEntity)
    }

    @Test("entities travelling down, and server-authoritative ones, are not writable by devices", arguments: StorageKind.allCases)
    func notWritable(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        let label: [String: JSONValue] = [
            "id": .string("label-1"), "name": .string("Urgent"), "color": .string("red"), "updated_at": .string("2026-01-01T00:00:00.000Z"),
        ]
        let profile: [String: JSONValue] = ["id": .string("admin")]
        let response = try await h.push(
            [h.mutation(1, "Label", .create, "label-1", label), h.mutation(2, "Profile", .create, "admin", profile)], as: PushHarness.admin
        )
        #expect(response.results.map(\.status) == [.rejected, .rejected])
        #expect(response.results.map(\.error?.code) == [.notWritable, .notWritable])
        #expect(try await h.row(Label.descriptor, "label-1") == nil)

        // A both-ways contract whose policy is server_authoritative is refused all the same.
        var entity = Card.descriptor
        entity.conflict = .serverAuthoritative
        let refusal = ConflictResolution.requirements(of: entity, operation: .create, mutation: h.mutation(1, "Card", .create, "c"))
        #expect(refusal?.code == .notWritable)
    }

    @Test("a contract with tombstones: false refuses a device's delete, and nothing else for that reason")
    func tombstonesOffRefusesDeletes() throws {
        var entity = Note.descriptor
        entity.tombstones = false
        let delete = Mutation(
            seq: 1, clientMutationId: "m-1", entity: "Note", op: .delete, id: "note-1",
            hlc: HybridLogicalClock(milliseconds: 1_000, counter: 0, node: "c-1").description
        )
        let refusal = ConflictResolution.requirements(of: entity, operation: .delete, mutation: delete)
        #expect(refusal?.code == .notWritable)
        #expect(refusal?.message.contains("tombstones: false") == true)
        #expect(ConflictResolution.requirements(of: Note.descriptor, operation: .delete, mutation: delete) == nil)
        var update = delete
        update.op = .update
        #expect(ConflictResolution.requirements(of: entity, operation: .update, mutation: update) == nil)
    }

    @Test("events and entities must use their own operations", arguments: StorageKind.allCases)
    func operationsMatchContracts(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        let response = try await h.push([
            h.mutation(1, "Card", .event, "card-1", h.cardPayload("card-1")),
            h.mutation(2, "CardMoved", .create, "ev-1", ["team_id": .string("red"), "card_id": .string("card-1")]),
        ])
        #expect(response.results.map(\.error?.code) == [.invalidPayload, .invalidPayload])
    }

    @Test("a device writes only the scopes its token grants, and a row never moves scope", arguments: StorageKind.allCases)
    func scopes(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        // Alice is in team red only.
        let blue = try await h.push([h.mutation(1, "Card", .create, "card-b", h.cardPayload("card-b", team: "blue"))])
        #expect(blue.results.first?.error?.code == .notWritable)

        // Bob (red and blue) creates a blue card; Alice cannot touch it.
        try await h.push([h.mutation(1, "Card", .create, "card-b", h.cardPayload("card-b", team: "blue"))], as: PushHarness.bob)
        let edit = try await h.push([h.mutation(2, "Card", .update, "card-b", h.cardPayload("card-b", team: "red"), baseVersion: 1)])
        #expect(edit.results.first?.error?.code == .notWritable)

        // Bob cannot move it to red either.
        let move = try await h.push(
            [h.mutation(2, "Card", .update, "card-b", h.cardPayload("card-b", team: "red"), baseVersion: 1)], as: PushHarness.bob
        )
        #expect(move.results.first?.error?.code == .notWritable)
        #expect(try await h.row(Card.descriptor, "card-b")?.text("_scope_key") == "workspace:team:blue")
    }

    @Test("user-scope rows are filed under the caller's user", arguments: StorageKind.allCases)
    func userScope(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "Activity", .create, h.activityID(1), h.activityPayload(h.activityID(1)))], as: PushHarness.bob)
        #expect(try await h.row(ActivityRecord.descriptor, h.activityID(1))?.text("_scope_key") == "workspace:user:bob")
    }

    @Test("rows carry the sync metadata: scope sequence, version, schema version, clock and writer", arguments: StorageKind.allCases)
    func metadata(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        try await h.push([
            h.mutation(1, "Activity", .create, h.activityID(1), h.activityPayload(h.activityID(1))),
            h.mutation(2, "Activity", .create, h.activityID(2), h.activityPayload(h.activityID(2))),
        ])
        let row = try #require(try await h.row(ActivityRecord.descriptor, h.activityID(2)))
        #expect(row.integer("_seq") == 2)
        #expect(row.integer("_version") == 1)
        #expect(row.integer("_schema_version") == 1)
        #expect(row.integer("_deleted") == 0)
        #expect(row.integer("_updated_at") == PushFixedClock().time.millisecondsSince1970)
        #expect(row.text("_updated_by") == "alice-phone")
        #expect(row.text("_tenant_id") == PushHarness.tenant)
    }

    // MARK: - Schema versions

    @Test("an old device's field names are mapped to the current ones (Label v2 position → sort_index), and fields added since read empty")
    func renamedField() throws {
        let label = PayloadContract(Label.descriptor)
        let old: JSONValue = .object(["id": .string("label-1"), "name": .string("Urgent"), "position": .int(4)])
        let validated = try PayloadValidator.validate(old, contract: label, schemaVersion: 2, mode: .whole, rowID: "label-1")
        #expect(validated.columns["sort_index"] == .integer(4))
        #expect(validated.columns["position"] == nil)
        #expect(validated.columns["color"] == .text("gray"))  // missing field with a default takes it
        #expect(validated.columns["icon"] == .null)  // version 2 did not know icon

        // Version 2 does not know the new name; version 3 does not know the old one.
        var wrong = old
        if case .object(var fields) = old {
            fields["sort_index"] = .int(4)
            fields["position"] = nil
            wrong = .object(fields)
        }
        #expect(throws: ErrorDetail.self) { try PayloadValidator.validate(wrong, contract: label, schemaVersion: 2, mode: .whole, rowID: "label-1") }
        #expect(throws: ErrorDetail.self) { try PayloadValidator.validate(old, contract: label, schemaVersion: 3, mode: .whole, rowID: "label-1") }
    }

    @Test("an event from a device on an older version is stored with the fields added since at their defaults", arguments: StorageKind.allCases)
    func oldEventVersion(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        // NoteViewed version 1 had no scroll_depth.
        let payload: JSONValue = .object([
            "note_id": .string("note-1"), "session_id": .string("8E1C6F3A-2B7D-4C59-9E11-0A3B5C7D9E21"), "viewed_on": .string("2026-01-01"),
            "duration_ms": .int(1200), "completed": .bool(false),
        ])
        let hash = PushWriter.sha256(payload)
        var event = Mutation(
            seq: 1, clientMutationId: "cm-1", entity: "NoteViewed", op: .event, id: "ev-1", payload: payload,
            occurredAt: Timestamp(millisecondsSince1970: 1_767_225_000_000), hash: hash
        )
        let response = try await h.push([event], schema: ["NoteViewed": 1])
        #expect(response.results.first?.status == .applied)
        let row = try #require(try await h.eventRow(NoteViewed.descriptor, "ev-1"))
        #expect(row.integer("schema_version") == 1)
        #expect(row["scroll_depth"] == .null)
        #expect(row.text("session_id") == "8e1c6f3a-2b7d-4c59-9e11-0a3b5c7d9e21")

        // A version 1 device sending a field of version 2 is refused.
        guard case .object(var fields) = payload else { return }
        fields["scroll_depth"] = .double(0.75)
        event = Mutation(
            seq: 2, clientMutationId: "cm-2", entity: "NoteViewed", op: .event, id: "ev-2", payload: .object(fields),
            occurredAt: Timestamp(millisecondsSince1970: 1_767_225_000_000), hash: PushWriter.sha256(.object(fields))
        )
        let refused = try await h.push([event], schema: ["NoteViewed": 1])
        #expect(refused.results.first?.error?.code == .invalidPayload)
    }

    @Test(
        "a contract version newer than the server's: that mutation is rejected schema_too_new, nothing dropped silently",
        arguments: StorageKind.allCases)
    func newerDevice(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        var payload = h.cardPayload("card-1")
        payload["priority_colour"] = .string("amber")
        let response = try await h.push(
            [h.mutation(1, "Card", .create, "card-1", payload), h.mutation(2, "Card", .create, "card-2", h.cardPayload("card-2"))],
            schema: ["Card": Card.descriptor.currentVersion + 1]
        )
        #expect(response.results.map(\.status) == [.rejected, .rejected])
        #expect(response.results.first?.error?.code == .schemaTooNew)
        #expect(
            response.results.first?.error?.details
                == .object(["entity": .string("Card"), "current": .int(Int64(Card.descriptor.currentVersion))]))
        let audit = try #require(try await h.auditedChanges().first)
        #expect(audit.detail.contains("schema_too_new"))
    }
}
