import ContractRuntime
import EngineTestContracts
import Foundation
import SyncProtocol
import Testing

@testable import SyncServer

/// The route writes pull pages straight from the stored rows (``PullPage/json()``) instead of
/// encoding ``PullService/pull(scope:cursor:limit:schema:clientID:identity:)``'s value with
/// `JSONEncoder`; both must be the same page. On the engines' own contracts; an event at an older
/// schema version is in PullPageEventVersionTests.
@Suite("Pull pages written as JSON")
struct PullPageJSONTests {
    static let device = PullHarness.device()

    /// Rows of every kind the contracts have: lists, JSON documents with text that needs
    /// escaping, whole and fractional doubles, dates, timestamps, UUIDs, bytes, nulls, tombstones,
    /// and team events.
    static func seeded() async throws -> PullHarness {
        let harness = try await PullHarness.engine(.sqlite)
        try await harness.publish("Label", PullHarness.label("label-1", name: "Fractions \"½\" / ünïcødé 🚲", sortIndex: 4, uses: nil))
        try await harness.publish(
            "Label",
            .object([
                "id": .string("label-3"), "name": .string("Tab\tnew\nline \\ back"), "description": .string("control \u{01}\u{1F} \u{08}\u{0C}"),
                "color": .string("purple"), "sort_index": .int(1),
            ]))
        try await harness.publish("Label", PullHarness.label("label-2"))
        try await harness.delete("Label", "label-2")

        try await harness.storeDirectly(
            ContractRegistry.profile,
            [
                "id": .string("u-1"), "display_name": .string("Ann \"the reader\""), "theme": .string("dark"), "member_since": .string("2026-01-02"),
                "last_active_on": .string("2026-01-31"), "notes_viewed": .int(1234), "average_view_seconds": .double(14),
                "pinned_board_ids": .array([.string("b-1"), .string("b-2")]),
                "preferences": .object(["text": .string("a \"quoted\" answer"), "choices": .array([.int(1), .int(2)])]),
                "updated_at": .string("2026-01-31T08:00:00.125Z"),
            ], scopeKey: "workspace:user:u-1")

        let team = "workspace:team:t-1"
        try await harness.storeDirectly(
            ContractRegistry.board,
            [
                "id": .string("b-1"), "team_id": .string("t-1"), "owner_id": .string("u-1"), "name": .string("Launch"), "is_template": .bool(true),
                "settings": .object(["q": .array([.string("control \u{01}\u{1F} \u{08}\u{0C}"), .double(0.1), .int(-3), .bool(true), .null])]),
                "starts_on": .string("2026-02-01"), "created_at": .string("2026-01-30T08:00:00.000Z"),
                "updated_at": .string("2026-01-31T08:00:00.000Z"),
            ], scopeKey: team)
        for (id, position) in [("c-1", 14.0), ("c-2", 0.35), ("c-3", 1e-7)] {
            try await harness.storeDirectly(
                ContractRegistry.card,
                [
                    "id": .string(id), "team_id": .string("t-1"), "board_id": .string("b-1"), "title": .string("Card \(id)"),
                    "lane": .string("doing"),
                    "sort_index": .double(position), "estimate_hours": .double(2.5), "label_ids": .array([.string("label-1")]),
                    "due_on": .string("2026-02-15"), "completed_at": .string("2026-01-31T08:00:00.000Z"), "revision": .int(1),
                ], scopeKey: team)
        }
        try await harness.storeDirectly(
            ContractRegistry.card,
            [
                "id": .string("c-2"), "team_id": .string("t-1"), "board_id": .string("b-1"), "title": .string("Card c-2"), "revision": .int(2),
            ], scopeKey: team, deleted: true)

        let commented = ContractRegistry.cardCommented
        func column(_ name: String, _ value: JSONValue) throws -> ColumnValue {
            try RowCodec.columnValue(value, for: try #require(commented.fields.first { $0.name == name }))
        }
        try await harness.storeEvent(
            commented, id: "01J0000000000000000000CMNT", scopeKey: team,
            payload: [
                "team_id": .text("t-1"), "card_id": .text("c-1"), "body": .text("Looks \"good\""), "mentions": .text("[\"u-2\",\"u-3\"]"),
                "reactions": .text("[\"like\"]"), "reply_to": try column("reply_to", .string("6F1C7E0A-2B3C-4D5E-8F90-A1B2C3D4E5F6")),
                "sketch": try column("sketch", .string("AQID/w==")),
            ])
        let file = try FileReference(
            sha256: String(repeating: "ab", count: 32), byteCount: 48_213, contentType: "image/jpeg", name: "mirror \"left\".jpg")
        try await harness.storeEvent(
            commented, id: "01J0000000000000000000CMNU", scopeKey: team,
            payload: [
                "team_id": .text("t-1"), "card_id": .text("c-3"), "body": .text("Scratched"), "mentions": .text("[]"), "reactions": .text("[]"),
                "edited_at": .integer(1_769_846_400_000), "attachment": .text(file.canonicalText),
            ])
        return harness
    }

    static let requests: [(scope: String, schema: [String: Int], limit: Int?)] = [
        ("catalog", [:], nil), ("catalog", ["Label": 2], nil), ("catalog", [:], 2),
        ("user", [:], nil), ("team", [:], nil), ("team", [:], 3), ("team", ["Card": 1], nil),
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

    @Test("an event is written as the bytes of its wire value, its file reference copied as stored")
    func eventBytes() async throws {
        let harness = try await Self.seeded()
        defer { harness.remove() }
        for schema in [[:], ["CardCommented": 1]] {
            let page = try await harness.pull.page(scope: "team", cursor: nil, limit: nil, schema: schema, clientID: nil, identity: Self.device)
            let group = try #require(page.upserts["CardCommented"])
            guard case .event(let event, let version, let plan) = group.shaping else {
                Issue.record("CardCommented is not shaped as an event")
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
            #expect(text.contains("mirror \\\"left\\\".jpg"), "\(schema): \(text)")
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

    @Test("rows and deletes land where the page says, and the team and user pages have every kind of value")
    func teamAndUserPages() async throws {
        let harness = try await Self.seeded()
        defer { harness.remove() }
        let page = try await harness.pull.page(scope: "team", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: Self.device)
        let json = try #require(JSONParser.parse(Data(page.json())))
        #expect(json.pullMember("deletes") == .object(["Card": .array([.string("c-2")])]))
        guard case .array(let events)? = json.pullMember("upserts")?.pullMember("CardCommented"), let comment = events.first else {
            Issue.record("no CardCommented row in \(json)")
            return
        }
        #expect(comment.pullMember("payload")?.pullMember("reply_to") == .string("6f1c7e0a-2b3c-4d5e-8f90-a1b2c3d4e5f6"))
        #expect(comment.pullMember("payload")?.pullMember("mentions") == .array([.string("u-2"), .string("u-3")]))
        guard case .array(let boards)? = json.pullMember("upserts")?.pullMember("Board"), let board = boards.first else {
            Issue.record("no Board row in \(json)")
            return
        }
        #expect(board.pullMember("is_template") == .bool(true))
        #expect(board.pullMember("_server_version") == .int(1))
        guard case .array(let cards)? = json.pullMember("upserts")?.pullMember("Card") else {
            Issue.record("no Card rows in \(json)")
            return
        }
        #expect(cards.map { $0.pullMember("id") } == [.string("c-1"), .string("c-3")])
        // A whole double is written as a whole number, which devices read into double columns.
        #expect(cards.map { $0.pullMember("sort_index") } == [.int(14), .double(1e-7)])

        let userPage = try await harness.pull.page(scope: "user", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: Self.device)
        let user = try #require(JSONParser.parse(Data(userPage.json())))
        guard case .array(let profiles)? = user.pullMember("upserts")?.pullMember("Profile"), let profile = profiles.first else {
            Issue.record("no Profile row in \(user)")
            return
        }
        #expect(profile.pullMember("preferences") == .object(["text": .string("a \"quoted\" answer"), "choices": .array([.int(1), .int(2)])]))
        #expect(profile.pullMember("updated_at") == .string("2026-01-31T08:00:00.125Z"))
        #expect(profile.pullMember("average_view_seconds") == .int(14))
        #expect(profile.pullMember("member_since") == .string("2026-01-02"))
        #expect(profile.pullMember("_server_version") == .int(1))
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
