import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// Pull on the engines' own contracts: the read-only `catalog` scope (`Label`, version 3, oldest
/// supported 2), a team's scope (`Board`, `Card` at version 2, `Note`, the events `CardCommented`
/// and `CardMoved`) and a member's (`Profile`, `Activity`). A published row's cascading deletion
/// is in PullCascadeDeleteTests.
@Suite("Pull by scope and cursor")
struct PullServiceTests {
    let device = PullHarness.device()

    @Test("pages are bounded by limit; over many pages every row comes exactly once, in sequence order", arguments: StorageKind.allCases)
    func paging(_ kind: StorageKind) async throws {
        let harness = try await PullHarness.engine(kind)
        defer { harness.remove() }
        for index in 0..<30 {
            try await harness.seed("Board", PullHarness.board(String(format: "b-%02d", index)))
            try await harness.seed("Card", PullHarness.card(String(format: "c-%02d", index), board: String(format: "b-%02d", index)))
        }
        let pages = try await harness.pullAll("team", as: device, limit: 7)
        #expect(pages.map { $0.upserts.values.map(\.count).reduce(0, +) } == [7, 7, 7, 7, 7, 7, 7, 7, 4])
        #expect(pages.dropLast().allSatisfy { $0.hasMore })
        #expect(pages.last?.hasMore == false)
        let boards = pages.flatMap { $0.upserts["Board"] ?? [] }.compactMap { $0.pullMember("id")?.pullText }
        let cards = pages.flatMap { $0.upserts["Card"] ?? [] }.compactMap { $0.pullMember("id")?.pullText }
        #expect(boards == (0..<30).map { String(format: "b-%02d", $0) })
        #expect(cards == (0..<30).map { String(format: "c-%02d", $0) })
        // The cursor is the last row's sequence: page n+1 starts right after page n.
        let sequences = try pages.map { try SyncCursor(encoded: $0.cursor).sequence }
        #expect(sequences == [7, 14, 21, 28, 35, 42, 49, 56, 60])

        // An empty page keeps the cursor.
        let empty = try await harness.pull.pull(scope: "team", cursor: pages.last!.cursor, limit: 7, schema: [:], clientID: nil, identity: device)
        #expect(empty.upserts.isEmpty && empty.deletes.isEmpty && !empty.hasMore)
        #expect(empty.cursor == pages.last!.cursor)
    }

    @Test("rows written while a device pages through are not skipped", arguments: StorageKind.allCases)
    func writesBetweenPages(_ kind: StorageKind) async throws {
        let harness = try await PullHarness.engine(kind)
        defer { harness.remove() }
        for index in 0..<10 {
            try await harness.publish("Label", PullHarness.label("label-\(index)"))
        }
        var seen: [String] = []
        var cursor: String?
        var page: PullResponse
        var extra = 0
        repeat {
            page = try await harness.pull.pull(scope: "catalog", cursor: cursor, limit: 3, schema: [:], clientID: nil, identity: device)
            seen += (page.upserts["Label"] ?? []).compactMap { $0.pullMember("id")?.pullText }
            cursor = page.cursor
            if extra < 2 {
                // A new row and an update of a row already pulled, between two pages.
                try await harness.publish("Label", PullHarness.label("new-\(extra)"))
                try await harness.publish("Label", PullHarness.label("label-0", name: "Renamed \(extra)"))
                extra += 1
            }
        } while page.hasMore
        #expect(Set(seen) == Set((0..<10).map { "label-\($0)" } + ["new-0", "new-1"]))
        // label-0 comes once more, in its latest state only: its first update was replaced by the
        // second before the device got there.
        #expect(seen.filter { $0 == "label-0" }.count == 2)
        #expect(seen.count == 13)
    }

