import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// Push on the engines' own contracts: `Card` (version_check, team scope), `Activity`
/// (append_only, user scope) and `Label` (read-only catalog, version 3, oldest supported 2).
@Suite("Push: exactly once, sequencing, whole-request refusals", .blockingWork)
struct PushServiceTests {
    @Test("the same push sent 3 times gives the same results and one effect, audited once", arguments: StorageKind.allCases)
    func exactlyOnce(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        let mutations = [
            h.mutation(1, "Card", .create, "card-1", h.cardPayload("card-1")),
            h.mutation(2, "Card", .update, "card-1", h.cardPayload("card-1", title: "Draft the plan, part 2"), baseVersion: 1),
            h.mutation(3, "Activity", .create, h.activityID(1), h.activityPayload(h.activityID(1))),
        ]
        let first = try await h.push(mutations)
        let second = try await h.push(mutations)
        let third = try await h.push(mutations)
        #expect(first.results.map(\.status) == [.applied, .applied, .applied])
        #expect(second == first)
        #expect(third == first)
        #expect(first.lastSeq == 3)

        let card = try #require(try await h.row(Card.descriptor, "card-1"))
        #expect(card.integer("_version") == 2)
        #expect(card.text("title") == "Draft the plan, part 2")
        #expect(card.integer("revision") == 2)  // the int version field follows _version
        let sequence = try await h.storage.read { try await $0.scopeSequence(tenant: PushHarness.tenant, scopeKey: "workspace:team:red") }
        #expect(sequence == 2)
        let audit = try await h.auditedChanges()
        #expect(audit.count == 3)
        #expect(audit.map(\.outcome) == [.applied, .applied, .applied])
    }

    @Test("a resend overlapping done and new seqs replays the done ones and applies the rest", arguments: StorageKind.allCases)
    func overlappingResend(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        let one = h.mutation(1, "Activity", .create, h.activityID(1), h.activityPayload(h.activityID(1)))
        let two = h.mutation(2, "Activity", .create, h.activityID(2), h.activityPayload(h.activityID(2)))
        let three = h.mutation(3, "Activity", .create, h.activityID(3), h.activityPayload(h.activityID(3)))
        let first = try await h.push([one, two])
        let second = try await h.push([two, three])
        #expect(second.results[0] == first.results[1])
        #expect(second.results[1].status == .applied)
        #expect(second.lastSeq == 3)
        #expect(try await h.auditedChanges().count == 3)
    }

