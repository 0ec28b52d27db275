import ContractRuntime
import Contracts
import Foundation
import Hummingbird
import HummingbirdTesting
import OutpostTestSupport
import SampleServerApps
import SyncProtocol
import Testing

@testable import SyncServer

#if canImport(Glibc)
    import Glibc
#endif

/// What a device of the same tenant can try against the real server on loopback, each attack
/// on both storages: it must get nothing and break nothing (docs/security.md).
@Suite("Hostile device of the same tenant")
struct HostileDeviceTests {
    // MARK: Streams bound to identity

    @Test(
        "another device's client_id: 403 client_not_owned on push, gap, pull and 426, revealing nothing; the owner goes on",
        arguments: StorageKind.allCases)
    func clientIDOfAnotherDevice(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            let first = try await client.push(SampleMutations.push([SampleMutations.answer(seq: 1)], client: "alice-client"), token: h.ownerToken)
            #expect(try first.pushResults.map(\.status) == [.applied])
            let auditBefore = try await h.auditCount()

            // Replaying the owner's seq to read its stored result, moving the stream on, a gap
            // to learn last_seq, a pull and an old schema to learn last_seq: all the same 403.
            let attempts: [PushRequest] = [
                SampleMutations.push([SampleMutations.answer(seq: 1)], client: "alice-client"),
                SampleMutations.push([SampleMutations.answer(seq: 2, id: "9b2f3c1e-0000-4000-8000-000000000002")], client: "alice-client"),
                SampleMutations.push([SampleMutations.answer(seq: 50)], client: "alice-client"),
                SampleMutations.push([SampleMutations.answer(seq: 2)], client: "alice-client", schema: ["Unit": 1]),
                SampleMutations.push([], client: "alice-client"),
            ]
            for attempt in attempts {
                let response = try await client.push(attempt, token: h.hostileToken)
                #expect(response.status == .forbidden)
                #expect(try response.errorDetail.code == .clientNotOwned)
                #expect(try response.errorDetail.details == nil)
                for secret in ["last_seq", "results", "alice", "server_row", "9b2f3c1e"] {
                    #expect(!response.bodyText.contains(secret), "the refusal leaks \(secret)")
                }
            }
            // The same user on another device is another identity too.
            let sibling = try await client.push(
                SampleMutations.push([SampleMutations.answer(seq: 2)], client: "alice-client"), token: h.token(user: "alice", device: "alice-tablet"))
            #expect(sibling.status == .forbidden)

            let pull = try await client.execute(
                uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(h.hostileToken, [.outpostClient: "alice-client"])
            )
            #expect(pull.status == .forbidden)
            #expect(try pull.errorDetail.code == .clientNotOwned)
            #expect(try await h.auditCount() == auditBefore, "a refused request wrote something")

            // The owner's stream did not move: its next seq applies, and a resend of seq 1 is its own result.
            let next = try await client.push(
                SampleMutations.push(
                    [SampleMutations.answer(seq: 1), SampleMutations.answer(seq: 2, id: "9b2f3c1e-0000-4000-8000-000000000003", questionID: "q-2")],
                    client: "alice-client"
                ),
                token: h.ownerToken
            )
            #expect(try next.pushResults.map(\.status) == [.applied, .applied])
            let ownPull = try await client.execute(
                uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(h.ownerToken, [.outpostClient: "alice-client"])
            )
            #expect(try JSONDecoder().decode(PullResponse.self, from: Data(ownPull.body.readableBytesView)).lastSeq == 2)
        }
    }

    // MARK: Server-only fields

    @Test("no content answer carries the answer key: pull pages and the units route, as sent on the wire", arguments: StorageKind.allCases)
    func answerKeysStayOnTheServer(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        _ = try await SampleContent.seed(storage: h.storage, tenant: HostileHarness.tenant, team: "team-1", clock: SystemClock())
        let stored = try await h.storage.read { reader in
            try await reader.row(in: ContractTable(Assessment.descriptor), tenant: HostileHarness.tenant, id: "assessment-battery-basics")
        }
        #expect(stored?.text("answer_key")?.contains("correct") == true, "the server keeps the key")
        try await h.live { client in
            let bodies = [
                try await client.execute(
                    uri: "/sync/v1/pull?scope=content&limit=1000", method: .get, headers: HostileHarness.headers(h.hostileToken)),
                try await client.execute(
                    uri: "/sync/v1/pull?scope=content&limit=1000", method: .get,
                    headers: HostileHarness.headers(h.hostileToken, [.outpostSchema: "Assessment=1"])),
                try await client.execute(
                    uri: "/api/v1/content/units/sync?include_deleted=true", method: .get, headers: HostileHarness.headers(h.hostileToken)),
            ]
            for response in bodies {
                #expect(response.status == .ok)
                #expect(!response.bodyText.contains("answer_key"))
                #expect(!response.bodyText.contains("correct"))
            }
            #expect(bodies[0].bodyText.contains("assessment-battery-basics"), "the assessment itself is there")
        }
    }

    // MARK: Clock bounds

    @Test("a hybrid clock far ahead of the server's is rejected clock_skew, nothing written, the queue moves on", arguments: StorageKind.allCases)
    func futureClock(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            var ahead = SampleMutations.answer(seq: 1)
            ahead.hlc = HybridLogicalClock(milliseconds: now + 3_600_000, counter: 0, node: "mallory").description
            var slightlyAhead = SampleMutations.answer(seq: 2, id: "9b2f3c1e-0000-4000-8000-000000000002", questionID: "q-2")
            slightlyAhead.hlc = HybridLogicalClock(milliseconds: now + 60_000, counter: 0, node: "mallory").description
            let response = try await client.push(SampleMutations.push([ahead, slightlyAhead], client: "mallory-client"), token: h.hostileToken)
            let results = try response.pushResults
            #expect(results.map(\.status) == [.rejected, .applied])
            #expect(results.first?.error?.code == .clockSkew)
            let stored = try await h.storage.read { reader in
                try await reader.row(
                    in: ContractTable(AssessmentResponse.descriptor), tenant: HostileHarness.tenant, id: "9b2f3c1e-0000-4000-8000-000000000001")
            }
            #expect(stored == nil)
        }
    }

    // MARK: A newer client

    @Test("a client with contracts the server does not know: only those mutations are refused, each with its result", arguments: StorageKind.allCases)
    func newerClient(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            var future = SampleMutations.answer(seq: 2, id: "9b2f3c1e-0000-4000-8000-000000000002")
            future.entity = "Hovercraft"
            var newerVersion = SampleMutations.answer(seq: 3, id: "9b2f3c1e-0000-4000-8000-000000000003", questionID: "q-3")
            newerVersion.entity = "Unit"
            let response = try await client.push(
                SampleMutations.push(
                    [SampleMutations.answer(seq: 1), future, newerVersion], client: "newer-client",
                    schema: ["AssessmentResponse": 1, "Hovercraft": 1, "Unit": 99]
                ),
                token: h.ownerToken
            )
            #expect(response.status == .ok)
            let results = try response.pushResults
            #expect(results.map(\.status) == [.applied, .rejected, .rejected])
            #expect(results.map { $0.error?.code } == [nil, .unknownEntity, .schemaTooNew])
        }
    }

    // MARK: Bad input that broke the server

    @Test("two mutations at seq Int64.max: 400, and the server still answers", arguments: StorageKind.allCases)
    func sequenceOverflow(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            let body =
                #"{"client_id":"c","schema":{},"mutations":["#
                + [0, 1].map { _ in
                    #"{"seq":9223372036854775807,"client_mutation_id":"m","entity":"AssessmentResponse","op":"create","id":"x","payload":{}}"#
                }.joined(separator: ",") + "]}"
            let response = try await client.push(raw: body, token: h.hostileToken)
            #expect(response.status == .badRequest)
            #expect(try response.errorDetail.code == .malformedRequest)
            for huge in ["9223372036854775808", "1e300", "-1"] {
                let other = try await client.push(
                    raw:
                        #"{"client_id":"c","schema":{},"mutations":[{"seq":\#(huge),"client_mutation_id":"m","entity":"AssessmentResponse","op":"create","id":"x","payload":{}}]}"#,
                    token: h.hostileToken
                )
                #expect(other.status == .badRequest, "seq \(huge)")
            }
            #expect(try await client.execute(uri: "/health", method: .get).status == .ok)
        }
    }

    @Test("U+0000 in an id, a string or a client_id is refused nul_character, nothing written", arguments: StorageKind.allCases)
    func nulCharacters(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            let answer = SampleMutations.answer(seq: 1)
            let clean = String(decoding: try JSONEncoder().encode(SampleMutations.push([answer], client: "nul-client")), as: UTF8.self)
            let variants = [
                clean.replacingOccurrences(of: "9b2f3c1e-0000-4000-8000-000000000001", with: #"9b2f3c1e-0000-4000-8000-000000000001\u0000evil"#),
                clean.replacingOccurrences(of: "nul-client", with: #"nul-client\u0000"#),
                clean.replacingOccurrences(of: #""q-1""#, with: #""q-1\u0000truncated""#),
            ]
            #expect(variants.allSatisfy { $0 != clean })
            for body in variants {
                let response = try await client.push(raw: body, token: h.hostileToken)
                #expect(response.status == .badRequest)
                #expect(try response.errorDetail.code == .nulCharacter)
            }
            #expect(try await h.auditCount() == 0)
            // Escaped backslashes are not a NUL.
            let escaped = clean.replacingOccurrences(of: #""q-1""#, with: #""q-1\\u0000""#)
            #expect(try await client.push(raw: escaped, token: h.hostileToken).status == .ok)
        }
    }

    @Test("JSON nested far too deep is 400 nesting_too_deep, and the server keeps answering others", arguments: StorageKind.allCases)
    func deepNesting(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            let deep = String(repeating: "[", count: 500) + String(repeating: "]", count: 500)
            let body =
                #"{"client_id":"deep","schema":{},"mutations":[{"seq":1,"client_mutation_id":"m","entity":"AssessmentResponse","op":"create","id":"x","payload":{"answer":\#(deep)}}]}"#
            let big = String(repeating: "[", count: 30_000) + String(repeating: "]", count: 30_000)
            let bigBody =
                #"{"client_id":"deep","schema":{},"mutations":[{"seq":1,"client_mutation_id":"m","entity":"AssessmentResponse","op":"create","id":"x","payload":{"answer":\#(big)}}]}"#
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        let response = try await client.push(raw: bigBody, token: h.hostileToken)
                        #expect(response.status == .badRequest)
                        #expect(try response.errorDetail.code == .nestingTooDeep)
                    }
                }
                group.addTask {
                    let health = try await client.execute(uri: "/health", method: .get)
                    #expect(health.status == .ok)
                }
                try await group.waitForAll()
            }
            let response = try await client.push(raw: body, token: h.hostileToken)
            #expect(try response.errorDetail.code == .nestingTooDeep)
            // Nesting within the limit is an ordinary json value.
            var answer = SampleMutations.answer(seq: 1)
            if case .object(var payload)? = answer.payload {
                var nested: JSONValue = .string("leaf")
                for _ in 0..<40 { nested = .array([nested]) }
                payload["answer"] = nested
                answer.payload = .object(payload)
            }
            #expect(
                try await client.push(SampleMutations.push([answer], client: "deep"), token: h.hostileToken).pushResults.first?.status == .applied)
        }
    }

    @Test("ids are bounded: a 1 MB mutation id is 400, a long id in a payload is rejected", arguments: StorageKind.allCases)
    func longIDs(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            var huge = SampleMutations.answer(seq: 1)
            huge.id = String(repeating: "a", count: 1 << 20)
            let response = try await client.push(SampleMutations.push([huge], client: "ids"), token: h.hostileToken)
            #expect(response.status == .badRequest)
            var longRef = SampleMutations.answer(seq: 1)
            if case .object(var payload)? = longRef.payload {
                payload["question_id"] = .string(String(repeating: "q", count: RowCodec.maximumIDBytes + 1))
                longRef.payload = .object(payload)
            }
            let refused = try await client.push(SampleMutations.push([longRef], client: "ids"), token: h.hostileToken)
            #expect(try refused.pushResults.first?.error?.code == .invalidPayload)
        }
    }

    @Test("an enum value the contract does not list is refused on a write, even where reading has a fallback", arguments: StorageKind.allCases)
    func unknownEnumOnWrite(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            let statement = Mutation(
                seq: 1, clientMutationId: "01J0000000000000000000STMT", entity: "Statement", op: .create, id: "stmt-1",
                payload: .object([
                    "id": .string("stmt-1"), "verb": .string("teleported"), "object_id": .string("lesson-1"),
                    "stated_at": .string("2026-01-31T08:00:00.000Z"),
                ])
            )
            let response = try await client.push(SampleMutations.push([statement], client: "enum", schema: ["Statement": 1]), token: h.hostileToken)
            let result = try #require(try response.pushResults.first)
            #expect(result.status == .rejected)
            #expect(result.error?.code == .invalidPayload)
        }
    }

    /// `identity, chunked` is read as chunked by the HTTP parser, and maybe otherwise by a proxy
    /// in front (request smuggling): refused too.
    @Test(
        "Transfer-Encoding other than exactly chunked is 400, not 500 and not read as chunked",
        arguments: ["xchunked", "identity, chunked", "gzip, chunked"])
    func badTransferEncoding(_ coding: String) async throws {
        let h = try await HostileHarness.make(.sqlite)
        try await h.live { client in
            let port = try #require(client.port)
            let body = #"{"client_id":"c","schema":{},"mutations":[]}"#
            let answer = try await RawHTTP.exchange(
                "POST /sync/v1/push HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(h.hostileToken)\r\n"
                    + "Content-Type: application/json\r\nTransfer-Encoding: \(coding)\r\n\r\n\(String(body.utf8.count, radix: 16))\r\n\(body)\r\n0\r\n\r\n",
                port: port
            )
            #expect(answer.hasPrefix("HTTP/1.1 400"), "\(answer.prefix(200))")
        }
    }

    @Test("a Range end beyond 2^64 is a range to the end of the file, not the whole file", arguments: [StorageKind.sqlite])
    func hugeRangeEnd(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            let bytes = Data((0..<100).map { UInt8($0) })
            let row = try await client.execute(
                uri: "/admin/v1/content/Asset", method: .post, headers: HostileHarness.headers(h.adminToken),
                body: ByteBuffer(
                    string:
                        #"{"id": "a-1", "lesson_id": "lesson-1", "asset_kind": "document", "content_type": "application/octet-stream", "size_bytes": 0, "checksum": "", "storage_key": ""}"#
                )
            )
            #expect(row.status == .ok, "\(row.bodyText)")
            let upload = try await client.execute(
                uri: "/admin/v1/assets/a-1", method: .put, headers: HostileHarness.headers(h.adminToken, [.contentType: "application/octet-stream"]),
                body: ByteBuffer(bytes: bytes)
            )
            #expect(upload.status == .ok)
            let response = try await client.execute(
                uri: "/assets/a-1", method: .get, headers: HostileHarness.headers(h.hostileToken, [.range: "bytes=10-99999999999999999999999"])
            )
            #expect(response.status == .partialContent)
            #expect(response.headers[.contentRange] == "bytes 10-99/100")
            #expect(response.body.readableBytes == 90)
        }
    }

    // MARK: Abuse limits

    @Test("every response says nosniff; /metrics needs its own token and is off without one", arguments: [StorageKind.sqlite])
    func headersAndMetrics(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            for response in [
                try await client.execute(uri: "/health", method: .get),
                try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get),
                try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(h.hostileToken)),
            ] {
                #expect(response.headers[.xContentTypeOptions] == "nosniff")
            }
            #expect(try await client.execute(uri: "/metrics", method: .get).status == .unauthorized)
            #expect(try await client.execute(uri: "/metrics", method: .get, headers: HostileHarness.headers(h.hostileToken)).status == .unauthorized)
            let metrics = try await client.execute(uri: "/metrics", method: .get, headers: HostileHarness.headers(HostileHarness.metricsToken))
            #expect(metrics.status == .ok)
            #expect(metrics.bodyText.contains("outpost_http_requests_total"))
        }
        let closed = try await HostileHarness.make(kind) { $0.metricsToken = nil }
        try await closed.live { client in
            let response = try await client.execute(uri: "/metrics", method: .get, headers: HostileHarness.headers(HostileHarness.metricsToken))
            #expect(response.status == .notFound)
        }
    }

    @Test("requests without a valid token are limited per peer address", arguments: [StorageKind.sqlite])
    func peerLimit(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind) { $0.peerLimit = ServerConfiguration.RateLimit(requestsPerSecond: 0.01, burst: 3) }
        try await h.live { client in
            for _ in 0..<3 {
                let guess = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers("guess.guess"))
                #expect(guess.status == .unauthorized)
            }
            let limited = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers("guess.guess"))
            #expect(limited.status == .tooManyRequests)
            #expect(try limited.errorDetail.code == .rateLimited)
            #expect(limited.headers[.retryAfter] != nil)
        }
        let open = try await HostileHarness.make(kind) { $0.peerLimit = ServerConfiguration.RateLimit(requestsPerSecond: 0.01, burst: 2) }
        try await open.live { client in
            var statuses: [HTTPResponse.Status] = []
            for _ in 0..<3 { statuses.append(try await client.execute(uri: "/metrics", method: .get).status) }
            #expect(statuses == [.unauthorized, .unauthorized, .tooManyRequests])
            // A balancer's health check is never limited.
            for _ in 0..<3 { #expect(try await client.execute(uri: "/health", method: .get).status == .ok) }
        }
    }

    @Test("a client trickling its headers, or its body, is cut off", arguments: [StorageKind.sqlite])
    func slowClients(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind) {
            $0.timeouts = ServerConfiguration.Timeouts(headers: .milliseconds(500), body: .milliseconds(500), idle: .seconds(5))
        }
        try await h.live { client in
            let port = try #require(client.port)
            let (headersCut, bodyCut) = try await RawHTTP.onOwnThread {
                let slowHeaders = try RawHTTP.connect(port: port)
                defer { close(slowHeaders) }
                RawHTTP.send("GET /health HTTP/1.1\r\nHost: local", on: slowHeaders)
                let headersCut = RawHTTP.receive(on: slowHeaders)

                let slowBody = try RawHTTP.connect(port: port)
                defer { close(slowBody) }
                RawHTTP.send(
                    "POST /sync/v1/push HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(h.hostileToken)\r\nContent-Length: 1000\r\n\r\n{",
                    on: slowBody
                )
                return (headersCut, RawHTTP.receive(on: slowBody))
            }
            #expect(headersCut.closed && headersCut.text.isEmpty, "the server kept a connection whose headers never came")
            #expect(bodyCut.closed)
            // A prompt client is served as ever.
            let answer = try await RawHTTP.exchange("GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", port: port)
            #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer.prefix(200))")
        }
    }

    @Test("the per-device rate limit holds across processes sharing PostgreSQL")
    func sharedRateLimit() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-hostile-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let storages = try await StorageKind.postgres.makeSharedStorages(2, in: folder)
        // Fixed windows of burst / rate seconds: long enough (4 000 s) that the six requests never straddle two.
        var configuration = ServerConfiguration(rateLimit: ServerConfiguration.RateLimit(requestsPerSecond: 0.001, burst: 4))
        configuration.peerLimit = nil
        let signer = try TokenSigner(secret: HostileHarness.secret)
        let token = signer.token(tenant: "acme", user: "u", device: "busy")
        let apps = storages.map {
            buildApplication(
                configuration: configuration,
                environment: ServerEnvironment(
                    storage: $0, signer: signer, apps: SampleServerApps.all)
            )
        }
        var statuses: [HTTPResponse.Status] = []
        for index in 0..<6 {
            let status = try await apps[index % 2].test(.router) { client in
                try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(token)).status
            }
            statuses.append(status)
        }
        #expect(statuses.prefix(4).allSatisfy { $0 == .ok }, "\(statuses)")
        #expect(statuses.suffix(2).allSatisfy { $0 == .tooManyRequests }, "\(statuses)")
    }
}
