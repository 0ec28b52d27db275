import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// Changes an operator marks urgent (a withdrawn unit, corrected terms) reach a device before any
/// page of its next pull: `urgentPage` answers them after the device's cursor, on both storages.
@Suite("Urgent changes")
struct UrgentChangeTests {
    static let device = PullHarness.device()

    static func field(_ row: JSONValue?, _ name: String) -> JSONValue? {
        guard case .object(let fields)? = row else { return nil }
        return fields[name]
    }

    func urgent(_ h: PullHarness, after cursor: String?) async throws -> PullResponse {
        try PullResponse(json: Data(try await h.pull.urgentPage(scope: "content", cursor: cursor, schema: [:], identity: Self.device).json()))
    }

    @Test("only the urgent changes after the cursor, in their latest state, the cursor unchanged", arguments: StorageKind.allCases)
    func urgentChangesAfterTheCursor(kind: StorageKind) async throws {
        let h = try await PullHarness(kind)
        defer { h.remove() }
        try await h.publish("Unit", PullHarness.unit("u-1"))
        try await h.publish("Unit", PullHarness.unit("u-2"))
        try await h.publish("Lesson", PullHarness.lesson("l-1", unit: "u-1", index: 0))
        let cursor = try #require(try await h.pullAll("content", as: Self.device).last?.cursor)
        #expect(try await urgent(h, after: cursor).upserts.isEmpty)

        // Ordinary changes, then urgent ones: u-1 withdrawn (its lesson with it), u-2 corrected.
        for index in 1...5 { try await h.publish("Lesson", PullHarness.lesson("l-2-\(index)", unit: "u-2", index: Int64(index))) }
        try await h.content.delete(entity: "Unit", id: "u-1", identity: PullHarness.admin, urgent: true)
        _ = try await h.content.publish(entity: "Unit", row: PullHarness.unit("u-2", title: "Corrected"), identity: PullHarness.admin, urgent: true)
        try await h.publish("Lesson", PullHarness.lesson("l-2-6", unit: "u-2", index: 6))

        let page = try await urgent(h, after: cursor)
        #expect(page.cursor == cursor)
        #expect(!page.hasMore)
        #expect(page.deletes["Unit"] == ["u-1"])
        #expect(page.deletes["Lesson"] == ["l-1"])
        #expect(page.upserts["Unit"]?.count == 1)
        #expect(Self.field(page.upserts["Unit"]?.first, "title") == .string("Corrected"))
        #expect(page.upserts["Lesson"] == nil)

        // A device whose cursor is past them has nothing urgent; the pages still bring them, in order.
        let pages = try await h.pullAll("content", as: Self.device, from: cursor)
        #expect(try await urgent(h, after: pages.last?.cursor).upserts.isEmpty)
        #expect(try await urgent(h, after: pages.last?.cursor).deletes.isEmpty)
        #expect(pages.flatMap { $0.deletes["Unit"] ?? [] } == ["u-1"])

        // A row corrected urgently, then changed again, comes in its latest state.
        _ = try await h.content.publish(entity: "Unit", row: PullHarness.unit("u-2", title: "Later"), identity: PullHarness.admin)
        #expect(Self.field(try await urgent(h, after: cursor).upserts["Unit"]?.first, "title") == .string("Later"))
    }

    @Test("asked without a cursor, or for a scope the token does not grant, it is refused", arguments: StorageKind.allCases)
    func refusals(kind: StorageKind) async throws {
        let h = try await PullHarness(kind)
        defer { h.remove() }
        await #expect(throws: ServiceError.self) { _ = try await urgent(h, after: nil) }
        let other = SyncCursor(scopeKey: "progress:user:someone-else", sequence: 0).encoded
        do {
            _ = try await h.pull.urgentPage(scope: "progress:user:someone-else", cursor: other, schema: [:], identity: Self.device)
            Issue.record("another user's scope was answered")
        } catch {
            #expect(error.status == 403)
        }
    }

    @Test(
        "housekeeping forgets urgent marks older than the tombstone horizon; the change still comes with the pages", arguments: StorageKind.allCases)
    func oldMarksArePruned(kind: StorageKind) async throws {
        let h = try await PullHarness(kind)
        defer { h.remove() }
        try await h.publish("Unit", PullHarness.unit("u-1"))
        let cursor = try #require(try await h.pullAll("content", as: Self.device).last?.cursor)
        _ = try await h.content.publish(entity: "Unit", row: PullHarness.unit("u-1", title: "Corrected"), identity: PullHarness.admin, urgent: true)
        let horizons = ServerHousekeeping.Horizons(pushResultRetention: nil, tombstoneHorizon: .seconds(90 * 86_400))
        let marked = Date(timeIntervalSince1970: Double(h.clock.now().millisecondsSince1970) / 1000)

        #expect(
            try await ServerHousekeeping(storage: h.storage, horizons: horizons).run(now: marked.addingTimeInterval(89 * 86_400)).urgentMarks == 0)
        #expect(try await urgent(h, after: cursor).upserts["Unit"]?.count == 1)
        #expect(
            try await ServerHousekeeping(storage: h.storage, horizons: horizons).run(now: marked.addingTimeInterval(91 * 86_400)).urgentMarks == 1)
        #expect(try await urgent(h, after: cursor).upserts.isEmpty)
        #expect(try await h.pullAll("content", as: Self.device, from: cursor).flatMap { $0.upserts["Unit"] ?? [] }.count == 1)
    }
}
