import ContractRuntime
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// Sinks over a real server on loopback, delivering to a receiver on loopback, on both storages:
/// signed batches in commit order, retries, dead letters and their replay, xAPI statements, and
/// the admin routes' refusals.
@Suite("Sinks: webhooks and xAPI statements from the change feed", .blockingWork)
struct SinkTests {
    static let secret = "a-signing-secret-of-the-tests-0123456789"
    /// The tests' receivers' addresses, allowed for outbound requests.
    static let loopback = CIDRBlock("127.0.0.1/32")!

    static func harness(_ kind: StorageKind) async throws -> HostileHarness {
        try await HostileHarness.make(kind) { configuration in
            // The receivers are on loopback, which outbound requests refuse unless allowed.
            configuration.outboundAllowList = [Self.loopback]
            configuration.sinks.pollInterval = .milliseconds(100)
            configuration.sinks.initialBackoff = .milliseconds(50)
            configuration.sinks.maximumBackoff = .milliseconds(400)
            configuration.sinks.lease = .seconds(5)
        }
    }

    static func addSink(_ client: any TestClientProtocol, _ h: HostileHarness, _ body: [String: JSONValue]) async throws -> TestResponse {
        try await client.execute(
            uri: "/admin/v1/sinks", method: .post, headers: HostileHarness.headers(h.adminToken, [.contentType: "application/json"]),
            body: ByteBuffer(bytes: CanonicalJSON.bytes(.object(body))))
    }

    static func sink(_ client: any TestClientProtocol, _ h: HostileHarness, _ id: String) async throws -> [String: JSONValue] {
        let response = try await client.execute(uri: "/admin/v1/sinks/\(id)", method: .get, headers: HostileHarness.headers(h.adminToken))
        guard case .object(let object) = try JSONDecoder().decode(JSONValue.self, from: Data(buffer: response.body)) else { return [:] }
        return object
    }

    /// Whether `request` carries a valid `Outpost-Signature` of its body under `secret`.
    static func isSigned(_ request: TestReceiver.Received, secret: String) -> Bool {
        guard let header = request.headers["outpost-signature"] else { return false }
        var timestamp: String?
        var signature: String?
        for part in header.split(separator: ",") {
            if part.hasPrefix("t=") { timestamp = String(part.dropFirst(2)) }
            if part.hasPrefix("v1=") { signature = String(part.dropFirst(3)) }
        }
        guard let timestamp, let signature, let seconds = Int64(timestamp), abs(Int64(Date().timeIntervalSince1970) - seconds) < 300 else {
            return false
        }
        var mac = HMAC<SHA256>(key: SymmetricKey(data: Data(secret.utf8)))
        mac.update(data: Data("\(timestamp).".utf8))
        mac.update(data: request.body)
        return mac.finalize().map { String(format: "%02x", $0) }.joined() == signature
    }

