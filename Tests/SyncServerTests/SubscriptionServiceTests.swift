import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// Subscriptions on the server, on both storages: a device names a subscription with its
/// parameters and gets just its rows, with their own cursor; rows entering and leaving the
/// filter reach it, what it may not read is refused, and every bound holds. On the engines' own
/// contracts: `card` (a card with the board it is on), `assigned_cards` (the signed-in member's)
/// and `board` (a board with its cards and their notes).
@Suite("Subscription pulls")
struct SubscriptionServiceTests {
    static let tenant = "acme"
    static let alice = DeviceIdentity(tenant: tenant, userID: "alice", deviceID: "alice-phone", teams: ["t-1"], expiresAt: 4_000_000_000)
    static let carol = DeviceIdentity(tenant: tenant, userID: "carol", deviceID: "carol-phone", teams: ["t-2"], expiresAt: 4_000_000_000)

    /// A fresh storage with the service on top.
    struct Harness {
        let folder: URL
        let storage: any SyncStorage
        let service: SubscriptionService
        let rows: PullHarness

        init(_ kind: StorageKind, limits: IdentityStateLimits = IdentityStateLimits(), pageBytes: Int = PullService.defaultPageBytes) async throws {
            rows = try await PullHarness.engine(kind)
            folder = rows.folder
            storage = rows.storage
            service = SubscriptionService(storage: storage, pages: PullService(storage: storage, pageBytes: pageBytes), limits: limits)
        }

        func remove() { rows.remove() }

        /// Every page of one subscription from `cursor`, merged: the last cursor, and every page.
        func pullAll(
            _ name: String, _ parameters: [String: JSONValue], as identity: DeviceIdentity, from cursor: String? = nil, limit: Int? = nil
        ) async throws -> [SubscriptionPullResponse.Page] {
            var pages: [SubscriptionPullResponse.Page] = []
            var cursor = cursor
            repeat {
                let request = SubscriptionPullRequest(
                    subscriptions: [.init(id: "s", name: name, parameters: parameters, cursor: cursor)], limit: limit)
                let page = try await service.pull(request, schema: [:], clientID: nil, identity: identity).subscriptions[0]
                pages.append(page)
                cursor = page.cursor
            } while pages.last!.hasMore && pages.last!.error == nil && pages.count < 1000
            return pages
        }

        /// A `Card` of team `team` on board `board`, at `sortIndex` in its lane.
        func card(
            _ id: String, team: String = "t-1", board: String = "b-1", assignee: String? = nil, lane: String = "todo", sortIndex: Double = 0,
            deleted: Bool = false
        ) async throws {
            var fields: [String: JSONValue] = [
                "id": .string(id), "team_id": .string(team), "board_id": .string(board), "title": .string("Card \(id)"), "lane": .string(lane),
                "sort_index": .double(sortIndex), "revision": .int(1),
            ]
            if let assignee { fields["assignee_id"] = .string(assignee) }
            try await rows.storeDirectly(ContractRegistry.entity(named: "Card")!, fields, scopeKey: "workspace:team:\(team)", deleted: deleted)
        }

        /// A `Board` of team `team`.
        func board(_ id: String, team: String = "t-1") async throws {
            try await rows.storeDirectly(
                ContractRegistry.entity(named: "Board")!,
                [
                    "id": .string(id), "team_id": .string(team), "owner_id": .string("alice"), "name": .string("Board \(id)"),
                    "created_at": .string("2026-01-31T08:00:00.000Z"), "updated_at": .string("2026-01-31T08:00:00.000Z"),
                ], scopeKey: "workspace:team:\(team)")
        }

        /// A `Note` of team t-1 on card `card`.
        func note(_ id: String, card: String) async throws {
            try await rows.storeDirectly(
                ContractRegistry.entity(named: "Note")!,
                [
                    "id": .string(id), "team_id": .string("t-1"), "card_id": .string(card), "author_id": .string("alice"),
                    "body": .string("Note \(id)"),
                    "updated_at": .string("2026-01-31T08:00:00.000Z"),
                ], scopeKey: "workspace:team:t-1")
        }
    }

    static func ids(_ pages: [SubscriptionPullResponse.Page], _ entity: String) -> [String] {
        pages.flatMap { page in
            (page.upserts[entity] ?? []).compactMap { row -> String? in
                guard case .object(let fields) = row, case .string(let id)? = fields["id"] else { return nil }
                return id
            }
        }.sorted()
    }

