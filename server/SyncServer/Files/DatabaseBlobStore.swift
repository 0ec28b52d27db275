import ContractRuntime
import Crypto
import Foundation
package import NIOCore

/// Files as chunks in the database's `file_chunks` table: what every server process on one
/// PostgreSQL database sees alike, with nothing on any process's disk. Chunk `n` of an owner
/// (an upload, `upload:<id>`, or a stored file, `file:<tenant hash>:<sha256>`) holds its bytes
/// from `n × chunkBytes`; every chunk but the last is full, so a read at an offset is one
/// indexed row and an append tops up the last chunk, then adds whole ones.
///
/// Promotion renames the owner of an upload's chunks in one transaction, so readers see the
/// whole file or none of it.
package struct DatabaseBlobStore: BlobStore {
    let storage: any SyncStorage
    let chunkSize: Int

    static let table = EngineNames.ServerTable.fileChunks.rawValue

    package init(storage: any SyncStorage, chunkSize: Int = 1 << 20) {
        self.storage = storage
        self.chunkSize = max(1, chunkSize)
    }

    private static func owner(upload: String) -> String { "upload:" + upload }

    private static func owner(_ key: BlobKey) -> String {
        let tenant = SHA256.hash(data: Data(key.tenant.utf8)).map { String(format: "%02x", $0) }.joined()
        return "file:\(tenant):\(key.sha256)"
    }

    /// The owner's length: its last chunk's index and size.
    private func length(of owner: String, in reader: any StorageReader) async throws -> (lastChunk: Int64, lastBytes: Int64)? {
        let rows = try await reader.serverTableQuery(
            "SELECT \"chunk\", length(\"data\") AS \"bytes\" FROM \"\(Self.table)\" WHERE \"owner\" = ? ORDER BY \"chunk\" DESC LIMIT 1",
            [.text(owner)])
        guard let row = rows.first, let chunk = row.integer("chunk"), let bytes = row.integer("bytes") else { return nil }
        return (chunk, bytes)
    }

    private func total(_ last: (lastChunk: Int64, lastBytes: Int64)?) -> Int64 {
        guard let last else { return 0 }
        return last.lastChunk * Int64(chunkSize) + last.lastBytes
    }

    package func stagedLength(upload: String) async throws -> Int64 {
        let owner = Self.owner(upload: upload)
        return total(try await storage.read { reader in try await length(of: owner, in: reader) })
    }

    package func append(upload: String, at offset: Int64, _ bytes: ByteBuffer) async throws {
        let owner = Self.owner(upload: upload)
        let data = Data(bytes.readableBytesView)
        let size = chunkSize
        try await storage.write { transaction in
            let last = try await length(of: owner, in: transaction)
            let length = total(last)
            guard length == offset else { throw BlobStoreError.offsetMismatch(expected: length) }
            var rest = data[...]
            var next = last.map { $0.lastChunk + 1 } ?? 0
            if let last, last.lastBytes < Int64(size), !rest.isEmpty {
                let rows = try await transaction.serverTableQuery(
                    "SELECT \"data\" FROM \"\(Self.table)\" WHERE \"owner\" = ? AND \"chunk\" = ?", [.text(owner), .integer(last.lastChunk)])
                guard case .blob(let existing)? = rows.first?["data"] else { throw BlobStoreError.offsetMismatch(expected: length) }
                let take = min(size - existing.count, rest.count)
                _ = try await transaction.serverTableQuery(
                    "UPDATE \"\(Self.table)\" SET \"data\" = ? WHERE \"owner\" = ? AND \"chunk\" = ?",
                    [.blob(existing + rest.prefix(take)), .text(owner), .integer(last.lastChunk)])
                rest = rest.dropFirst(take)
            }
            while !rest.isEmpty {
                _ = try await transaction.serverTableQuery(
                    "INSERT INTO \"\(Self.table)\" (\"owner\", \"chunk\", \"data\") VALUES (?, ?, ?)",
                    [.text(owner), .integer(next), .blob(Data(rest.prefix(size)))])
                rest = rest.dropFirst(size)
                next += 1
            }
        }
    }

    package func stagedDigest(upload: String) async throws -> StagedDigest {
        let owner = Self.owner(upload: upload)
        var hasher = SHA256()
        var head: [UInt8] = []
        var chunk: Int64 = 0
        while let piece = try await self.chunk(chunk, of: owner) {
            if head.count < FileSignature.headBytes { head += piece.prefix(FileSignature.headBytes - head.count) }
            hasher.update(data: piece)
            chunk += 1
        }
        return StagedDigest(sha256: hasher.finalize().map { String(format: "%02x", $0) }.joined(), head: head)
    }

    private func chunk(_ index: Int64, of owner: String) async throws -> Data? {
        let rows = try await storage.read { reader in
            try await reader.serverTableQuery(
                "SELECT \"data\" FROM \"\(Self.table)\" WHERE \"owner\" = ? AND \"chunk\" = ?", [.text(owner), .integer(index)])
        }
        guard case .blob(let data)? = rows.first?["data"] else { return nil }
        return data
    }

    package func promote(upload: String, to key: BlobKey) async throws {
        let (staged, stored) = (Self.owner(upload: upload), Self.owner(key))
        try await storage.write { transaction in
            let present = try await transaction.serverTableQuery(
                "SELECT 1 AS \"present\" FROM \"\(Self.table)\" WHERE \"owner\" = ? LIMIT 1", [.text(stored)])
            if present.isEmpty {
                _ = try await transaction.serverTableQuery(
                    "UPDATE \"\(Self.table)\" SET \"owner\" = ? WHERE \"owner\" = ?", [.text(stored), .text(staged)])
            } else {
                _ = try await transaction.serverTableQuery("DELETE FROM \"\(Self.table)\" WHERE \"owner\" = ?", [.text(staged)])
            }
        }
    }

    package func discard(upload: String) async throws {
        let owner = Self.owner(upload: upload)
        try await storage.write { transaction in
            _ = try await transaction.serverTableQuery("DELETE FROM \"\(Self.table)\" WHERE \"owner\" = ?", [.text(owner)])
        }
    }

    package func size(of key: BlobKey) async throws -> Int64? {
        let owner = Self.owner(key)
        guard let last = try await storage.read({ reader in try await length(of: owner, in: reader) }) else { return nil }
        return total(last)
    }

    package func readChunk(_ key: BlobKey, at offset: Int64, maxLength: Int) async throws -> ByteBuffer {
        let index = offset / Int64(chunkSize)
        guard let data = try await chunk(index, of: Self.owner(key)) else { throw BlobStoreError.missing(key) }
        let start = Int(offset - index * Int64(chunkSize))
        guard start <= data.count else { throw BlobStoreError.missing(key) }
        return ByteBuffer(bytes: data[data.startIndex + start..<data.startIndex + min(data.count, start + maxLength)])
    }

    package func delete(_ key: BlobKey) async throws {
        let owner = Self.owner(key)
        try await storage.write { transaction in
            _ = try await transaction.serverTableQuery("DELETE FROM \"\(Self.table)\" WHERE \"owner\" = ?", [.text(owner)])
        }
    }
}