    @Test(
        "a webhook gets signed batches of the changes applied after it was added, in commit order; its contracts filter; the cursor moves once acknowledged",
        arguments: StorageKind.allCases)
    func signedBatchesInOrder(_ kind: StorageKind) async throws {
        let h = try await Self.harness(kind)
        let receiver = TestReceiver()
        try await receiver.run { base in
            try await h.live { client in
                try await ChangeFeedTests.join(client, h)
                // Applied before the sink: not delivered.
                try await ChangeFeedTests.push(client, h.ownerToken, client: "alice-phone", [ChangeFeedTests.task(1, "task-0")])
                let added = try await Self.addSink(
                    client, h, ["id": .string("billing"), "url": .string(base + "/hooks"), "secret": .string(Self.secret)])
                #expect(added.status == .created, "\(added.bodyText)")
                #expect(!added.bodyText.contains(Self.secret), "the secret is never shown")
                let assets = try await Self.addSink(
                    client, h,
                    [
                        "id": .string("assets"), "url": .string(base + "/hooks"), "secret": .string(Self.secret),
                        "contracts": .array([.string("ServiceAsset")]),
                    ])
                #expect(assets.status == .created)

                try await ChangeFeedTests.push(
                    client, h.ownerToken, client: "alice-phone", [ChangeFeedTests.task(2, "task-1"), ChangeFeedTests.task(3, "task-2")])
                try await ChangeFeedTests.push(client, h.ownerToken, client: "alice-phone", [ChangeFeedTests.asset(4, "asset-1")])
                try await ChangeFeedTests.push(client, h.ownerToken, client: "alice-phone", [ChangeFeedTests.task(5, "task-3")])

                await eventually("the receiver has every change") {
                    receiver.acknowledged.filter { $0.headers["outpost-sink"] == "billing" }.flatMap(\.changes).count >= 4
                        && receiver.acknowledged.contains { $0.headers["outpost-sink"] == "assets" }
                }
                let billing = receiver.acknowledged.filter { $0.headers["outpost-sink"] == "billing" }
                #expect(billing.flatMap(\.changes).map { $0["id"] as? String } == ["task-1", "task-2", "asset-1", "task-3"])
                #expect(billing.allSatisfy { Self.isSigned($0, secret: Self.secret) }, "every batch is signed with the sink's secret")
                #expect(!billing.contains { Self.isSigned($0, secret: "another-secret-of-the-same-length!!") })
                let keys = billing.compactMap { $0.headers["idempotency-key"] }
                #expect(keys.count == billing.count && Set(keys).count == keys.count, "one key per batch")
                #expect(billing.allSatisfy { ($0.json as? [String: Any])?["tenant"] as? String == HostileHarness.tenant })
                let onlyAssets = receiver.acknowledged.filter { $0.headers["outpost-sink"] == "assets" }.flatMap(\.changes)
                #expect(onlyAssets.map { $0["id"] as? String } == ["asset-1"])

                await eventually("the sink's cursor moved past what was acknowledged") {
                    (try? await Self.sink(client, h, "billing")["delivered"]) == .int(4)
                }
                let listed = try await client.execute(uri: "/admin/v1/sinks", method: .get, headers: HostileHarness.headers(h.adminToken))
                #expect(listed.status == .ok && listed.bodyText.contains("\"billing\"") && listed.bodyText.contains("\"assets\""))
                #expect(!listed.bodyText.contains(Self.secret))
            }
        }
        // The secret is sealed at rest: the database does not hold it in clear.
        let stored = try await h.storage.read { try await $0.serverTableQuery("SELECT sealed_secret, options FROM sinks", []) }
        #expect(stored.count == 2)
        #expect(!stored.contains { ($0.text("sealed_secret") ?? "").contains(Self.secret) || ($0.text("options") ?? "").contains(Self.secret) })
    }

