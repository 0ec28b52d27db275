import ContractRuntime
import Crypto
package import Foundation
package import NIOCore
package import NIOPosix

/// A stored file's address: its tenant and the SHA-256 of its bytes.
package struct BlobKey: Hashable, Sendable, CustomStringConvertible {
    package var tenant: String
    package var sha256: String

    package init(tenant: String, sha256: String) {
        self.tenant = tenant
        self.sha256 = sha256
    }

    package var description: String { "\(tenant)/\(sha256)" }
}

/// Where the bytes of files live on the server: the uploads being received, then the stored
/// files, by ``BlobKey``. Everything streams, in pieces of at most ``chunkBytes``, so a file's
/// size never becomes the server's memory.
///
/// The metadata (which files exist, who uploaded them, which rows name them) is the storage's
/// (``FileService``); a blob store holds bytes only. Implementations: ``FileSystemBlobStore``
/// (a data folder, with SQLite) and ``DatabaseBlobStore`` (chunks in the database, with
/// PostgreSQL, so every server process sees every file). An object store (S3 and the like)
/// would be a third: uploads as multipart uploads, ``promote(upload:to:)`` as a copy to the
/// file's key (or the completion of the multipart upload at it), ``readChunk(_:at:maxLength:)``
/// as a ranged `GET`.
package protocol BlobStore: Sendable {
    /// How many bytes an upload's staging holds (0 for one not begun). After a crash, what the
    /// staging holds is the truth: the device asks for it and sends the rest.
    func stagedLength(upload: String) async throws -> Int64

    /// Appends `bytes` to an upload's staging, which must hold exactly `offset` bytes (kept
    /// through a crash of the process; a stored file is made durable when it is promoted).
    ///
    /// - Throws: ``BlobStoreError/offsetMismatch(expected:)`` when the staging holds another length.
    func append(upload: String, at offset: Int64, _ bytes: ByteBuffer) async throws

    /// The lowercase hex SHA-256 of an upload's staged bytes, read through in pieces, and its
    /// first bytes (at most ``FileSignature/headBytes``), by which its content type is checked.
    func stagedDigest(upload: String) async throws -> StagedDigest

    /// Makes an upload's staged bytes the stored file `key`, at once for readers (they see the
    /// whole file or none). A file already stored under `key` stays; the staging goes.
    func promote(upload: String, to key: BlobKey) async throws

    /// Drops an upload's staging (nothing when there is none).
    func discard(upload: String) async throws

    /// The stored file's size; `nil` when the store does not hold it.
    func size(of key: BlobKey) async throws -> Int64?

    /// At most `maxLength` bytes of the stored file from `offset` (fewer only at its end).
    func readChunk(_ key: BlobKey, at offset: Int64, maxLength: Int) async throws -> ByteBuffer

    /// Deletes a stored file (nothing when it is not there).
    func delete(_ key: BlobKey) async throws
}

extension BlobStore {
    /// The largest piece a store reads or writes at once.
    package static var chunkBytes: Int { 1 << 20 }
}

/// What reading an upload through found: its hash and its first bytes.
package struct StagedDigest: Sendable, Hashable {
    package var sha256: String
    package var head: [UInt8]
}

/// What a blob store refuses.
package enum BlobStoreError: Error, Hashable, Sendable {
    /// An append at an offset other than the staging's length.
    case offsetMismatch(expected: Int64)
    /// A read of a file the store does not hold, or past its end.
    case missing(BlobKey)
}

/// The pieces of a stored file's byte range, read one at a time as the consumer asks for them:
/// a slow reader holds one piece, not the file.
package struct BlobChunks: AsyncSequence, Sendable {
    package typealias Element = ByteBuffer

    let store: any BlobStore
    let key: BlobKey
    let range: ClosedRange<Int64>

    package init(store: any BlobStore, key: BlobKey, range: ClosedRange<Int64>) {
        self.store = store
        self.key = key
        self.range = range
    }

    package struct AsyncIterator: AsyncIteratorProtocol {
        let store: any BlobStore
        let key: BlobKey
        var next: Int64
        let end: Int64

        package mutating func next() async throws -> ByteBuffer? {
            guard next <= end else { return nil }
            let wanted = Int(Swift.min(Int64(FileSystemBlobStore.chunkBytes), end - next + 1))
            let chunk = try await store.readChunk(key, at: next, maxLength: wanted)
            guard chunk.readableBytes > 0 else { throw BlobStoreError.missing(key) }
            next += Int64(chunk.readableBytes)
            return chunk
        }
    }

    package func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(store: store, key: key, next: range.lowerBound, end: range.upperBound)
    }
}

