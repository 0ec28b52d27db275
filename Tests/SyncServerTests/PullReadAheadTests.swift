import ContractRuntime
import EngineTestContracts
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOConcurrencyHelpers
import SyncProtocol
import Testing

@testable import SyncServer

/// On the engines' own contracts: the pages read ahead are a team's `Note`s (last writer wins).
@Suite("Pull read-ahead: the next pages written while a device receives this one")
struct PullReadAheadTests {
    // MARK: The read-ahead itself

    static let device = DeviceIdentity(tenant: "acme", userID: "u-1", deviceID: "d-1", expiresAt: 4_102_444_800, issuedAt: 1_700_000_000)

    /// A lifetime no test outlasts, however loaded the machine (the lifetime has its own test).
    static let longLife: Duration = .seconds(3600)

    static func request(_ cursor: String?, identity: DeviceIdentity = device, clientID: String? = "client-1") -> PullReadAhead.Request {
        PullReadAhead.Request(
            identity: identity, scope: "user", cursor: cursor, limit: 1, schema: ["Note": 1], clientID: clientID,
            contracts: nil, gzip: false
        )
    }

    /// Pages `c1`, `c2`, … up to `last` (whose page has no more), recording what was written.
    final class Pages: Sendable {
        let last: Int
        let written = NIOLockedValueBox<[String]>([])
        let failing: Set<String>

        init(last: Int = 100, failing: Set<String> = []) {
            self.last = last
            self.failing = failing
        }

        func work(_ request: PullReadAhead.Request) async throws -> PullReadAhead.Read {
            let cursor = request.cursor ?? "c0"
            written.withLockedValue { $0.append(cursor) }
            if failing.contains(cursor) { throw ServiceError(status: 500, .internalError, "storage failed") }
            let number = Int(cursor.dropFirst())! + 1
            let hasMore = number < last
            return PullReadAhead.Read(cursor: "c\(number)", hasMore: hasMore) {
                PullReadAhead.Body(bytes: Data("page after \(cursor)".utf8), rowCount: 1, cursor: "c\(number)", hasMore: hasMore)
            }
        }

        var cursors: [String] { written.withLockedValue { $0 } }
    }

    /// Waits until `condition` holds (the pages are written by tasks of their own).
    static func eventually(_ condition: () -> Bool) async throws {
        for _ in 0..<500 where !condition() { try await Task.sleep(for: .milliseconds(2)) }
        #expect(condition())
    }

    static func answered(_ cursor: String, hasMore: Bool = true) -> PullReadAhead.Body {
        PullReadAhead.Body(bytes: Data(), rowCount: 1, cursor: cursor, hasMore: hasMore)
    }

    @Test("the pages after an answered one are written ahead up to the depth, and each goes to exactly its request")
    func depthAndHandOver() async throws {
        let readAhead = PullReadAhead(depth: 2, lifetime: Self.longLife)
        let pages = Pages()
        readAhead.readAhead(after: Self.request(nil), answered: Self.answered("c1"), work: pages.work)
        try await Self.eventually { pages.cursors == ["c1", "c2"] }
        #expect(readAhead.count == 2)

        guard case .hit(let body) = await readAhead.take(Self.request("c1")) else {
            Issue.record("the page after c1 was not handed over")
            return
        }
        #expect(String(decoding: body.bytes, as: UTF8.self) == "page after c1")
        #expect(body.cursor == "c2")
        // Taking one makes room for the next.
        try await Self.eventually { pages.cursors == ["c1", "c2", "c3"] }
        try await Task.sleep(for: .milliseconds(20))
        #expect(pages.cursors == ["c1", "c2", "c3"], "never more than the depth ahead")
    }