    @Test("default limit, clamping above the maximum, and limits below 1 refused", arguments: StorageKind.allCases)
    func limits(_ kind: StorageKind) async throws {
        let harness = try await PullHarness.engine(kind, defaultLimit: 4, maximumLimit: 6)
        defer { harness.remove() }
        for index in 0..<10 {
            try await harness.publish("Label", PullHarness.label("label-\(index)"))
        }
        let byDefault = try await harness.pull.pull(scope: "catalog", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)
        #expect(byDefault.upserts["Label"]?.count == 4 && byDefault.hasMore)
        let clamped = try await harness.pull.pull(scope: "catalog", cursor: nil, limit: 5000, schema: [:], clientID: nil, identity: device)
        #expect(clamped.upserts["Label"]?.count == 6 && clamped.hasMore)
        let exact = try await harness.pull.pull(scope: "catalog", cursor: nil, limit: 10, schema: [:], clientID: nil, identity: device)
        #expect(exact.upserts["Label"]?.count == 6)
        for limit in [0, -3] {
            let status = await pullErrorStatus {
                _ = try await harness.pull.pull(scope: "catalog", cursor: nil, limit: limit, schema: [:], clientID: nil, identity: device)
            }
            #expect(status == 400)
        }
    }

    @Test("a row written several times comes once, in its latest state", arguments: StorageKind.allCases)
    func latestStateOnly(_ kind: StorageKind) async throws {
        let harness = try await PullHarness.engine(kind)
        defer { harness.remove() }
        for name in ["First", "Second", "Third"] {
            try await harness.publish("Label", PullHarness.label("label-1", name: name))
        }
        try await harness.publish("Label", PullHarness.label("label-2"))
        let page = try await harness.pull.pull(scope: "catalog", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)
        let labels = page.upserts["Label"] ?? []
        #expect(labels.count == 2)
        #expect(labels.first?.pullMember("name") == .string("Third"))
        #expect(try SyncCursor(encoded: page.cursor).sequence == 4)

        let stored = try await harness.storage.read { reader in
            try await reader.row(in: ContractTable(ContractRegistry.label), tenant: PullHarness.tenant, id: "label-1")
        }
        #expect(stored?.integer("_version") == 3)
        #expect(stored?.integer("_seq") == 3)
    }

    @Test("deleted rows come as deletes, not upserts; publishing a row again brings it back", arguments: StorageKind.allCases)
    func tombstones(_ kind: StorageKind) async throws {
        let harness = try await PullHarness.engine(kind)
        defer { harness.remove() }
        try await harness.publish("Label", PullHarness.label("label-1"))
        try await harness.publish("Label", PullHarness.label("label-2"))
        let before = try await harness.pull.pull(scope: "catalog", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)

        try await harness.delete("Label", "label-1")

        let fromStart = try await harness.pull.pull(scope: "catalog", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)
        #expect(fromStart.deletes == ["Label": ["label-1"]])
        #expect(fromStart.upserts.keys.sorted() == ["Label"])
        #expect(fromStart.upserts["Label"]?.compactMap { $0.pullMember("id")?.pullText } == ["label-2"])

        let since = try await harness.pull.pull(scope: "catalog", cursor: before.cursor, limit: nil, schema: [:], clientID: nil, identity: device)
        #expect(since.upserts.isEmpty)
        #expect(since.deletes == ["Label": ["label-1"]])

        // Publishing it again brings it back.
        try await harness.publish("Label", PullHarness.label("label-1", name: "Back"))
        let again = try await harness.pull.pull(scope: "catalog", cursor: since.cursor, limit: nil, schema: [:], clientID: nil, identity: device)
        #expect(again.upserts["Label"]?.first?.pullMember("name") == .string("Back"))
        #expect(again.deletes.isEmpty)
    }

