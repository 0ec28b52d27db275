import ContractRuntime
import Contracts
import Foundation
import Hummingbird
import HummingbirdTesting
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Every response that lists stored data goes through one byte budget and the shared memory
/// budget (``ListingBudget``, docs/security.md "Listing pages and memory"): the round-4 attack on
/// the change feed (a thousand rows of 250 kB asked for in one page) and the same shape on the
/// export, the fleet, the sinks and the console.
@Suite("Listing pages and memory", .blockingWork)
struct ListingBudgetTests {
    static let rowBytes = 250_000
    static let pageBytes = 1_000_000

    /// A `Statement` whose `result` holds `bytes` characters (within its field's 256 kB).
    static func largeStatement(seq: Int64, bytes: Int = rowBytes) -> Mutation {
        let id = String(format: "st-%04d", seq)
        let letter = Character(UnicodeScalar(UInt8(97 + Int(seq % 26))))
        return Mutation(
            seq: seq, clientMutationId: "cm-\(seq)", entity: "Statement", op: .create, id: id,
            payload: .object([
                "id": .string(id), "verb": .string("experienced"), "object_id": .string("lesson-\(seq)"),
                "result": .object(["text": .string(String(repeating: letter, count: bytes))]), "stated_at": .string("2026-11-27T08:00:00.000Z"),
            ]))
    }

    /// `count` statements of `rowBytes` by alice's phone, four per push.
    static func storeLargeStatements(_ client: any TestClientProtocol, _ h: HostileHarness, count: Int) async throws {
        for start in stride(from: 1, through: count, by: 4) {
            let mutations = (start...min(start + 3, count)).map { Self.largeStatement(seq: Int64($0)) }
            let pushed = try await client.push(SampleMutations.push(mutations, client: "alice-phone"), token: h.ownerToken)
            #expect(pushed.status == .ok, "\(pushed.bodyText.prefix(300))")
            #expect(try pushed.pushResults.allSatisfy { $0.status == .applied })
        }
    }

    static func json(_ response: TestResponse) throws -> [String: JSONValue] {
        guard case .object(let object)? = JSONParser.parse(String(buffer: response.body)) else {
            throw CancellationError()
        }
        return object
    }

    static func query(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! }

    // MARK: The change feed

