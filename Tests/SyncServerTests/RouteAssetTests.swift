import ContractRuntime
import Contracts
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import LearningAPI
import OutpostTestSupport
import SampleServerApps
import SyncProtocol
import Testing

@testable import SyncServer

@Suite("Routes: assets")
struct RouteAssetTests {
    /// Publishes an asset row and uploads `bytes` as its file through the admin routes.
    static func upload(_ bytes: Data, id: String, harness: RouteHarness, client: any TestClientProtocol) async throws {
        let admin = harness.token(user: "admin", device: "console", admin: true)
        let row = try await client.execute(
            uri: "/admin/v1/content/Asset", method: .post, headers: harness.headers(admin),
            body: ByteBuffer(
                string:
                    #"{"id": "\#(id)", "lesson_id": "lesson-battery-safety", "asset_kind": "document", "content_type": "application/octet-stream", "size_bytes": 0, "checksum": "", "storage_key": ""}"#
            )
        )
        #expect(row.status == .ok, "\(row.text)")
        let put = try await client.execute(
            uri: "/admin/v1/assets/\(id)", method: .put, headers: harness.headers(admin, [.contentType: "application/x-test"]),
            body: ByteBuffer(bytes: bytes)
        )
        #expect(put.status == .ok, "\(put.text)")
    }

