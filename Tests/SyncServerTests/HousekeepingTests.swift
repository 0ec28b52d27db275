import ContractRuntime
import EngineTestContracts
import Foundation
import HummingbirdTesting
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// Housekeeping on the engines' own contracts (`Card`, version_check in a team's scope; the catalog's
/// `Label`). The sample `sync-server housekeeping` command is in HousekeepingCommandTests.
@Suite("Data horizons: push results pruned, tombstones compacted, 410 cursor_expired", .blockingWork)
struct HousekeepingTests {
    /// The push clock's time (PushFixedClock), as a date: rows are written then.
    static let written = PushFixedClock().time.date
    static func days(_ count: Double, after date: Date = written) -> Date { date.addingTimeInterval(count * 86_400) }

    /// When PushHarness's pushes happen, by its server clock (a stored result's retention starts there).
    static let pushedAt = Date(timeIntervalSince1970: Double(PushFixedClock().time.millisecondsSince1970) / 1000)

    static let resultsOnly = ServerHousekeeping.Horizons(pushResultRetention: .seconds(7 * 86_400), tombstoneHorizon: nil)
    static let tombstonesOnly = ServerHousekeeping.Horizons(pushResultRetention: nil, tombstoneHorizon: .seconds(90 * 86_400))

    func results(_ h: PushHarness, client: String = PushHarness.alice.deviceID, _ seqs: ClosedRange<Int64>) async throws -> [String?] {
        var found: [String?] = []
        for seq in seqs {
            found.append(try await h.storage.read { try await $0.pushResult(tenant: PushHarness.tenant, clientID: client, seq: seq) })
        }
        return found
    }

    @Test(
        "acknowledged results are pruned after the retention; a resend of a pruned seq is a duplicate that writes nothing",
        arguments: StorageKind.allCases)
    func pushResults(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        // Three pushes of one: three records (a push's results are stored, and pruned, together).
        let first = (1...3).map { h.mutation(Int64($0), "Card", .create, "card-\($0)", h.cardPayload("card-\($0)")) }
        try await h.push([first[0]])
        // Nothing acknowledged yet (the client never sent a push starting after it): kept however old.
        let housekeeping = ServerHousekeeping(storage: h.storage, horizons: Self.resultsOnly, batchSize: 2)
        #expect(try await housekeeping.run(now: Self.pushedAt.addingTimeInterval(1000 * 86_400)).pushResults == 0)
        #expect(try await results(h, 1...1).allSatisfy { $0 != nil })
        try await h.push([first[1]])
        try await h.push([first[2]])

        // A push starting at 4 acknowledges 1...3.
        let fourth = h.mutation(4, "Card", .create, "card-4", h.cardPayload("card-4"))
        let answered = try await h.push([fourth])
        #expect(try await housekeeping.run(now: Self.pushedAt).pushResults == 0, "recorded just now: within the retention")
        let counts = try await housekeeping.run(now: Self.pushedAt.addingTimeInterval(8 * 86_400))
        #expect(counts.pushResults == 3)
        #expect(counts.transactions == 2, "batches of 2: a full one, then the rest")
        #expect(try await results(h, 1...4).map { $0 != nil } == [false, false, false, true])

        // The resend of every seq: the pruned ones are duplicates, nothing is written again.
        let rowBefore = try await h.row(Card.descriptor, "card-1")
        let auditBefore = try await h.audit()
        let sequenceBefore = try await h.storage.read { try await $0.scopeSequence(tenant: PushHarness.tenant, scopeKey: "workspace:team:red") }
        let resent = try await h.push(first + [fourth])
        #expect(resent.results.map(\.status) == [.duplicate, .duplicate, .duplicate, answered.results[0].status])
        #expect(resent.results.map(\.clientMutationId) == (first + [fourth]).map(\.clientMutationId))
        #expect(resent.results[3] == answered.results[0], "a result still kept is answered as it was")
        #expect(resent.lastSeq == 4)
        #expect(try await h.row(Card.descriptor, "card-1") == rowBefore)
        #expect(try await h.audit().count == auditBefore.count, "a resend of a done seq is not audited again")
        #expect(try await h.storage.read { try await $0.scopeSequence(tenant: PushHarness.tenant, scopeKey: "workspace:team:red") } == sequenceBefore)

        // seq 4 is not acknowledged (the resend started at 1): never pruned, however old.
        #expect(try await housekeeping.run(now: Self.pushedAt.addingTimeInterval(1000 * 86_400)).pushResults == 0)
        #expect(try await results(h, 4...4) == [answered.results[0].storedText])
        // Horizons off: nothing.
        #expect(try await ServerHousekeeping(storage: h.storage, horizons: .off).run(now: .distantFuture) == .init())
    }

