import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncServer
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A data folder an older server left, its asset files in `assets/` (by SHA-256) and its `Asset`
/// rows of version 1 (no `file`), served by today's `sync-server`.
@Suite("An older server's asset folder", .serialized, .blockingWork)
struct AssetUpgradeTests {
    @Test("serve moves an older server's asset files into the files as it starts; a learner reads them by /assets/{id} and the files route")
    func upgradedAtStart() async throws {
        let folder = try TemporaryDirectory(prefix: "asset-upgrade")
        let server = SyncServerProcess(data: folder.url)
        try server.seed()
        // What an older server left: a version 1 row, and its bytes in assets/<ab>/<sha256>.
        let bytes = Data("# Notes an older server stored\n".utf8)
        let checksum = Hex.sha256(bytes)
        do {
            let storage = try SQLiteStorage(directory: folder.url, contracts: ContractRegistry.self)
            let admin = DeviceIdentity(tenant: Stage.tenant, userID: "editor", deviceID: "console", isAdmin: true, expiresAt: Int64.max)
            _ = try await ContentService(storage: storage).publish(
                entity: "Asset",
                row: .object([
                    "id": .string("asset-old-notes"), "lesson_id": .string("lesson-battery-safety"), "asset_kind": .string("document"),
                    "content_type": .string("text/markdown"), "size_bytes": .int(Int64(bytes.count)), "checksum": .string(checksum),
                    "storage_key": .string(checksum),
                ]), identity: admin)
        }
        let shard = folder.url.appendingPathComponent("assets/\(checksum.prefix(2))", isDirectory: true)
        try FileManager.default.createDirectory(at: shard, withIntermediateDirectories: true)
        try bytes.write(to: shard.appendingPathComponent(checksum))

        try server.start()
        defer { try? server.stop() }
        #expect(server.output.contains("asset files moved into the files: 1 asset(s)"), "\(server.output)")
        #expect(!FileManager.default.fileExists(atPath: folder.url.appendingPathComponent("assets").path), "the old folder goes once empty")

        let learner = try server.token(user: "learner-1", device: "phone-1")
        for path in ["assets/asset-old-notes", "sync/v1/files/\(checksum)"] {
            var request = URLRequest(url: try server.url.appendingPathComponent(path))
            request.setValue("Bearer \(learner)", forHTTPHeaderField: "Authorization")
            let (body, response) = try await URLSession.shared.data(for: request)
            let http = try #require(response as? HTTPURLResponse)
            #expect(http.statusCode == 200, "\(path)")
            #expect(body == bytes, "\(path)")
            #expect(http.value(forHTTPHeaderField: "ETag") == "\"\(checksum)\"", "\(path)")
        }
    }
}