    @Test("GET, HEAD, ETag, If-None-Match, and every form of Range")
    func ranges() async throws {
        let harness = try RouteHarness()
        try await harness.seed()
        // Large enough to be streamed in several chunks.
        let bytes = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) })
        let checksum = SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
        let eTag = "\"\(checksum)\""
        try await harness.test { client in
            try await Self.upload(bytes, id: "asset-test", harness: harness, client: client)
            let uri = "/assets/asset-test"

            let whole = try await client.execute(uri: uri, method: .get, headers: harness.headers())
            #expect(whole.status == .ok)
            #expect(whole.data == bytes)
            #expect(whole.headers[.eTag] == eTag)
            // An id may name another file later: revalidated every time (the files route's are immutable).
            #expect(whole.headers[.cacheControl] == "private, max-age=0, must-revalidate")
            #expect(whole.headers[.acceptRanges] == "bytes")
            #expect(whole.headers[.contentLength] == String(bytes.count))
            #expect(whole.headers[.contentType] == "application/x-test")

            let head = try await client.execute(uri: uri, method: .head, headers: harness.headers())
            #expect(head.status == .ok)
            #expect(head.data.isEmpty)
            #expect(head.headers[.contentLength] == String(bytes.count))
            #expect(head.headers[.eTag] == eTag)

            let cached = try await client.execute(uri: uri, method: .get, headers: harness.headers(nil, [.ifNoneMatch: "\"other\", \(eTag)"]))
            #expect(cached.status == .notModified)
            #expect(cached.data.isEmpty)
            #expect(cached.headers[.eTag] == eTag)
            let stale = try await client.execute(uri: uri, method: .get, headers: harness.headers(nil, [.ifNoneMatch: "\"other\""]))
            #expect(stale.status == .ok)

            let cases: [(String, Range<Int>)] = [
                ("bytes=0-9", 0..<10),
                ("bytes=1000-", 1000..<bytes.count),
                ("bytes=-500", (bytes.count - 500)..<bytes.count),
                ("bytes=299990-400000", 299_990..<bytes.count),
                ("bytes=-999999", 0..<bytes.count),
            ]
            for (range, expected) in cases {
                let partial = try await client.execute(uri: uri, method: .get, headers: harness.headers(nil, [.range: range]))
                #expect(partial.status == .partialContent, "\(range)")
                #expect(partial.data == bytes[expected], "\(range)")
                #expect(partial.headers[.contentRange] == "bytes \(expected.lowerBound)-\(expected.upperBound - 1)/\(bytes.count)")
                #expect(partial.headers[.contentLength] == String(expected.count))
            }
            let headRange = try await client.execute(uri: uri, method: .head, headers: harness.headers(nil, [.range: "bytes=10-19"]))
            #expect(headRange.status == .partialContent)
            #expect(headRange.data.isEmpty)
            #expect(headRange.headers[.contentRange] == "bytes 10-19/\(bytes.count)")

            for unsatisfiable in ["bytes=300000-", "bytes=400000-400010", "bytes=-0"] {
                let refused = try await client.execute(uri: uri, method: .get, headers: harness.headers(nil, [.range: unsatisfiable]))
                #expect(refused.status == .rangeNotSatisfiable, "\(unsatisfiable)")
                #expect(refused.headers[.contentRange] == "bytes */\(bytes.count)")
                #expect(try refused.errorBody().code == .rangeNotSatisfiable)
            }
            // Forms the server does not serve partially are ignored: the whole file.
            for ignored in ["bytes=0-1,5-6", "items=0-4", "bytes=9-3", "bytes=abc"] {
                let full = try await client.execute(uri: uri, method: .get, headers: harness.headers(nil, [.range: ignored]))
                #expect(full.status == .ok, "\(ignored)")
                #expect(full.data.count == bytes.count)
            }
            // If-Range: a range of another version is not served; the whole current file is.
            let resumed = try await client.execute(uri: uri, method: .get, headers: harness.headers(nil, [.range: "bytes=5-", .ifRange: eTag]))
            #expect(resumed.status == .partialContent)
            let changed = try await client.execute(uri: uri, method: .get, headers: harness.headers(nil, [.range: "bytes=5-", .ifRange: "\"old\""]))
            #expect(changed.status == .ok)
            #expect(changed.data == bytes)
        }
    }

    @Test("a seeded asset downloads with its checksum as ETag; a token of another tenant finds nothing")
    func seeded() async throws {
        let harness = try RouteHarness()
        try await harness.seed()
        try await harness.test { client in
            let units = try await client.execute(uri: "/api/v1/content/units/sync", method: .get, headers: harness.headers())
            let asset = try #require(try JSONDecoder().decode(UnitsSyncResponse.self, from: units.data).units.first?.lessons.first?.assets.first)
            let path = try #require(URL(string: asset.downloadURL)?.path)
            let file = try await client.execute(uri: path, method: .get, headers: harness.headers())
            #expect(file.status == .ok)
            #expect(file.headers[.eTag] == "\"\(asset.checksum)\"")
            #expect(SHA256.hash(data: file.data).map { String(format: "%02x", $0) }.joined() == asset.checksum)
            #expect(Int64(file.data.count) == asset.sizeBytes)

            let stranger = try await client.execute(uri: path, method: .get, headers: harness.headers(harness.token(tenant: "other")))
            #expect(stranger.status == .notFound)
        }
    }

    @Test(
        "asset links are https when the server serves TLS itself without --public-url, http without TLS, the public URL when given",
        arguments: [
            (tls: true, publicURL: nil, base: "https://127.0.0.1:8080/assets/"),
            (tls: false, publicURL: nil, base: "http://127.0.0.1:8080/assets/"),
            (tls: true, publicURL: "https://sync.example.com/", base: "https://sync.example.com/assets/"),
        ] as [(tls: Bool, publicURL: String?, base: String)])
    func linkScheme(tls: Bool, publicURL: String?, base: String) async throws {
        var configuration = RouteHarness.defaultConfiguration
        configuration.publicBaseURL = publicURL
        if tls {
            // Never read here: the in-process router serves no connection, only the scheme counts.
            let folder = URL(fileURLWithPath: "/nonexistent-outpost-tls", isDirectory: true)
            configuration.tls = TLSFiles(
                certificateChain: folder.appendingPathComponent("server.pem"), privateKey: folder.appendingPathComponent("server.key"))
        }
        let harness = try RouteHarness(configuration: configuration)
        try await harness.seed()
        try await harness.test { client in
            let units = try await client.execute(uri: "/api/v1/content/units/sync", method: .get, headers: harness.headers())
            #expect(units.status == .ok)
            let synced = try JSONDecoder().decode(UnitsSyncResponse.self, from: units.data)
            let links = synced.units.flatMap(\.lessons).flatMap(\.assets).map(\.downloadURL)
            #expect(!links.isEmpty)
            #expect(links.allSatisfy { $0.hasPrefix(base) }, "\(links)")
        }
    }

    @Test("a learner reads a published asset's file by /assets/{id} and by the files route; another tenant's learner by neither")
    func learnerReadsContentFiles() async throws {
        let harness = try RouteHarness()
        try await harness.seed()
        let icon = SampleFiles.batteryIconPNG()
        let sha256 = SHA256.hash(data: icon).map { String(format: "%02x", $0) }.joined()
        // A learner of no team, who never uploaded anything: the content scope's rows name the file.
        let learner = harness.token(user: "learner-9", device: "phone-9", teams: [])
        try await harness.test { client in
            let byAsset = try await client.execute(uri: "/assets/asset-battery-icon", method: .get, headers: harness.headers(learner))
            #expect(byAsset.status == .ok)
            #expect(byAsset.data == icon)
            #expect(byAsset.headers[.contentType] == "image/png")
            #expect(byAsset.headers[.eTag] == "\"\(sha256)\"")

            let byFile = try await client.execute(uri: "/sync/v1/files/\(sha256)", method: .get, headers: harness.headers(learner))
            #expect(byFile.status == .ok)
            #expect(byFile.data == icon)
            #expect(byFile.headers[.eTag] == "\"\(sha256)\"")
            let part = try await client.execute(
                uri: "/sync/v1/files/\(sha256)", method: .get, headers: harness.headers(learner, [.range: "bytes=8-15"]))
            #expect(part.status == .partialContent)
            #expect(part.data == icon[8..<16])

            // The Markdown notes: served as their own type by /assets, as the stored file's by the files route.
            let notes = try await client.execute(uri: "/assets/asset-battery-safety-notes", method: .get, headers: harness.headers(learner))
            #expect(notes.status == .ok && notes.headers[.contentType] == "text/markdown")
            let notesHash = SHA256.hash(data: notes.data).map { String(format: "%02x", $0) }.joined()
            let notesFile = try await client.execute(uri: "/sync/v1/files/\(notesHash)", method: .get, headers: harness.headers(learner))
            #expect(notesFile.status == .ok && notesFile.data == notes.data)
            #expect(notesFile.headers[.contentType] == "application/octet-stream")

            let stranger = harness.token(tenant: "other", user: "learner-9", device: "phone-9", teams: [])
            for uri in ["/assets/asset-battery-icon", "/sync/v1/files/\(sha256)"] {
                let refused = try await client.execute(uri: uri, method: .get, headers: harness.headers(stranger))
                #expect(refused.status == .notFound, "\(uri)")
            }
        }
    }
}
