import Contracts
import Crypto
import Foundation
import NIOCore
import SyncServer

#if canImport(Glibc)
    import Glibc
#endif

/// `files`, part 4: PostgreSQL's two ways of holding a file's bytes, each on one
/// ``PostgresStorage`` (a fresh schema), driven as the file routes drive a ``BlobStore``: an
/// upload appended in pieces of 1 MiB (``FileService`` hands the store pieces of at least
/// ``BlobStore/chunkBytes``), read through for its hash (``BlobStore/stagedDigest(upload:)``)
/// and promoted; then the stored file read back 1 MiB at a time, as ``BlobChunks`` reads it for
/// a `GET`.
///
/// - **chunks**: ``DatabaseBlobStore``, today's store: rows of 1 MiB in `file_chunks`.
/// - **large objects**: ``LargeObjectBlobStore``: one large object per upload or file
///   (`lo_from_bytea`, `lo_put`, `lo_get`, `lo_unlink` in SQL through the same storage and
///   postgres-nio), its oid and length in a table of the benchmark's.
///
/// Each measured in turn at each size, in the same run; the process's peak memory reset before
/// each (`/proc/self/clear_refs`) and read after (VmHWM): the server's side of the transfer.
enum FilesPostgresWorkload {
    static let sizes = [10, 256]
    static func runs(_ mebibytes: Int) -> Int { mebibytes <= 64 ? 5 : 1 }

    enum Kind: String, CaseIterable {
        case chunks = "chunks (file_chunks)"
        case largeObjects = "large objects"
    }

    struct Figures {
        var write = Samples()
        var read = Samples()
        var peakKiB = 0
    }

    static func measure(into result: inout BenchmarkResult) throws {
        guard let url = ProcessInfo.processInfo.environment["OUTPOST_TEST_POSTGRES_URL"], !url.isEmpty else {
            result.fact("PostgreSQL blob stores", "not measured: OUTPOST_TEST_POSTGRES_URL is not set (`make bench` starts one)")
            return
        }
        var configuration = try PostgresBenchmark.configuration(url: url)
        configuration.schema = PostgresBenchmark.schemaName()
        configuration.maximumConnections = 4
        let fresh = configuration
        let storage = try runBlocking { try await PostgresStorage(configuration: fresh, contracts: ContractRegistry.self) }
        defer { try? runBlocking { await storage.close() } }
        let chunks = DatabaseBlobStore(storage: storage)
        let objects = try runBlocking { try await LargeObjectBlobStore.make(storage: storage) }
        result.fact(
            "PostgreSQL blob stores",
            "\(fresh.host):\(fresh.port), one PostgresStorage (fresh schema); chunks (DatabaseBlobStore, 1 MiB rows in file_chunks) against large "
                + "objects (lo_from_bytea / lo_put / lo_get through the same storage); write = 1 MiB appends + hash read-through + promote, "
                + "read = the stored file 1 MiB at a time; this process's VmHWM reset before each")
        var figures: [Int: [Kind: Figures]] = [:]
        for mebibytes in sizes {
            let bytes = mebibytes << 20
            for run in 0..<runs(mebibytes) {
                for kind in Kind.allCases {
                    let store: any MeasuredBlobStore = kind == .chunks ? chunks : objects
                    let seed = UInt64(mebibytes * 100 + run) &+ (kind == .chunks ? 0 : 50)
                    resetPeak()
                    let (written, write) = try Timing.measure { try runBlocking { try await writeFile(bytes, seed: seed, into: store) } }
                    let (readBytes, read) = try Timing.measure { try runBlocking { try await readFile(written, size: bytes, from: store) } }
                    guard readBytes == bytes else { throw BenchmarkError("\(kind.rawValue): read \(readBytes) of \(bytes) bytes") }
                    var entry = figures[mebibytes, default: [:]][kind, default: Figures()]
                    entry.write.append(write)
                    entry.read.append(read)
                    entry.peakKiB = max(entry.peakKiB, ProcessMemory.status("VmHWM"))
                    figures[mebibytes, default: [:]][kind] = entry
                    try runBlocking { try await store.delete(written) }
                }
            }
        }
        for mebibytes in sizes {
            let bytes = Double(mebibytes << 20)
            for kind in Kind.allCases {
                let entry = figures[mebibytes]![kind]!
                func rate(_ seconds: Double) -> String { Format.fixed(bytes / seconds / Double(1 << 20), 1) + " MiB/s" }
                result.rows.append(
                    .init(
                        "PostgreSQL \(kind.rawValue) write, \(mebibytes) MiB",
                        median: "\(rate(entry.write.median)) (\(Format.duration(entry.write.median)))",
                        min: rate(entry.write.min), note: "peak \(FilesBenchmark.mebibytes(entry.peakKiB)) (write and read)"))
                result.rows.append(
                    .init(
                        "PostgreSQL \(kind.rawValue) read, \(mebibytes) MiB",
                        median: "\(rate(entry.read.median)) (\(Format.duration(entry.read.median)))",
                        min: rate(entry.read.min)))
            }
            let chunk = figures[mebibytes]![.chunks]!
            let object = figures[mebibytes]![.largeObjects]!
            result.fact(
                "PostgreSQL \(mebibytes) MiB",
                "large objects take \(Format.ratio(object.write.median / chunk.write.median)) the chunks' time to write, "
                    + "\(Format.ratio(object.read.median / chunk.read.median)) to read")
        }
    }

