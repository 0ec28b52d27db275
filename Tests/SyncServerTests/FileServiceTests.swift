import ContractRuntime
import Crypto
import EngineTestContracts
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// Files on the server, on both storages and both blob stores: declared by hash and size,
/// received in as many pieces as the connection allows, checked against the hash before they are
/// stored, deduplicated, readable only by who may name them, within the quotas. On a storage of
/// the engines' own contracts.
@Suite("File uploads and downloads")
struct FileServiceTests {
    static let tenant = "acme"
    static let alice = DeviceIdentity(tenant: tenant, userID: "alice", deviceID: "alice-phone", teams: ["t-1"], expiresAt: 4_000_000_000)
    static let bob = DeviceIdentity(tenant: tenant, userID: "bob", deviceID: "bob-phone", teams: ["t-1"], expiresAt: 4_000_000_000)

    /// A storage, the blob store it goes with, and the service.
    struct Harness {
        let rows: PullHarness
        let blobs: any BlobStore
        let service: FileService

        init(_ kind: StorageKind, limits: FileLimits = FileLimits()) async throws {
            rows = try await PullHarness.engine(kind)
            blobs =
                kind == .postgres
                ? DatabaseBlobStore(storage: rows.storage, chunkSize: 4096) as any BlobStore
                : FileSystemBlobStore(directory: rows.folder.appendingPathComponent("files"))
            service = FileService(storage: rows.storage, blobs: blobs, limits: limits, clock: rows.clock)
        }

        func remove() { rows.remove() }

        /// Declares `bytes` as `identity` and sends them in pieces of `piece` bytes.
        @discardableResult
        func upload(_ bytes: Data, as identity: DeviceIdentity, piece: Int = 10_000, type: String = "application/octet-stream") async throws
            -> FileReference
        {
            let reference = try FileServiceTests.reference(bytes, type: type)
            let (answer, _) = try await service.declare(FileUploadRequest(reference), identity: identity)
            guard answer.state == .uploading, let id = answer.uploadID else { return reference }
            var offset = answer.offset
            while offset < Int64(bytes.count) {
                let part = bytes[Int(offset)..<min(bytes.count, Int(offset) + piece)]
                offset = try await service.receive(id, at: offset, body: FileServiceTests.body(part), identity: identity).offset
            }
            return reference
        }

        /// The whole stored file, read back a piece at a time.
        func read(_ reference: FileReference, as identity: DeviceIdentity) async throws -> Data {
            let file = try await service.readable(reference.sha256, identity: identity)
            var data = Data()
            guard file.size > 0 else { return data }
            for try await piece in BlobChunks(store: blobs, key: file.key, range: 0...(file.size - 1)) {
                data.append(contentsOf: piece.readableBytesView)
            }
            return data
        }
    }

    /// A request body of `bytes`, as the route hands it on.
    static func body(_ bytes: some Sequence<UInt8>) -> BoundedBody {
        BoundedBody(body: RequestBody(buffer: ByteBuffer(bytes: Array(bytes))), limit: .max)
    }

    static func reference(_ bytes: Data, type: String = "application/octet-stream") throws -> FileReference {
        try FileReference(
            sha256: SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined(), byteCount: Int64(bytes.count), contentType: type,
            name: "photo.bin")
    }

