import Contracts
import Foundation
import Hummingbird
import HummingbirdTesting
import SyncClient
import SyncProtocol
import SyncServer

/// The real sync server on a loopback port, with content an admin publishes: units, lessons,
/// asset rows and their files.
struct LiveContentServer: Sendable {
    let url: URL
    let content: ContentService
    let signer: TokenSigner

    static let tenant = "acme"
    static let admin = DeviceIdentity(tenant: tenant, userID: "admin", deviceID: "admin", isAdmin: true, expiresAt: Int64.max)

    /// Runs `body` against a fresh server (its storage and files in a temporary folder).
    static func run(_ body: @Sendable (LiveContentServer) async throws -> Void) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("asset-live-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = try SQLiteStorage(directory: folder)
        let assets = AssetStore(directory: folder.appendingPathComponent("assets"))
        let signer = try TokenSigner(secret: Data(repeating: 9, count: 32))
        let environment = ServerEnvironment(storage: storage, assets: assets, signer: signer)
        let app = buildApplication(configuration: ServerConfiguration(port: 0, rateLimit: nil), environment: environment)
        try await app.test(.live) { client in
            let server = LiveContentServer(
                url: URL(string: "http://127.0.0.1:\(client.port!)")!, content: ContentService(storage: storage, assets: assets),
                signer: signer
            )
            try await body(server)
        }
    }

    /// A transport with a learner's device token.
    func transport() -> URLSessionTransport {
        let identity = DeviceIdentity(
            tenant: Self.tenant, userID: "u-1", deviceID: "device-1", expiresAt: Int64(Date().timeIntervalSince1970) + 3600
        )
        let token = signer.sign(identity)
        return URLSessionTransport(baseURL: url, timeout: 10) { token }
    }

    /// Publishes a unit with one lesson per entry of `lessons`, each with its files (asset id → bytes).
    func publishUnit(_ id: String, lessons: [[(id: String, data: Data)]]) async throws {
        try await publish("Unit", ["id": .string(id), "title": .string("Unit \(id)"), "learner_level": .string("beginner")])
        for (index, files) in lessons.enumerated() {
            let lessonId = "\(id)-lesson-\(index)"
            try await publish(
                "Lesson",
                [
                    "id": .string(lessonId), "unit_id": .string(id), "title": .string("Lesson \(index)"), "sort_index": .int(Int64(index)),
                    "lesson_kind": .string("audio"),
                ]
            )
            for file in files {
                let checksum = AssetStore.checksum(of: file.data)
                try await publish(
                    "Asset",
                    [
                        "id": .string(file.id), "lesson_id": .string(lessonId), "asset_kind": .string("audio"),
                        "content_type": .string("audio/wav"), "size_bytes": .int(Int64(file.data.count)), "checksum": .string(checksum),
                        "storage_key": .string(checksum),
                    ]
                )
                try await upload(file.id, file.data)
            }
        }
    }

    /// Stores (or replaces) the file of an asset.
    func upload(_ assetId: String, _ data: Data) async throws {
        _ = try await content.uploadAsset(id: assetId, data: data, contentType: "audio/wav", identity: Self.admin)
    }

    private func publish(_ entity: String, _ fields: [String: JSONValue]) async throws {
        _ = try await content.publish(entity: entity, row: .object(fields), identity: Self.admin)
    }
}
