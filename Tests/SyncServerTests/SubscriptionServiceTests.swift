import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// Subscriptions on the server, on both storages: a device names a subscription with its
/// parameters and gets just its rows, with their own cursor; rows entering and leaving the
/// filter reach it, what it may not read is refused, and every bound holds.
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
            rows = try await PullHarness(kind, contracts: ContractRegistry.self)
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

        func incident(_ id: String, team: String = "t-1", assignee: String? = nil, asset: String? = nil, state: String = "new") async throws {
            var fields: [String: JSONValue] = [
                "id": .string(id), "team_id": .string(team), "number": .string("INC-\(id)"), "short_description": .string("Broken \(id)"),
                "state": .string(state), "opened_at": .string("2026-01-31T08:00:00.000Z"), "updated_at": .string("2026-01-31T08:00:00.000Z"),
            ]
            if let assignee { fields["assignee_id"] = .string(assignee) }
            if let asset { fields["service_asset_id"] = .string(asset) }
            try await rows.storeDirectly(ContractRegistry.entity(named: "Incident")!, fields, scopeKey: "ops:team:\(team)")
        }

        func serviceAsset(_ id: String, team: String = "t-1") async throws {
            try await rows.storeDirectly(
                ContractRegistry.entity(named: "ServiceAsset")!,
                [
                    "id": .string(id), "team_id": .string(team), "asset_tag": .string("TAG-\(id)"), "display_name": .string("Scooter \(id)"),
                    "category": .string("vehicle"), "updated_at": .string("2026-01-31T08:00:00.000Z"),
                ], scopeKey: "ops:team:\(team)")
        }

        func unit(_ id: String) async throws {
            try await rows.storeDirectly(
                ContractRegistry.entity(named: "Unit")!,
                [
                    "id": .string(id), "title": .string("Unit \(id)"), "learner_level": .string("beginner"),
                    "updated_at": .string("2026-01-31T08:00:00.000Z"),
                ], scopeKey: "content:global")
        }

        func lesson(_ id: String, unit: String, index: Int64, deleted: Bool = false) async throws {
            try await rows.storeDirectly(
                ContractRegistry.entity(named: "Lesson")!,
                [
                    "id": .string(id), "unit_id": .string(unit), "title": .string("Lesson \(id)"), "sort_index": .int(index),
                    "lesson_kind": .string("reading"), "updated_at": .string("2026-01-31T08:00:00.000Z"),
                ], scopeKey: "content:global", deleted: deleted)
        }

        func asset(_ id: String, lesson: String) async throws {
            try await rows.storeDirectly(
                ContractRegistry.entity(named: "Asset")!,
                [
                    "id": .string(id), "lesson_id": .string(lesson), "asset_kind": .string("audio"), "content_type": .string("audio/mpeg"),
                    "size_bytes": .int(10), "checksum": .string(String(repeating: "a", count: 64)), "storage_key": .string("k-\(id)"),
                    "updated_at": .string("2026-01-31T08:00:00.000Z"),
                ], scopeKey: "content:global")
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

    @Test("one incident with the asset it names, nothing else of the team; changes to it come after its cursor", arguments: StorageKind.allCases)
    func oneIncidentWithItsAsset(kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.remove() }
        try await h.serviceAsset("sa-1")
        try await h.serviceAsset("sa-2")
        try await h.incident("i-1", asset: "sa-1")
        try await h.incident("i-2", asset: "sa-2")

        let first = try await h.pullAll("incident", ["id": .string("i-1")], as: Self.alice)
        #expect(Self.ids(first, "Incident") == ["i-1"])
        #expect(Self.ids(first, "ServiceAsset") == ["sa-1"])
        let cursor = try #require(first.last?.cursor)

        // Another incident of the team changes: nothing for this subscription.
        try await h.incident("i-2", asset: "sa-2", state: "in_progress")
        let quiet = try await h.pullAll("incident", ["id": .string("i-1")], as: Self.alice, from: cursor)
        #expect(quiet.allSatisfy { $0.rowCount == 0 })

        // The incident now names another asset: it comes, with that asset; the old one leaves.
        try await h.incident("i-1", asset: "sa-2", state: "in_progress")
        let moved = try await h.pullAll("incident", ["id": .string("i-1")], as: Self.alice, from: quiet.last?.cursor)
        #expect(Self.ids(moved, "Incident") == ["i-1"])
        #expect(Self.ids(moved, "ServiceAsset") == ["sa-2"])
        #expect(Self.leaves(moved, "ServiceAsset") == ["sa-1"])
    }

    @Test("a subscription to a row of a scope the token may not read is refused, with nothing of it", arguments: StorageKind.allCases)
    func anotherTeamsRowIsRefused(kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.remove() }
        try await h.incident("i-9", team: "t-2")
        let page = try #require(try await h.pullAll("incident", ["id": .string("i-9")], as: Self.alice).first)
        #expect(page.error?.code == .forbidden)
        #expect(page.rowCount == 0)
        #expect(page.cursor == nil)
        // Its own team's device gets it.
        #expect(Self.ids(try await h.pullAll("incident", ["id": .string("i-9")], as: Self.carol), "Incident") == ["i-9"])
        // An id that exists nowhere is simply empty (it may be created later).
        let none = try #require(try await h.pullAll("incident", ["id": .string("i-404")], as: Self.alice).first)
        #expect(none.error == nil)
        #expect(none.rowCount == 0)
    }

    @Test("rows entering and leaving the filter reach the device: assigned to me", arguments: StorageKind.allCases)
    func moveInAndMoveOut(kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.remove() }
        try await h.incident("i-1", assignee: "alice")
        try await h.incident("i-2", assignee: "bob")
        try await h.incident("i-3")
        let first = try await h.pullAll("assigned_incidents", [:], as: Self.alice)
        #expect(Self.ids(first, "Incident") == ["i-1"])

        try await h.incident("i-1", assignee: "bob")
        try await h.incident("i-2", assignee: "alice")
        try await h.incident("i-3", assignee: "carol")
        let next = try await h.pullAll("assigned_incidents", [:], as: Self.alice, from: first.last?.cursor)
        #expect(Self.ids(next, "Incident") == ["i-2"])
        #expect(Self.leaves(next, "Incident") == ["i-1"])

        // Back again: it comes in once more and no longer leaves.
        try await h.incident("i-1", assignee: "alice")
        let back = try await h.pullAll("assigned_incidents", [:], as: Self.alice, from: next.last?.cursor)
        #expect(Self.ids(back, "Incident") == ["i-1"])
        #expect(Self.leaves(back, "Incident").isEmpty)
    }

    @Test(
        "a unit with its lessons and their assets; a lesson moving in brings its old assets, one moving out leaves with them",
        arguments: StorageKind.allCases)
    func unitWithChildren(kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.remove() }
        try await h.unit("u-1")
        try await h.unit("u-2")
        try await h.lesson("l-1", unit: "u-1", index: 0)
        try await h.lesson("l-2", unit: "u-1", index: 1)
        try await h.lesson("l-3", unit: "u-2", index: 0)
        try await h.asset("a-1", lesson: "l-1")
        try await h.asset("a-2", lesson: "l-2")
        try await h.asset("a-3", lesson: "l-3")

        let first = try await h.pullAll("unit", ["id": .string("u-1")], as: Self.alice)
        #expect(Self.ids(first, "Unit") == ["u-1"])
        #expect(Self.ids(first, "Lesson") == ["l-1", "l-2"])
        #expect(Self.ids(first, "Asset") == ["a-1", "a-2"])

        try await h.lesson("l-2", unit: "u-2", index: 1)
        try await h.lesson("l-3", unit: "u-1", index: 2)
        try await h.lesson("l-1", unit: "u-1", index: 0, deleted: true)
        let next = try await h.pullAll("unit", ["id": .string("u-1")], as: Self.alice, from: first.last?.cursor)
        #expect(Self.ids(next, "Lesson") == ["l-3"])
        #expect(Self.ids(next, "Asset") == ["a-3"])
        #expect(Self.leaves(next, "Lesson") == ["l-2"])
        #expect(Self.leaves(next, "Asset") == ["a-1", "a-2"])
        #expect(next.flatMap { $0.deletes["Lesson"] ?? [] } == ["l-1"])
    }

    @Test("pages of a large subscription deliver every row once, whatever the limit", arguments: StorageKind.allCases)
    func paging(kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.remove() }
        try await h.unit("u-1")
        for index in 0..<30 { try await h.lesson("l-\(index)", unit: "u-1", index: Int64(index)) }
        for index in 0..<10 { try await h.asset("a-\(index)", lesson: "l-\(index)") }
        let pages = try await h.pullAll("unit", ["id": .string("u-1")], as: Self.alice, limit: 7)
        #expect(pages.count > 4)
        #expect(Self.ids(pages, "Lesson") == (0..<30).map { "l-\($0)" }.sorted())
        #expect(Self.ids(pages, "Asset") == (0..<10).map { "a-\($0)" }.sorted())
        // A change after the last page comes alone.
        try await h.lesson("l-5", unit: "u-1", index: 50)
        let next = try await h.pullAll("unit", ["id": .string("u-1")], as: Self.alice, from: pages.last?.cursor, limit: 7)
        #expect(Self.ids(next, "Lesson") == ["l-5"])
        #expect(Self.ids(next, "Unit").isEmpty)
    }

    @Test("bounds: rows per subscription, subscriptions per request, parameters", arguments: StorageKind.allCases)
    func bounds(kind: StorageKind) async throws {
        let h = try await Harness(kind, limits: IdentityStateLimits(subscriptionsPerDevice: 4, rowsPerSubscription: 5))
        defer { h.remove() }
        try await h.unit("u-1")
        for index in 0..<5 { try await h.lesson("l-\(index)", unit: "u-1", index: Int64(index)) }
        let broad = try #require(try await h.pullAll("unit", ["id": .string("u-1")], as: Self.alice).first)
        #expect(broad.error?.code == .subscriptionTooBroad)
        #expect(broad.rowCount == 0)

        let five = SubscriptionPullRequest(
            subscriptions: (0..<5).map { .init(id: "s-\($0)", name: "incident", parameters: ["id": .string("i-\($0)")]) })
        let tooMany = await pullError { _ = try await h.service.pull(five, schema: [:], clientID: nil, identity: Self.alice) }
        #expect(tooMany?.status == 400)
        #expect(tooMany?.detail.code == .tooManySubscriptions)

        let cases: [(String, [String: JSONValue])] = [
            ("incident", [:]), ("incident", ["id": .int(3)]), ("incident", ["id": .string("i-1"), "other": .string("x")]),
            ("incident", ["id": .string("a\u{0}b")]), ("nope", [:]),
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
        try await h.serviceAsset("sa-1")
        try await h.incident("i-1", asset: "sa-1")
        let first = try await h.pullAll("incident", ["id": .string("i-1")], as: Self.alice)
        let cursor = try SyncCursor(encoded: try #require(first.last?.cursor))

        // A task of the team changes: the scope moves, the subscription's tables do not.
        try await h.rows.storeDirectly(
            ContractRegistry.entity(named: "Task")!,
            [
                "id": .string("t-1"), "team_id": .string("t-1"), "title": .string("Swap"), "task_kind": .string("battery_swap"),
                "status": .string("assigned"), "revision": .int(1),
            ], scopeKey: "ops:team:t-1")
        let head = try await h.storage.read { try await $0.scopeSequence(tenant: Self.tenant, scopeKey: "ops:team:t-1") }
        #expect(head > cursor.sequence)
        let quiet = try await h.pullAll("incident", ["id": .string("i-1")], as: Self.alice, from: first.last?.cursor)
        #expect(quiet.count == 1 && quiet[0].rowCount == 0 && quiet[0].leaves.isEmpty && quiet[0].error == nil)
        #expect(try SyncCursor(encoded: try #require(quiet[0].cursor)).sequence == head)

        // The horizon passes the first cursor with nothing of the subscription changed: it expires all the same.
        try await h.storage.write { transaction in
            try await transaction.raiseCompactedSequence(tenant: Self.tenant, scopeKey: "ops:team:t-1", to: head)
        }
        let expired = try await h.pullAll("incident", ["id": .string("i-1")], as: Self.alice, from: first.last?.cursor)
        #expect(expired.first?.error?.code == .cursorExpired)

        // The incident changes after that cursor: it comes, as from any cursor.
        try await h.incident("i-1", asset: "sa-1", state: "in_progress")
        let changed = try await h.pullAll("incident", ["id": .string("i-1")], as: Self.alice, from: quiet[0].cursor)
        #expect(Self.ids(changed, "Incident") == ["i-1"])
    }

    @Test("a cursor below the compacted sequence expires that subscription only", arguments: StorageKind.allCases)
    func horizon(kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.remove() }
        try await h.incident("i-1", assignee: "alice")
        let first = try await h.pullAll("assigned_incidents", [:], as: Self.alice)
        try await h.incident("i-1", assignee: "alice", state: "resolved")
        try await h.storage.write { transaction in
            try await transaction.raiseCompactedSequence(tenant: Self.tenant, scopeKey: "ops:team:t-1", to: 2)
        }
        let request = SubscriptionPullRequest(subscriptions: [
            .init(id: "old", name: "assigned_incidents", parameters: [:], cursor: first.last?.cursor),
            .init(id: "new", name: "assigned_incidents", parameters: [:]),
        ])
        let answer = try await h.service.pull(request, schema: [:], clientID: nil, identity: Self.alice)
        #expect(answer.subscriptions[0].error?.code == .cursorExpired)
        #expect(Self.ids([answer.subscriptions[1]], "Incident") == ["i-1"])
    }
}

