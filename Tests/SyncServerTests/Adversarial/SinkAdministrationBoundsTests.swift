import ContractRuntime
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NIOConcurrencyHelpers
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// A receiver on loopback for the attacks: it answers with a body no admin may read back, or
/// sends its head and then trickles its body for ever, and counts the requests in flight.
final class HostileReceiver: Sendable {
    enum Behaviour: Sendable {
        /// Answers `status` with `body` at once.
        case answer(status: Int, body: String)
        /// Sends 200's head, then one byte every 100 ms until the client goes away.
        case trickle
    }

    private struct State {
        var script: [Behaviour]
        var requests = 0
        var inFlight = 0
        var mostInFlight = 0
    }

    private let state: NIOLockedValueBox<State>
    static let secretBody = "ssh-rsa AAAA-the-internal-service's-private-answer"

    init(_ script: [Behaviour]) {
        state = NIOLockedValueBox(State(script: script))
    }

    var requests: Int { state.withLockedValue { $0.requests } }
    var mostInFlight: Int { state.withLockedValue { $0.mostInFlight } }

    /// Serves while `body` runs, with its base URL (`http://127.0.0.1:PORT`).
    func run<Value: Sendable>(_ body: @Sendable (String) async throws -> Value) async throws -> Value {
        let router = Router()
        router.post("/hooks") { request, _ in try await self.answer(request) }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        return try await app.test(.live) { client in try await body("http://127.0.0.1:\(client.port!)") }
    }

    private func answer(_ request: Request) async throws -> Response {
        _ = try await request.body.collect(upTo: 1 << 24)
        let behaviour = state.withLockedValue { state -> Behaviour in
            state.requests += 1
            return state.script.count > 1 ? state.script.removeFirst() : state.script.first ?? .answer(status: 200, body: "")
        }
        switch behaviour {
        case .answer(let status, let body):
            return Response(status: HTTPResponse.Status(code: status), body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
        case .trickle:
            let box = state
            return Response(
                status: .ok, headers: [.contentLength: "1000000"],
                body: ResponseBody { writer in
                    box.withLockedValue {
                        $0.inFlight += 1
                        $0.mostInFlight = max($0.mostInFlight, $0.inFlight)
                    }
                    defer { box.withLockedValue { $0.inFlight -= 1 } }
                    for _ in 0..<1_000 {
                        try await writer.write(ByteBuffer(string: "x"))
                        try await Task.sleep(for: .milliseconds(100))
                    }
                    try await writer.finish(nil)
                })
        }
    }
}

/// Sink administration under attack (issue 44): sinks as server-side request forgery with
/// read-back, ids and URLs that cannot be managed, a receiver that stalls its body, and a
/// tenant adding sinks without end.
@Suite("Sinks: refused addresses, no read-back, whole-exchange deadlines, bounded per tenant", .blockingWork)
struct SinkAdministrationBoundsTests {
    static let secret = SinkTests.secret
    static let loopback = CIDRBlock("127.0.0.1/32")!

    static func add(_ client: any TestClientProtocol, _ h: HostileHarness, _ body: [String: JSONValue]) async throws -> TestResponse {
        try await SinkTests.addSink(client, h, body)
    }

    @Test(
        "a sink at loopback, the metadata service, [::1], decimal or hex addresses, localhost or the server's own routes is 400",
        arguments: StorageKind.allCases)
    func refusedAtAdd(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.serve { server in
            let client = server.client
            let own = "127.0.0.1:\(server.url.port!)"
            let urls = [
                "http://\(own)/admin/v1/sinks", "http://localhost:\(server.url.port!)/health", "http://2130706433/", "http://0x7f000001/",
                "http://0177.0.0.1/", "http://127.1/", "http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://[0:0:0:0:0:0:0:1]/",
                "http://169.254.169.254/latest/meta-data/", "http://2852039166/", "http://0.0.0.0:8080/", "http://0/", "http://10.0.0.1/",
                "http://172.16.5.4/", "http://192.168.1.1/", "http://100.64.0.1/", "http://[fe80::1]/", "http://[fd00::1]/",
                "https://127.0.0.1:443/",
            ]
            for url in urls {
                let response = try await Self.add(client, h, ["url": .string(url), "secret": .string(Self.secret)])
                #expect(response.status == .badRequest, "\(url): \(response.status) \(response.bodyText)")
                #expect(response.bodyText.contains("refused_address"), "\(url): \(response.bodyText)")
            }
            let listed = try await client.execute(uri: "/admin/v1/sinks", method: .get, headers: HostileHarness.headers(h.adminToken))
            #expect(!listed.bodyText.contains("\"id\""), "none was added: \(listed.bodyText)")
        }
    }

