import Foundation

@testable import SyncServer

extension SyncStorage {
    /// The bytes of a stored file of `tenant` (``BlobStore``), read whole; `nil` when the store
    /// does not hold it.
    func storedFile(tenant: String, sha256: String) async throws -> Data? {
        let blobs = defaultBlobStore
        let key = BlobKey(tenant: tenant, sha256: sha256)
        guard let size = try await blobs.size(of: key) else { return nil }
        var data = Data()
        while Int64(data.count) < size {
            let chunk = try await blobs.readChunk(key, at: Int64(data.count), maxLength: FileSystemBlobStore.chunkBytes)
            guard chunk.readableBytes > 0 else { break }
            data.append(contentsOf: chunk.readableBytesView)
        }
        return data
    }

    /// The tenant's stored files (their SHA-256), sorted.
    func storedFileHashes(tenant: String) async throws -> [String] {
        try await read { reader in
            try await reader.serverTableQuery("SELECT \"sha256\" FROM \"files\" WHERE \"tenant\" = ? ORDER BY \"sha256\"", [.text(tenant)])
                .compactMap { $0.text("sha256") }
        }
    }
}
