import ContractRuntime
import Contracts
import Foundation
import SyncProtocol
import Testing

@testable import SyncServer

/// The page writer writes an event at an older schema version without the fields added since
/// (``PullPageJSONTests`` checks the rest on the engines' own contracts). This stays on the sample's
/// contracts (`IssueLogged`, whose `photo` file came in version 2): no event of the engines' own
/// set that devices pull has a version history.
@Suite("Pull pages written as JSON: events at older versions")
struct PullPageEventVersionTests {
    static let device = PullHarness.device()

    /// Two `IssueLogged` events of team `t-1`, the second with a photo.
    static func seeded() async throws -> PullHarness {
        let harness = try await PullHarness(.sqlite)
        try await harness.storeEvent(
            ContractRegistry.issueLogged, id: "01J0000000000000000000ISSU", scopeKey: "ops:team:t-1",
            payload: [
                "team_id": .text("t-1"), "service_asset_id": .text("sa-1"), "category": .text("damage"), "severity": .text("high"),
                "description": .text("Cracked \"mirror\""), "tags": .text("[\"mirror\",\"glass\"]"), "observed_on": .text("2026-01-30"),
            ])
        let photo = try FileReference(
            sha256: String(repeating: "ab", count: 32), byteCount: 48_213, contentType: "image/jpeg", name: "mirror \"left\".jpg")
        try await harness.storeEvent(
            ContractRegistry.issueLogged, id: "01J0000000000000000000ISSV", scopeKey: "ops:team:t-1",
            payload: [
                "team_id": .text("t-1"), "service_asset_id": .text("sa-2"), "category": .text("damage"), "severity": .text("low"),
                "description": .text("Scratched"), "observed_on": .text("2026-01-31"), "photo_file": .text(photo.canonicalText),
            ])
        return harness
    }

    @Test("an event is written as the bytes of its wire value, its file reference copied as stored, at every schema version")
    func eventBytes() async throws {
        let harness = try await Self.seeded()
        defer { harness.remove() }
        for schema in [[:], ["IssueLogged": 1]] {
            let page = try await harness.pull.page(scope: "team", cursor: nil, limit: nil, schema: schema, clientID: nil, identity: Self.device)
            let group = try #require(page.upserts["IssueLogged"])
            guard case .event(let event, let version, let plan) = group.shaping else {
                Issue.record("IssueLogged is not shaped as an event")
                return
            }
            #expect(group.rows.count == 2)
            for row in group.rows {
                var written = JSONWriter(capacity: 1024)
                RowShaping.writeEvent(row, event: event, version: version, plan: plan, positions: plan.positions(in: row.layout), into: &written)
                var shaped = JSONWriter(capacity: 1024)
                shaped.value(.object(RowShaping.wireEvent(row, event: event, version: version, plan: plan)))
                #expect(String(decoding: written.bytes, as: UTF8.self) == String(decoding: shaped.bytes, as: UTF8.self), "\(schema)")
            }
            let text = String(decoding: page.json(), as: UTF8.self)
            #expect(text.contains("mirror \\\"left\\\".jpg") == schema.isEmpty, "\(schema): \(text)")
        }
    }
}
