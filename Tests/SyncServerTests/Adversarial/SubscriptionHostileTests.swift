import ContractRuntime
import EngineTestContracts
import Foundation
import Hummingbird
import HummingbirdTesting
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// A hostile device against `POST /sync/v1/subscriptions/pull`, over HTTP on loopback: another
/// team's row, another team's scope named outright, a filter that would take too much, more
/// subscriptions than one request may carry, and thousands of distinct subscriptions from one
/// token, which leave nothing behind on the server. On the engines' own contracts (`card`,
/// `assigned_cards`).
@Suite("Subscriptions under a hostile device", .blockingWork)
struct SubscriptionHostileTests {
    static func card(_ id: String, team: String, assignee: String? = nil, seq: Int64) -> Mutation {
        var payload: [String: JSONValue] = [
            "id": .string(id), "team_id": .string(team), "board_id": .string("board-1"), "title": .string("Card \(id)"), "lane": .string("todo"),
        ]
        if let assignee { payload["assignee_id"] = .string(assignee) }
        return Mutation(
            seq: seq, clientMutationId: String(format: "01J00000000000000000000%03d", seq), entity: "Card", op: .create, id: id,
            payload: .object(payload))
    }

    /// Alice and Mallory on team-1, Carol on team-2 (the server holds team membership).
    static func teams(_ h: HostileHarness) async throws {
        try await h.storage.write { transaction in
            for (team, user) in [("team-1", "alice"), ("team-1", "mallory"), ("team-2", "carol")] {
                try await transaction.setTeamMembership(tenant: HostileHarness.tenant, team: team, userID: user, isMember: true)
            }
        }
    }

    static func subscribe(
        _ client: any TestClientProtocol, _ token: String, _ entries: [SubscriptionPullRequest.Entry]
    ) async throws -> TestResponse {
        try await client.execute(
            uri: "/sync/v1/subscriptions/pull", method: .post, headers: HostileHarness.headers(token),
            body: ByteBuffer(bytes: try JSONEncoder().encode(SubscriptionPullRequest(subscriptions: entries))))
    }

    static func answer(_ response: TestResponse) throws -> SubscriptionPullResponse {
        try JSONDecoder().decode(SubscriptionPullResponse.self, from: Data(response.body.readableBytesView))
    }

    @Test("another team's row, another team's scope, a too-broad filter, too many at once", arguments: StorageKind.allCases)
    func refusals(kind: StorageKind) async throws {
        let h = try await HostileHarness.engine(kind) { $0.identityLimits.rowsPerSubscription = 3 }
        try await Self.teams(h)
        try await h.live(apps: []) { client in
            let carol = h.signer.token(tenant: HostileHarness.tenant, user: "carol", device: "carol-phone", teams: ["team-2"])
            let pushed = try await client.push(
                PushRequest(clientId: "carol-phone", schema: [:], mutations: [Self.card("secret", team: "team-2", seq: 1)]), token: carol)
            #expect(pushed.status == .ok, "\(pushed.bodyText.prefix(300))")
            #expect(try pushed.pushResults.allSatisfy { $0.status == .applied }, "\(pushed.bodyText.prefix(300))")
            let mine = (1...5).map { Self.card("mine-\($0)", team: "team-1", assignee: "alice", seq: Int64($0)) }
            let owned = try await client.push(PushRequest(clientId: "alice-phone", schema: [:], mutations: mine), token: h.ownerToken)
            #expect(try owned.pushResults.allSatisfy { $0.status == .applied }, "\(owned.bodyText.prefix(300))")

            // Another team's card by id: refused, nothing of it.
            let stolen = try Self.answer(
                try await Self.subscribe(client, h.hostileToken, [.init(id: "a", name: "card", parameters: ["id": .string("secret")])]))
            #expect(stolen.subscriptions[0].error?.code == .forbidden)
            #expect(stolen.subscriptions[0].rowCount == 0)
            // Another team's scope named outright: refused.
            let named = try Self.answer(
                try await Self.subscribe(
                    client, h.hostileToken, [.init(id: "b", name: "card", parameters: ["id": .string("secret")], scope: "workspace:team:team-2")]))
            #expect(named.subscriptions[0].error?.code == .forbidden)
            #expect(named.subscriptions[0].rowCount == 0)
            // The owner's "assigned to me" holds more rows than one subscription may: refused as too broad, nothing sent.
            let broad = try Self.answer(try await Self.subscribe(client, h.ownerToken, [.init(id: "c", name: "assigned_cards", parameters: [:])]))
            #expect(broad.subscriptions[0].error?.code == .subscriptionTooBroad)
            #expect(broad.subscriptions[0].rowCount == 0)
            // Mallory's "assigned to me" is hers only: none.
            let hers = try Self.answer(
                try await Self.subscribe(client, h.hostileToken, [.init(id: "d", name: "assigned_cards", parameters: [:])]))
            #expect(hers.subscriptions[0].error == nil)
            #expect(hers.subscriptions[0].rowCount == 0)

            let many = (0..<65).map { SubscriptionPullRequest.Entry(id: "s-\($0)", name: "card", parameters: ["id": .string("i-\($0)")]) }
            let tooMany = try await Self.subscribe(client, h.hostileToken, many)
            #expect(tooMany.status == .badRequest)
            #expect(try tooMany.errorDetail.code == .tooManySubscriptions)
            // A repeated entry id, and an entry id that is no identifier.
            let twice = try await Self.subscribe(client, h.hostileToken, [many[0], many[0]])
            #expect(twice.status == .badRequest)
            let nul = try await Self.subscribe(client, h.hostileToken, [.init(id: "x\u{0}y", name: "card", parameters: ["id": .string("i")])])
            #expect(nul.status == .badRequest)
        }
    }

    @Test("thousands of distinct subscriptions from one token are answered and leave nothing on the server", arguments: StorageKind.allCases)
    func thousandsLeaveNothing(kind: StorageKind) async throws {
        let h = try await HostileHarness.engine(kind)
        try await Self.teams(h)
        let before = try await h.auditCount()
        try await h.live(apps: []) { client in
            for round in 0..<40 {
                let entries = (0..<50).map {
                    SubscriptionPullRequest.Entry(id: "s-\($0)", name: "card", parameters: ["id": .string("r\(round)-i\($0)")])
                }
                let response = try await Self.subscribe(client, h.hostileToken, entries)
                #expect(response.status == .ok, "round \(round): \(response.bodyText.prefix(200))")
                #expect(try Self.answer(response).subscriptions.allSatisfy { $0.error == nil && $0.rowCount == 0 })
            }
        }
        #expect(try await h.auditCount() == before)
        let moves = try await h.storage.read { reader in
            try await reader.serverTableQuery("SELECT COUNT(*) AS \"n\" FROM \"subscription_moves\"", []).first?.integer("n")
        }
        #expect(moves == 0)
    }
}