    @Test("each device reads only its own user scope, its own teams, its own tenant", arguments: StorageKind.allCases)
    func scopeIsolation(_ kind: StorageKind) async throws {
        let harness = try await PullHarness.engine(kind)
        defer { harness.remove() }
        let profile = ContractRegistry.profile
        func profileRow(_ id: String, _ name: String) -> [String: JSONValue] {
            ["id": .string(id), "display_name": .string(name), "updated_at": .string("2026-01-31T08:00:00.000Z")]
        }
        try await harness.storeDirectly(profile, profileRow("u-1", "Ann"), scopeKey: "workspace:user:u-1")
        try await harness.storeDirectly(profile, profileRow("u-2", "Ben"), scopeKey: "workspace:user:u-2")
        try await harness.storeDirectly(profile, profileRow("u-1", "Ann at Globex"), scopeKey: "workspace:user:u-1", tenant: "globex")
        for team in ["t-1", "t-2"] {
            try await harness.seed("Board", PullHarness.board("b-\(team)", team: team))
            try await harness.seed("Card", PullHarness.card("c-\(team)", board: "b-\(team)", team: team))
            try await harness.seed("Note", PullHarness.note("n-\(team)", card: "c-\(team)", team: team))
        }
        try await harness.publish("Label", PullHarness.label("label-1"))

        let mine = try await harness.pull.pull(scope: "user", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)
        #expect(mine.upserts["Profile"]?.compactMap { $0.pullMember("id")?.pullText } == ["u-1"])
        #expect(mine.upserts["Profile"]?.compactMap { $0.pullMember("display_name")?.pullText } == ["Ann"])

        let team = try await harness.pull.pull(scope: "team", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)
        let teamIDs = team.upserts.values.flatMap { $0 }.compactMap { $0.pullMember("team_id")?.pullText }
        #expect(!teamIDs.isEmpty && teamIDs.allSatisfy { $0 == "t-1" })
        #expect(team.upserts.keys.sorted() == ["Board", "Card", "Note"])

        let byKey = try await harness.pull.pull(scope: "workspace:team:t-1", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)
        #expect(byKey.upserts == team.upserts)

        // Another tenant sees none of acme's rows, the catalog included.
        let outsider = PullHarness.device("u-1", tenant: "globex", teams: ["t-1"])
        let theirs = try await harness.pull.pull(scope: "user", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: outsider)
        #expect(theirs.upserts["Profile"]?.compactMap { $0.pullMember("display_name")?.pullText } == ["Ann at Globex"])
        let theirCatalog = try await harness.pull.pull(scope: "catalog", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: outsider)
        #expect(theirCatalog.upserts.isEmpty)
        let theirTeam = try await harness.pull.pull(scope: "team", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: outsider)
        #expect(theirTeam.upserts.isEmpty)
    }