    @Test("another device of the same user, another client or another schema never gets the pages; a request for another page drops them")
    func onlyTheSameRequest() async throws {
        let readAhead = PullReadAhead(depth: 2, lifetime: Self.longLife)
        let pages = Pages()
        readAhead.readAhead(after: Self.request(nil), answered: Self.answered("c1"), work: pages.work)
        try await Self.eventually { readAhead.count == 2 }

        var otherDevice = Self.device
        otherDevice.deviceID = "d-2"
        var newerToken = Self.device
        newerToken.issuedAt = 1_700_000_100
        var otherTeams = Self.device
        otherTeams.teams = ["team-9"]
        var otherSchema = Self.request("c1")
        otherSchema.schema = ["Note": 2]
        for stranger in [
            Self.request("c1", identity: otherDevice), Self.request("c1", identity: newerToken), Self.request("c1", identity: otherTeams),
            Self.request("c1", clientID: "client-2"),
        ] {
            guard case .miss = await readAhead.take(stranger) else {
                Issue.record("\(stranger) got a page read ahead for another requester")
                return
            }
        }
        #expect(readAhead.count == 2, "a stranger's request leaves the device's pages alone")

        guard case .miss = await readAhead.take(otherSchema) else {
            Issue.record("a request with another schema got a page written for the old one")
            return
        }
        #expect(readAhead.count == 0, "the device moved on: its pages are dropped")
        guard case .miss = await readAhead.take(Self.request("c1")) else {
            Issue.record("a dropped page was handed over")
            return
        }
    }

    @Test("the last page ends the chain and is left for its request to read; so is a failed page")
    func lastPageAndFailure() async throws {
        let readAhead = PullReadAhead(depth: 4, lifetime: Self.longLife)
        let pages = Pages(last: 3)
        readAhead.readAhead(after: Self.request(nil), answered: Self.answered("c1"), work: pages.work)
        try await Self.eventually { pages.cursors == ["c1", "c2"] }
        try await Task.sleep(for: .milliseconds(20))
        #expect(pages.cursors == ["c1", "c2"], "nothing is written after the page that has no more")
        guard case .hit = await readAhead.take(Self.request("c1")), case .miss = await readAhead.take(Self.request("c2")) else {
            Issue.record("the page with more after it is a hit; the last page must be a miss, read by its request as of then")
            return
        }

        let failing = Pages(failing: ["c2"])
        let other = PullReadAhead(depth: 4, lifetime: Self.longLife)
        other.readAhead(after: Self.request(nil), answered: Self.answered("c1"), work: failing.work)
        try await Self.eventually { failing.cursors == ["c1", "c2"] }
        guard case .hit = await other.take(Self.request("c1")), case .miss = await other.take(Self.request("c2")) else {
            Issue.record("a failed page must be a miss, the page before it a hit")
            return
        }
        #expect(failing.cursors == ["c1", "c2"], "nothing is written after a failed page")
    }

    @Test("bounded: pages in all, a requester that stops asking, a push by the client")
    func bounds() async throws {
        let readAhead = PullReadAhead(depth: 2, maximumPages: 3, lifetime: .milliseconds(100))
        let pages = Pages()
        var second = Self.device
        second.deviceID = "d-2"
        readAhead.readAhead(after: Self.request(nil), answered: Self.answered("c1"), work: pages.work)
        readAhead.readAhead(after: Self.request(nil, identity: second), answered: Self.answered("c1"), work: pages.work)
        try await Self.eventually { pages.cursors.count == 3 }
        try await Task.sleep(for: .milliseconds(20))
        #expect(readAhead.count == 3, "at most maximumPages for all requesters")

        readAhead.discard(identity: Self.device, clientID: "client-1")
        guard case .miss = await readAhead.take(Self.request("c1")) else {
            Issue.record("a page read ahead before the client's push was handed over after it")
            return
        }

        try await Task.sleep(for: .milliseconds(150))
        guard case .miss = await readAhead.take(Self.request("c1", identity: second)) else {
            Issue.record("a page outlived its lifetime")
            return
        }
        #expect(readAhead.count == 0)

        let off = PullReadAhead(depth: 0)
        off.readAhead(after: Self.request(nil), answered: Self.answered("c1"), work: pages.work)
        #expect(off.count == 0, "depth 0 turns read-ahead off")
    }

    // MARK: Through the route