    @Test("a gap is refused with 409 and the last seq done, and writes nothing", arguments: StorageKind.allCases)
    func gap(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "Activity", .create, h.activityID(1), h.activityPayload(h.activityID(1)))])
        let error = try #require(await h.refusal([h.mutation(3, "Activity", .create, h.activityID(3), h.activityPayload(h.activityID(3)))]))
        #expect(error.status == 409)
        #expect(error.detail.code == .sequenceGap)
        #expect(error.detail.details == .object(["last_seq": .int(1)]))
        #expect(try await h.row(ActivityRecord.descriptor, h.activityID(3)) == nil)
        #expect(try await h.auditedChanges().count == 1)
    }

    @Test("malformed pushes are refused with 400 before anything is written", arguments: StorageKind.allCases)
    func malformed(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        let activity = h.mutation(1, "Activity", .create, h.activityID(1), h.activityPayload(h.activityID(1)))
        let emptyClient = await h.refusal([activity], client: " ")
        #expect(emptyClient?.status == 400)
        #expect(emptyClient?.detail.code == .malformedRequest)

        let skipping = await h.refusal([activity, h.mutation(3, "Activity", .create, h.activityID(3), h.activityPayload(h.activityID(3)))])
        #expect(skipping?.status == 400)

        let zero = await h.refusal([h.mutation(0, "Activity", .create, h.activityID(0), h.activityPayload(h.activityID(0)))])
        #expect(zero?.status == 400)

        let tooMany = (1...1001).map { h.mutation(Int64($0), "Activity", .create, h.activityID($0), h.activityPayload(h.activityID($0))) }
        let large = await h.refusal(tooMany)
        #expect(large?.status == 400)
        #expect(large?.detail.message.contains("1000") == true)

        #expect(try await h.auditedChanges().isEmpty)
        #expect(try await h.storage.read { try await $0.lastSequence(tenant: PushHarness.tenant, clientID: "alice-phone") } == 0)
    }

    @Test("an empty push answers the last seq done", arguments: StorageKind.allCases)
    func emptyPush(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "Activity", .create, h.activityID(1), h.activityPayload(h.activityID(1)))])
        let response = try await h.push([])
        #expect(response.results.isEmpty)
        #expect(response.lastSeq == 1)
    }

    @Test("a rejected mutation in the middle is done: the ones after it apply, and it is not retried", arguments: StorageKind.allCases)
    func rejectedInTheMiddle(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        let mutations = [
            h.mutation(1, "Activity", .create, h.activityID(1), h.activityPayload(h.activityID(1))),
            h.mutation(2, "Activity", .create, h.activityID(2), ["id": .string(h.activityID(2)), "verb": .int(3)]),
            h.mutation(3, "Activity", .create, h.activityID(3), h.activityPayload(h.activityID(3))),
        ]
        let response = try await h.push(mutations)
        #expect(response.results.map(\.status) == [.applied, .rejected, .applied])
        #expect(response.results[1].error?.code == .invalidPayload)
        #expect(response.lastSeq == 3)

        let again = try await h.push(mutations)
        #expect(again == response)
        #expect(try await h.row(ActivityRecord.descriptor, h.activityID(2)) == nil)
        #expect(try await h.auditedChanges().map(\.outcome) == [.applied, .rejected, .applied])
    }

    @Test("426 for a schema below the oldest supported, 422 for an unknown contract name", arguments: StorageKind.allCases)
    func schemaVersions(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        let activity = h.mutation(1, "Activity", .create, h.activityID(1), h.activityPayload(h.activityID(1)))
        let old = try #require(await h.refusal([activity], schema: ["Label": 1, "Activity": 1]))
        #expect(old.status == 426)
        #expect(old.detail.code == .schemaTooOld)
        #expect(
            old.detail.details
                == .object(["entity": .string("Label"), "oldest_supported": .int(2), "current": .int(3), "last_seq": .int(0)])
        )

        // A contract the server does not know refuses only the mutations that use it.
        #expect(await h.refusal([activity], schema: ["Spaceship": 1, "Label": 2]) == nil)

        #expect(try await h.push([activity], schema: ["Label": 2, "Activity": 1]).results.first?.status == .applied)
        // The refusal names the last seq the server took, so the device renumbers only what it never took.
        let second = h.mutation(2, "Activity", .create, h.activityID(2), h.activityPayload(h.activityID(2)))
        let later = try #require(await h.refusal([second], schema: ["Label": 1, "Activity": 1]))
        guard case .object(let details)? = later.detail.details else { Issue.record("no details"); return }
        #expect(details["last_seq"] == .int(1))
    }

    @Test("the audit chain verifies after pushes with every outcome", arguments: StorageKind.allCases)
    func auditChain(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        try await h.push([
            h.mutation(1, "Card", .create, "card-1", h.cardPayload("card-1")),
            h.mutation(2, "Card", .update, "card-1", h.cardPayload("card-1"), baseVersion: 7),
            h.mutation(3, "Label", .create, "label-1", ["id": .string("label-1")]),
            h.mutation(4, "Activity", .create, h.activityID(1), h.activityPayload(h.activityID(1))),
            h.mutation(5, "Activity", .create, h.activityID(1), h.activityPayload(h.activityID(1))),
        ])
        let audit = try await h.auditedChanges()
        #expect(audit.map(\.outcome) == [.applied, .conflicted, .rejected, .applied, .duplicate])
        let entries = try await h.audit()
        #expect(entries.map(\.operation) == [.push] && entries.map(\.rowID) == ["alice-phone:1-5"])
        #expect(entries.map(\.entity) == ["Activity,Card,Label"] && entries.map(\.outcome.rawValue) == ["applied,conflicted,duplicate,rejected"])
        #expect(try await AuditChain.verify(h.storage) == .intact(entries: 1, keyedFrom: 1))

        // Every detail is canonical JSON naming the mutation, not copying its payload.
        for entry in audit {
            let detail = try JSONDecoder().decode(JSONValue.self, from: Data(entry.detail.utf8))
            #expect(CanonicalJSON.text(detail) == entry.detail, "\(entry.outcome)")
        }
        let detail = try JSONDecoder().decode(JSONValue.self, from: Data(audit[0].detail.utf8))
        guard case .object(let fields) = detail else { Issue.record("detail is not an object"); return }
        #expect(fields["client_id"] == .string("alice-phone"))
        #expect(fields["seq"] == .int(1))
        #expect(fields["policy"] == .string("version_check"))
        #expect(fields["payload_sha256"] != nil)
        #expect(fields["payload"] == nil)
    }

    @Test("a transaction that fails half way leaves nothing written, and the resend applies once", arguments: StorageKind.allCases)
    func crashHalfWay(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        let mutations = [
            h.mutation(1, "Card", .create, "card-1", h.cardPayload("card-1")),
            h.mutation(2, "Activity", .create, h.activityID(1), h.activityPayload(h.activityID(1))),
            h.mutation(3, "Activity", .create, h.activityID(2), h.activityPayload(h.activityID(2))),
        ]
        for failAfter in [0, 1, 3, 5, 7] {
            let failing = PushService(
                storage: PushFailingStorage(base: h.storage, failAfter: failAfter), clock: PushFixedClock(), reducers: [])
            do {
                _ = try await failing.push(PushRequest(clientId: "alice-phone", schema: [:], mutations: mutations), identity: PushHarness.alice)
                Issue.record("the push should have failed after \(failAfter) writes")
            } catch {
                #expect(error.status == 500)
                #expect(error.detail.code == .internalError)
            }
            #expect(try await h.row(Card.descriptor, "card-1") == nil)
            #expect(try await h.row(ActivityRecord.descriptor, h.activityID(1)) == nil)
            #expect(try await h.auditedChanges().isEmpty)
            #expect(try await h.storage.read { try await $0.lastSequence(tenant: PushHarness.tenant, clientID: "alice-phone") } == 0)
            #expect(try await h.storage.read { try await $0.scopeSequence(tenant: PushHarness.tenant, scopeKey: "workspace:team:red") } == 0)
        }

        let response = try await h.push(mutations)
        #expect(response.results.map(\.status) == [.applied, .applied, .applied])
        #expect(try await h.push(mutations) == response)
        #expect(try await h.row(Card.descriptor, "card-1")?.integer("_version") == 1)
        #expect(try await h.auditedChanges().count == 3)
        #expect(try await AuditChain.verify(h.storage) == .intact(entries: 1, keyedFrom: 1))
    }

    @Test("a stored result is the canonical JSON of MutationResult's Codable form, and reads back equal")
    func storedResultShape() throws {
        let results = [
            MutationResult(seq: 1, clientMutationId: "a", status: .applied, serverVersion: 2),
            MutationResult(
                seq: 2, clientMutationId: "b", status: .conflicted, serverVersion: 3,
                serverRow: .object(["x": .double(1.5), "y": .null, "z": .array([.int(1), .string("é/\"")])]), resolution: "lost"
            ),
            MutationResult(
                seq: 3, clientMutationId: "c", status: .rejected,
                error: ErrorDetail(code: .invalidPayload, message: "bad", details: .object(["fields": .object(["a": .string("b")])]))
            ),
            MutationResult(seq: 4, clientMutationId: "d", status: .duplicate, error: ErrorDetail(code: .rowNotFound, message: "gone")),
        ]
        for result in results {
            let text = PushSession.storedText(result)
            #expect(text == String(decoding: try CanonicalJSON.encode(result), as: UTF8.self))
            #expect(try JSONDecoder().decode(MutationResult.self, from: Data(text.utf8)) == result)
        }
    }

    @Test("clients are sequenced separately, and tenants never see each other's rows", arguments: StorageKind.allCases)
    func clientsAndTenants(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "Card", .create, "card-1", h.cardPayload("card-1"))], as: PushHarness.alice)
        try await h.push([h.mutation(1, "Card", .create, "card-2", h.cardPayload("card-2"))], as: PushHarness.bob)
        let other = DeviceIdentity(tenant: "t2", userID: "alice", deviceID: "alice-phone", teams: ["red"], expiresAt: .max)
        let response = try await h.push([h.mutation(1, "Card", .create, "card-1", h.cardPayload("card-1", title: "Other tenant"))], as: other)
        #expect(response.results.first?.status == .applied)
        #expect(try await h.row(Card.descriptor, "card-1")?.text("title") == "Draft the plan")
    }
}
