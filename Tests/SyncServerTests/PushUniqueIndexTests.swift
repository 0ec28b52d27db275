import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// Unique indexes on push. These stay on the sample's contracts (`Incident`'s unique `number`):
/// the engines' own contract set has no unique index yet. The rest of payload validation runs on
/// the engines' contracts (PushValidationTests).
@Suite("Push: unique indexes", .blockingWork)
struct PushUniqueIndexTests {
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
}