    /// Resets this process's VmHWM to its resident size now.
    static func resetPeak() {
        if let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") {
            try? handle.write(contentsOf: Data("5".utf8))
            try? handle.close()
        }
    }

    /// An upload of `bytes` pseudo-random bytes appended 1 MiB at a time, hashed and promoted;
    /// the stored file's key.
    static func writeFile(_ bytes: Int, seed: UInt64, into store: any MeasuredBlobStore) async throws -> BlobKey {
        let upload = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        var hasher = SHA256()
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        var words = [UInt64](repeating: 0, count: (1 << 20) / 8)
        var offset = 0
        while offset < bytes {
            for index in words.indices {
                state ^= state >> 12
                state ^= state << 25
                state ^= state >> 27
                words[index] = state &* 0x2545_F491_4F6C_DD1D
            }
            let count = min(1 << 20, bytes - offset)
            let piece = words.withUnsafeBytes { ByteBuffer(bytes: $0.prefix(count)) }
            hasher.update(data: piece.readableBytesView)
            try await store.append(upload: upload, at: Int64(offset), piece)
            offset += count
        }
        let expected = hasher.finalize().map { String(format: "%02x", $0) }.joined()
        let digest = try await store.stagedSHA256(upload: upload)
        guard digest == expected else { throw BenchmarkError("the staged upload hashes to \(digest), not \(expected)") }
        let key = BlobKey(tenant: "bench", sha256: expected)
        try await store.promote(upload: upload, to: key)
        return key
    }

    /// The stored file read through a piece of 1 MiB at a time, as ``BlobChunks`` reads it for a
    /// `GET`; its byte count.
    static func readFile(_ key: BlobKey, size: Int, from store: any MeasuredBlobStore) async throws -> Int {
        var count = 0
        while count < size {
            let piece = try await store.readChunk(key, at: Int64(count), maxLength: min(1 << 20, size - count))
            guard piece.readableBytes > 0 else { break }
            count += piece.readableBytes
        }
        return count
    }
}

/// What the benchmark drives of a blob store: the operations of ``BlobStore`` the file routes use
/// for an upload and a download (``StagedDigest`` cannot be made outside the server, so the
/// hash comes back as text).
protocol MeasuredBlobStore: Sendable {
    func append(upload: String, at offset: Int64, _ bytes: ByteBuffer) async throws
    func stagedSHA256(upload: String) async throws -> String
    func promote(upload: String, to key: BlobKey) async throws
    func readChunk(_ key: BlobKey, at offset: Int64, maxLength: Int) async throws -> ByteBuffer
    func delete(_ key: BlobKey) async throws
}

extension DatabaseBlobStore: MeasuredBlobStore {
    func stagedSHA256(upload: String) async throws -> String { try await stagedDigest(upload: upload).sha256 }
}

/// A blob store on PostgreSQL large objects: one per upload or stored file, named in the
/// table `bench_large_objects` (owner → oid, length). An append is one `lo_put` at the end (or
/// `lo_from_bytea` for the first piece), a read one `lo_get` of a range, a promotion a rename of
/// the owner in one transaction. Built for the `files` benchmark only, to measure the choice.
struct LargeObjectBlobStore: MeasuredBlobStore {
    let storage: any SyncStorage
    static let table = "bench_large_objects"

    static func make(storage: any SyncStorage) async throws -> LargeObjectBlobStore {
        try await storage.write { transaction in
            _ = try await transaction.serverTableQuery(
                "CREATE TABLE IF NOT EXISTS \"\(table)\" (\"owner\" TEXT PRIMARY KEY, \"object\" BIGINT NOT NULL, \"length\" BIGINT NOT NULL)", [])
        }
        return LargeObjectBlobStore(storage: storage)
    }