    static func leaves(_ pages: [SubscriptionPullResponse.Page], _ entity: String) -> [String] {
        pages.flatMap { $0.leaves[entity] ?? [] }.sorted()
    }

    @Test("one card with the board it is on, nothing else of the team; changes to it come after its cursor", arguments: StorageKind.allCases)
    func oneCardWithItsBoard(kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.remove() }
        try await h.board("b-1")
        try await h.board("b-2")
        try await h.card("c-1", board: "b-1")
        try await h.card("c-2", board: "b-2")

        let first = try await h.pullAll("card", ["id": .string("c-1")], as: Self.alice)
        #expect(Self.ids(first, "Card") == ["c-1"])
        #expect(Self.ids(first, "Board") == ["b-1"])
        let cursor = try #require(first.last?.cursor)

        // Another card of the team changes: nothing for this subscription.
        try await h.card("c-2", board: "b-2", lane: "doing")
        let quiet = try await h.pullAll("card", ["id": .string("c-1")], as: Self.alice, from: cursor)
        #expect(quiet.allSatisfy { $0.rowCount == 0 })

        // The card is now on another board: it comes, with that board; the old one leaves.
        try await h.card("c-1", board: "b-2", lane: "doing")
        let moved = try await h.pullAll("card", ["id": .string("c-1")], as: Self.alice, from: quiet.last?.cursor)
        #expect(Self.ids(moved, "Card") == ["c-1"])
        #expect(Self.ids(moved, "Board") == ["b-2"])
        #expect(Self.leaves(moved, "Board") == ["b-1"])
    }

    @Test("a subscription to a row of a scope the token may not read is refused, with nothing of it", arguments: StorageKind.allCases)
    func anotherTeamsRowIsRefused(kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.remove() }
        try await h.card("c-9", team: "t-2")
        let page = try #require(try await h.pullAll("card", ["id": .string("c-9")], as: Self.alice).first)
        #expect(page.error?.code == .forbidden)
        #expect(page.rowCount == 0)
        #expect(page.cursor == nil)
        // Its own team's device gets it.
        #expect(Self.ids(try await h.pullAll("card", ["id": .string("c-9")], as: Self.carol), "Card") == ["c-9"])
        // An id that exists nowhere is simply empty (it may be created later).
        let none = try #require(try await h.pullAll("card", ["id": .string("c-404")], as: Self.alice).first)
        #expect(none.error == nil)
        #expect(none.rowCount == 0)
    }

    @Test("rows entering and leaving the filter reach the device: assigned to me", arguments: StorageKind.allCases)
    func moveInAndMoveOut(kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.remove() }
        try await h.card("c-1", assignee: "alice")
        try await h.card("c-2", assignee: "bob")
        try await h.card("c-3")
        let first = try await h.pullAll("assigned_cards", [:], as: Self.alice)
        #expect(Self.ids(first, "Card") == ["c-1"])

        try await h.card("c-1", assignee: "bob")
        try await h.card("c-2", assignee: "alice")
        try await h.card("c-3", assignee: "carol")
        let next = try await h.pullAll("assigned_cards", [:], as: Self.alice, from: first.last?.cursor)
        #expect(Self.ids(next, "Card") == ["c-2"])
        #expect(Self.leaves(next, "Card") == ["c-1"])

        // Back again: it comes in once more and no longer leaves.
        try await h.card("c-1", assignee: "alice")
        let back = try await h.pullAll("assigned_cards", [:], as: Self.alice, from: next.last?.cursor)
        #expect(Self.ids(back, "Card") == ["c-1"])
        #expect(Self.leaves(back, "Card").isEmpty)
    }

    @Test(
        "a board with its cards and their notes; a card moving in brings its old notes, one moving out leaves with them",
        arguments: StorageKind.allCases)
    func boardWithChildren(kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.remove() }
        try await h.board("b-1")
        try await h.board("b-2")
        try await h.card("c-1", board: "b-1", sortIndex: 0)
        try await h.card("c-2", board: "b-1", sortIndex: 1)
        try await h.card("c-3", board: "b-2", sortIndex: 0)
        try await h.note("n-1", card: "c-1")
        try await h.note("n-2", card: "c-2")
        try await h.note("n-3", card: "c-3")

        let first = try await h.pullAll("board", ["id": .string("b-1")], as: Self.alice)
        #expect(Self.ids(first, "Board") == ["b-1"])
        #expect(Self.ids(first, "Card") == ["c-1", "c-2"])
        #expect(Self.ids(first, "Note") == ["n-1", "n-2"])

        try await h.card("c-2", board: "b-2", sortIndex: 1)
        try await h.card("c-3", board: "b-1", sortIndex: 2)
        try await h.card("c-1", board: "b-1", sortIndex: 0, deleted: true)
        let next = try await h.pullAll("board", ["id": .string("b-1")], as: Self.alice, from: first.last?.cursor)
        #expect(Self.ids(next, "Card") == ["c-3"])
        #expect(Self.ids(next, "Note") == ["n-3"])
        #expect(Self.leaves(next, "Card") == ["c-2"])
        #expect(Self.leaves(next, "Note") == ["n-1", "n-2"])
        #expect(next.flatMap { $0.deletes["Card"] ?? [] } == ["c-1"])
    }

    @Test("pages of a large subscription deliver every row once, whatever the limit", arguments: StorageKind.allCases)
    func paging(kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.remove() }
        try await h.board("b-1")
        for index in 0..<30 { try await h.card("c-\(index)", board: "b-1", sortIndex: Double(index)) }
        for index in 0..<10 { try await h.note("n-\(index)", card: "c-\(index)") }
        let pages = try await h.pullAll("board", ["id": .string("b-1")], as: Self.alice, limit: 7)
        #expect(pages.count > 4)
        #expect(Self.ids(pages, "Card") == (0..<30).map { "c-\($0)" }.sorted())
        #expect(Self.ids(pages, "Note") == (0..<10).map { "n-\($0)" }.sorted())
        // A change after the last page comes alone.
        try await h.card("c-5", board: "b-1", sortIndex: 50)
        let next = try await h.pullAll("board", ["id": .string("b-1")], as: Self.alice, from: pages.last?.cursor, limit: 7)
        #expect(Self.ids(next, "Card") == ["c-5"])
        #expect(Self.ids(next, "Board").isEmpty)
    }

    @Test("bounds: rows per subscription, subscriptions per request, parameters", arguments: StorageKind.allCases)
    func bounds(kind: StorageKind) async throws {
        let h = try await Harness(kind, limits: IdentityStateLimits(subscriptionsPerDevice: 4, rowsPerSubscription: 5))
        defer { h.remove() }
        try await h.board("b-1")
        for index in 0..<5 { try await h.card("c-\(index)", board: "b-1", sortIndex: Double(index)) }
        let broad = try #require(try await h.pullAll("board", ["id": .string("b-1")], as: Self.alice).first)
        #expect(broad.error?.code == .subscriptionTooBroad)
        #expect(broad.rowCount == 0)

        let five = SubscriptionPullRequest(
            subscriptions: (0..<5).map { .init(id: "s-\($0)", name: "card", parameters: ["id": .string("c-\($0)")]) })
        let tooMany = await pullError { _ = try await h.service.pull(five, schema: [:], clientID: nil, identity: Self.alice) }
        #expect(tooMany?.status == 400)
        #expect(tooMany?.detail.code == .tooManySubscriptions)

        let cases: [(String, [String: JSONValue])] = [
            ("card", [:]), ("card", ["id": .int(3)]), ("card", ["id": .string("c-1"), "other": .string("x")]),
            ("card", ["id": .string("a\u{0}b")]), ("nope", [:]),
        ]
        for (name, parameters) in cases {
            let page = try #require(try await h.pullAll(name, parameters, as: Self.alice).first)
            #expect(page.error != nil, "\(name) \(parameters) was answered")
            #expect(page.rowCount == 0)
        }
    }

    @Test(
        "a subscription none of whose tables changed answers from the scope's head: no rows, its cursor moved, the horizon still checked",
        arguments: StorageKind.allCases)
    func unchangedTablesAnswerFromTheHead(kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.remove() }
        try await h.board("b-1")
        try await h.card("c-1", board: "b-1")
        let first = try await h.pullAll("card", ["id": .string("c-1")], as: Self.alice)
        let cursor = try SyncCursor(encoded: try #require(first.last?.cursor))

        // A note of the team changes: the scope moves, the subscription's tables do not.
        try await h.note("n-1", card: "c-1")
        let head = try await h.storage.read { try await $0.scopeSequence(tenant: Self.tenant, scopeKey: "workspace:team:t-1") }
        #expect(head > cursor.sequence)
        let quiet = try await h.pullAll("card", ["id": .string("c-1")], as: Self.alice, from: first.last?.cursor)
        #expect(quiet.count == 1 && quiet[0].rowCount == 0 && quiet[0].leaves.isEmpty && quiet[0].error == nil)
        #expect(try SyncCursor(encoded: try #require(quiet[0].cursor)).sequence == head)

        // The horizon passes the first cursor with nothing of the subscription changed: it expires all the same.
        try await h.storage.write { transaction in
            try await transaction.raiseCompactedSequence(tenant: Self.tenant, scopeKey: "workspace:team:t-1", to: head)
        }
        let expired = try await h.pullAll("card", ["id": .string("c-1")], as: Self.alice, from: first.last?.cursor)
        #expect(expired.first?.error?.code == .cursorExpired)

        // The card changes after that cursor: it comes, as from any cursor.
        try await h.card("c-1", board: "b-1", lane: "doing")
        let changed = try await h.pullAll("card", ["id": .string("c-1")], as: Self.alice, from: quiet[0].cursor)
        #expect(Self.ids(changed, "Card") == ["c-1"])
    }

    @Test("a cursor below the compacted sequence expires that subscription only", arguments: StorageKind.allCases)
    func horizon(kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.remove() }
        try await h.card("c-1", assignee: "alice")
        let first = try await h.pullAll("assigned_cards", [:], as: Self.alice)
        try await h.card("c-1", assignee: "alice", lane: "done")
        try await h.storage.write { transaction in
            try await transaction.raiseCompactedSequence(tenant: Self.tenant, scopeKey: "workspace:team:t-1", to: 2)
        }
        let request = SubscriptionPullRequest(subscriptions: [
            .init(id: "old", name: "assigned_cards", parameters: [:], cursor: first.last?.cursor),
            .init(id: "new", name: "assigned_cards", parameters: [:]),
        ])
        let answer = try await h.service.pull(request, schema: [:], clientID: nil, identity: Self.alice)
        #expect(answer.subscriptions[0].error?.code == .cursorExpired)
        #expect(Self.ids([answer.subscriptions[1]], "Card") == ["c-1"])
    }
}

