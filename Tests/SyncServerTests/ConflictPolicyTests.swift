import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// Two devices pushing conflicting edits end with the outcome each policy promises, on the
/// engines' own contracts: one entity per policy.
@Suite("Conflict policies", .blockingWork)
struct ConflictPolicyTests {
    // MARK: append_only

    @Test("append_only: the same id again is a duplicate, never a conflict; changes are refused", arguments: StorageKind.allCases)
    func appendOnly(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        let id = "6f1c2a8e-4b5d-4e7f-9a0b-1c2d3e4f5a6b"
        let phone = try await h.push([h.mutation(1, "Activity", .create, id, h.activityPayload(id, verb: "viewed"))])
        // Alice's tablet sends the same activity id, even with other content.
        let tablet = try await h.push(
            [
                h.mutation(1, "Activity", .create, id, h.activityPayload(id, verb: "edited")),
                h.mutation(2, "Activity", .update, id, h.activityPayload(id, verb: "edited")),
                h.mutation(3, "Activity", .delete, id),
            ], as: PushHarness.aliceTablet
        )
        #expect(phone.results.first?.status == .applied)
        #expect(tablet.results.map(\.status) == [.duplicate, .rejected, .rejected])
        #expect(tablet.results[1].error?.code == .notWritable)
        let row = try #require(try await h.row(ActivityRecord.descriptor, id))
        #expect(row.text("verb") == "viewed")
        #expect(row.integer("_version") == 1)
    }

    // MARK: last_writer_wins