    private static func owner(upload: String) -> String { "upload:" + upload }
    private static func owner(_ key: BlobKey) -> String { "file:\(key.tenant):\(key.sha256)" }

    private func entry(_ owner: String, in reader: any StorageReader) async throws -> (object: Int64, length: Int64)? {
        let rows = try await reader.serverTableQuery(
            "SELECT \"object\", \"length\" FROM \"\(Self.table)\" WHERE \"owner\" = ?", [.text(owner)])
        guard let row = rows.first, let object = row.integer("object"), let length = row.integer("length") else { return nil }
        return (object, length)
    }

    func append(upload: String, at offset: Int64, _ bytes: ByteBuffer) async throws {
        let owner = Self.owner(upload: upload)
        let data = Data(bytes.readableBytesView)
        try await storage.write { transaction in
            let current = try await entry(owner, in: transaction)
            guard (current?.length ?? 0) == offset else { throw BlobStoreError.offsetMismatch(expected: current?.length ?? 0) }
            if let current {
                _ = try await transaction.serverTableQuery(
                    "SELECT CAST(lo_put(CAST(? AS oid), ?, ?) AS text) AS \"done\"", [.integer(current.object), .integer(offset), .blob(data)])
                _ = try await transaction.serverTableQuery(
                    "UPDATE \"\(Self.table)\" SET \"length\" = ? WHERE \"owner\" = ?", [.integer(offset + Int64(data.count)), .text(owner)])
            } else {
                _ = try await transaction.serverTableQuery(
                    "INSERT INTO \"\(Self.table)\" (\"owner\", \"object\", \"length\") VALUES (?, CAST(lo_from_bytea(0, ?) AS BIGINT), ?)",
                    [.text(owner), .blob(data), .integer(Int64(data.count))])
            }
        }
    }

    /// The upload read through 1 MiB at a time and hashed, as ``DatabaseBlobStore/stagedDigest(upload:)`` reads its chunks.
    func stagedSHA256(upload: String) async throws -> String {
        let owner = Self.owner(upload: upload)
        var hasher = SHA256()
        if let current = try await storage.read({ reader in try await entry(owner, in: reader) }) {
            var offset: Int64 = 0
            while offset < current.length {
                let piece = try await range(current.object, at: offset, count: 1 << 20)
                if piece.isEmpty { break }
                hasher.update(data: piece)
                offset += Int64(piece.count)
            }
        }
        return hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }

    private func range(_ object: Int64, at offset: Int64, count: Int) async throws -> Data {
        let rows = try await storage.read { reader in
            try await reader.serverTableQuery(
                "SELECT lo_get(CAST(? AS oid), ?, CAST(? AS integer)) AS \"data\"", [.integer(object), .integer(offset), .integer(Int64(count))])
        }
        guard case .blob(let data)? = rows.first?["data"] else { return Data() }
        return data
    }

    func promote(upload: String, to key: BlobKey) async throws {
        let (staged, stored) = (Self.owner(upload: upload), Self.owner(key))
        try await storage.write { transaction in
            if try await entry(stored, in: transaction) == nil {
                _ = try await transaction.serverTableQuery(
                    "UPDATE \"\(Self.table)\" SET \"owner\" = ? WHERE \"owner\" = ?", [.text(stored), .text(staged)])
            } else {
                try await unlink(staged, in: transaction)
            }
        }
    }

    private func unlink(_ owner: String, in transaction: any StorageTransaction) async throws {
        guard let current = try await entry(owner, in: transaction) else { return }
        _ = try await transaction.serverTableQuery("SELECT lo_unlink(CAST(? AS oid)) AS \"done\"", [.integer(current.object)])
        _ = try await transaction.serverTableQuery("DELETE FROM \"\(Self.table)\" WHERE \"owner\" = ?", [.text(owner)])
    }

    func readChunk(_ key: BlobKey, at offset: Int64, maxLength: Int) async throws -> ByteBuffer {
        // One statement, as the chunks' read is one indexed row.
        let rows = try await storage.read { reader in
            try await reader.serverTableQuery(
                "SELECT lo_get(CAST(\"object\" AS oid), ?, CAST(? AS integer)) AS \"data\" FROM \"\(Self.table)\" WHERE \"owner\" = ?",
                [.integer(offset), .integer(Int64(maxLength)), .text(Self.owner(key))])
        }
        guard case .blob(let data)? = rows.first?["data"] else { throw BlobStoreError.missing(key) }
        return ByteBuffer(bytes: data)
    }

    func delete(_ key: BlobKey) async throws {
        let owner = Self.owner(key)
        try await storage.write { transaction in try await unlink(owner, in: transaction) }
    }
}