    @Test("an empty id, port 99999 or 0, a non-http scheme are 400 at add time", arguments: StorageKind.allCases)
    func malformedAtAdd(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            let good = JSONValue.string("https://hooks.example.com/outpost")
            var response = try await Self.add(client, h, ["id": .string(""), "url": good, "secret": .string(Self.secret)])
            #expect(response.status == .badRequest, "\(response.bodyText)")
            for url in [
                "https://hooks.example.com:99999/", "http://hooks.example.com:0/", "http://hooks.example.com:-1/", "http://hooks.example.com:8o/",
                "ftp://hooks.example.com/", "file:///etc/passwd", "gopher://hooks.example.com/", "hooks.example.com/path", "http:///nohost",
            ] {
                response = try await Self.add(client, h, ["url": .string(url), "secret": .string(Self.secret)])
                #expect(response.status == .badRequest, "\(url): \(response.status) \(response.bodyText)")
            }
            response = try await Self.add(client, h, ["id": .string("fine"), "url": good, "secret": .string(Self.secret)])
            #expect(response.status == .created, "a public https URL with a valid id is taken: \(response.bodyText)")
            response = try await Self.add(client, h, ["url": .string("https://hooks.example.com:8443/x"), "secret": .string(Self.secret)])
            #expect(response.status == .created, "\(response.bodyText)")
        }
    }

