import CZlib
import ContractRuntime
import EngineTestContracts
import Foundation
import Hummingbird
import HummingbirdTesting
import SyncProtocol
import Testing

@testable import SyncServer

/// The engine's routes on the engines' own contracts: pushes of `Activity` rows, pulls of a team's
/// board, cards and notes, the catalog's labels published by an admin. The learning app's content
/// routes are in RouteLearningContentTests.
@Suite("Routes: operations, push, pull, content")
struct RouteSyncTests {
    @Test("/health answers ok without a token once storage answers")
    func health() async throws {
        let harness = try RouteHarness.engine()
        try await harness.test { client in
            let response = try await client.execute(uri: "/health", method: .get)
            #expect(response.status == .ok)
            #expect(response.text == #"{"status":"ok"}"#)
            #expect(response.headers[.contentType] == "application/json; charset=utf-8")
        }
    }

    @Test("the same push sent 3 times answers the same bytes and has one effect")
    func pushReplay() async throws {
        let harness = try RouteHarness.engine()
        let request = EngineMutations.push([
            EngineMutations.activity(seq: 1), EngineMutations.activity(seq: 2, id: "9b2f3c1e-0000-4000-8000-000000000002", subject: "card-2"),
        ])
        let body = try JSONEncoder().encode(request)
        let table = ContractTable(ContractRegistry.activity)
        try await harness.test { client in
            var answers: [Data] = []
            var auditCounts: [Int] = []
            for _ in 0..<3 {
                let response = try await client.execute(
                    uri: "/sync/v1/push", method: .post, headers: harness.headers(), body: ByteBuffer(bytes: body))
                #expect(response.status == .ok, "\(response.text)")
                answers.append(response.data)
                auditCounts.append(try await harness.storage.read { try await $0.auditEntries(after: 0, limit: 100).count })
            }
            #expect(answers[1] == answers[0])
            #expect(answers[2] == answers[0])
            let decoded = try JSONDecoder().decode(PushResponse.self, from: answers[0])
            #expect(decoded.results.map(\.status) == [.applied, .applied])
            #expect(decoded.lastSeq == 2)

            // One effect: two rows, one scope sequence step per row, no audit entry for the replays.
            let (rows, sequence) = try await harness.storage.read { reader in
                (
                    try await reader.rows(in: table, tenant: "acme", where: [:], limit: 10).count,
                    try await reader.scopeSequence(tenant: "acme", scopeKey: "workspace:user:u-1")
                )
            }
            #expect(rows == 2)
            #expect(sequence == 2)
            #expect(auditCounts[0] > 0 && auditCounts[1] == auditCounts[0] && auditCounts[2] == auditCounts[0])

            // A gzip-encoded push is the same push.
            let gzipped = try await client.execute(
                uri: "/sync/v1/push", method: .post, headers: harness.headers(nil, [.contentEncoding: "gzip"]),
                body: ByteBuffer(bytes: Gzip.compress(body))
            )
            #expect(gzipped.data == answers[0])

            let metrics = try await client.execute(uri: "/metrics", method: .get, headers: harness.metricsHeaders).text
            #expect(metrics.contains(#"outpost_push_mutations_total{status="applied"} 8"#))
            #expect(metrics.contains(#"outpost_http_requests_total{route="/sync/v1/push",status="200"} 4"#))
        }
    }

    @Test("pull with Accept-Encoding: gzip answers valid gzip of the same JSON, smaller")
    func pullGzip() async throws {
        let harness = try RouteHarness.engine()
        try await harness.seedWorkspace()
        try await harness.test { client in
            let plain = try await client.execute(uri: "/sync/v1/pull?scope=team", method: .get, headers: harness.headers())
            #expect(plain.status == .ok)
            #expect(plain.headers[.contentEncoding] == nil)
            #expect(plain.headers[.vary] == "Accept-Encoding")

            let compressed = try await client.execute(
                uri: "/sync/v1/pull?scope=team", method: .get, headers: harness.headers(nil, [.acceptEncoding: "br;q=1.0, gzip;q=0.8"])
            )
            #expect(compressed.status == .ok)
            #expect(compressed.headers[.contentEncoding] == "gzip")
            #expect(compressed.headers[.vary] == "Accept-Encoding")
            #expect(compressed.headers[.contentLength] == String(compressed.data.count))
            #expect(compressed.data.starts(with: [0x1f, 0x8b]), "gzip magic")
            #expect(compressed.data.count < plain.data.count)
            #expect(try TestZlib.gunzip(compressed.data) == plain.data)

            let page = try JSONDecoder().decode(PullResponse.self, from: plain.data)
            #expect(page.upserts.keys.sorted() == ["Board", "Card", "Note"])

            let refused = try await client.execute(
                uri: "/sync/v1/pull?scope=team", method: .get, headers: harness.headers(nil, [.acceptEncoding: "gzip;q=0"])
            )
            #expect(refused.headers[.contentEncoding] == nil)
            #expect(refused.data == plain.data)

            let rows = page.upserts.values.reduce(0) { $0 + $1.count }
            let metrics = try await client.execute(uri: "/metrics", method: .get, headers: harness.metricsHeaders).text
            #expect(metrics.contains("outpost_pull_rows_total \(rows * 3)\n"))
        }
    }