    @Test("foreign scopes are forbidden; unknown scopes, bad cursors and ambiguous names are refused", arguments: StorageKind.allCases)
    func refusals(_ kind: StorageKind) async throws {
        let harness = try await PullHarness.engine(kind)
        defer { harness.remove() }
        try await harness.publish("Label", PullHarness.label("label-1"))
        let pull = harness.pull
        func status(_ scope: String, cursor: String? = nil, as identity: DeviceIdentity? = nil) async -> Int? {
            await pullErrorStatus {
                _ = try await pull.pull(scope: scope, cursor: cursor, limit: nil, schema: [:], clientID: nil, identity: identity ?? device)
            }
        }
        #expect(await status("workspace:user:u-2") == 403)
        #expect(await status("workspace:team:t-2") == 403)
        #expect(await status("team", as: PullHarness.device(teams: [])) == 403)
        #expect(await status("team", as: PullHarness.device(teams: ["t-1", "t-2"])) == 400)
        #expect(await status("workspace:team:t-2", as: PullHarness.device(teams: ["t-1", "t-2"])) == nil)
        #expect(await status("workspace:user:u-1") == nil)
        #expect(await status("nowhere") == 404)
        #expect(await status("orders:team:t-1") == 404)

        let catalogCursor = try await pull.pull(scope: "catalog", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device).cursor
        #expect(await status("user", cursor: catalogCursor) == 400)
        #expect(await status("catalog", cursor: "not a cursor") == 400)
        #expect(await status("catalog", cursor: SyncCursor(scopeKey: "catalog:global", sequence: 0).encoded) == nil)
        let futureFormat = Data(#"{"k":"catalog:global","s":1,"v":9}"#.utf8).base64EncodedString()
        let error = await pullError {
            _ = try await pull.pull(scope: "catalog", cursor: futureFormat, limit: nil, schema: [:], clientID: nil, identity: device)
        }
        #expect(error?.status == 400)
        #expect(error?.detail.code == .malformedRequest)

        // An admin reads any scope by its key.
        #expect(await status("workspace:user:u-2", as: PullHarness.admin) == nil)
    }

    @Test(
        "rows are shaped for the device's schema version: Label 2 gets position and no icon or usage_count, Card 1 no estimate_hours or checklist",
        arguments: StorageKind.allCases)
    func shaping(_ kind: StorageKind) async throws {
        let harness = try await PullHarness.engine(kind)
        defer { harness.remove() }
        try await harness.publish("Label", PullHarness.label("label-1", sortIndex: 4, uses: 30))
        try await harness.seed("Board", PullHarness.board("b-1"))
        try await harness.seed("Card", PullHarness.card("c-1", board: "b-1", hours: 1.5))

        let current = try await harness.pull.pull(scope: "catalog", cursor: nil, limit: nil, schema: ["Label": 3], clientID: nil, identity: device)
        let v3 = try #require(current.upserts["Label"]?.first)
        #expect(
            v3.pullKeys == ["id", "name", "color", "description", "sort_index", "icon", "usage_count", "updated_at", "_server_version"])
        #expect(v3.pullMember("_server_version") == .int(1), "a pulled row carries the server version a device sends back as base_version")
        #expect(v3.pullMember("sort_index") == .int(4))
        #expect(v3.pullMember("usage_count") == .int(30))

        let old = try await harness.pull.pull(
            scope: "catalog", cursor: nil, limit: nil, schema: ["Label": 2, "Card": 1], clientID: nil, identity: device)
        let v2 = try #require(old.upserts["Label"]?.first)
        #expect(v2.pullKeys == ["id", "name", "color", "description", "position", "updated_at", "_server_version"])
        #expect(v2.pullMember("position") == .int(4))
        #expect(v2.pullMember("sort_index") == nil && v2.pullMember("usage_count") == nil)
        let team = try await harness.pull.pull(scope: "team", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)
        let cardV2 = try #require(team.upserts["Card"]?.first)
        #expect(cardV2.pullMember("estimate_hours") == .double(1.5))
        let oldTeam = try await harness.pull.pull(scope: "team", cursor: nil, limit: nil, schema: ["Card": 1], clientID: nil, identity: device)
        let cardV1 = try #require(oldTeam.upserts["Card"]?.first)
        #expect(cardV1.pullMember("title") == .string("Card c-1"))
        #expect(cardV1.pullMember("estimate_hours") == nil && cardV1.pullMember("checklist") == nil)

        // Values are in wire form: timestamps as ISO-8601 text, lists as arrays, bools as bools.
        let board = try #require(team.upserts["Board"]?.first)
        #expect(board.pullMember("is_template") == .bool(false))
        #expect(cardV2.pullMember("checklist") == .array([.string("draft"), .string("review")]))
        #expect(v3.pullMember("updated_at")?.pullText.flatMap(Timestamp.init(iso8601:)) != nil)

        // A device newer than the server gets the current shape.
        let newer = try await harness.pull.pull(scope: "catalog", cursor: nil, limit: nil, schema: ["Label": 9], clientID: nil, identity: device)
        #expect(newer.upserts["Label"]?.first == v3)
    }

    @Test("a schema version below the oldest supported is refused with 426 and the versions", arguments: StorageKind.allCases)
    func schemaTooOld(_ kind: StorageKind) async throws {
        let harness = try await PullHarness.engine(kind)
        defer { harness.remove() }
        let error = await pullError {
            _ = try await harness.pull.pull(
                scope: "catalog", cursor: nil, limit: nil, schema: ["Label": 1, "Card": 1], clientID: nil, identity: device)
        }
        #expect(error?.status == 426)
        #expect(error?.detail.code == .schemaTooOld)
        #expect(error?.detail.details == .object(["entity": .string("Label"), "oldest_supported": .int(2), "current": .int(3)]))
        // Contracts the server does not know are ignored.
        let status = await pullErrorStatus {
            _ = try await harness.pull.pull(scope: "catalog", cursor: nil, limit: nil, schema: ["Future": 1], clientID: nil, identity: device)
        }
        #expect(status == nil)
    }

