import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// Two devices pushing conflicting edits end with the outcome each policy promises.
@Suite("Conflict policies", .blockingWork)
struct ConflictPolicyTests {
    // MARK: append_only

    @Test("append_only: the same id again is a duplicate, never a conflict; changes are refused", arguments: StorageKind.allCases)
    func appendOnly(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        let phone = try await h.push([h.mutation(1, "Statement", .create, "st-1", h.statementPayload("st-1", verb: "experienced"))])
        // Alice's tablet sends the same statement id, even with other content.
        let tablet = try await h.push(
            [
                h.mutation(1, "Statement", .create, "st-1", h.statementPayload("st-1", verb: "completed")),
                h.mutation(2, "Statement", .update, "st-1", h.statementPayload("st-1", verb: "completed")),
                h.mutation(3, "Statement", .delete, "st-1"),
            ], as: PushHarness.aliceTablet
        )
        #expect(phone.results.first?.status == .applied)
        #expect(tablet.results.map(\.status) == [.duplicate, .rejected, .rejected])
        #expect(tablet.results[1].error?.code == .notWritable)
        let row = try #require(try await h.row(Statement.descriptor, "st-1"))
        #expect(row.text("verb") == "experienced")
        #expect(row.integer("_version") == 1)
    }

    // MARK: last_writer_wins