    @Test("/metrics is Prometheus text with requests, mutations, pull rows and latencies")
    func metrics() async throws {
        let harness = try RouteHarness.engine()
        try await harness.test { client in
            _ = try await client.execute(uri: "/health", method: .get)
            _ = try await client.execute(uri: "/health", method: .get)
            _ = try await client.execute(uri: "/sync/v1/files/some-hash", method: .get)
            _ = try await client.execute(uri: "/no/such/route", method: .get)
            let response = try await client.execute(uri: "/metrics", method: .get, headers: harness.metricsHeaders)
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "text/plain; version=0.0.4; charset=utf-8")
            let text = response.text
            for line in [
                "# TYPE outpost_http_requests_total counter",
                #"outpost_http_requests_total{route="/health",status="200"} 2"#,
                #"outpost_http_requests_total{route="/sync/v1/files/{sha256}",status="401"} 1"#,
                #"outpost_http_requests_total{route="unmatched",status="404"} 1"#,
                "# TYPE outpost_push_mutations_total counter",
                #"outpost_push_mutations_total{status="rejected"} 0"#,
                "# TYPE outpost_pull_rows_total counter",
                "outpost_pull_rows_total 0",
                "# TYPE outpost_request_duration_seconds histogram",
                #"outpost_request_duration_seconds_bucket{route="/health",le="+Inf"} 2"#,
                #"outpost_request_duration_seconds_count{route="/health"} 2"#,
            ] {
                #expect(text.split(separator: "\n").contains(Substring(line)), "missing: \(line)")
            }
            #expect(text.hasSuffix("\n"))
        }
    }

    @Test("admin routes publish and delete content that devices then sync")
    func adminRoutes() async throws {
        let harness = try RouteHarness.engine()
        try await harness.seedWorkspace()
        let admin = harness.token(user: "admin", device: "console", admin: true)
        try await harness.test { client in
            let publish = try await client.execute(
                uri: "/admin/v1/content/Label", method: .post, headers: harness.headers(admin),
                body: ByteBuffer(string: #"{"id": "label-new", "name": "Ladders", "color": "green", "sort_index": 9}"#)
            )
            #expect(publish.status == .ok, "\(publish.text)")

            let labels = try await client.execute(uri: "/sync/v1/pull?scope=catalog&limit=100", method: .get, headers: harness.headers())
            let synced = try JSONDecoder().decode(PullResponse.self, from: labels.data)
            #expect(synced.upserts["Label"]?.contains { $0.pullMember("id") == .string("label-new") } == true)

            let delete = try await client.execute(uri: "/admin/v1/content/Label/label-new", method: .delete, headers: harness.headers(admin))
            #expect(delete.status == .noContent)
            let again = try await client.execute(uri: "/admin/v1/content/Label/label-new", method: .delete, headers: harness.headers(admin))
            #expect(again.status == .notFound)

            let cursor = try #require(synced.cursor.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
            let after = try await client.execute(uri: "/sync/v1/pull?scope=catalog&cursor=\(cursor)", method: .get, headers: harness.headers())
            #expect(try JSONDecoder().decode(PullResponse.self, from: after.data).deletes == ["Label": ["label-new"]])
        }
    }
}

/// gzip decoding written against zlib directly, independent of the server's own code.
enum TestZlib {
    struct Failure: Error { var status: Int32 }

    static func gunzip(_ data: Data) throws -> Data {
        var stream = z_stream()
        // 15 + 16: accept only a gzip wrapper, and check its CRC-32 and length.
        guard inflateInit2_(&stream, 15 + 16, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else { throw Failure(status: -1) }
        defer { inflateEnd(&stream) }
        var input = [UInt8](data)
        var output = Data()
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        let status: Int32 = input.withUnsafeMutableBufferPointer { inputPointer in
            stream.next_in = inputPointer.baseAddress
            stream.avail_in = uInt(inputPointer.count)
            var status = Z_OK
            while status == Z_OK {
                status = buffer.withUnsafeMutableBufferPointer { out in
                    stream.next_out = out.baseAddress
                    stream.avail_out = uInt(out.count)
                    let result = inflate(&stream, Z_NO_FLUSH)
                    output.append(out.baseAddress!, count: out.count - Int(stream.avail_out))
                    return result
                }
            }
            return status
        }
        guard status == Z_STREAM_END, stream.avail_in == 0 else { throw Failure(status: status) }
        return output
    }
}