    @Test(
        "last_writer_wins: the later clock wins whichever arrives first; the loser is told with the row that stands", arguments: StorageKind.allCases)
    func lastWriterWins(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "Note", .create, "note-7", h.notePayload("note-7"), hlc: h.hlc(1000, "alice"))])

        // Bob's edit is later (2000) but reaches the server first; Alice's earlier edit (1500) loses.
        let bob = try await h.push(
            [
                h.mutation(
                    1, "Note", .update, "note-7", h.notePayload("note-7", body: "Call the venue (bob)"), baseVersion: 1, hlc: h.hlc(2000, "bob"))
            ],
            as: PushHarness.bob
        )
        let alice = try await h.push([
            h.mutation(
                2, "Note", .update, "note-7", h.notePayload("note-7", body: "Call the venue (alice)"), baseVersion: 1, hlc: h.hlc(1500, "alice"))
        ])
        #expect(bob.results.first?.status == .applied)
        #expect(bob.results.first?.resolution == nil)
        let lost = try #require(alice.results.first)
        #expect(lost.status == .conflicted)
        #expect(lost.resolution == "lost")
        #expect(lost.serverVersion == 2)
        guard case .object(let row)? = lost.serverRow else { Issue.record("no server row"); return }
        #expect(row["body"] == .string("Call the venue (bob)"))

        // A later edit based on an old version wins and says so.
        let late = try await h.push([
            h.mutation(3, "Note", .patch, "note-7", ["body": .string("Call the venue (late)")], baseVersion: 1, hlc: h.hlc(3000, "alice"))
        ])
        #expect(late.results.first?.status == .applied)
        #expect(late.results.first?.resolution == "won")
        let stored = try #require(try await h.row(Note.descriptor, "note-7"))
        #expect(stored.text("body") == "Call the venue (late)")
        #expect(stored.text("author_id") == "alice")  // a patch keeps the other fields
        #expect(stored.text("_hlc") == h.hlc(3000, "alice"))
    }

    @Test(
        "last_writer_wins: same millisecond and counter, the node id breaks the tie; the same clock twice is a duplicate",
        arguments: StorageKind.allCases)
    func lastWriterWinsTieBreak(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "Note", .create, "note-7", h.notePayload("note-7"), hlc: h.hlc(1000, "alice"))])
        let bob = try await h.push(
            [h.mutation(1, "Note", .update, "note-7", h.notePayload("note-7", body: "B"), hlc: h.hlc(2000, "bob"))], as: PushHarness.bob
        )
        let alice = try await h.push([h.mutation(2, "Note", .update, "note-7", h.notePayload("note-7", body: "A"), hlc: h.hlc(2000, "alice"))])
        #expect(bob.results.first?.status == .applied)
        #expect(alice.results.first?.resolution == "lost")  // "alice" < "bob"
        let again = try await h.push(
            [h.mutation(2, "Note", .update, "note-7", h.notePayload("note-7", body: "B"), hlc: h.hlc(2000, "bob"))], as: PushHarness.bob
        )
        #expect(again.results.first?.status == .duplicate)
        #expect(try await h.row(Note.descriptor, "note-7")?.text("body") == "B")
    }

    @Test("last_writer_wins needs hlc", arguments: StorageKind.allCases)
    func lastWriterWinsNeedsClock(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        let response = try await h.push([
            h.mutation(1, "Note", .create, "note-7", h.notePayload("note-7")),
            h.mutation(2, "Note", .create, "note-8", h.notePayload("note-8"), hlc: "yesterday"),
        ])
        #expect(response.results.map(\.error?.code) == [.missingPolicyData, .invalidPayload])
    }

    @Test("last_writer_wins: a delete is a tombstone, and a later write brings the row back", arguments: StorageKind.allCases)
    func lastWriterWinsDelete(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        try await h.push([
            h.mutation(1, "Note", .create, "note-7", h.notePayload("note-7"), hlc: h.hlc(1000, "alice")),
            h.mutation(2, "Note", .delete, "note-7", hlc: h.hlc(2000, "alice")),
        ])
        let deleted = try #require(try await h.row(Note.descriptor, "note-7"))
        #expect(deleted.integer("_deleted") == 1)
        let earlier = try await h.push(
            [h.mutation(1, "Note", .update, "note-7", h.notePayload("note-7", body: "old"), hlc: h.hlc(1500, "bob"))], as: PushHarness.bob
        )
        #expect(earlier.results.first?.resolution == "lost")
        #expect(earlier.results.first?.serverRow == nil)
        let later = try await h.push(
            [h.mutation(2, "Note", .update, "note-7", h.notePayload("note-7", body: "back"), hlc: h.hlc(2500, "bob"))], as: PushHarness.bob
        )
        #expect(later.results.first?.status == .applied)
        let back = try #require(try await h.row(Note.descriptor, "note-7"))
        #expect(back.integer("_deleted") == 0)
        #expect(back.text("body") == "back")
    }

    // MARK: version_check

    @Test(
        "version_check: of two edits on the same base the second is conflicted with the server row; resubmitting on it applies",
        arguments: StorageKind.allCases)
    func versionCheck(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "Card", .create, "card-1", h.cardPayload("card-1"))])
        let bob = try await h.push(
            [h.mutation(1, "Card", .update, "card-1", h.cardPayload("card-1", title: "Bob's title"), baseVersion: 1)], as: PushHarness.bob
        )
        let alice = try await h.push([h.mutation(2, "Card", .patch, "card-1", ["description": .string("Book the room first")], baseVersion: 1)])
        #expect(bob.results.first?.status == .applied)
        #expect(bob.results.first?.serverVersion == 2)
        let conflict = try #require(alice.results.first)
        #expect(conflict.status == .conflicted)
        #expect(conflict.serverVersion == 2)
        guard case .object(let row)? = conflict.serverRow else { Issue.record("no server row"); return }
        #expect(row["title"] == .string("Bob's title"))
        #expect(row["revision"] == .int(2))
        #expect(row["description"] == .null)

        // Alice merges and submits again on the server's version.
        let resubmit = try await h.push([h.mutation(3, "Card", .patch, "card-1", ["description": .string("Book the room first")], baseVersion: 2)])
        #expect(resubmit.results.first?.status == .applied)
        let stored = try #require(try await h.row(Card.descriptor, "card-1"))
        #expect(stored.text("title") == "Bob's title")
        #expect(stored.text("description") == "Book the room first")
        #expect(stored.integer("revision") == 3)
    }

    @Test(
        "version_check: base_version is required; a create of an existing id is conflicted; an edit of a row the server lacks is a deletion",
        arguments: StorageKind.allCases)
    func versionCheckRequirements(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        let response = try await h.push([
            h.mutation(1, "Card", .create, "card-1", h.cardPayload("card-1")),
            h.mutation(2, "Card", .update, "card-1", h.cardPayload("card-1")),
            h.mutation(3, "Card", .create, "card-1", h.cardPayload("card-1")),
            h.mutation(4, "Card", .update, "card-9", h.cardPayload("card-9"), baseVersion: 1),
            h.mutation(5, "Card", .delete, "card-9", baseVersion: 1),
        ])
        // A row the server does not have was deleted (its tombstone maybe compacted): an update
        // is a `deleted` conflict, a delete a duplicate.
        #expect(response.results.map(\.status) == [.applied, .rejected, .conflicted, .conflicted, .duplicate])
        #expect(response.results.map(\.error?.code) == [nil, .missingPolicyData, nil, nil, nil])
        #expect(response.results[3].resolution == "deleted")
        #expect(response.results[3].serverRow == nil)
    }

    @Test("version_check: a delete writes a tombstone with a new scope sequence; later edits see it deleted", arguments: StorageKind.allCases)
    func tombstones(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "Card", .create, "card-1", h.cardPayload("card-1"))])
        let before = try #require(try await h.row(Card.descriptor, "card-1"))
        let response = try await h.push([h.mutation(2, "Card", .delete, "card-1", baseVersion: 1)])
        #expect(response.results.first?.status == .applied)
        #expect(response.results.first?.serverVersion == 2)
        let tombstone = try #require(try await h.row(Card.descriptor, "card-1"))
        #expect(tombstone.integer("_deleted") == 1)
        #expect(try #require(tombstone.integer("_seq")) > before.integer("_seq")!)
        #expect(tombstone.text("title") == "Draft the plan")  // the row keeps its last values

        let later = try await h.push(
            [
                h.mutation(1, "Card", .update, "card-1", h.cardPayload("card-1"), baseVersion: 1),
                h.mutation(2, "Card", .delete, "card-1", baseVersion: 1),
            ], as: PushHarness.bob
        )
        #expect(later.results.map(\.status) == [.conflicted, .duplicate])
        #expect(later.results.first?.resolution == "deleted")
        #expect(later.results.first?.serverRow == nil)
    }

    // MARK: field_merge

    @Test("field_merge: edits to different fields merge", arguments: StorageKind.allCases)
    func fieldMergeDifferentFields(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "Board", .create, "board-1", h.boardPayload("board-1"), hlc: h.hlc(1000, "alice"))])
        let bob = try await h.push(
            [
                h.mutation(
                    1, "Board", .patch, "board-1", ["color": .string("red")], hlc: h.hlc(2000, "bob"), base: ["color": .null]
                )
            ], as: PushHarness.bob
        )
        let alice = try await h.push([
            h.mutation(2, "Board", .patch, "board-1", ["status": .string("paused")], hlc: h.hlc(1500, "alice"), base: ["status": .string("active")])
        ])
        #expect(bob.results.first?.status == .applied)
        #expect(alice.results.first?.status == .applied)
        #expect(alice.results.first?.resolution == nil)
        let row = try #require(try await h.row(Board.descriptor, "board-1"))
        #expect(row.text("color") == "red")
        #expect(row.text("status") == "paused")
        #expect(row.integer("_version") == 3)
        let clocks = ConflictResolution.fieldClocks(row)
        #expect(clocks["color"] == h.hlc(2000, "bob"))
        #expect(clocks["status"] == h.hlc(1500, "alice"))
    }

    @Test("field_merge: the same field falls back to last writer wins; a partly kept edit is merged and audited", arguments: StorageKind.allCases)
    func fieldMergeSameField(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "Board", .create, "board-1", h.boardPayload("board-1"), hlc: h.hlc(1000, "alice"))])
        // Bob (later clock) sets the status first.
        try await h.push(
            [h.mutation(1, "Board", .patch, "board-1", ["status": .string("paused")], hlc: h.hlc(3000, "bob"), base: ["status": .string("active")])],
            as: PushHarness.bob
        )
        // Alice edited the status (earlier clock: loses) and the description (untouched on the server: applies).
        let alice = try await h.push([
            h.mutation(
                2, "Board", .patch, "board-1", ["status": .string("archived"), "description": .string("Moved to the new office")],
                hlc: h.hlc(2000, "alice"),
                base: ["status": .string("active"), "description": .null]
            )
        ])
        let merged = try #require(alice.results.first)
        #expect(merged.status == .applied)
        #expect(merged.resolution == "merged")
        guard case .object(let serverRow)? = merged.serverRow else { Issue.record("no merged row"); return }
        #expect(serverRow["status"] == .string("paused"))
        #expect(serverRow["description"] == .string("Moved to the new office"))

        // An edit whose every field loses is conflicted, and changes nothing.
        let lost = try await h.push([
            h.mutation(3, "Board", .patch, "board-1", ["status": .string("archived")], hlc: h.hlc(2500, "alice"), base: ["status": .string("active")])
        ])
        #expect(lost.results.first?.status == .conflicted)
        #expect(lost.results.first?.resolution == "lost")

        // A later clock wins the same field even though its base is stale.
        let later = try await h.push([
            h.mutation(4, "Board", .patch, "board-1", ["status": .string("archived")], hlc: h.hlc(4000, "alice"), base: ["status": .string("active")])
        ])
        #expect(later.results.first?.status == .applied)
        #expect(try await h.row(Board.descriptor, "board-1")?.text("status") == "archived")

        let outcomes = try await h.auditedChanges().map(\.outcome)
        #expect(outcomes == [.applied, .applied, .merged, .conflicted, .applied])
        let mergeEntry = try await h.auditedChanges()[2]
        #expect(mergeEntry.detail.contains("\"kept_fields\":[\"status\"]"))
        #expect(mergeEntry.detail.contains("\"applied_fields\":[\"description\"]"))
        for entry in try await h.auditedChanges() {
            #expect(CanonicalJSON.text(try JSONDecoder().decode(JSONValue.self, from: Data(entry.detail.utf8))) == entry.detail)
        }
    }

    @Test("field_merge: a patch needs base and hlc", arguments: StorageKind.allCases)
    func fieldMergeRequirements(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "Board", .create, "board-1", h.boardPayload("board-1"), hlc: h.hlc(1000, "alice"))])
        let response = try await h.push([
            h.mutation(2, "Board", .patch, "board-1", ["status": .string("archived")], hlc: h.hlc(2000, "alice")),
            h.mutation(3, "Board", .patch, "board-1", ["status": .string("archived")], base: ["status": .string("active")]),
        ])
        #expect(response.results.map(\.error?.code) == [.missingPolicyData, .missingPolicyData])
    }

    @Test("the per-field merge rule")
    func mergeRule() {
        let clock = HybridLogicalClock(milliseconds: 2000, counter: 0, node: "a")
        let older = HybridLogicalClock(milliseconds: 1000, counter: 0, node: "z")
        let newer = HybridLogicalClock(milliseconds: 3000, counter: 0, node: "b")
        let outcome = ConflictResolution.mergeFields(
            changes: ["a": .text("new"), "b": .text("new"), "c": .text("new"), "d": .text("same"), "e": .text("new")],
            base: ["a": .text("base"), "b": .text("base"), "c": .text("base"), "e": .text("base")],
            server: ["a": .text("base"), "b": .text("other"), "c": .text("other"), "d": .text("same"), "e": .text("other")],
            clocks: ["b": older, "c": newer], hlc: clock
        )
        // a: server still at base; b: server changed by an older writer; d: already equal;
        // e: changed, no clock known → the edit wins. c: changed by a newer writer → kept.
        #expect(outcome.applied == ["a", "b", "d", "e"])
        #expect(outcome.kept == ["c"])
    }

    @Test("the policy follows the descriptor, not the entity name")
    func policyFromDescriptor() {
        var entity = Board.descriptor
        entity.conflict = .versionCheck
        let existing = StoredRow(["_version": .integer(3), "id": .text("x")])
        let decision = ConflictResolution.decide(
            ConflictResolution.Input(entity: entity, operation: .update, existing: existing, changes: [:], baseVersion: 2)
        )
        #expect(decision == .conflicted(resolution: nil))
    }
}
