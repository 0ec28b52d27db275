import ContractRuntime
import Contracts
import Foundation
import SyncProtocol
import Testing

@testable import SyncServer

/// The route writes pull pages straight from the stored rows (``PullPage/json()``) instead of
/// encoding ``PullService/pull(scope:cursor:limit:schema:clientID:identity:)``'s value with
/// `JSONEncoder`; both must be the same page.
@Suite("Pull pages written as JSON")
struct PullPageJSONTests {
    static let device = PullHarness.device()

    /// Rows of every kind the contracts have: lists, JSON documents with text that needs
    /// escaping, whole and fractional doubles, dates, timestamps, UUIDs, nulls, tombstones,
    /// and team events.
    static func seeded() async throws -> PullHarness {
        let harness = try await PullHarness(.sqlite)
        try await harness.publish("Unit", PullHarness.unit("u-1", title: "Fractions \"½\" / ünïcødé 🚲", sortIndex: 4, minutes: nil))
        try await harness.publish(
            "Lesson",
            .object([
                "id": .string("l-1"), "unit_id": .string("u-1"), "title": .string("Tab\tnew\nline \\ back"), "sort_index": .int(0),
                "lesson_kind": .string("quiz"), "duration_seconds": .int(90),
                "body": .object(["q": .array([.string("control \u{01}\u{1F} \u{08}\u{0C}"), .double(0.1), .int(-3), .bool(true), .null])]),
            ]))
        try await harness.publish("Unit", PullHarness.unit("u-2"))
        try await harness.content.delete(entity: "Unit", id: "u-2", identity: PullHarness.admin)

        let user = "progress:user:u-1"
        try await harness.storeDirectly(
            ContractRegistry.assessmentResponse,
            [
                "id": .string("6F1C7E0A-2B3C-4D5E-8F90-A1B2C3D4E5F6"), "assessment_id": .string("a-1"), "attempt_id": .string("at-1"),
                "question_id": .string("q1"), "answer": .object(["text": .string("a \"quoted\" answer"), "choices": .array([.int(1), .int(2)])]),
                "time_spent_ms": .int(1234), "flagged_for_review": .bool(true), "answered_at": .string("2026-01-31T08:00:00.125Z"),
                "updated_at": .string("2026-01-31T08:00:01.000Z"),
            ], scopeKey: user)
        for (id, score) in [("at-1", 14.0), ("at-2", 0.35), ("at-3", 1e-7)] {
            try await harness.storeDirectly(
                ContractRegistry.attempt,
                [
                    "id": .string(id), "assessment_id": .string("a-1"), "state": .string("submitted"), "outcome": .string("passed"),
                    "score": .double(score), "max_score": .double(20), "answered_count": .int(20), "started_at": .string("2026-01-30T08:00:00.000Z"),
                    "updated_at": .string("2026-01-31T08:00:00.000Z"),
                ], scopeKey: user)
        }
        try await harness.storeDirectly(
            ContractRegistry.completionRecord,
            [
                "id": .string("c-1"), "unit_id": .string("u-1"), "attempt_id": .string("at-1"), "passed": .bool(true),
                "completed_at": .string("2026-01-31T08:00:00.000Z"), "completed_on": .string("2026-01-31"),
                "updated_at": .string("2026-01-31T08:00:00.000Z"),
            ], scopeKey: user)
        try await harness.storeDirectly(
            ContractRegistry.attempt,
            [
                "id": .string("at-2"), "assessment_id": .string("a-1"), "state": .string("closed"), "started_at": .string("2026-01-30T08:00:00.000Z"),
                "updated_at": .string("2026-01-31T09:00:00.000Z"),
            ], scopeKey: user, deleted: true)

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

    static let requests: [(scope: String, schema: [String: Int], limit: Int?)] = [
        ("content", [:], nil), ("content", ["Unit": 2, "Lesson": 1], nil), ("content", [:], 2),
        ("user", [:], nil), ("user", [:], 3), ("team", [:], nil),
    ]

    @Test("the JSON the page writer produces is every row shaped by RowShaping, as JSONEncoder would write it")
    func sameDocument() async throws {
        let harness = try await Self.seeded()
        defer { harness.remove() }
        for request in Self.requests {
            let page = try await harness.pull.page(
                scope: request.scope, cursor: nil, limit: request.limit, schema: request.schema, clientID: nil, identity: Self.device
            )
            let shaped = page.shapedByRowShaping
            let written = try JSONDecoder().decode(PullResponse.self, from: Data(page.json()))
            let encoded = try JSONDecoder().decode(PullResponse.self, from: JSONCoding.encoder.encode(shaped))
            #expect(written == encoded, "\(request)")
            #expect(page.rowCount == shaped.rowCount)
        }
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

    @Test("keys are sorted at every level, as the server's JSONEncoder sorts them")
    func sortedKeys() async throws {
        let harness = try await Self.seeded()
        defer { harness.remove() }
        for request in Self.requests {
            let page = try await harness.pull.page(
                scope: request.scope, cursor: nil, limit: request.limit, schema: request.schema, clientID: nil, identity: Self.device
            )
            let text = String(decoding: page.json(), as: UTF8.self)
            let reencoded = try String(
                decoding: JSONCoding.encoder.encode(JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))), as: UTF8.self)
            // Re-encoding the parsed document with sorted keys changes nothing but number forms.
            #expect(Self.keyOrder(text) == Self.keyOrder(reencoded), "\(request)")
        }
    }