    static func bytes(_ count: Int, seed: UInt8 = 1) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) })
    }

    @Test("a file sent in pieces is stored once its hash holds, and read back whole", arguments: StorageKind.allCases)
    func uploadInPieces(kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.remove() }
        let bytes = Self.bytes(50_000)
        let reference = try await h.upload(bytes, as: Self.alice, piece: 7_001)
        #expect(try await h.read(reference, as: Self.alice) == bytes)
        // Declared again: nothing to send.
        let (again, created) = try await h.service.declare(FileUploadRequest(reference), identity: Self.alice)
        #expect(again.state == .stored && !created)
        // The audit names the file by its hash.
        let audited = try await h.rows.storage.read { reader in try await reader.auditEntries(tenant: Self.tenant, after: 0, limit: 100) }
        #expect(audited.contains { $0.entity == "file" && $0.rowID == reference.sha256 })
    }

    @Test(
        "the hash is kept as the pieces are stored, so the last one reads nothing back; an upload not followed throughout is hashed by reading it",
        arguments: StorageKind.allCases)
    func hashedAsThePiecesArrive(kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.remove() }
        let digests = RunningUploadDigests.shared
        func declare(_ bytes: Data) async throws -> (FileReference, String) {
            let reference = try Self.reference(bytes)
            let (answer, _) = try await h.service.declare(FileUploadRequest(reference), identity: Self.alice)
            return (reference, try #require(answer.uploadID))
        }
        // Followed throughout: after each piece the hash covers what the store holds; gone once stored.
        let followed = Self.bytes(30_000, seed: 21)
        let (first, id) = try await declare(followed)
        _ = try await h.service.receive(id, at: 0, body: Self.body(followed.prefix(12_000)), identity: Self.alice)
        #expect(digests.length(of: id) == 12_000)
        let done = try await h.service.receive(id, at: 12_000, body: Self.body(followed.suffix(from: 12_000)), identity: Self.alice)
        #expect(done.stored && digests.length(of: id) == nil)
        #expect(try await h.read(first, as: Self.alice) == followed)

        // Forgotten part-way (another process took a piece, or this one restarted): read back at the end.
        let forgotten = Self.bytes(30_000, seed: 22)
        let (second, other) = try await declare(forgotten)
        _ = try await h.service.receive(other, at: 0, body: Self.body(forgotten.prefix(10_000)), identity: Self.alice)
        digests.forget(other)
        _ = try await h.service.receive(other, at: 10_000, body: Self.body(forgotten[10_000..<20_000]), identity: Self.alice)
        #expect(digests.length(of: other) == nil, "not followed from the middle")
        let stored = try await h.service.receive(other, at: 20_000, body: Self.body(forgotten.suffix(from: 20_000)), identity: Self.alice)
        #expect(stored.stored)
        #expect(try await h.read(second, as: Self.alice) == forgotten)

        // Followed, but the bytes are not the declared file's: refused all the same.
        let declared = Self.bytes(20_000, seed: 23)
        let (_, third) = try await declare(declared)
        var wrong = declared
        wrong[19_999] ^= 0xFF
        _ = try await h.service.receive(third, at: 0, body: Self.body(wrong.prefix(10_000)), identity: Self.alice)
        await #expect(throws: ServiceError.self) {
            _ = try await h.service.receive(third, at: 10_000, body: Self.body(wrong.suffix(from: 10_000)), identity: Self.alice)
        }
        #expect(digests.length(of: third) == nil)
    }

    @Test("an upload resumes from the offset the server holds; another offset is 409 with it", arguments: StorageKind.allCases)
    func resumesFromTheServersOffset(kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.remove() }
        let bytes = Self.bytes(30_000, seed: 9)
        let reference = try Self.reference(bytes)
        let (first, created) = try await h.service.declare(FileUploadRequest(reference), identity: Self.alice)
        let id = try #require(first.uploadID)
        #expect(created && first.offset == 0)
        _ = try await h.service.receive(id, at: 0, body: Self.body(bytes.prefix(12_345)), identity: Self.alice)

        // The device lost count: declaring again gives the same upload and where it got.
        let (resumed, createdAgain) = try await h.service.declare(FileUploadRequest(reference), identity: Self.alice)
        #expect(resumed.uploadID == id && resumed.offset == 12_345 && !createdAgain)
        #expect(try await h.service.offset(of: id, identity: Self.alice).offset == 12_345)
        // Overlapping bytes (an offset behind the server's) are refused, and so is one past it.
        for wrong: Int64 in [0, 12_000, 20_000] {
            await #expect(throws: ServiceError.self) {
                _ = try await h.service.receive(
                    id, at: wrong, body: Self.body(bytes.prefix(10)), identity: Self.alice)
            }
            do {
                _ = try await h.service.receive(id, at: wrong, body: Self.body(bytes.prefix(10)), identity: Self.alice)
            } catch {
                #expect(error.detail.code == .offsetMismatch && error.detail.details == .object(["offset": .int(12_345)]))
            }
        }
        // Another user cannot see or add to it.
        await #expect(throws: ServiceError.self) { _ = try await h.service.offset(of: id, identity: Self.bob) }
        let done = try await h.service.receive(
            id, at: 12_345, body: Self.body(bytes.suffix(from: 12_345)), identity: Self.alice)
        #expect(done.stored && done.offset == 30_000)
        #expect(try await h.read(reference, as: Self.alice) == bytes)
    }

    @Test("bytes that are not the declared file are dropped with 422 hash_mismatch; nothing is served", arguments: StorageKind.allCases)
    func wrongHashIsDropped(kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.remove() }
        let declared = Self.bytes(5_000, seed: 1)
        let reference = try Self.reference(declared)
        let (answer, _) = try await h.service.declare(FileUploadRequest(reference), identity: Self.alice)
        let id = try #require(answer.uploadID)
        var lie = declared
        lie[2_500] ^= 0xFF
        do {
            _ = try await h.service.receive(id, at: 0, body: Self.body(lie), identity: Self.alice)
            Issue.record("a wrong file was stored")
        } catch {
            #expect(error.status == 422 && error.detail.code == .hashMismatch)
        }
        await #expect(throws: ServiceError.self) { _ = try await h.service.readable(reference.sha256, identity: Self.alice) }
        await #expect(throws: ServiceError.self) { _ = try await h.service.offset(of: id, identity: Self.alice) }
        #expect(try await h.blobs.size(of: BlobKey(tenant: Self.tenant, sha256: reference.sha256)) == nil)
    }

    @Test(
        "a file that is not of its declared type (an HTML page as a PNG) is dropped with 422 content_type_mismatch", arguments: StorageKind.allCases)
    func contentTypeLie(kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.remove() }
        let page = Data("<html><script>alert(1)</script></html>".utf8)
        let reference = try Self.reference(page, type: "image/png")
        do {
            try await h.upload(page, as: Self.alice, type: "image/png")
            Issue.record("an HTML page was stored as a PNG")
        } catch let error as ServiceError {
            #expect(error.status == 422 && error.detail.code == .contentTypeMismatch)
        }
        await #expect(throws: ServiceError.self) { _ = try await h.service.readable(reference.sha256, identity: Self.alice) }
        // The same page as what it is, and a real PNG as a PNG, are stored.
        try await h.upload(page, as: Self.alice, type: "text/html")
        let png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) + Self.bytes(500)
        let stored = try await h.upload(png, as: Self.alice, type: "image/png")
        #expect(try await h.read(stored, as: Self.alice) == png)
    }

    @Test("bytes past the declared size are refused, those before them kept", arguments: StorageKind.allCases)
    func pastTheEnd(kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.remove() }
        let bytes = Self.bytes(1_000)
        let (answer, _) = try await h.service.declare(FileUploadRequest(try Self.reference(bytes)), identity: Self.alice)
        let id = try #require(answer.uploadID)
        do {
            _ = try await h.service.receive(id, at: 0, body: Self.body(bytes + Data([1, 2, 3])), identity: Self.alice)
            Issue.record("bytes past the end were taken")
        } catch {
            #expect(error.status == 413)
        }
        #expect(try await h.service.offset(of: id, identity: Self.alice).offset <= 1_000)
    }

    @Test("a file is read only by who may name it; knowing its hash is not enough", arguments: StorageKind.allCases)
    func othersCannotReadByHash(kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.remove() }
        let bytes = Self.bytes(2_000, seed: 5)
        let reference = try await h.upload(bytes, as: Self.alice)
        do {
            _ = try await h.service.readable(reference.sha256, identity: Self.bob)
            Issue.record("bob read alice's file by its hash")
        } catch {
            #expect(error.status == 404)
        }
        // Declaring it does not grant it: bob must send the bytes, which proves he has them.
        let (answer, _) = try await h.service.declare(FileUploadRequest(reference), identity: Self.bob)
        #expect(answer.state == .uploading)
        try await h.upload(bytes, as: Self.bob)
        #expect(try await h.read(reference, as: Self.bob) == bytes)
        // Another tenant never sees it.
        let other = DeviceIdentity(tenant: "globex", userID: "alice", deviceID: "alice-phone", expiresAt: 4_000_000_000)
        await #expect(throws: ServiceError.self) { _ = try await h.service.readable(reference.sha256, identity: other) }
    }

    @Test("quotas per user and per tenant, and the cap on uploads under way", arguments: StorageKind.allCases)
    func quotas(kind: StorageKind) async throws {
        let h = try await Harness(kind, limits: FileLimits(maximumFileBytes: 5_000, bytesPerUser: 6_000, bytesPerTenant: 9_000, uploadsPerUser: 2))
        defer { h.remove() }
        func refusal(_ body: () async throws -> Void) async -> ServiceError? {
            do {
                try await body()
                return nil
            } catch let error as ServiceError {
                return error
            } catch {
                return nil
            }
        }
        // Larger than the server takes.
        let tooLarge = await refusal {
            _ = try await h.service.declare(FileUploadRequest(try Self.reference(Self.bytes(5_001))), identity: Self.alice)
        }
        #expect(tooLarge?.status == 413 && tooLarge?.detail.code == .payloadTooLarge)
        try await h.upload(Self.bytes(4_000, seed: 1), as: Self.alice)
        let overUser = await refusal {
            _ = try await h.service.declare(FileUploadRequest(try Self.reference(Self.bytes(2_001, seed: 2))), identity: Self.alice)
        }
        #expect(overUser?.status == 413 && overUser?.detail.code == .quotaExceeded)
        try await h.upload(Self.bytes(4_000, seed: 3), as: Self.bob)
        let overTenant = await refusal {
            _ = try await h.service.declare(FileUploadRequest(try Self.reference(Self.bytes(1_001, seed: 4))), identity: Self.bob)
        }
        #expect(overTenant?.status == 413 && overTenant?.detail.code == .quotaExceeded)
        // Uploads under way count, and are capped.
        _ = try await h.service.declare(FileUploadRequest(try Self.reference(Self.bytes(100, seed: 5))), identity: Self.alice)
        _ = try await h.service.declare(FileUploadRequest(try Self.reference(Self.bytes(100, seed: 6))), identity: Self.alice)
        let capped = await refusal {
            _ = try await h.service.declare(FileUploadRequest(try Self.reference(Self.bytes(100, seed: 7))), identity: Self.alice)
        }
        #expect(capped?.status == 409 && capped?.detail.code == .limitReached)
    }

    @Test("a name with a path, a content type that is not one, a hash that is not one are refused at the declaration")
    func badDeclarations() async throws {
        let h = try await Harness(.sqlite)
        defer { h.remove() }
        let good = FileUploadRequest(try Self.reference(Self.bytes(10)))
        var path = good, type = good, hash = good, size = good
        path.name = "../etc/passwd"
        type.contentType = "image"
        hash.sha256 = "abc"
        size.size = -1
        for bad in [path, type, hash, size] {
            do {
                _ = try await h.service.declare(bad, identity: Self.alice)
                Issue.record("\(bad) was accepted")
            } catch {
                #expect(error.status == 400)
            }
        }
    }

    @Test("housekeeping drops abandoned uploads, and files nothing names once the horizon passes", arguments: StorageKind.allCases)
    func collection(kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.remove() }
        let start = h.rows.clock.now().millisecondsSince1970
        let kept = try await h.upload(Self.bytes(3_000, seed: 1), as: Self.alice)
        let (abandoned, _) = try await h.service.declare(FileUploadRequest(try Self.reference(Self.bytes(900, seed: 2))), identity: Self.alice)
        let id = try #require(abandoned.uploadID)
        _ = try await h.service.receive(id, at: 0, body: Self.body(Self.bytes(900, seed: 2).prefix(100)), identity: Self.alice)
        let now = h.rows.clock.now().millisecondsSince1970

        // Nothing is older than the start.
        #expect(try await h.service.collect(abandonedBefore: start, unreferencedBefore: start, limit: 1) == .init())
        // Past both: the upload and its bytes go, and the file no row names.
        let collected = try await h.service.collect(abandonedBefore: now + 1, unreferencedBefore: now + 1, limit: 1)
        #expect(collected.uploads == 1 && collected.files == 1 && collected.bytes == 3_000)
        await #expect(throws: ServiceError.self) { _ = try await h.service.offset(of: id, identity: Self.alice) }
        await #expect(throws: ServiceError.self) { _ = try await h.service.readable(kept.sha256, identity: Self.alice) }
        #expect(try await h.blobs.size(of: BlobKey(tenant: Self.tenant, sha256: kept.sha256)) == nil)
        #expect(try await h.blobs.stagedLength(upload: id) == 0)

        // A file a row names stays, however old.
        let named = try await h.upload(Self.bytes(1_000, seed: 4), as: Self.alice)
        _ = try await h.rows.storage.write { transaction in
            try await transaction.serverTableQuery(
                """
                INSERT INTO "file_references" ("tenant", "table_name", "row_id", "field_name", "sha256", "scope_key")
                VALUES (?, 'notes', 'note-1', 'sketch', ?, 'workspace:team:t-1') RETURNING "sha256"
                """, [.text(Self.tenant), .text(named.sha256)])
        }
        let later = h.rows.clock.now().millisecondsSince1970 + 1
        #expect(try await h.service.collect(abandonedBefore: later, unreferencedBefore: later, limit: 10).files == 0)
        #expect(try await h.read(named, as: Self.alice) == Self.bytes(1_000, seed: 4))
    }
}
