import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// What the engine suites push: rows of the engines' own contracts (EngineTestContracts), so a
/// change to the sample apps' contracts never reaches them.
extension PushHarness {
    /// A push service on a fresh storage of the engines' own contracts, without reducers.
    static func engine(_ kind: StorageKind) async throws -> PushHarness {
        try await PushHarness(kind, contracts: ContractRegistry.self, reducers: [])
    }

    /// A valid `Card` (version_check on `revision`, team scope) row.
    func cardPayload(_ id: String, team: String = "red", title: String = "Draft the plan", lane: String = "todo") -> [String: JSONValue] {
        ["id": .string(id), "team_id": .string(team), "board_id": .string("board-1"), "title": .string(title), "lane": .string(lane)]
    }

    /// A valid `Board` (field_merge, team scope) row.
    func boardPayload(_ id: String, name: String = "Launch") -> [String: JSONValue] {
        [
            "id": .string(id), "team_id": .string("red"), "owner_id": .string("alice"), "name": .string(name),
            "status": .string("active"), "created_at": .string("2026-01-01T08:00:00.000Z"), "updated_at": .string("2026-01-01T08:00:00.000Z"),
        ]
    }

    /// A valid `Note` (last_writer_wins, team scope) row.
    func notePayload(_ id: String, body: String = "Call the venue", card: String = "card-1") -> [String: JSONValue] {
        [
            "id": .string(id), "team_id": .string("red"), "card_id": .string(card), "author_id": .string("alice"), "body": .string(body),
            "updated_at": .string("2026-01-01T08:00:00.000Z"),
        ]
    }

    /// The `n`th `Activity` id: a lowercase UUID (its primary key is a uuid), the same for the same `n`.
    func activityID(_ n: Int) -> String {
        String(format: "00000000-0000-4000-8000-%012d", n)
    }

    /// A valid `Activity` (append_only, up, user scope) row.
    func activityPayload(_ id: String, verb: String = "viewed", subject: String = "card-1") -> [String: JSONValue] {
        [
            "id": .string(id), "verb": .string(verb), "subject_id": .string(subject), "happened_at": .string("2026-01-01T07:00:00.000Z"),
            "happened_on": .string("2026-01-01"),
        ]
    }
}

/// What the engine suites publish and pull: rows of the engines' own contracts, in the `catalog`
/// scope (`Label`, read-only, published by an admin), a team's scope (`Board`, `Card`, `Note`,
/// seeded) and a member's scope (`Profile`).
extension PullHarness {
    /// A pull harness on a fresh storage of the engines' own contracts, publishing without any
    /// app's computed fields.
    static func engine(_ kind: StorageKind, defaultLimit: Int = 500, maximumLimit: Int = 1000) async throws -> PullHarness {
        try await PullHarness(kind, defaultLimit: defaultLimit, maximumLimit: maximumLimit, contracts: ContractRegistry.self, apps: [])
    }

    /// A `Label` of the catalog (version 3: `sort_index`, once `position`; `icon` and
    /// `usage_count` since 3).
    static func label(_ id: String, name: String? = nil, sortIndex: Int64 = 0, uses: Int64? = 2) -> JSONValue {
        var row: [String: JSONValue] = [
            "id": .string(id), "name": .string(name ?? "Label \(id)"), "description": .string("About \(id)"), "color": .string("blue"),
            "sort_index": .int(sortIndex),
        ]
        if let uses { row["usage_count"] = .int(uses) }
        return .object(row)
    }

    /// A `Board` (field_merge) of team `team`.
    static func board(_ id: String, team: String = "t-1", name: String? = nil) -> [String: JSONValue] {
        [
            "id": .string(id), "team_id": .string(team), "owner_id": .string("u-1"), "name": .string(name ?? "Board \(id)"),
            "created_at": .string("2026-01-31T08:00:00.000Z"), "updated_at": .string("2026-01-31T08:00:00.000Z"),
        ]
    }

    /// A `Card` (version_check, version 2) of team `team` on board `board`.
    static func card(_ id: String, board: String, team: String = "t-1", lane: String = "todo", hours: Double? = nil) -> [String: JSONValue] {
        var row: [String: JSONValue] = [
            "id": .string(id), "team_id": .string(team), "board_id": .string(board), "title": .string("Card \(id)"), "lane": .string(lane),
            "checklist": .array([.string("draft"), .string("review")]),
        ]
        if let hours { row["estimate_hours"] = .double(hours) }
        return row
    }

    /// A `Note` (last_writer_wins) of team `team` on card `card`.
    static func note(_ id: String, card: String, team: String = "t-1") -> [String: JSONValue] {
        [
            "id": .string(id), "team_id": .string(team), "card_id": .string(card), "author_id": .string("u-1"), "body": .string("Note \(id)"),
            "updated_at": .string("2026-01-31T08:00:00.000Z"),
        ]
    }

    /// Writes a row of a writable scope as seeding does (``ContentService/publish(rows:identity:operation:)``,
    /// filed under its scope's key from its fields), with the scope's next sequence.
    func seed(_ entity: String, _ fields: [String: JSONValue]) async throws {
        let descriptor = try #require(storage.contracts.entity(named: entity))
        _ = try await publisher.publish(rows: [.init(entity: descriptor, fields: fields)], identity: Self.admin)
    }