    @Test("events that travel both ways are pulled as envelope and payload; device-to-server contracts never are", arguments: StorageKind.allCases)
    func events(_ kind: StorageKind) async throws {
        let harness = try await PullHarness.engine(kind)
        defer { harness.remove() }
        let scopeKey = "workspace:team:t-1"
        let commented = ContractRegistry.cardCommented, moved = ContractRegistry.cardMoved
        try await harness.storeEvent(
            commented, id: "01J0000000000000000000CMNT", scopeKey: scopeKey,
            payload: [
                "team_id": .text("t-1"), "card_id": .text("c-1"), "body": .text("Looks good"), "mentions": .text("[\"u-3\"]"),
                "reactions": .text("[]"),
            ])
        try await harness.storeEvent(
            moved, id: "01J0000000000000000000MOVE", scopeKey: scopeKey,
            payload: [
                "team_id": .text("t-1"), "card_id": .text("c-1"), "board_id": .text("b-1"), "from_lane": .text("todo"), "to_lane": .text("doing"),
                "base_revision": .integer(1),
            ])
        let activity = ContractRegistry.activity
        try await harness.storeDirectly(
            activity,
            [
                "id": .string("00000000-0000-4000-8000-000000000001"), "verb": .string("viewed"), "subject_id": .string("c-1"),
                "happened_at": .string("2026-01-31T08:00:00.000Z"), "happened_on": .string("2026-01-31"),
            ], scopeKey: "workspace:user:u-1")

        let team = try await harness.pull.pull(scope: "team", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)
        #expect(team.upserts.keys.sorted() == ["CardCommented"])
        let event = try #require(team.upserts["CardCommented"]?.first)
        #expect(event.pullKeys == ["event_id", "type", "schema_version", "user_id", "device_id", "occurred_at", "recorded_at", "hash", "payload"])
        #expect(event.pullMember("type") == .string("CardCommented"))
        #expect(event.pullMember("occurred_at") == .string("2026-01-31T08:00:00.000Z"))
        let payload = try #require(event.pullMember("payload"))
        #expect(payload.pullMember("mentions") == .array([.string("u-3")]))
        #expect(payload.pullMember("attachment") == .null)
        // It decodes as the generated envelope.
        let data = try JSONEncoder().encode(event)
        let decoded = try JSONDecoder().decode(EventEnvelope<CardCommented>.self, from: data)
        #expect(decoded.eventId == "01J0000000000000000000CMNT")
        #expect(decoded.payload.body == "Looks good")
        // The cursor is the last pulled row's sequence.
        #expect(try SyncCursor(encoded: team.cursor).sequence == 1)

        let user = try await harness.pull.pull(scope: "user", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)
        #expect(user.upserts.isEmpty && user.deletes.isEmpty)
    }

    @Test("last_seq is the client's last push done, 0 without a client id", arguments: StorageKind.allCases)
    func lastSeq(_ kind: StorageKind) async throws {
        let harness = try await PullHarness.engine(kind)
        defer { harness.remove() }
        try await harness.storage.write { transaction in
            try await transaction.recordPushResults(
                tenant: PullHarness.tenant, clientID: "c-1", PushResultRecord(firstSeq: 1, results: ["{}", "{}", "{}"]), recordedAt: 0
            )
        }
        let with = try await harness.pull.pull(scope: "user", cursor: nil, limit: nil, schema: [:], clientID: "c-1", identity: device)
        #expect(with.lastSeq == 3)
        let other = try await harness.pull.pull(scope: "user", cursor: nil, limit: nil, schema: [:], clientID: "c-2", identity: device)
        #expect(other.lastSeq == 0)
        let without = try await harness.pull.pull(scope: "user", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)
        #expect(without.lastSeq == 0)
        let elsewhere = try await harness.pull.pull(
            scope: "user", cursor: nil, limit: nil, schema: [:], clientID: "c-1", identity: PullHarness.device(tenant: "globex")
        )
        #expect(elsewhere.lastSeq == 0)
    }

    @Test("the response has the protocol's JSON shape", arguments: StorageKind.allCases)
    func wireShape(_ kind: StorageKind) async throws {
        let harness = try await PullHarness.engine(kind)
        defer { harness.remove() }
        try await harness.publish("Label", PullHarness.label("label-1"))
        let page = try await harness.pull.pull(scope: "catalog", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)
        let json = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(page))
        #expect(json.pullKeys == ["cursor", "has_more", "upserts", "deletes", "last_seq"])
        // A pulled row decodes as the generated DTO.
        let label = try JSONDecoder().decode(EngineTestContracts.Label.self, from: JSONEncoder().encode(page.upserts["Label"]![0]))
        #expect(label.id == "label-1")
    }
}