    @Test("tombstones past the horizon are deleted in batches; an older cursor gets 410, a pull from scratch works", arguments: StorageKind.allCases)
    func tombstones(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        let pull = PullService(storage: h.storage)
        let alice = PushHarness.alice
        try await h.push((1...4).map { h.mutation(Int64($0), "Card", .create, "card-\($0)", h.cardPayload("card-\($0)")) })
        let before = try await pull.pull(scope: "team", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: alice)
        #expect(before.upserts["Card"]?.count == 4)
        // Pulled part-way: a cursor in the middle of the rows.
        let partial = try await pull.pull(scope: "team", cursor: nil, limit: 1, schema: [:], clientID: nil, identity: alice)
        try await h.push([
            h.mutation(5, "Card", .delete, "card-2", baseVersion: 1), h.mutation(6, "Card", .delete, "card-3", baseVersion: 1),
        ])
        let afterDeletes = try await pull.pull(scope: "team", cursor: before.cursor, limit: nil, schema: [:], clientID: nil, identity: alice)
        #expect(afterDeletes.deletes["Card"]?.sorted() == ["card-2", "card-3"])

        let housekeeping = ServerHousekeeping(storage: h.storage, horizons: Self.tombstonesOnly, batchSize: 1)
        #expect(try await housekeeping.run(now: Self.days(89)).tombstones == 0, "within the horizon")
        let counts = try await housekeeping.run(now: Self.days(91))
        #expect(counts.tombstones == 2)
        #expect(counts.scopes == 1)
        #expect(counts.transactions >= 3, "one tombstone per transaction")
        #expect(try await h.row(Card.descriptor, "card-2") == nil)
        #expect(try await h.row(Card.descriptor, "card-1") != nil, "live rows stay, however old")
        let compacted = try await h.storage.read { try await $0.compactedSequence(tenant: PushHarness.tenant, scopeKey: "workspace:team:red") }
        #expect(compacted == 6)
        #expect(try await housekeeping.run(now: Self.days(91)).tombstones == 0, "idempotent")

        // Cursors from before the compacted deletes expire; one after them does not.
        for cursor in [before.cursor, partial.cursor] {
            do {
                _ = try await pull.pull(scope: "team", cursor: cursor, limit: nil, schema: [:], clientID: nil, identity: alice)
                Issue.record("a cursor below the compacted sequence must be refused")
            } catch {
                #expect(error.status == 410)
                #expect(error.detail.code == .cursorExpired)
                #expect(error.detail.message.contains("from scratch"))
            }
        }
        #expect(
            try await pull.pull(scope: "team", cursor: afterDeletes.cursor, limit: nil, schema: [:], clientID: nil, identity: alice).upserts.isEmpty)
        let fresh = try await pull.pull(scope: "team", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: alice)
        #expect(fresh.upserts["Card"]?.count == 2)
        #expect(fresh.deletes.isEmpty)
        let again = try await pull.pull(scope: "team", cursor: fresh.cursor, limit: nil, schema: [:], clientID: nil, identity: alice)
        #expect(again.upserts.isEmpty && again.deletes.isEmpty)
        // A filtered (priority tier) pull without a cursor works too.
        _ = try await pull.pull(scope: "team", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: alice, contracts: ["Card"])
        // Another scope is untouched.
        #expect(try await h.storage.read { try await $0.compactedSequence(tenant: PushHarness.tenant, scopeKey: "workspace:team:blue") } == 0)
    }

    @Test("a tombstone written again after it was found is not compacted", arguments: StorageKind.allCases)
    func rewrittenTombstoneStays(_ kind: StorageKind) async throws {
        let h = try await PushHarness.engine(kind)
        defer { h.remove() }
        try await h.push([
            h.mutation(1, "Card", .create, "card-1", h.cardPayload("card-1")), h.mutation(2, "Card", .delete, "card-1", baseVersion: 1),
        ])
        let table = ContractTable(Card.descriptor)
        let cutoff = Int64(Self.days(1).timeIntervalSince1970 * 1000)
        let deleted = try await h.storage.write { transaction in
            let found = try await transaction.tombstones(in: table, updatedBefore: cutoff, limit: 10)
            #expect(found.count == 1)
            // Written again (another _seq) before the delete: kept.
            var row = try #require(try await transaction.row(in: table, tenant: PushHarness.tenant, id: "card-1"))
            row["_seq"] = .integer(try await transaction.nextScopeSequence(tenant: PushHarness.tenant, scopeKey: "workspace:team:red"))
            try await transaction.upsert(row, in: table)
            return try await transaction.deleteTombstones(found, in: table, updatedBefore: cutoff)
        }
        #expect(deleted.isEmpty)
        #expect(try await h.row(Card.descriptor, "card-1") != nil)
    }

    @Test("GET /sync/v1/pull answers 410 cursor_expired for a cursor below the compacted sequence, 200 without a cursor")
    func route() async throws {
        let harness = try RouteHarness.engine()
        try await harness.seedWorkspace()
        try await harness.storage.write { try await $0.raiseCompactedSequence(tenant: "acme", scopeKey: "catalog:global", to: 2) }
        let old = SyncCursor(scopeKey: "catalog:global", sequence: 1).encoded
        let current = SyncCursor(scopeKey: "catalog:global", sequence: 2).encoded
        try await harness.test { client in
            let expired = try await client.execute(uri: "/sync/v1/pull?scope=catalog&cursor=\(old)", method: .get, headers: harness.headers())
            #expect(expired.status.code == 410)
            let body = try expired.errorBody()
            #expect(body.code == .cursorExpired)
            #expect(body.message.contains("pull the scope again from scratch"))
            let fine = try await client.execute(uri: "/sync/v1/pull?scope=catalog&cursor=\(current)", method: .get, headers: harness.headers())
            #expect(fine.status == .ok)
            let fresh = try await client.execute(uri: "/sync/v1/pull?scope=catalog", method: .get, headers: harness.headers())
            #expect(fresh.status == .ok)
        }
    }

    @Test("durations: off and 0 disable, units s m h d, a bare number in the given unit")
    func durations() {
        #expect(ServerHousekeeping.parseDuration("off", bareUnit: 86_400) == .some(nil))
        #expect(ServerHousekeeping.parseDuration("0", bareUnit: 86_400) == .some(nil))
        #expect(ServerHousekeeping.parseDuration("90", bareUnit: 86_400) == .some(.seconds(90 * 86_400)))
        #expect(ServerHousekeeping.parseDuration("36h", bareUnit: 86_400) == .some(.seconds(36 * 3600)))
        #expect(ServerHousekeeping.parseDuration("30m", bareUnit: 1) == .some(.seconds(1800)))
        #expect(ServerHousekeeping.parseDuration("3600", bareUnit: 1) == .some(.seconds(3600)))
        #expect(ServerHousekeeping.parseDuration("soon", bareUnit: 1) == nil)
        #expect(ServerHousekeeping.parseDuration("-1d", bareUnit: 1) == nil)
    }
}