    /// Pushes `count` notes of team-1 (`Note`, last writer wins) as `client`, seqs from `firstSeq`.
    static func pushNotes(
        _ client: any TestClientProtocol, harness: RouteHarness, token: String, count: Int, firstSeq: Int64 = 1, clientID: String = "client-1",
        body: String = "B", minutesLater: Int64 = 0, firstIndex: Int = 0
    ) async throws {
        let mutations = (0..<count).map { index -> Mutation in
            let id = String(format: "note-%03d", firstIndex + index)
            return Mutation(
                seq: firstSeq + Int64(index),
                clientMutationId: String(
                    format: "01J%@%03d", clientID == "client-1" ? "0000000000000000000A" : "0000000000000000000B", firstSeq + Int64(index)),
                entity: "Note", op: .create, id: id,
                payload: .object([
                    "id": .string(id), "team_id": .string("team-1"), "card_id": .string("card-1"), "author_id": .string("u-1"), "body": .string(body),
                    "updated_at": .string("2026-01-31T08:00:00.000Z"),
                ]),
                // Last writer wins by hybrid clock: a later write must carry a later one.
                hlc: HybridLogicalClock(milliseconds: 1_769_846_400_000 + minutesLater * 60_000, counter: Int(firstSeq) + index, node: clientID)
                    .description
            )
        }
        let push = try await client.execute(
            uri: "/sync/v1/push", method: .post, headers: harness.headers(token, [.outpostClient: clientID]),
            body: ByteBuffer(json: PushRequest(clientId: clientID, schema: ["Note": 1], mutations: mutations))
        )
        #expect(push.status == .ok, "\(push.text)")
    }

    /// Every page of team-1's scope by `limit`, as the device asks for them.
    static func pages(
        _ client: any TestClientProtocol, harness: RouteHarness, token: String, limit: Int = 2, between: (Int) async throws -> Void = { _ in }
    ) async throws -> [PullResponse] {
        var cursor: String?
        var pages: [PullResponse] = []
        repeat {
            var uri = "/sync/v1/pull?scope=team&limit=\(limit)"
            if let cursor { uri += "&cursor=\(cursor)" }
            let response = try await client.execute(uri: uri, method: .get, headers: harness.headers(token, [.outpostClient: "client-1"]))
            #expect(response.status == .ok, "\(response.text)")
            guard response.status == .ok else { break }
            let page = try PullResponse(json: response.data)
            pages.append(page)
            cursor = page.hasMore ? page.cursor : nil
            try await between(pages.count)
        } while cursor != nil
        return pages
    }

    static func field(_ row: JSONValue, _ name: String) -> JSONValue? {
        guard case .object(let fields) = row else { return nil }
        return fields[name]
    }