/// Subscriptions with several server processes on one database: rows written through one
/// process, a subscription pulled through another, its leaves recorded by the database itself
/// (the engines' own `assigned_cards`).
@Suite("Subscription pulls across processes")
struct SubscriptionProcessesTests {
    @Test("writes through one process reach a subscription pulled through another, move-outs included", arguments: StorageKind.allCases)
    func twoProcesses(kind: StorageKind) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-subscriptions-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let storages = try await kind.makeSharedStorages(2, in: folder, contracts: ContractRegistry.self)
        let writer = try await PullHarness.sharing(storages[0], folder: folder)
        let service = SubscriptionService(storage: storages[1], pages: PullService(storage: storages[1]))
        let alice = SubscriptionServiceTests.alice

        func pull(from cursor: String?) async throws -> SubscriptionPullResponse.Page {
            try await service.pull(
                .init(subscriptions: [.init(id: "s", name: "assigned_cards", parameters: [:], cursor: cursor)]), schema: [:], clientID: nil,
                identity: alice
            ).subscriptions[0]
        }
        func card(_ id: String, assignee: String) async throws {
            try await writer.storeDirectly(
                ContractRegistry.entity(named: "Card")!,
                [
                    "id": .string(id), "team_id": .string("t-1"), "board_id": .string("b-1"), "title": .string("Card \(id)"),
                    "assignee_id": .string(assignee), "revision": .int(1),
                ], scopeKey: "workspace:team:t-1", tenant: SubscriptionServiceTests.tenant)
        }
        try await card("c-1", assignee: "alice")
        let first = try await pull(from: nil)
        #expect(SubscriptionServiceTests.ids([first], "Card") == ["c-1"])
        try await card("c-1", assignee: "bob")
        try await card("c-2", assignee: "alice")
        let next = try await pull(from: first.cursor)
        #expect(SubscriptionServiceTests.ids([next], "Card") == ["c-2"])
        #expect(SubscriptionServiceTests.leaves([next], "Card") == ["c-1"])
    }
}