    @Test(
        "last_writer_wins: the later clock wins whichever arrives first; the loser is told with the row that stands", arguments: StorageKind.allCases)
    func lastWriterWins(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "ServiceAsset", .create, "van-7", h.assetPayload("van-7"), hlc: h.hlc(1000, "alice"))])

        // Bob's edit is later (2000) but reaches the server first; Alice's earlier edit (1500) loses.
        let bob = try await h.push(
            [h.mutation(1, "ServiceAsset", .update, "van-7", h.assetPayload("van-7", name: "Van 7 (bob)"), baseVersion: 1, hlc: h.hlc(2000, "bob"))],
            as: PushHarness.bob
        )
        let alice = try await h.push([
            h.mutation(2, "ServiceAsset", .update, "van-7", h.assetPayload("van-7", name: "Van 7 (alice)"), baseVersion: 1, hlc: h.hlc(1500, "alice"))
        ])
        #expect(bob.results.first?.status == .applied)
        #expect(bob.results.first?.resolution == nil)
        let lost = try #require(alice.results.first)
        #expect(lost.status == .conflicted)
        #expect(lost.resolution == "lost")
        #expect(lost.serverVersion == 2)
        guard case .object(let row)? = lost.serverRow else { Issue.record("no server row"); return }
        #expect(row["display_name"] == .string("Van 7 (bob)"))

        // A later edit based on an old version wins and says so.
        let late = try await h.push([
            h.mutation(3, "ServiceAsset", .patch, "van-7", ["display_name": .string("Van 7 (late)")], baseVersion: 1, hlc: h.hlc(3000, "alice"))
        ])
        #expect(late.results.first?.status == .applied)
        #expect(late.results.first?.resolution == "won")
        let stored = try #require(try await h.row(ServiceAsset.descriptor, "van-7"))
        #expect(stored.text("display_name") == "Van 7 (late)")
        #expect(stored.text("asset_tag") == "VAN-7")  // a patch keeps the other fields
        #expect(stored.text("_hlc") == h.hlc(3000, "alice"))
    }

    @Test(
        "last_writer_wins: same millisecond and counter, the node id breaks the tie; the same clock twice is a duplicate",
        arguments: StorageKind.allCases)
    func lastWriterWinsTieBreak(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "ServiceAsset", .create, "van-7", h.assetPayload("van-7"), hlc: h.hlc(1000, "alice"))])
        let bob = try await h.push(
            [h.mutation(1, "ServiceAsset", .update, "van-7", h.assetPayload("van-7", name: "B"), hlc: h.hlc(2000, "bob"))], as: PushHarness.bob
        )
        let alice = try await h.push([h.mutation(2, "ServiceAsset", .update, "van-7", h.assetPayload("van-7", name: "A"), hlc: h.hlc(2000, "alice"))])
        #expect(bob.results.first?.status == .applied)
        #expect(alice.results.first?.resolution == "lost")  // "alice" < "bob"
        let again = try await h.push(
            [h.mutation(2, "ServiceAsset", .update, "van-7", h.assetPayload("van-7", name: "B"), hlc: h.hlc(2000, "bob"))], as: PushHarness.bob
        )
        #expect(again.results.first?.status == .duplicate)
        #expect(try await h.row(ServiceAsset.descriptor, "van-7")?.text("display_name") == "B")
    }

    @Test("last_writer_wins needs hlc", arguments: StorageKind.allCases)
    func lastWriterWinsNeedsClock(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        let response = try await h.push([
            h.mutation(1, "ServiceAsset", .create, "van-7", h.assetPayload("van-7")),
            h.mutation(2, "ServiceAsset", .create, "van-8", h.assetPayload("van-8", tag: "VAN-8"), hlc: "yesterday"),
        ])
        #expect(response.results.map(\.error?.code) == [.missingPolicyData, .invalidPayload])
    }

    @Test("last_writer_wins: a delete is a tombstone, and a later write brings the row back", arguments: StorageKind.allCases)
    func lastWriterWinsDelete(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        try await h.push([
            h.mutation(1, "ServiceAsset", .create, "van-7", h.assetPayload("van-7"), hlc: h.hlc(1000, "alice")),
            h.mutation(2, "ServiceAsset", .delete, "van-7", hlc: h.hlc(2000, "alice")),
        ])
        let deleted = try #require(try await h.row(ServiceAsset.descriptor, "van-7"))
        #expect(deleted.integer("_deleted") == 1)
        let earlier = try await h.push(
            [h.mutation(1, "ServiceAsset", .update, "van-7", h.assetPayload("van-7", name: "old"), hlc: h.hlc(1500, "bob"))], as: PushHarness.bob
        )
        #expect(earlier.results.first?.resolution == "lost")
        #expect(earlier.results.first?.serverRow == nil)
        let later = try await h.push(
            [h.mutation(2, "ServiceAsset", .update, "van-7", h.assetPayload("van-7", name: "back"), hlc: h.hlc(2500, "bob"))], as: PushHarness.bob
        )
        #expect(later.results.first?.status == .applied)
        let back = try #require(try await h.row(ServiceAsset.descriptor, "van-7"))
        #expect(back.integer("_deleted") == 0)
        #expect(back.text("display_name") == "back")
    }

    // MARK: version_check

    @Test(
        "version_check: of two edits on the same base the second is conflicted with the server row; resubmitting on it applies",
        arguments: StorageKind.allCases)
    func versionCheck(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "Task", .create, "task-1", h.taskPayload("task-1"))])
        let bob = try await h.push(
            [h.mutation(1, "Task", .update, "task-1", h.taskPayload("task-1", title: "Bob's title"), baseVersion: 1)], as: PushHarness.bob
        )
        let alice = try await h.push([h.mutation(2, "Task", .patch, "task-1", ["notes": .string("Gate code 1234")], baseVersion: 1)])
        #expect(bob.results.first?.status == .applied)
        #expect(bob.results.first?.serverVersion == 2)
        let conflict = try #require(alice.results.first)
        #expect(conflict.status == .conflicted)
        #expect(conflict.serverVersion == 2)
        guard case .object(let row)? = conflict.serverRow else { Issue.record("no server row"); return }
        #expect(row["title"] == .string("Bob's title"))
        #expect(row["revision"] == .int(2))
        #expect(row["notes"] == .null)

        // Alice merges and submits again on the server's version.
        let resubmit = try await h.push([h.mutation(3, "Task", .patch, "task-1", ["notes": .string("Gate code 1234")], baseVersion: 2)])
        #expect(resubmit.results.first?.status == .applied)
        let stored = try #require(try await h.row(FieldTask.descriptor, "task-1"))
        #expect(stored.text("title") == "Bob's title")
        #expect(stored.text("notes") == "Gate code 1234")
        #expect(stored.integer("revision") == 3)
    }

    @Test(
        "version_check: base_version is required; a create of an existing id is conflicted; an edit of a row the server lacks is a deletion",
        arguments: StorageKind.allCases)
    func versionCheckRequirements(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        let response = try await h.push([
            h.mutation(1, "Task", .create, "task-1", h.taskPayload("task-1")),
            h.mutation(2, "Task", .update, "task-1", h.taskPayload("task-1")),
            h.mutation(3, "Task", .create, "task-1", h.taskPayload("task-1")),
            h.mutation(4, "Task", .update, "task-9", h.taskPayload("task-9"), baseVersion: 1),
            h.mutation(5, "Task", .delete, "task-9", baseVersion: 1),
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
        let h = try await PushHarness(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "Task", .create, "task-1", h.taskPayload("task-1"))])
        let before = try #require(try await h.row(FieldTask.descriptor, "task-1"))
        let response = try await h.push([h.mutation(2, "Task", .delete, "task-1", baseVersion: 1)])
        #expect(response.results.first?.status == .applied)
        #expect(response.results.first?.serverVersion == 2)
        let tombstone = try #require(try await h.row(FieldTask.descriptor, "task-1"))
        #expect(tombstone.integer("_deleted") == 1)
        #expect(try #require(tombstone.integer("_seq")) > before.integer("_seq")!)
        #expect(tombstone.text("title") == "Swap battery")  // the row keeps its last values

        let later = try await h.push(
            [
                h.mutation(1, "Task", .update, "task-1", h.taskPayload("task-1"), baseVersion: 1),
                h.mutation(2, "Task", .delete, "task-1", baseVersion: 1),
            ], as: PushHarness.bob
        )
        #expect(later.results.map(\.status) == [.conflicted, .duplicate])
        #expect(later.results.first?.resolution == "deleted")
        #expect(later.results.first?.serverRow == nil)
    }

    // MARK: field_merge

    @Test("field_merge: edits to different fields merge", arguments: StorageKind.allCases)
    func fieldMergeDifferentFields(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "Incident", .create, "inc-1", h.incidentPayload("inc-1"), hlc: h.hlc(1000, "alice"))])
        let bob = try await h.push(
            [
                h.mutation(
                    1, "Incident", .patch, "inc-1", ["priority": .string("high")], hlc: h.hlc(2000, "bob"), base: ["priority": .string("moderate")]
                )
            ], as: PushHarness.bob
        )
        let alice = try await h.push([
            h.mutation(2, "Incident", .patch, "inc-1", ["state": .string("in_progress")], hlc: h.hlc(1500, "alice"), base: ["state": .string("new")])
        ])
        #expect(bob.results.first?.status == .applied)
        #expect(alice.results.first?.status == .applied)
        #expect(alice.results.first?.resolution == nil)
        let row = try #require(try await h.row(Incident.descriptor, "inc-1"))
        #expect(row.text("priority") == "high")
        #expect(row.text("state") == "in_progress")
        #expect(row.integer("_version") == 3)
        let clocks = ConflictResolution.fieldClocks(row)
        #expect(clocks["priority"] == h.hlc(2000, "bob"))
        #expect(clocks["state"] == h.hlc(1500, "alice"))
    }

    @Test("field_merge: the same field falls back to last writer wins; a partly kept edit is merged and audited", arguments: StorageKind.allCases)
    func fieldMergeSameField(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "Incident", .create, "inc-1", h.incidentPayload("inc-1"), hlc: h.hlc(1000, "alice"))])
        // Bob (later clock) sets the state first.
        try await h.push(
            [h.mutation(1, "Incident", .patch, "inc-1", ["state": .string("on_hold")], hlc: h.hlc(3000, "bob"), base: ["state": .string("new")])],
            as: PushHarness.bob
        )
        // Alice edited state (earlier clock: loses) and the description (untouched on the server: applies).
        let alice = try await h.push([
            h.mutation(
                2, "Incident", .patch, "inc-1", ["state": .string("resolved"), "description": .string("Tyre replaced")], hlc: h.hlc(2000, "alice"),
                base: ["state": .string("new"), "description": .null]
            )
        ])
        let merged = try #require(alice.results.first)
        #expect(merged.status == .applied)
        #expect(merged.resolution == "merged")
        guard case .object(let serverRow)? = merged.serverRow else { Issue.record("no merged row"); return }
        #expect(serverRow["state"] == .string("on_hold"))
        #expect(serverRow["description"] == .string("Tyre replaced"))

        // An edit whose every field loses is conflicted, and changes nothing.
        let lost = try await h.push([
            h.mutation(3, "Incident", .patch, "inc-1", ["state": .string("closed")], hlc: h.hlc(2500, "alice"), base: ["state": .string("new")])
        ])
        #expect(lost.results.first?.status == .conflicted)
        #expect(lost.results.first?.resolution == "lost")

        // A later clock wins the same field even though its base is stale.
        let later = try await h.push([
            h.mutation(4, "Incident", .patch, "inc-1", ["state": .string("closed")], hlc: h.hlc(4000, "alice"), base: ["state": .string("new")])
        ])
        #expect(later.results.first?.status == .applied)
        #expect(try await h.row(Incident.descriptor, "inc-1")?.text("state") == "closed")

        let outcomes = try await h.auditedChanges().map(\.outcome)
        #expect(outcomes == [.applied, .applied, .merged, .conflicted, .applied])
        let mergeEntry = try await h.auditedChanges()[2]
        #expect(mergeEntry.detail.contains("\"kept_fields\":[\"state\"]"))
        #expect(mergeEntry.detail.contains("\"applied_fields\":[\"description\"]"))
        for entry in try await h.auditedChanges() {
            #expect(CanonicalJSON.text(try JSONDecoder().decode(JSONValue.self, from: Data(entry.detail.utf8))) == entry.detail)
        }
    }

    @Test("field_merge: a patch needs base and hlc", arguments: StorageKind.allCases)
    func fieldMergeRequirements(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "Incident", .create, "inc-1", h.incidentPayload("inc-1"), hlc: h.hlc(1000, "alice"))])
        let response = try await h.push([
            h.mutation(2, "Incident", .patch, "inc-1", ["state": .string("closed")], hlc: h.hlc(2000, "alice")),
            h.mutation(3, "Incident", .patch, "inc-1", ["state": .string("closed")], base: ["state": .string("new")]),
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
        var entity = Incident.descriptor
        entity.conflict = .versionCheck
        let existing = StoredRow(["_version": .integer(3), "id": .text("x")])
        let decision = ConflictResolution.decide(
            ConflictResolution.Input(entity: entity, operation: .update, existing: existing, changes: [:], baseVersion: 2)
        )
        #expect(decision == .conflicted(resolution: nil))
    }
}