    @Test(
        "a tenant holds at most sinksPerTenant sinks: one more is 409 limit_reached; another tenant is not affected", arguments: StorageKind.allCases)
    func capPerTenant(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind) { $0.identityLimits.sinksPerTenant = 3 }
        try await h.live { client in
            for index in 0..<3 {
                let response = try await Self.add(
                    client, h, ["id": .string("s\(index)"), "url": .string("https://hooks.example.com/\(index)"), "secret": .string(Self.secret)])
                #expect(response.status == .created, "\(response.bodyText)")
            }
            let refused = try await Self.add(
                client, h, ["id": .string("s3"), "url": .string("https://hooks.example.com/3"), "secret": .string(Self.secret)])
            #expect(refused.status == .conflict, "\(refused.bodyText)")
            #expect(try refused.errorDetail.code == .limitReached)
            #expect(refused.bodyText.contains("\"limit\":3"), "\(refused.bodyText)")
            let other = h.signer.token(tenant: "globex", user: "admin", device: "console", teams: [], isAdmin: true)
            let theirs = try await client.execute(
                uri: "/admin/v1/sinks", method: .post, headers: HostileHarness.headers(other, [.contentType: "application/json"]),
                body: ByteBuffer(
                    bytes: CanonicalJSON.bytes(.object(["url": .string("https://hooks.example.com/g"), "secret": .string(Self.secret)]))))
            #expect(theirs.status == .created, "the cap is per tenant")
            #expect(
                try await client.execute(uri: "/admin/v1/sinks/s0", method: .delete, headers: HostileHarness.headers(h.adminToken)).status == .ok)
            let again = try await Self.add(
                client, h, ["id": .string("s3"), "url": .string("https://hooks.example.com/3"), "secret": .string(Self.secret)])
            #expect(again.status == .created, "room again once one is removed")
        }
    }

    @Test("a receiver's answer never comes back: dead letters and replays show its status and a fixed category", arguments: StorageKind.allCases)
    func noReadBack(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind) { configuration in
            configuration.outboundAllowList = [Self.loopback]
            configuration.sinks.pollInterval = .milliseconds(100)
        }
        let receiver = HostileReceiver([.answer(status: 404, body: HostileReceiver.secretBody)])
        try await receiver.run { base in
            try await h.live { client in
                try await ChangeFeedTests.join(client, h)
                #expect(
                    try await Self.add(client, h, ["id": .string("probe"), "url": .string(base + "/hooks"), "secret": .string(Self.secret)]).status
                        == .created)
                try await ChangeFeedTests.push(client, h.ownerToken, client: "alice-phone", [ChangeFeedTests.task(1, "task-1")])
                await eventually("the refused batch was parked") { receiver.requests >= 1 }
                await eventually("the dead letter is listed") {
                    let letters = try? await client.execute(
                        uri: "/admin/v1/sinks/probe/dead-letters", method: .get, headers: HostileHarness.headers(h.adminToken))
                    return letters?.bodyText.contains("\"status\":404") ?? false
                }
                let letters = try await client.execute(
                    uri: "/admin/v1/sinks/probe/dead-letters", method: .get, headers: HostileHarness.headers(h.adminToken))
                #expect(!letters.bodyText.contains("ssh-rsa") && !letters.bodyText.contains("private-answer"), "\(letters.bodyText)")
                #expect(letters.bodyText.contains("\"response\":\"receiver_status 404\""), "\(letters.bodyText)")
                let sink = try await SinkTests.sink(client, h, "probe")
                #expect(sink["last_error"] == .string("receiver_status 404: parked as a dead letter"), "\(sink)")
                let replay = try await client.execute(
                    uri: "/admin/v1/sinks/probe/dead-letters/replay", method: .post,
                    headers: HostileHarness.headers(h.adminToken, [.contentType: "application/json"]), body: ByteBuffer(string: "{}"))
                #expect(replay.status == .ok && receiver.requests >= 2)
                #expect(!replay.bodyText.contains("ssh-rsa") && !replay.bodyText.contains("private-answer"), "\(replay.bodyText)")
                #expect(replay.bodyText.contains("\"response\":\"receiver_status 404\"") && replay.bodyText.contains("\"status\":404"))
            }
        }
        // Nor is it kept.
        let stored = try await h.storage.read { try await $0.serverTableQuery("SELECT response FROM sink_dead_letters", []) }
        #expect(!stored.isEmpty && stored.allSatisfy { $0.text("response") == "receiver_status 404" })
    }

    @Test(
        "a sink added earlier at a now-refused address is never connected to: refused_address, nothing dead-lettered, no port told apart",
        arguments: StorageKind.allCases)
    func refusedAtDelivery(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind) { configuration in
            configuration.sinks.pollInterval = .milliseconds(100)
            configuration.sinks.initialBackoff = .milliseconds(50)
            configuration.sinks.maximumBackoff = .milliseconds(200)
        }
        let receiver = HostileReceiver([.answer(status: 404, body: HostileReceiver.secretBody)])
        try await receiver.run { base in
            // Added as the CLI with an allow-list would; this server allows nothing.
            let administration = SinkAdministration(
                storage: h.storage, outbound: OutboundAddressPolicy(allowList: [Self.loopback, CIDRBlock("10.0.0.0/8")!]))
            for (id, url) in [("open", base + "/hooks"), ("closed", "http://127.0.0.1:9/hooks"), ("filtered", "http://10.255.255.1:81/")] {
                var request = SinkAdministration.Request(url: url, secret: Self.secret)
                request.id = id
                _ = try await administration.add(request, tenant: HostileHarness.tenant)
            }
            try await h.live { client in
                try await ChangeFeedTests.join(client, h)
                try await ChangeFeedTests.push(client, h.ownerToken, client: "alice-phone", [ChangeFeedTests.task(1, "task-1")])
                await eventually("every sink was tried") {
                    for id in ["open", "closed", "filtered"] {
                        guard case .int(let attempts)? = try? await SinkTests.sink(client, h, id)["attempts"], attempts >= 1 else { return false }
                    }
                    return true
                }
                var errors: Set<JSONValue> = []
                for id in ["open", "closed", "filtered"] {
                    let sink = try await SinkTests.sink(client, h, id)
                    errors.insert(sink["last_error"] ?? .null)
                    let letters = try await client.execute(
                        uri: "/admin/v1/sinks/\(id)/dead-letters", method: .get, headers: HostileHarness.headers(h.adminToken))
                    #expect(!letters.bodyText.contains("\"status\""), "nothing parked: \(letters.bodyText)")
                }
                #expect(errors == [.string("refused_address")], "open, closed and filtered ports look alike: \(errors)")
                #expect(receiver.requests == 0, "the refused address was never connected to")
            }
        }
    }

    @Test(
        "a receiver that trickles its body for ever is cut off at the deadline: the attempt counts, the batch is retried",
        arguments: StorageKind.allCases)
    func stalledBody(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind) { configuration in
            configuration.outboundAllowList = [Self.loopback]
            configuration.sinks.pollInterval = .milliseconds(100)
            configuration.sinks.initialBackoff = .milliseconds(50)
            configuration.sinks.maximumBackoff = .milliseconds(100)
            configuration.sinks.requestTimeout = .seconds(1)
        }
        let receiver = HostileReceiver([.answer(status: 404, body: "no"), .trickle])
        try await receiver.run { base in
            try await h.live { client in
                try await ChangeFeedTests.join(client, h)
                #expect(
                    try await Self.add(client, h, ["id": .string("slow"), "url": .string(base + "/hooks"), "secret": .string(Self.secret)]).status
                        == .created)
                try await ChangeFeedTests.push(client, h.ownerToken, client: "alice-phone", [ChangeFeedTests.task(1, "task-1")])
                await eventually("the first batch was parked") { receiver.requests >= 1 }
                try await ChangeFeedTests.push(client, h.ownerToken, client: "alice-phone", [ChangeFeedTests.task(2, "task-2")])
                await eventually("the stalled attempts end and count", within: 20) {
                    guard case .int(let attempts)? = try? await SinkTests.sink(client, h, "slow")["attempts"] else { return false }
                    return attempts >= 2
                }
                let sink = try await SinkTests.sink(client, h, "slow")
                #expect(sink["last_error"] == .string("timeout") && sink["in_flight"] == .bool(true), "\(sink)")
                // A replay to the trickling receiver ends at the deadline too.
                let started = ContinuousClock.now
                let replay = try await client.execute(
                    uri: "/admin/v1/sinks/slow/dead-letters/replay", method: .post,
                    headers: HostileHarness.headers(h.adminToken, [.contentType: "application/json"]), body: ByteBuffer(string: "{}"))
                #expect(replay.status == .ok && replay.bodyText.contains("\"error\":\"timeout\""), "\(replay.bodyText)")
                #expect(ContinuousClock.now - started < .seconds(5))
            }
        }
    }

    @Test("on PostgreSQL, a stalled receiver never has the same sink's batch from two processes at once: the lease outlasts the deadline")
    func leaseOutlastsDeadline() async throws {
        let folder = try TemporaryDirectory(prefix: "sink-stall")
        let storages = try await StorageKind.postgres.makeSharedStorages(2, in: folder.url)
        var configuration = SinkDeliveryConfiguration()
        configuration.pollInterval = .milliseconds(100)
        // Long enough for the receiver to see each cut-off request end before the next one.
        configuration.initialBackoff = .seconds(1)
        configuration.maximumBackoff = .seconds(1)
        configuration.lease = .seconds(2)
        let policy = OutboundAddressPolicy(allowList: [Self.loopback])
        let deliveries = storages.map {
            SinkDelivery(
                storage: $0, configuration: configuration, metrics: ServerMetrics(), clock: SystemClock(), logger: Logger(label: "test"),
                outbound: policy)
        }
        let receiver = HostileReceiver([.trickle])
        let identity = DeviceIdentity(tenant: "acme", userID: "alice", deviceID: "alice-phone", teams: ["team-1"], expiresAt: 4_102_444_800)
        try await receiver.run { base in
            var request = SinkAdministration.Request(url: base + "/hooks", secret: Self.secret)
            request.id = "stalled"
            _ = try await SinkAdministration(storage: storages[0], outbound: policy).add(request, tenant: "acme")
            _ = try await PushService(storage: storages[0]).push(
                PushRequest(clientId: "alice-phone", schema: [:], mutations: [ChangeFeedTests.task(1, "task-1")]), identity: identity)
            let running = deliveries.map { delivery in Task { try await delivery.run() } }
            // Three leases' worth: without a whole-exchange deadline the holder never returns,
            // its lease lapses, and the other process sends the same batch alongside.
            try await Task.sleep(for: .seconds(6))
            for task in running { task.cancel() }
            for task in running { _ = try? await task.value }
        }
        #expect(receiver.requests >= 2, "the batch was tried again after each deadline")
        #expect(receiver.mostInFlight == 1, "one request in flight at a time, never one from each process")
        let sink = try await SinkStore(storage: storages[0]).sink(tenant: "acme", id: "stalled")
        #expect(sink?.lastError == "timeout" && (sink?.attempts ?? 0) >= 2)
        for storage in storages { if let postgres = storage as? PostgresStorage { await postgres.close() } }
    }
}
