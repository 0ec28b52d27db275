import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// Changes an operator marks urgent (a withdrawn label, corrected terms) reach a device before any
/// page of its next pull: `urgentPage` answers them after the device's cursor, on both storages.
/// On the engines' own contracts (the catalog's `Label`); that an urgent deletion's cascade is
/// urgent too is in PullCascadeDeleteTests.
@Suite("Urgent changes")
struct UrgentChangeTests {
    static let device = PullHarness.device()

    static func field(_ row: JSONValue?, _ name: String) -> JSONValue? {
        guard case .object(let fields)? = row else { return nil }
        return fields[name]
    }

    func urgent(_ h: PullHarness, after cursor: String?) async throws -> PullResponse {
        try PullResponse(json: Data(try await h.pull.urgentPage(scope: "catalog", cursor: cursor, schema: [:], identity: Self.device).json()))
    }

    @Test("only the urgent changes after the cursor, in their latest state, the cursor unchanged", arguments: StorageKind.allCases)
    func urgentChangesAfterTheCursor(kind: StorageKind) async throws {
        let h = try await PullHarness.engine(kind)
        defer { h.remove() }
        try await h.publish("Label", PullHarness.label("label-1"))
        try await h.publish("Label", PullHarness.label("label-2"))
        try await h.publish("Label", PullHarness.label("label-3"))
        let cursor = try #require(try await h.pullAll("catalog", as: Self.device).last?.cursor)
        #expect(try await urgent(h, after: cursor).upserts.isEmpty)

        // Ordinary changes, then urgent ones: label-1 withdrawn, label-2 corrected.
        for index in 1...5 { try await h.publish("Label", PullHarness.label("label-3", name: "Ordinary \(index)", sortIndex: Int64(index))) }
        try await h.delete("Label", "label-1", urgent: true)
        _ = try await h.publisher.publish(
            entity: "Label", row: PullHarness.label("label-2", name: "Corrected"), identity: PullHarness.admin, urgent: true)
        try await h.publish("Label", PullHarness.label("label-4"))

        let page = try await urgent(h, after: cursor)
        #expect(page.cursor == cursor)
        #expect(!page.hasMore)
        #expect(page.deletes == ["Label": ["label-1"]])
        #expect(page.upserts["Label"]?.count == 1)
        #expect(Self.field(page.upserts["Label"]?.first, "name") == .string("Corrected"))
        #expect(page.upserts.keys.sorted() == ["Label"])

        // A device whose cursor is past them has nothing urgent; the pages still bring them, in order.
        let pages = try await h.pullAll("catalog", as: Self.device, from: cursor)
        #expect(try await urgent(h, after: pages.last?.cursor).upserts.isEmpty)
        #expect(try await urgent(h, after: pages.last?.cursor).deletes.isEmpty)
        #expect(pages.flatMap { $0.deletes["Label"] ?? [] } == ["label-1"])

        // A row corrected urgently, then changed again, comes in its latest state.
        _ = try await h.publisher.publish(entity: "Label", row: PullHarness.label("label-2", name: "Later"), identity: PullHarness.admin)
        #expect(Self.field(try await urgent(h, after: cursor).upserts["Label"]?.first, "name") == .string("Later"))
    }

    @Test("asked without a cursor, or for a scope the token does not grant, it is refused", arguments: StorageKind.allCases)
    func refusals(kind: StorageKind) async throws {
        let h = try await PullHarness.engine(kind)
        defer { h.remove() }
        await #expect(throws: ServiceError.self) { _ = try await urgent(h, after: nil) }
        let other = SyncCursor(scopeKey: "workspace:user:someone-else", sequence: 0).encoded
        do {
            _ = try await h.pull.urgentPage(scope: "workspace:user:someone-else", cursor: other, schema: [:], identity: Self.device)
            Issue.record("another user's scope was answered")
        } catch {
            #expect(error.status == 403)
        }
    }

    @Test(
        "housekeeping forgets urgent marks older than the tombstone horizon; the change still comes with the pages", arguments: StorageKind.allCases)
    func oldMarksArePruned(kind: StorageKind) async throws {
        let h = try await PullHarness.engine(kind)
        defer { h.remove() }
        try await h.publish("Label", PullHarness.label("label-1"))
        let cursor = try #require(try await h.pullAll("catalog", as: Self.device).last?.cursor)
        _ = try await h.publisher.publish(
            entity: "Label", row: PullHarness.label("label-1", name: "Corrected"), identity: PullHarness.admin, urgent: true)
        let horizons = ServerHousekeeping.Horizons(pushResultRetention: nil, tombstoneHorizon: .seconds(90 * 86_400))
        let marked = Date(timeIntervalSince1970: Double(h.clock.now().millisecondsSince1970) / 1000)

        #expect(
            try await ServerHousekeeping(storage: h.storage, horizons: horizons).run(now: marked.addingTimeInterval(89 * 86_400)).urgentMarks == 0)
        #expect(try await urgent(h, after: cursor).upserts["Label"]?.count == 1)
        #expect(
            try await ServerHousekeeping(storage: h.storage, horizons: horizons).run(now: marked.addingTimeInterval(91 * 86_400)).urgentMarks == 1)
        #expect(try await urgent(h, after: cursor).upserts.isEmpty)
        #expect(try await h.pullAll("catalog", as: Self.device, from: cursor).flatMap { $0.upserts["Label"] ?? [] }.count == 1)
    }
}
