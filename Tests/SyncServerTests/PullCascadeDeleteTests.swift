import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// Deleting a published row deletes its `has_many` rows of the same read-only scope with it. This
/// stays on the sample's contracts (a `Unit` and its `Lesson`s): the engines' own contract set has
/// no relation inside its read-only scope. The rest of pull runs on the engines' contracts
/// (PullServiceTests, UrgentChangeTests).
@Suite("Pull: a published row's deletion cascades")
struct PullCascadeDeleteTests {
    let device = PullHarness.device()

    @Test("deleted rows come as deletes, not upserts; a unit's lessons are deleted with it", arguments: StorageKind.allCases)
    func tombstones(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        try await harness.publish("Unit", PullHarness.unit("u-1"))
        try await harness.publish("Unit", PullHarness.unit("u-2"))
        try await harness.publish("Lesson", PullHarness.lesson("l-1", unit: "u-1", index: 0))
        try await harness.publish("Lesson", PullHarness.lesson("l-2", unit: "u-1", index: 1))
        let before = try await harness.pull.pull(scope: "content", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)

        try await harness.content.delete(entity: "Unit", id: "u-1", identity: PullHarness.admin)

        let fromStart = try await harness.pull.pull(scope: "content", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)
        #expect(fromStart.deletes == ["Unit": ["u-1"], "Lesson": ["l-1", "l-2"]])
        #expect(fromStart.upserts.keys.sorted() == ["Unit"])
        #expect(fromStart.upserts["Unit"]?.compactMap { $0.pullMember("id")?.pullText } == ["u-2"])

        let since = try await harness.pull.pull(scope: "content", cursor: before.cursor, limit: nil, schema: [:], clientID: nil, identity: device)
        #expect(since.upserts.isEmpty)
        #expect(since.deletes == ["Unit": ["u-1"], "Lesson": ["l-1", "l-2"]])

        // Publishing it again brings it back.
        try await harness.publish("Unit", PullHarness.unit("u-1", title: "Back"))
        let again = try await harness.pull.pull(scope: "content", cursor: since.cursor, limit: nil, schema: [:], clientID: nil, identity: device)
        #expect(again.upserts["Unit"]?.first?.pullMember("title") == .string("Back"))
        #expect(again.deletes.isEmpty)
    }

    @Test("an urgent deletion's cascade is urgent too: the unit's lessons come in the urgent page", arguments: StorageKind.allCases)
    func urgentCascade(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        try await harness.publish("Unit", PullHarness.unit("u-1"))
        try await harness.publish("Unit", PullHarness.unit("u-2"))
        try await harness.publish("Lesson", PullHarness.lesson("l-1", unit: "u-1", index: 0))
        try await harness.publish("Lesson", PullHarness.lesson("l-2", unit: "u-2", index: 0))
        let cursor = try #require(try await harness.pullAll("content", as: device).last?.cursor)

        try await harness.content.delete(entity: "Unit", id: "u-1", identity: PullHarness.admin, urgent: true)
        try await harness.publish("Lesson", PullHarness.lesson("l-3", unit: "u-2", index: 1))

        let page = try PullResponse(
            json: Data(try await harness.pull.urgentPage(scope: "content", cursor: cursor, schema: [:], identity: device).json()))
        #expect(page.deletes["Unit"] == ["u-1"])
        #expect(page.deletes["Lesson"] == ["l-1"])
        #expect(page.upserts["Lesson"] == nil)
    }
}