    @Test("5xx and 429 are retried with the same idempotency key, after Retry-After, until acknowledged", arguments: StorageKind.allCases)
    func retries(_ kind: StorageKind) async throws {
        let h = try await Self.harness(kind)
        let receiver = TestReceiver(script: [(503, "1"), (500, nil), (429, "0")])
        try await receiver.run { base in
            try await h.live { client in
                try await ChangeFeedTests.join(client, h)
                #expect(
                    try await Self.addSink(client, h, ["id": .string("flaky"), "url": .string(base + "/hooks"), "secret": .string(Self.secret)])
                        .status == .created)
                let started = Date()
                try await ChangeFeedTests.push(client, h.ownerToken, client: "alice-phone", [ChangeFeedTests.task(1, "task-1")])
                await eventually("the batch is acknowledged") { !receiver.acknowledged.isEmpty }
                let attempts = receiver.received
                #expect(attempts.map(\.status) == [503, 500, 429, 200])
                #expect(Set(attempts.compactMap { $0.headers["idempotency-key"] }).count == 1, "the same batch each time")
                #expect(Set(attempts.map(\.body)).count == 1)
                #expect(Date().timeIntervalSince(started) >= 1, "Retry-After: 1 was honoured")
                await eventually("the sink is caught up") { (try? await Self.sink(client, h, "flaky")["delivered"]) == .int(1) }
                let sink = try await Self.sink(client, h, "flaky")
                #expect(sink["attempts"] == .int(0) && sink["last_error"] == nil)
                let metrics = try await client.execute(uri: "/metrics", method: .get, headers: HostileHarness.headers(HostileHarness.metricsToken))
                #expect(
                    metrics.bodyText.contains("outpost_sink_attempts_total{tenant=\"acme\",sink=\"flaky\",outcome=\"retried\"} 3"),
                    "\(metrics.bodyText)")
                #expect(metrics.bodyText.contains("outpost_sink_changes_delivered_total{tenant=\"acme\",sink=\"flaky\"} 1"))
                #expect(metrics.bodyText.contains("outpost_sink_lag_seconds"))
            }
        }
    }

    @Test(
        "a sink whose secrets do not open with the audit key is listed with the reason and left out; the others are delivered",
        arguments: StorageKind.allCases)
    func unreadableSecrets(_ kind: StorageKind) async throws {
        let h = try await Self.harness(kind)
        let receiver = TestReceiver()
        try await receiver.run { base in
            try await h.live { client in
                try await ChangeFeedTests.join(client, h)
                for id in ["broken", "fine"] {
                    #expect(
                        try await Self.addSink(client, h, ["id": .string(id), "url": .string(base + "/hooks"), "secret": .string(Self.secret)]).status
                            == .created)
                }
                // As if sealed under another audit key.
                _ = try await h.storage.write {
                    try await $0.serverTableQuery(
                        "UPDATE sinks SET sealed_secret = ? WHERE id = ? RETURNING id", [.text("c2VhbGVkIGVsc2V3aGVyZQ=="), .text("broken")])
                }
                try await ChangeFeedTests.push(client, h.ownerToken, client: "alice-phone", [ChangeFeedTests.task(1, "task-1")])
                await eventually("the readable sink is delivered") { !receiver.acknowledged.isEmpty }
                try await Task.sleep(for: .milliseconds(300))
                #expect(receiver.received.allSatisfy { $0.headers["outpost-sink"] == "fine" })
                let broken = try await Self.sink(client, h, "broken")
                guard case .string(let error)? = broken["last_error"] else { Issue.record("no reason: \(broken)"); return }
                #expect(error.contains("audit key") && broken["delivered"] == .int(0))
                #expect(
                    try await client.execute(uri: "/admin/v1/sinks/broken", method: .delete, headers: HostileHarness.headers(h.adminToken)).status
                        == .ok)
            }
        }
    }

    @Test("a batch keeps under its byte budget: changes beyond it go in the next batches, in order", arguments: StorageKind.allCases)
    func batchByteBudget(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind) { configuration in
            configuration.outboundAllowList = [Self.loopback]
            configuration.sinks.pollInterval = .milliseconds(100)
            configuration.sinks.maximumBatchBytes = 1500
        }
        let receiver = TestReceiver()
        try await receiver.run { base in
            try await h.live { client in
                try await ChangeFeedTests.join(client, h)
                #expect(
                    try await Self.addSink(client, h, ["id": .string("small"), "url": .string(base + "/hooks"), "secret": .string(Self.secret)])
                        .status == .created)
                let tasks = (1...6).map { ChangeFeedTests.task(Int64($0), "task-\($0)") }
                try await ChangeFeedTests.push(client, h.ownerToken, client: "alice-phone", tasks)
                await eventually("every change arrived") { receiver.acknowledgedChanges.count >= 6 }
                #expect(receiver.acknowledgedChanges.map { $0["id"] as? String } == (1...6).map { "task-\($0)" })
                let batches = receiver.acknowledged
                #expect(batches.count >= 2, "one push of 6 went out in \(batches.count) batch(es)")
                #expect(batches.allSatisfy { $0.changes.count == 1 || $0.body.count <= 1500 + 200 }, "\(batches.map(\.body.count))")
            }
        }
    }

    @Test(
        "a receiver that cannot be reached is retried, not dead-lettered: the batch stays in flight with its error", arguments: StorageKind.allCases)
    func unreachableReceiver(_ kind: StorageKind) async throws {
        let h = try await Self.harness(kind)
        try await h.live { client in
            try await ChangeFeedTests.join(client, h)
            // Port 9 (discard) is closed on loopback: every attempt is a connection error.
            #expect(
                try await Self.addSink(
                    client, h, ["id": .string("down"), "url": .string("http://127.0.0.1:9/hooks"), "secret": .string(Self.secret)]
                ).status == .created)
            try await ChangeFeedTests.push(client, h.ownerToken, client: "alice-phone", [ChangeFeedTests.task(1, "task-1")])
            await eventually("the batch was tried several times") {
                guard case .int(let attempts)? = try? await Self.sink(client, h, "down")["attempts"] else { return false }
                return attempts >= 2
            }
            let sink = try await Self.sink(client, h, "down")
            #expect(sink["in_flight"] == .bool(true) && sink["delivered"] == .int(0))
            guard case .string(let error)? = sink["last_error"] else { Issue.record("no last_error: \(sink)"); return }
            #expect(error == "connection_failed" || error == "timeout", "a fixed category, nothing of the error's text: \(error)")
            let letters = try await client.execute(
                uri: "/admin/v1/sinks/down/dead-letters", method: .get, headers: HostileHarness.headers(h.adminToken))
            #expect(letters.bodyText.contains("\"dead_letters\":[]"), "\(letters.bodyText)")
        }
    }

    @Test("Retry-After is read as seconds or as an HTTP date; anything else is ignored")
    func retryAfterForms() {
        let now: Int64 = 1_795_000_000_000
        #expect(SinkRequest.retryAfter("120", now: now) == 120)
        #expect(SinkRequest.retryAfter(" 0 ", now: now) == 0)
        #expect(SinkRequest.retryAfter("-5", now: now) == 0)
        let date = Date(timeIntervalSince1970: Double(now) / 1000 + 90)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        #expect(SinkRequest.retryAfter(formatter.string(from: date), now: now) == 90)
        #expect(SinkRequest.retryAfter("soon", now: now) == nil)
        #expect(SinkRequest.retryAfter(nil, now: now) == nil)
    }

    @Test(
        "a 4xx parks the batch as a dead letter and delivery goes on; a replay sends it again with its key and removes it",
        arguments: StorageKind.allCases)
    func deadLettersAndReplay(_ kind: StorageKind) async throws {
        let h = try await Self.harness(kind)
        let receiver = TestReceiver(script: [(422, nil)])
        try await receiver.run { base in
            try await h.live { client in
                try await ChangeFeedTests.join(client, h)
                #expect(
                    try await Self.addSink(client, h, ["id": .string("strict"), "url": .string(base + "/hooks"), "secret": .string(Self.secret)])
                        .status == .created)
                try await ChangeFeedTests.push(client, h.ownerToken, client: "alice-phone", [ChangeFeedTests.task(1, "task-1")])
                await eventually("the refused batch was parked") {
                    (try? await Self.sink(client, h, "strict")["cursor"]) != nil && receiver.received.count >= 1
                }
                try await ChangeFeedTests.push(client, h.ownerToken, client: "alice-phone", [ChangeFeedTests.task(2, "task-2")])
                await eventually("the next batch is delivered") { receiver.acknowledged.flatMap(\.changes).count == 1 }
                #expect(receiver.acknowledged.flatMap(\.changes).map { $0["id"] as? String } == ["task-2"])

                let letters = try await client.execute(
                    uri: "/admin/v1/sinks/strict/dead-letters", method: .get, headers: HostileHarness.headers(h.adminToken))
                guard case .object(let page) = try JSONDecoder().decode(JSONValue.self, from: Data(buffer: letters.body)),
                    case .array(let list)? = page["dead_letters"], case .object(let letter)? = list.first
                else { Issue.record("no dead letters: \(letters.bodyText)"); return }
                #expect(list.count == 1)
                #expect(letter["status"] == .int(422) && letter["changes"] == .int(1))
                let firstKey = receiver.received[0].headers["idempotency-key"]
                #expect(letter["idempotency_key"] == firstKey.map(JSONValue.string))

                let replay = try await client.execute(
                    uri: "/admin/v1/sinks/strict/dead-letters/replay", method: .post,
                    headers: HostileHarness.headers(h.adminToken, [.contentType: "application/json"]), body: ByteBuffer(string: "{}"))
                #expect(replay.status == .ok && replay.bodyText.contains("\"delivered\":true"), "\(replay.bodyText)")
                let replayed = try #require(receiver.received.last)
                #expect(replayed.headers["idempotency-key"] == firstKey && replayed.body == receiver.received[0].body)
                #expect(Self.isSigned(replayed, secret: Self.secret))
                let after = try await client.execute(
                    uri: "/admin/v1/sinks/strict/dead-letters", method: .get, headers: HostileHarness.headers(h.adminToken))
                #expect(after.bodyText.contains("\"dead_letters\":[]"), "\(after.bodyText)")
            }
        }
    }

    @Test("an xAPI sink posts the Statement rows as xAPI 1.0.3 statements with Basic auth", arguments: StorageKind.allCases)
    func xapiStatements(_ kind: StorageKind) async throws {
        let h = try await Self.harness(kind)
        let receiver = TestReceiver()
        try await receiver.run { base in
            try await h.live { client in
                let added = try await Self.addSink(
                    client, h,
                    [
                        "id": .string("lrs"), "kind": .string("xapi"), "url": .string(base + "/lrs/xAPI"), "secret": .string(Self.secret),
                        "xapi": .object([
                            "user": .string("outpost"), "password": .string("lrs-password"), "home_page": .string("https://learn.example.com"),
                        ]),
                    ])
                #expect(added.status == .created, "\(added.bodyText)")
                let statement = Mutation(
                    seq: 1, clientMutationId: "cm-1", entity: "Statement", op: .create, id: "01JD0000000000000000000001",
                    payload: .object([
                        "id": .string("01JD0000000000000000000001"), "verb": .string("completed"), "object_id": .string("lesson-1"),
                        "score": .double(0.9), "success": .bool(true), "duration_ms": .int(90_500), "stated_at": .string("2026-11-27T08:00:00.000Z"),
                        "result": .object(["answer": .string("42")]),
                    ]))
                let pushed = try await client.push(PushRequest(clientId: "alice-phone", schema: [:], mutations: [statement]), token: h.ownerToken)
                #expect(try pushed.pushResults.map(\.status) == [.applied], "\(pushed.bodyText)")
                await eventually("the LRS has the statement") { !receiver.acknowledged.isEmpty }
                let request = try #require(receiver.acknowledged.first)
                #expect(request.path == "/lrs/xAPI/statements")
                #expect(request.headers["x-experience-api-version"] == "1.0.3")
                #expect(request.headers["authorization"] == "Basic " + Data("outpost:lrs-password".utf8).base64EncodedString())
                let statements = try #require(request.json as? [[String: Any]])
                #expect(statements.count == 1)
                let first = try #require(statements.first)
                #expect((first["id"] as? String).flatMap(UUID.init(uuidString:)) != nil)
                #expect((first["verb"] as? [String: Any])?["id"] as? String == "http://adlnet.gov/expapi/verbs/completed")
                #expect(((first["actor"] as? [String: Any])?["account"] as? [String: Any])?["name"] as? String == "alice")
                #expect((first["object"] as? [String: Any])?["id"] as? String == "https://learn.example.com/activities/lesson-1")
                let result = try #require(first["result"] as? [String: Any])
                #expect((result["score"] as? [String: Any])?["scaled"] as? Double == 0.9)
                #expect(result["duration"] as? String == "PT90.5S" && result["completion"] as? Bool == true && result["success"] as? Bool == true)
                #expect(first["timestamp"] as? String == "2026-11-27T08:00:00.000Z" && first["stored"] != nil)
            }
        }
    }

    @Test(
        "sinks are an admin's: bad settings are 400, a taken id 409, a device or integration token 403, an unknown sink 404",
        arguments: StorageKind.allCases)
    func refusals(_ kind: StorageKind) async throws {
        let h = try await Self.harness(kind)
        try await h.live { client in
            func code(_ response: TestResponse) throws -> String { try response.errorDetail.code.rawValue }
            let url = JSONValue.string("http://127.0.0.1:9/hooks")
            var response = try await Self.addSink(client, h, ["url": .string("ftp://example.com"), "secret": .string(Self.secret)])
            #expect(response.status == .badRequest)
            response = try await Self.addSink(client, h, ["url": .string("http://user:pw@example.com/"), "secret": .string(Self.secret)])
            #expect(response.status == .badRequest, "credentials in a URL are refused")
            response = try await Self.addSink(client, h, ["url": url, "secret": .string("short")])
            #expect(response.status == .badRequest && response.bodyText.contains("16 bytes"))
            response = try await Self.addSink(client, h, ["url": url, "secret": .string(Self.secret), "contracts": .array([.string("Nope")])])
            #expect(try response.status == .badRequest && code(response) == "unknown_entity")
            response = try await Self.addSink(client, h, ["url": url, "secret": .string(Self.secret), "kind": .string("xapi")])
            #expect(response.status == .badRequest, "an xAPI sink needs its credentials and home page")
            response = try await Self.addSink(client, h, ["url": url, "secret": .string(Self.secret), "colour": .string("red")])
            #expect(response.status == .badRequest)
            response = try await Self.addSink(client, h, ["id": .string("a b"), "url": url, "secret": .string(Self.secret)])
            #expect(response.status == .badRequest)
            #expect(try await Self.addSink(client, h, ["id": .string("one"), "url": url, "secret": .string(Self.secret)]).status == .created)
            response = try await Self.addSink(client, h, ["id": .string("one"), "url": url, "secret": .string(Self.secret)])
            #expect(try response.status == .conflict && code(response) == "sink_exists")

            let integration = h.signer.sign(
                DeviceIdentity(
                    tenant: HostileHarness.tenant, userID: "billing", deviceID: "billing-service", isIntegration: true,
                    expiresAt: Int64(Date().timeIntervalSince1970) + 600))
            for token in [h.ownerToken, integration] {
                let listed = try await client.execute(uri: "/admin/v1/sinks", method: .get, headers: HostileHarness.headers(token))
                #expect(listed.status == .forbidden)
            }
            // Another tenant's admin sees none of them.
            let other = h.signer.token(tenant: "globex", user: "admin", device: "console", teams: [], isAdmin: true)
            let theirs = try await client.execute(uri: "/admin/v1/sinks", method: .get, headers: HostileHarness.headers(other))
            #expect(theirs.bodyText.contains("\"sinks\":[]"), "\(theirs.bodyText)")
            #expect(try await client.execute(uri: "/admin/v1/sinks/one", method: .get, headers: HostileHarness.headers(other)).status == .notFound)

            let removed = try await client.execute(uri: "/admin/v1/sinks/one", method: .delete, headers: HostileHarness.headers(h.adminToken))
            #expect(removed.status == .ok)
            #expect(
                try await client.execute(uri: "/admin/v1/sinks/one", method: .delete, headers: HostileHarness.headers(h.adminToken)).status
                    == .notFound)
        }
    }
}

