import ContractRuntime
import Contracts
import Foundation
import SyncClient
import SyncProtocol
import SyncServer

/// Content an admin publishes on the live server: units, lessons, asset rows and their files.
extension LiveServer {
    static let admin = DeviceIdentity(tenant: "acme", userID: "admin", deviceID: "admin", isAdmin: true, expiresAt: Int64.max)

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
                let checksum = Hex.sha256(file.data)
                try await publish(
                    "Asset",
                    [
                        "id": .string(file.id), "lesson_id": .string(lessonId), "asset_kind": .string("audio"),
                        "content_type": .string("application/octet-stream"), "size_bytes": .int(Int64(file.data.count)),
                        "checksum": .string(checksum),
                        "storage_key": .string(checksum),
                    ]
                )
                try await upload(file.id, file.data)
            }
        }
    }

    /// Stores (or replaces) the file of an asset: a file of the tenant its row names.
    func upload(_ assetId: String, _ data: Data) async throws {
        _ = try await content.uploadAsset(id: assetId, data: data, contentType: "application/octet-stream", identity: Self.admin)
    }

    private func publish(_ entity: String, _ fields: [String: JSONValue]) async throws {
        _ = try await content.publish(entity: entity, row: .object(fields), identity: Self.admin)
    }
}