    @Test("rows and deletes land where the page says, and the user page has every kind of value")
    func userPage() async throws {
        let harness = try await Self.seeded()
        defer { harness.remove() }
        let page = try await harness.pull.page(scope: "user", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: Self.device)
        let json = try #require(JSONParser.parse(Data(page.json())))
        #expect(json.pullMember("deletes") == .object(["Attempt": .array([.string("at-2")])]))
        let response = try #require(json.pullMember("upserts")?.pullMember("AssessmentResponse"))
        guard case .array(let rows) = response, let row = rows.first else {
            Issue.record("no AssessmentResponse row in \(json)")
            return
        }
        #expect(row.pullMember("id") == .string("6f1c7e0a-2b3c-4d5e-8f90-a1b2c3d4e5f6"))
        #expect(row.pullMember("answer") == .object(["text": .string("a \"quoted\" answer"), "choices": .array([.int(1), .int(2)])]))
        #expect(row.pullMember("answered_at") == .string("2026-01-31T08:00:00.125Z"))
        #expect(row.pullMember("flagged_for_review") == .bool(true))
        #expect(row.pullMember("_server_version") == .int(1))
        guard case .array(let attempts)? = json.pullMember("upserts")?.pullMember("Attempt") else {
            Issue.record("no Attempt rows in \(json)")
            return
        }
        #expect(attempts.map { $0.pullMember("id") } == [.string("at-1"), .string("at-3")])
        // A whole double is written as a whole number, which devices read into double columns.
        #expect(attempts.map { $0.pullMember("score") } == [.int(14), .double(1e-7)])
    }

    /// The object keys of a JSON text in the order they appear.
    static func keyOrder(_ text: String) -> [String] {
        var keys: [String] = []
        var current = ""
        var inString = false
        var escaped = false
        var after = text.startIndex
        for index in text.indices {
            let character = text[index]
            if inString {
                if escaped {
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "\"" {
                    inString = false
                    after = text.index(after: index)
                } else {
                    current.append(character)
                }
                continue
            }
            if character == "\"" {
                inString = true
                current = ""
            } else if character == ":", index == after || text[after..<index].allSatisfy(\.isWhitespace) {
                keys.append(current)
            }
        }
        return keys
    }
}

extension PullPage {
    /// The page shaped row by row into a tree of values by ``RowShaping`` (the way the server
    /// shapes single rows elsewhere), to check the page writer against.
    var shapedByRowShaping: PullResponse {
        PullResponse(
            cursor: cursor, hasMore: hasMore,
            upserts: upserts.mapValues { group in
                group.rows.map { row in
                    switch group.shaping {
                    case .entity(let plan): .object(plan.shape(row))
                    case .event(let event, let version, let plan): .object(RowShaping.wireEvent(row, event: event, version: version, plan: plan))
                    }
                }
            },
            deletes: deletes, lastSeq: lastSeq
        )
    }
}