/// Two processes on one PostgreSQL database, each running the sinks' delivery: one holds a sink
/// at a time, and the receiver gets each change once, in commit order, even when the holder
/// stops and the other takes over.
@Suite("Sinks across processes", .blockingWork)
struct SinkProcessesTests {
    @Test("two deliveries on one database: each change once and in order, across a takeover when the holder stops")
    func twoDeliveries() async throws {
        let folder = try TemporaryDirectory(prefix: "sink-two")
        let storages = try await StorageKind.postgres.makeSharedStorages(2, in: folder.url)
        var configuration = SinkDeliveryConfiguration()
        configuration.pollInterval = .milliseconds(100)
        configuration.lease = .seconds(2)
        let loopback = OutboundAddressPolicy(allowList: [SinkTests.loopback])
        let deliveries = storages.map {
            SinkDelivery(
                storage: $0, configuration: configuration, metrics: ServerMetrics(), clock: SystemClock(), logger: Logger(label: "test"),
                outbound: loopback)
        }
        // A slow receiver: a batch is still being sent when the other process looks for sinks.
        let receiver = TestReceiver(delay: .milliseconds(150))
        let identity = DeviceIdentity(tenant: "acme", userID: "alice", deviceID: "alice-phone", teams: ["team-1"], expiresAt: 4_102_444_800)
        try await receiver.run { base in
            var request = SinkAdministration.Request(url: base + "/hooks", secret: SinkTests.secret)
            request.id = "shared"
            _ = try await SinkAdministration(storage: storages[0], outbound: loopback).add(request, tenant: "acme")
            let first = Task { try await deliveries[0].run() }
            let second = Task { try await deliveries[1].run() }
            let pushes = [PushService(storage: storages[0]), PushService(storage: storages[1])]
            var seq: Int64 = 0
            for round in 0..<20 {
                var mutations: [Mutation] = []
                for index in 0..<5 {
                    seq += 1
                    mutations.append(ChangeFeedTests.task(seq, "task-\(round)-\(index)"))
                }
                _ = try await pushes[round % 2].push(PushRequest(clientId: "alice-phone", schema: [:], mutations: mutations), identity: identity)
                // Half way, the process holding the sink stops (gives its lease back): the other goes on.
                if round == 10 {
                    (try await SinkStore(storage: storages[0]).sink(tenant: "acme", id: "shared"))?.leaseHolder == deliveries[0].holder
                        ? first.cancel() : second.cancel()
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            await eventually("every change arrived") { receiver.acknowledgedChanges.count >= 100 }
            try await Task.sleep(for: .milliseconds(500))
            first.cancel()
            second.cancel()
            _ = try? await first.value
            _ = try? await second.value
        }
        // As a receiver that deduplicates by key sees them.
        var keys = Set<String>()
        var resent = 0
        var ids: [String] = []
        for request in receiver.acknowledged {
            guard keys.insert(request.headers["idempotency-key"] ?? "").inserted else {
                resent += 1
                continue
            }
            ids += request.changes.compactMap { $0["id"] as? String }
        }
        #expect(ids == (0..<20).flatMap { round in (0..<5).map { "task-\(round)-\($0)" } }, "each change once, in commit order")
        #expect(resent <= 1, "only the batch in flight when its holder stopped may be sent twice, not one per look of the other process")
        for storage in storages { if let postgres = storage as? PostgresStorage { await postgres.close() } }
    }
}