extension MutationResult {
    /// The result as the server stores it.
    var storedText: String { PushSession.storedText(self) }
}

extension HousekeepingTests {
    @Test(
        "housekeeping in three processes at once, beside pushes, deletes each tombstone once and pages from scratch keep working",
        arguments: StorageKind.allCases)
    func severalProcesses(_ kind: StorageKind) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("housekeeping-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let storages = try await kind.makeSharedStorages(3, in: folder, contracts: ContractRegistry.self)
        let push = PushService(storage: storages[0], clock: PushFixedClock(), reducers: [])
        let alice = PushHarness.alice
        @Sendable func card(_ id: String) -> JSONValue {
            .object([
                "id": .string(id), "team_id": .string("red"), "board_id": .string("board-1"), "title": .string("Draft"), "lane": .string("todo"),
            ])
        }
        let creates = (1...40).map {
            Mutation(seq: Int64($0), clientMutationId: "c-\($0)", entity: "Card", op: .create, id: "card-\($0)", payload: card("card-\($0)"))
        }
        _ = try await push.push(PushRequest(clientId: "c", schema: [:], mutations: creates), identity: alice)
        let deletes = (1...30).map {
            Mutation(seq: Int64(40 + $0), clientMutationId: "d-\($0)", entity: "Card", op: .delete, id: "card-\($0)", baseVersion: 1)
        }
        _ = try await push.push(PushRequest(clientId: "c", schema: [:], mutations: deletes), identity: alice)

        // Three processes compact in batches of 4 while a fourth client keeps pushing to the scope.
        let now = Self.days(91)
        @Sendable func latePushes() async throws {
            let later = PushService(
                storage: storages[1], clock: PushFixedClock(time: Timestamp(now.addingTimeInterval(-1))), reducers: [])
            for seq in 1...10 {
                let id = "late-\(seq)"
                _ = try await later.push(
                    PushRequest(
                        clientId: "late", schema: [:],
                        mutations: [Mutation(seq: Int64(seq), clientMutationId: id, entity: "Card", op: .create, id: id, payload: card(id))]),
                    identity: alice
                )
            }
        }
        async let pushes: Void = latePushes()
        let counts = try await withThrowingTaskGroup(of: ServerHousekeeping.Counts.self) { group in
            for storage in storages {
                group.addTask { try await ServerHousekeeping(storage: storage, horizons: Self.tombstonesOnly, batchSize: 4).run(now: now) }
            }
            return try await group.reduce(into: [ServerHousekeeping.Counts]()) { $0.append($1) }
        }
        try await pushes
        #expect(counts.map(\.tombstones).reduce(0, +) == 30, "each tombstone deleted by one process: \(counts)")
        let compacted = try await storages[2].read { try await $0.compactedSequence(tenant: PushHarness.tenant, scopeKey: "workspace:team:red") }
        #expect(compacted == 70)

        // A pull from scratch pages through what is left, below the compacted sequence, one row at a time.
        let pull = PullService(storage: storages[2])
        var cursor: String?
        var ids: [String] = []
        while true {
            let page = try await pull.pull(scope: "team", cursor: cursor, limit: 3, schema: [:], clientID: nil, identity: alice)
            ids += (page.upserts["Card"] ?? []).compactMap { if case .object(let row) = $0, case .string(let id)? = row["id"] { id } else { nil } }
            #expect(page.deletes.isEmpty)
            cursor = page.cursor
            if !page.hasMore { break }
        }
        #expect(Set(ids) == Set((31...40).map { "card-\($0)" } + (1...10).map { "late-\($0)" }))
        for storage in storages {
            if let postgres = storage as? PostgresStorage { await postgres.close() }
        }
    }
}

extension HousekeepingTests {
    @Test("/metrics counts what housekeeping deleted, by kind")
    func metrics() async throws {
        let h = try await PushHarness.engine(.sqlite)
        defer { h.remove() }
        try await h.push([
            h.mutation(1, "Card", .create, "card-1", h.cardPayload("card-1")), h.mutation(2, "Card", .delete, "card-1", baseVersion: 1),
        ])
        try await h.push([h.mutation(3, "Card", .create, "card-2", h.cardPayload("card-2"))])
        let metrics = ServerMetrics()
        let counts = try await ServerHousekeeping(storage: h.storage, metrics: metrics).run(now: Date().addingTimeInterval(100 * 86_400))
        // The first push's record (seqs 1 and 2, acknowledged by the push starting at 3); not the second's.
        #expect(counts.tombstones == 1 && counts.pushResults == 1)
        let exposition = String(decoding: metrics.exposition(), as: UTF8.self)
        #expect(exposition.contains(#"outpost_housekeeping_deleted_total{kind="tombstone"} 1"#), "\(exposition)")
        #expect(exposition.contains(#"outpost_housekeeping_deleted_total{kind="push_result"} 1"#))
    }
}