    @Test(
        "the change feed attack: rows of 250 kB asked for with limit=1000 come in pages of the byte budget plus one row, has_more, nothing lost or doubled",
        arguments: StorageKind.allCases)
    func changeFeedPagesBoundedInBytes(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind) { $0.pageBytes = Self.pageBytes }
        try await h.live { client in
            let count = 24
            try await Self.storeLargeStatements(client, h, count: count)
            var seen: [String] = []
            var after: String?
            var pages = 0
            repeat {
                var uri = "/admin/v1/changes?limit=1000&contracts=Statement"
                if let after { uri += "&after=" + Self.query(after) }
                let response = try await client.execute(uri: uri, method: .get, headers: HostileHarness.headers(h.adminToken))
                #expect(response.status == .ok, "\(response.bodyText.prefix(300))")
                // At most the budget plus the one row that takes the page past it (and each change's envelope).
                #expect(
                    response.body.readableBytes <= Self.pageBytes + Self.rowBytes + 16_384,
                    "a change feed page of \(response.body.readableBytes) bytes")
                let page = try Self.json(response)
                guard case .array(let changes)? = page["changes"], case .string(let cursor)? = page["cursor"],
                    case .bool(let hasMore)? = page["has_more"]
                else {
                    Issue.record("not a change feed page")
                    return
                }
                for case .object(let change) in changes {
                    if case .string(let id)? = change["id"] { seen.append(id) }
                }
                pages += 1
                after = hasMore ? cursor : nil
            } while after != nil && pages < 100
            #expect(seen == (1...count).map { String(format: "st-%04d", $0) }, "every change once, in commit order")
            #expect(pages >= 5, "\(pages) pages for \(count) rows of 250 kB under a 1 MB budget")
        }
    }

    @Test("concurrent large change feed reads are each answered within the budget or told 503 server_busy with Retry-After, never unbounded")
    func concurrentReadsShareTheMemoryBudget() async throws {
        let h = try await HostileHarness.make(.sqlite) {
            $0.pageBytes = Self.pageBytes
            // Room for one page at a time (a page reserves twice the budget plus the largest row).
            $0.responseMemoryBytes = 2 * (Self.pageBytes + ContractCatalog(ContractRegistry.self).largestRowBytes) + 1
            $0.responseMemoryWait = .milliseconds(1)
        }
        try await h.serve { server in
            try await Self.storeLargeStatements(server.client, h, count: 16)
            let url = server.url.appendingPathComponent("admin/v1/changes")
            let token = h.adminToken
            let session = URLSession(configuration: .ephemeral)
            let outcomes = try await withThrowingTaskGroup(of: (status: Int, bytes: Int, retryAfter: String?).self) { group in
                for _ in 0..<12 {
                    group.addTask {
                        var request = URLRequest(url: URL(string: url.absoluteString + "?limit=1000")!)
                        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
                        let (data, response) = try await session.data(for: request)
                        let http = response as? HTTPURLResponse
                        return (http?.statusCode ?? 0, data.count, http?.value(forHTTPHeaderField: "Retry-After"))
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(outcomes.contains { $0.status == 200 }, "\(outcomes)")
            for outcome in outcomes {
                #expect(outcome.status == 200 || outcome.status == 503, "\(outcome)")
                if outcome.status == 200 { #expect(outcome.bytes <= Self.pageBytes + Self.rowBytes + 16_384, "\(outcome)") }
                if outcome.status == 503 { #expect(outcome.retryAfter != nil) }
            }
        }
    }

    // MARK: The export

    @Test("the export of a user with large rows comes back whole, streamed a page at a time, gzip or not", arguments: StorageKind.allCases)
    func exportOfLargeRowsIsComplete(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind) { $0.pageBytes = Self.pageBytes }
        try await h.live { client in
            let count = 12
            try await Self.storeLargeStatements(client, h, count: count)
            for gzip in [false, true] {
                let headers = HostileHarness.headers(h.adminToken, gzip ? [.acceptEncoding: "gzip"] : [:])
                let response = try await client.execute(uri: "/admin/v1/users/alice/export", method: .get, headers: headers)
                #expect(response.status == .ok, "\(response.bodyText.prefix(300))")
                var body = Data(response.body.readableBytesView)
                if gzip {
                    #expect(response.headers[.contentEncoding] == "gzip")
                    body = try Gzip.decompress(body, limit: 64 * 1024 * 1024)
                }
                let lines = String(decoding: body, as: UTF8.self).split(separator: "\n")
                let statements = lines.filter { $0.contains("\"type\":\"row\"") && $0.contains("\"entity\":\"Statement\"") }
                #expect(statements.count == count, "every statement once")
                #expect(statements.allSatisfy { $0.utf8.count > Self.rowBytes }, "each whole")
                #expect(lines.first?.contains("\"type\":\"user\"") == true)
                #expect(lines.contains { $0.contains("\"type\":\"audit\"") })
            }
            let nobody = try await client.execute(uri: "/admin/v1/users/nobody/export", method: .get, headers: HostileHarness.headers(h.adminToken))
            #expect(nobody.status == .notFound)
        }
    }

    @Test("the export reserves its room before it reads: with the memory taken, 503 server_busy")
    func exportWaitsForRoom() async throws {
        let h = try await HostileHarness.make(.sqlite) {
            $0.pageBytes = Self.pageBytes
            $0.responseMemoryBytes = 2 * (Self.pageBytes + ContractCatalog(ContractRegistry.self).largestRowBytes)
            $0.responseMemoryWait = .milliseconds(1)
        }
        try await h.serve { server in
            try await Self.storeLargeStatements(server.client, h, count: 4)
            // A slow reader holds the only page's room: nothing else is read meanwhile.
            let url = server.url.appendingPathComponent("admin/v1/users/alice/export")
            var request = URLRequest(url: url)
            request.setValue("Bearer \(h.adminToken)", forHTTPHeaderField: "Authorization")
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<6 {
                    group.addTask { [request] in
                        let (_, response) = try await URLSession(configuration: .ephemeral).data(for: request)
                        return (response as? HTTPURLResponse)?.statusCode ?? 0
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.contains(200))
            #expect(statuses.allSatisfy { $0 == 200 || $0 == 503 }, "\(statuses)")
        }
    }

    // MARK: The other lists

    @Test("the fleet's device list stops at the byte budget, says has_more, and its cursor continues with nothing lost or doubled")
    func fleetDevicesPaged() async throws {
        let h = try await HostileHarness.make(.sqlite) { $0.pageBytes = 1_024 }
        try await h.live { client in
            let devices = (1...12).map { "phone-\($0)" }
            for device in devices {
                let token = h.token(user: "alice", device: device)
                let response = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(token))
                #expect(response.status == .ok)
            }
            var seen: [String] = []
            var after: String?
            var pages = 0
            repeat {
                var uri = "/admin/v1/fleet/devices?limit=1000"
                if let after { uri += "&after=" + Self.query(after) }
                let response = try await client.execute(uri: uri, method: .get, headers: HostileHarness.headers(h.adminToken))
                #expect(response.status == .ok, "\(response.bodyText.prefix(300))")
                let page = try Self.json(response)
                guard case .array(let listed)? = page["devices"], case .bool(let hasMore)? = page["has_more"] else {
                    Issue.record("not a page: \(page)")
                    return
                }
                for case .object(let device) in listed {
                    if case .string(let id)? = device["device_id"] ?? device["device"] { seen.append(id) }
                }
                #expect(listed.count <= 5, "a page of \(listed.count) devices under a 1 kB budget")
                pages += 1
                after = hasMore ? page["cursor"].flatMap { if case .string(let text) = $0 { text } else { nil } } : nil
            } while after != nil && pages < 50
            #expect(Set(seen) == Set(devices) && seen.count == devices.count, "every device once: \(seen)")
            #expect(pages > 1)
            let bad = try await client.execute(
                uri: "/admin/v1/fleet/devices?after=nonsense", method: .get, headers: HostileHarness.headers(h.adminToken))
            #expect(bad.status == .badRequest)
        }
    }

    @Test("the sinks list and the dead letters stop at the byte budget and continue after their cursor")
    func sinksAndDeadLettersPaged() async throws {
        let h = try await HostileHarness.make(.sqlite) {
            $0.pageBytes = 1_024
            $0.outboundAllowList = [CIDRBlock("127.0.0.1/32")!]
        }
        try await h.live { client in
            for index in 1...3 {
                let body = #"{"id": "sink-\#(index)", "url": "http://127.0.0.1:9/hook", "secret": "a-secret-of-enough-length-\#(index)"}"#
                let added = try await client.execute(
                    uri: "/admin/v1/sinks", method: .post, headers: HostileHarness.headers(h.adminToken, [.contentType: "application/json"]),
                    body: ByteBuffer(string: body))
                #expect(added.status == .created, "\(added.bodyText.prefix(300))")
            }
            var sinks: [String] = []
            var after: String?
            repeat {
                let uri = "/admin/v1/sinks" + (after.map { "?after=" + Self.query($0) } ?? "")
                let response = try await client.execute(uri: uri, method: .get, headers: HostileHarness.headers(h.adminToken))
                #expect(response.status == .ok, "\(response.bodyText.prefix(300))")
                let page = try Self.json(response)
                guard case .array(let listed)? = page["sinks"], case .bool(let hasMore)? = page["has_more"] else {
                    Issue.record("not a page: \(page)")
                    return
                }
                for case .object(let sink) in listed { if case .string(let id)? = sink["id"] { sinks.append(id) } }
                after = hasMore ? page["cursor"].flatMap { if case .string(let text) = $0 { text } else { nil } } : nil
            } while after != nil && sinks.count < 10
            #expect(sinks == ["sink-1", "sink-2", "sink-3"])

            // Dead letters of 2 000 bytes each: one a page under a 1 kB budget.
            try await h.storage.write { transaction in
                for index in 1...3 {
                    _ = try await transaction.serverTableQuery(
                        """
                        INSERT INTO sink_dead_letters (tenant, sink_id, idempotency_key, body, changes, status, response, failed_at)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id
                        """,
                        [
                            .text(HostileHarness.tenant), .text("sink-1"), .text("key-\(index)"), .text(String(repeating: "x", count: 2_000)),
                            .integer(1), .integer(400), .text("client_error"), .integer(1_700_000_000),
                        ])
                }
            }
            var letters = 0
            var cursor = "0"
            var pages = 0
            while pages < 10 {
                let response = try await client.execute(
                    uri: "/admin/v1/sinks/sink-1/dead-letters?after=\(cursor)", method: .get, headers: HostileHarness.headers(h.adminToken))
                #expect(response.status == .ok, "\(response.bodyText.prefix(300))")
                let page = try Self.json(response)
                guard case .array(let listed)? = page["dead_letters"], case .bool(let hasMore)? = page["has_more"],
                    case .string(let next)? = page["cursor"]
                else {
                    Issue.record("not a page: \(page)")
                    return
                }
                #expect(listed.count <= 1)
                letters += listed.count
                pages += 1
                guard hasMore else { break }
                cursor = next
            }
            #expect(letters == 3)
            #expect(pages >= 3)
        }
    }

    @Test("the console's conflicts page reads troubled pushes a byte budget at a time")
    func consoleConflictsPaged() async throws {
        let h = try await HostileHarness.make(.sqlite)
        try await h.live { client in
            for seq in 1...3 {
                // A rejected mutation (its required fields missing): a troubled push each.
                var mutation = PullMemoryTests.largeAnswer(seq: Int64(seq), bytes: 100)
                mutation.payload = .object(["id": .string(mutation.id)])
                let pushed = try await client.push(SampleMutations.push([mutation], client: "alice-phone"), token: h.ownerToken)
                #expect(pushed.status == .ok)
                #expect(try pushed.pushResults.first?.status == .rejected)
            }
            let queries = ConsoleQueries(storage: h.storage)
            let all = try await queries.troubledPushesPage(tenant: HostileHarness.tenant, before: nil, limit: 25, pageBytes: .max)
            #expect(all.pushes.count == 3 && !all.hasMore)
            let first = try await queries.troubledPushesPage(tenant: HostileHarness.tenant, before: nil, limit: 25, pageBytes: 1)
            #expect(first.pushes.count == 1 && first.hasMore, "a page ends with the first push past the budget")
            let next = try await queries.troubledPushesPage(
                tenant: HostileHarness.tenant, before: first.pushes.last?.entry.id, limit: 25, pageBytes: 1)
            #expect(next.pushes.count == 1 && next.pushes[0].entry.id < first.pushes[0].entry.id)
        }
    }

    // MARK: The mechanism

    @Test("a page takes items while within its budget: at most the budget plus one item, a larger item alone")
    func pageRule() {
        let budget = ListingBudget(pageBytes: 100, memory: ResponseMemoryBudget(capacity: 10_000), largestItemBytes: 50)
        #expect(budget.prefix([40, 40, 40, 40]) { $0 }.items == [40, 40, 40])
        #expect(budget.prefix([40, 40, 40, 40]) { $0 }.hasMore)
        #expect(budget.prefix([500, 1]) { $0 }.items == [500], "a larger item travels alone")
        #expect(budget.prefix([10, 10]) { $0 }.hasMore == false)
        #expect(budget.prefix([10, 10, 10], limit: 2) { $0 }.items == [10, 10])
        #expect(budget.reservation == 300)
        let cursor = ListingCursor.encode([.int(7), .string("u/1"), .string("d 1")])
        #expect((try? ListingCursor.decode(cursor, count: 3)) == [.int(7), .string("u/1"), .string("d 1")])
        #expect((try? ListingCursor.decode("l1.bm9wZQ", count: 3)) == nil)
    }

    @Test("a streamed gzip body is one gzip member that inflates to what was written")
    func gzipStream() throws {
        let stream = GzipStream()
        var compressed = Data()
        var plain = Data()
        for index in 0..<50 {
            let part = Data(String(repeating: "line \(index)\n", count: 2_000).utf8)
            plain += part
            compressed += stream.compress(part, finish: false)
        }
        compressed += stream.compress(Data(), finish: true)
        #expect(try Gzip.decompress(compressed, limit: 10_000_000) == plain)
    }
}