/// Subscriptions with several server processes on one database: rows written through one
/// process, a subscription pulled through another, its leaves recorded by the database itself.
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
                .init(subscriptions: [.init(id: "s", name: "assigned_incidents", parameters: [:], cursor: cursor)]), schema: [:], clientID: nil,
                identity: alice
            ).subscriptions[0]
        }
        func incident(_ id: String, assignee: String) async throws {
            try await writer.storeDirectly(
                ContractRegistry.entity(named: "Incident")!,
                [
                    "id": .string(id), "team_id": .string("t-1"), "number": .string("INC-\(id)"), "short_description": .string("Broken"),
                    "state": .string("new"), "assignee_id": .string(assignee), "opened_at": .string("2026-01-31T08:00:00.000Z"),
                    "updated_at": .string("2026-01-31T08:00:00.000Z"),
                ], scopeKey: "ops:team:t-1", tenant: SubscriptionServiceTests.tenant)
        }
        try await incident("i-1", assignee: "alice")
        let first = try await pull(from: nil)
        #expect(SubscriptionServiceTests.ids([first], "Incident") == ["i-1"])
        try await incident("i-1", assignee: "bob")
        try await incident("i-2", assignee: "alice")
        let next = try await pull(from: first.cursor)
        #expect(SubscriptionServiceTests.ids([next], "Incident") == ["i-2"])
        #expect(SubscriptionServiceTests.leaves([next], "Incident") == ["i-1"])
    }
}