    /// Deletes a published row (``ContentService/delete(entity:id:identity:urgent:)``).
    func delete(_ entity: String, _ id: String, urgent: Bool = false) async throws {
        try await publisher.delete(entity: entity, id: id, identity: Self.admin, urgent: urgent)
    }
}

/// `Card` rows as storage holds them, sync metadata included (tenant `t`), for engine tests that
/// write straight through a storage transaction.
enum StoredCard {
    static let contract = ContractRegistry.card

    static func row(id: String, board: String, lane: String, seq: Int64, scopeKey: String = "workspace:team:red") throws -> StoredRow {
        var row = StoredRow()
        let wire: [String: JSONValue] = [
            "id": .string(id), "team_id": .string("red"), "board_id": .string(board), "title": .string("Card \(id)"), "lane": .string(lane),
            "revision": .int(1),
        ]
        for field in contract.fields { row[field.name] = try RowCodec.columnValue(wire[field.name] ?? field.defaultValue ?? .null, for: field) }
        for (name, value) in [
            ("_tenant_id", ColumnValue.text("t")), ("_scope_key", .text(scopeKey)), ("_seq", .integer(seq)), ("_version", .integer(1)),
            ("_schema_version", .integer(2)), ("_hlc", .null), ("_field_clocks", .null), ("_deleted", .integer(0)),
            ("_updated_at", .integer(1)), ("_updated_by", .text("d")),
        ] { row[name] = value }
        return row
    }
}

/// The route suites' server on the engines' own contracts.
extension RouteHarness {
    /// A server on a fresh SQLite database of the engines' own contracts, running no app.
    static func engine(configuration: ServerConfiguration = RouteHarness.defaultConfiguration, rateLimiter: RateLimiter? = nil) throws
        -> RouteHarness
    {
        try RouteHarness(configuration: configuration, rateLimiter: rateLimiter, contracts: ContractRegistry.self, apps: [])
    }

    /// Seeds tenant `acme` as an admin would: two labels of the catalog, and a board with a card
    /// and a note of team `team-1`.
    func seedWorkspace() async throws {
        let admin = DeviceIdentity(tenant: "acme", userID: "admin", deviceID: "console", isAdmin: true, expiresAt: .max)
        let stamp = JSONValue.string("2026-01-31T08:00:00.000Z")
        let rows: [ContentService.ContentRow] = [
            .init(entity: ContractRegistry.label, fields: ["id": .string("label-1"), "name": .string("Urgent"), "color": .string("red")]),
            .init(entity: ContractRegistry.label, fields: ["id": .string("label-2"), "name": .string("Later"), "sort_index": .int(1)]),
            .init(
                entity: ContractRegistry.board,
                fields: [
                    "id": .string("board-1"), "team_id": .string("team-1"), "owner_id": .string("u-1"), "name": .string("Launch"),
                    "created_at": stamp, "updated_at": stamp,
                ]),
            .init(
                entity: ContractRegistry.card,
                fields: [
                    "id": .string("card-1"), "team_id": .string("team-1"), "board_id": .string("board-1"), "title": .string("Draft the plan"),
                    "description": .string(String(repeating: "Book the room, then the speakers. ", count: 20)),
                ]),
            .init(
                entity: ContractRegistry.note,
                fields: [
                    "id": .string("note-1"), "team_id": .string("team-1"), "card_id": .string("card-1"), "author_id": .string("u-1"),
                    "body": .string("Call the venue"), "updated_at": stamp,
                ]),
        ]
        _ = try await ContentService(storage: storage).publish(rows: rows, identity: admin)
    }
}

/// Mutations of `Activity` (user scope, append_only, a lowercase UUID id): rows a device may push.
enum EngineMutations {
    static func activity(seq: Int64, id: String = "9b2f3c1e-0000-4000-8000-000000000001", subject: String = "card-1") -> Mutation {
        Mutation(
            seq: seq, clientMutationId: String(format: "01J00000000000000000000%03d", seq), entity: "Activity", op: .create, id: id,
            payload: .object([
                "id": .string(id), "verb": .string("viewed"), "subject_id": .string(subject), "duration_ms": .int(1200),
                "happened_at": .string("2026-01-31T08:00:00.000Z"), "happened_on": .string("2026-01-31"),
            ])
        )
    }

    static func push(_ mutations: [Mutation], client: String = "client-1", schema: [String: Int] = ["Activity": 1]) -> PushRequest {
        PushRequest(clientId: client, schema: schema, mutations: mutations)
    }
}

/// The hostile suites' loopback server on the engines' own contracts.
extension HostileHarness {
    /// A fresh storage of the engines' own contracts; serve it with `live(apps: [])`.
    static func engine(_ kind: StorageKind, configure: (inout ServerConfiguration) -> Void = { _ in }) async throws -> HostileHarness {
        try await make(kind, contracts: ContractRegistry.self, configure: configure)
    }
}