    static func readAheadCount(_ client: any TestClientProtocol, harness: RouteHarness) async throws -> Int {
        let metrics = try await client.execute(uri: "/metrics", method: .get, headers: harness.metricsHeaders).text
        let line = metrics.split(separator: "\n").first { $0.hasPrefix(#"outpost_pull_pages_total{source="read_ahead"}"#) }
        return line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? -1
    }

    @Test("a scope paged through read-ahead answers the same pages as without it")
    func samePages() async throws {
        var off = RouteHarness.defaultConfiguration
        off.pullReadAheadPages = 0
        var answers: [[PullResponse]] = []
        for configuration in [off, RouteHarness.defaultConfiguration] {
            let harness = try RouteHarness.engine(configuration: configuration)
            let token = harness.token()
            answers.append(
                try await harness.test { client in
                    try await Self.pushNotes(client, harness: harness, token: token, count: 9)
                    let pages = try await Self.pages(client, harness: harness, token: token)
                    let served = try await Self.readAheadCount(client, harness: harness)
                    #expect(
                        served == (configuration.pullReadAheadPages == 0 ? 0 : pages.count - 2),
                        "every page after the first read ahead, but the last (read by its request, as of then)"
                    )
                    return pages
                }
            )
        }
        // The servers stamp `updated_at` with their clock; everything else is the same.
        let comparable = answers.map { pages in
            pages.map { page in
                var page = page
                page.upserts = page.upserts.mapValues { rows in
                    rows.map { row in
                        guard case .object(var fields) = row else { return row }
                        fields["updated_at"] = nil
                        return .object(fields)
                    }
                }
                return page
            }
        }
        #expect(answers[0].count == 5)
        #expect(comparable[1] == comparable[0])
    }

    @Test("a row changed while pages are read ahead still arrives, in its latest state")
    func changeDuringReadAhead() async throws {
        let harness = try RouteHarness.engine()
        let token = harness.token()
        let other = harness.token(device: "d-2")
        try await harness.test { client in
            try await Self.pushNotes(client, harness: harness, token: token, count: 9)
            let pages = try await Self.pages(client, harness: harness, token: token) { page in
                // After the first page (the next ones being written ahead), another device of
                // the team changes the first note, already delivered.
                if page == 1 {
                    try await Self.pushNotes(client, harness: harness, token: other, count: 1, clientID: "client-2", body: "D", minutesLater: 1)
                }
            }
            let notes = pages.flatMap { $0.upserts["Note"] ?? [] }
            let first = notes.filter { Self.field($0, "id") == .string("note-000") }
            #expect(first.count == 2, "delivered before the change and again after it")
            #expect(first.last.flatMap { Self.field($0, "body") } == .string("D"))
            #expect(Set(notes.compactMap { Self.field($0, "id") }).count == 9, "no row skipped")
        }
    }

    @Test("a change committed after the last page was read ahead is in the pages the device gets")
    func changeAfterLastPageReadAhead() async throws {
        let harness = try RouteHarness.engine()
        let token = harness.token()
        let other = harness.token(device: "d-2")
        try await harness.test { client in
            try await Self.pushNotes(client, harness: harness, token: token, count: 4)
            let pages = try await Self.pages(client, harness: harness, token: token) { page in
                // The second (last) page is read ahead after the first; then another device adds a row.
                if page == 1 {
                    try await Task.sleep(for: .milliseconds(200))
                    try await Self.pushNotes(
                        client, harness: harness, token: other, count: 1, clientID: "client-2", body: "D", minutesLater: 1, firstIndex: 4
                    )
                }
            }
            let ids = Set(pages.flatMap { $0.upserts["Note"] ?? [] }.compactMap { Self.field($0, "id") })
            #expect(ids.count == 5, "the row added before the last page was asked for is delivered")
        }
    }

    @Test("a token revoked between pages gets 401, not the pages read ahead for it")
    func revokedBetweenPages() async throws {
        let harness = try RouteHarness.engine()
        let token = harness.token()
        try await harness.test { client in
            try await Self.pushNotes(client, harness: harness, token: token, count: 9)
            let first = try await client.execute(uri: "/sync/v1/pull?scope=team&limit=2", method: .get, headers: harness.headers(token))
            let cursor = try PullResponse(json: first.data).cursor
            try await harness.storage.write {
                try await $0.revoke(tenant: "acme", kind: .device, subject: "d-1", at: Int64(Date().timeIntervalSince1970) + 1)
            }
            let next = try await client.execute(
                uri: "/sync/v1/pull?scope=team&limit=2&cursor=\(cursor)", method: .get, headers: harness.headers(token))
            #expect(next.status == .unauthorized)
            #expect(try next.errorBody().code == .tokenRevoked)
            #expect(try await Self.readAheadCount(client, harness: harness) == 0)
        }
    }

    @Test("a push by the client between pages: the next page's last_seq counts it")
    func pushBetweenPages() async throws {
        let harness = try RouteHarness.engine()
        let token = harness.token()
        try await harness.test { client in
            try await Self.pushNotes(client, harness: harness, token: token, count: 9)
            let pages = try await Self.pages(client, harness: harness, token: token) { page in
                if page == 1 { try await Self.pushNotes(client, harness: harness, token: token, count: 1, firstSeq: 10) }
            }
            #expect(pages.first?.lastSeq == 9)
            #expect(pages.dropFirst().allSatisfy { $0.lastSeq == 10 }, "\(pages.map(\.lastSeq))")
        }
    }
}