/// Files in a folder: uploads in `uploads/<id>`, stored files in
/// `blobs/<tenant folder>/<first two hex digits>/<sha256>`, the tenant folder the hex SHA-256 of
/// the tenant id (so no tenant id is ever a path). A file is promoted by a rename, which readers
/// see whole or not at all. The disk work runs on NIO's thread pool, never on the tasks' threads.
package struct FileSystemBlobStore: BlobStore {
    package let directory: URL
    private let threads: NIOThreadPool

    package init(directory: URL, threads: NIOThreadPool = .singleton) {
        self.directory = directory
        self.threads = threads
    }

    private var uploads: URL { directory.appendingPathComponent("uploads", isDirectory: true) }

    private func staging(_ upload: String) throws -> URL {
        // Upload ids are the server's own (hex); anything else never names a path.
        guard !upload.isEmpty, upload.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else {
            throw BlobStoreError.missing(BlobKey(tenant: "", sha256: upload))
        }
        return uploads.appendingPathComponent(upload)
    }

    package func location(_ key: BlobKey) -> URL {
        let tenantFolder = SHA256.hash(data: Data(key.tenant.utf8)).map { String(format: "%02x", $0) }.joined()
        return directory.appendingPathComponent("blobs", isDirectory: true).appendingPathComponent(tenantFolder, isDirectory: true)
            .appendingPathComponent(String(key.sha256.prefix(2)), isDirectory: true).appendingPathComponent(key.sha256)
    }

    package func stagedLength(upload: String) async throws -> Int64 {
        let url = try staging(upload)
        return try await threads.runIfActive {
            let attributes = try? FileManager.default.attributesOfItem(atPath: url.path)
            return (attributes?[.size] as? NSNumber)?.int64Value ?? 0
        }
    }

    package func append(upload: String, at offset: Int64, _ bytes: ByteBuffer) async throws {
        let url = try staging(upload)
        let folder = uploads
        let data = Data(bytes.readableBytesView)
        try await threads.runIfActive {
            if !FileManager.default.fileExists(atPath: url.path) {
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                guard FileManager.default.createFile(atPath: url.path, contents: nil) else { throw CocoaError(.fileWriteUnknown) }
            }
            let handle = try FileHandle(forWritingTo: url)
            defer { try? handle.close() }
            let length = try handle.seekToEnd()
            guard Int64(length) == offset else { throw BlobStoreError.offsetMismatch(expected: Int64(length)) }
            // No fsync per piece: a process crash loses nothing the kernel holds, and bytes a
            // power loss takes are caught by the hash check (the device then sends them again).
            try handle.write(contentsOf: data)
        }
    }

    package func stagedDigest(upload: String) async throws -> StagedDigest {
        let url = try staging(upload)
        return try await threads.runIfActive {
            let handle = try FileHandle(forReadingFrom: url)
            defer { try? handle.close() }
            var hasher = SHA256()
            var head: [UInt8] = []
            while let piece = try handle.read(upToCount: Self.chunkBytes), !piece.isEmpty {
                if head.count < FileSignature.headBytes { head += piece.prefix(FileSignature.headBytes - head.count) }
                hasher.update(data: piece)
            }
            return StagedDigest(sha256: hasher.finalize().map { String(format: "%02x", $0) }.joined(), head: head)
        }
    }

    package func promote(upload: String, to key: BlobKey) async throws {
        let url = try staging(upload)
        let target = location(key)
        try await threads.runIfActive {
            let manager = FileManager.default
            if manager.fileExists(atPath: target.path) {
                try? manager.removeItem(at: url)
                return
            }
            // Durable before it is a stored file that rows may name.
            let staged = try FileHandle(forWritingTo: url)
            try staged.synchronize()
            try staged.close()
            try manager.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
            // rename(2): atomic within one file system, and the staging is in the same folder tree.
            guard rename(url.path, target.path) == 0 else { throw CocoaError(.fileWriteUnknown) }
        }
    }

    package func discard(upload: String) async throws {
        let url = try staging(upload)
        try await threads.runIfActive { try? FileManager.default.removeItem(at: url) }
    }

    package func size(of key: BlobKey) async throws -> Int64? {
        let url = location(key)
        return try await threads.runIfActive {
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: url.path) else { return nil }
            return (attributes[.size] as? NSNumber)?.int64Value
        }
    }

    package func readChunk(_ key: BlobKey, at offset: Int64, maxLength: Int) async throws -> ByteBuffer {
        let url = location(key)
        return try await threads.runIfActive {
            // Read straight into the buffer the response sends: no `Data` copied into it.
            let descriptor = open(url.path, O_RDONLY)
            guard descriptor >= 0 else { throw BlobStoreError.missing(key) }
            defer { _ = close(descriptor) }
            var buffer = ByteBufferAllocator().buffer(capacity: maxLength)
            var filled = 0
            while filled < maxLength {
                var read = 0
                buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: maxLength - filled) { bytes in
                    read = pread(descriptor, bytes.baseAddress, maxLength - filled, off_t(offset) + off_t(filled))
                    return Swift.max(0, read)
                }
                if read < 0, errno == EINTR { continue }
                if read < 0 { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
                if read == 0 { break }
                filled += read
            }
            return buffer
        }
    }

    package func delete(_ key: BlobKey) async throws {
        let url = location(key)
        try await threads.runIfActive { try? FileManager.default.removeItem(at: url) }
    }
}
