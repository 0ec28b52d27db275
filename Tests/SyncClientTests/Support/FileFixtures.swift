import ContractRuntime
import Crypto
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncProtocol

@testable import SyncClient

/// A contract with `file` fields, built by hand beside the engines' own contracts: a receipt
/// (user scope, last writer wins) with a `photo` (at most 1 000 bytes, `image/*`) and a
/// `document` (no limit, any type).
struct Receipt: ContractEntity, PatchableEntity {
    var id: String
    var title: String
    var photo: FileReference?
    var document: FileReference?

    init(id: String, title: String, photo: FileReference? = nil, document: FileReference? = nil) {
        self.id = id
        self.title = title
        self.photo = photo
        self.document = document
    }

    enum Change: EntityFieldChange {
        case title(String)
        case photo(FileReference?)
        case document(FileReference?)

        var fieldName: String {
            switch self {
            case .title: "title"
            case .photo: "photo"
            case .document: "document"
            }
        }

        func wireValue() throws -> JSONValue {
            switch self {
            case .title(let value): .string(value)
            case .photo(let value): value?.json ?? .null
            case .document(let value): value?.json ?? .null
            }
        }
    }

    enum CodingKeys: String, CodingKey {
        case id, title, photo, document
    }

    static let photoLimit = 1_000

    static let entity = EntityDescriptor(
        name: "Receipt", swiftName: "Receipt", summary: "A receipt with its photo.", table: "receipts", scope: "user", direction: .both,
        conflict: .lastWriterWins, tombstones: true, retentionSeconds: nil, priority: .normal, currentVersion: 1, oldestSupported: 1,
        primaryKey: "id", versionField: nil,
        fields: [
            FieldDescriptor(name: "id", kind: .id, isPrimaryKey: true),
            FieldDescriptor(name: "title", kind: .string, maxLength: 200),
            FieldDescriptor(name: "photo", kind: .file, isOptional: true, maxBytes: photoLimit, contentTypes: ["image/*"]),
            FieldDescriptor(name: "document", kind: .file, isOptional: true),
        ],
        localFields: [], relations: [], indexes: [],
        knownFieldsByVersion: [
            1: ["id", "title", "photo", "document"].map { KnownField(wireName: $0, currentName: $0) }
        ]
    )

    static var descriptor: EntityDescriptor { entity }

    var contractPrimaryKey: String { id }

    static let clientMigration = ContractMigration(
        identifier: "receipts.v1.create", contract: "Receipt", version: 1,
        statements: [
            """
            CREATE TABLE "receipts" (
                "id" TEXT NOT NULL,
                "title" TEXT NOT NULL,
                "photo" TEXT,
                "document" TEXT,
                "_schema_version" INTEGER NOT NULL,
                "_server_version" INTEGER,
                "_synced_at" INTEGER,
                PRIMARY KEY ("id")
            )
            """
        ],
        checksum: "test"
    )

    /// The engines' own contracts with receipts.
    static let catalog = ContractCatalog(
        scopes: ContractRegistry.scopes, entities: ContractRegistry.entities + [entity], events: ContractRegistry.events,
        entityTypes: ContractRegistry.entityTypes + [Receipt.self], eventTypes: ContractRegistry.eventTypes,
        clientMigrations: ContractRegistry.clientMigrations + [clientMigration], serverMigrations: ContractRegistry.serverMigrations,
        serverPostgresMigrations: ContractRegistry.serverPostgresMigrations, subscriptions: ContractRegistry.subscriptions
    )
}

/// Free space as a test says.
final class FixedFreeSpace: FreeSpaceProvider, @unchecked Sendable {
    private let lock = NSLock()
    private var bytes: Int64?

    init(_ bytes: Int64?) { self.bytes = bytes }

    var value: Int64? {
        get { lock.withLock { bytes } }
        set { lock.withLock { bytes = newValue } }
    }

    func availableBytes(at url: URL) -> Int64? { value }
}

/// A store of the receipt contracts on a real SQLite file in a temporary folder.
struct FileTestStore {
    let directory: TemporaryDirectory
    let clock: ManualClock
    let freeSpace: FixedFreeSpace
    let limits: StorageLimits
    let store: OfflineStore

    init(
        directory: TemporaryDirectory? = nil, clock: ManualClock = ManualClock(TestStore.start), freeSpace: FixedFreeSpace = FixedFreeSpace(nil),
        limits: StorageLimits = StorageLimits()
    ) throws {
        let directory = try directory ?? TemporaryDirectory(prefix: "files")
        self.directory = directory
        self.clock = clock
        self.freeSpace = freeSpace
        self.limits = limits
        store = try OfflineStore(
            OfflineStoreConfiguration(
                databaseURL: directory.databaseURL, tenantId: "acme", userId: "u-1", deviceId: "device-1",
                keyProvider: FileKeyProvider(directory: directory.keysURL), clock: clock, random: SeededRandomSource(seed: 7),
                storageLimits: limits, freeSpace: freeSpace
            ),
            contracts: Receipt.catalog
        )
    }

    /// The same store opened again, as after a restart.
    func reopen() throws -> FileTestStore {
        try? store.close()
        return try FileTestStore(directory: directory, clock: clock, freeSpace: freeSpace, limits: limits)
    }

    /// Every file under the store's files folder, as paths relative to it, sorted.
    func filesOnDisk() -> [String] {
        let root = store.filesDirectory
        guard let enumerator = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.isRegularFileKey]) else { return [] }
        var paths: [String] = []
        for case let url as URL in enumerator where (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true {
            paths.append(String(url.standardizedFileURL.path.dropFirst(root.standardizedFileURL.path.count + 1)))
        }
        return paths.sorted()
    }
}

/// `data` with the first bytes of a file of `contentType` (the signature the store and the server
/// check: `%PDF-`, JPEG's `FF D8 FF`, PNG's eight bytes) in place of its own.
func typed(_ data: Data, as contentType: String) -> Data {
    let head: [UInt8]
    switch contentType {
    case "image/jpeg": head = [0xFF, 0xD8, 0xFF, 0xE0]
    case "image/png": head = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    case "application/pdf": head = Array("%PDF-1.7\n".utf8)
    default: head = []
    }
    var bytes = data
    bytes.replaceSubrange(0..<min(head.count, bytes.count), with: head.prefix(bytes.count))
    return bytes
}

func sha256Hex(_ data: Data) -> String {
    SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
}

/// The file routes of a server, in memory: uploads by id, files by hash; pushes applied.
/// Failures can be scripted per call, to stand for a lost connection.
final class FakeFileTransport: SyncTransport, @unchecked Sendable {
    private let lock = NSLock()
    private(set) var files: [String: Data] = [:]
    private(set) var uploads: [String: (sha256: String, size: Int64, data: Data)] = [:]
    /// Every call, in order: `POST`, `HEAD u1`, `PATCH u1 0+1000`, `push 2`, `GET sha 0-999`.
    private(set) var calls: [String] = []
    /// The pushed mutations.
    private(set) var pushed: [Mutation] = []
    /// Answers each PATCH or GET with this error once, when its call's number (from 1) is listed.
    var failPatches: Set<Int> = []
    var failGets: Set<Int> = []
    /// Answers a file push with `file_missing` when the file is not on the server.
    var checksFiles = true
    /// Bytes this server sends in place of a file's own (a corrupt server).
    var corrupt: [String: Data] = [:]
    /// HEAD answers this many bytes less than the upload holds (a request landed meanwhile).
    var headLag: Int64 = 0
    /// Called once each push and file request has its answer (a test moving its clock by what
    /// the request took).
    var answered: (@Sendable () -> Void)?
    private var patchCount = 0
    private var getCount = 0
    private var nextUpload = 1

    func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    func storeFile(_ data: Data) { locked { files[sha256Hex(data)] = data } }

    /// An upload the server holds `prefix` of, as a previous run left it.
    func seedUpload(id: String, of data: Data, holding prefix: Int) {
        locked { uploads[id] = (sha256Hex(data), Int64(data.count), data.prefix(prefix)) }
    }

    private func requestAnswered() { locked { answered }?() }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        defer { requestAnswered() }
        let missing: String? = locked {
            calls.append("push \(request.mutations.count)")
            guard checksFiles else { return nil }
            for mutation in request.mutations {
                guard case .object(let payload)? = mutation.payload else { continue }
                for key in ["photo", "document"] {
                    if let value = payload[key], let reference = try? FileReference(json: value), files[reference.sha256] == nil {
                        return reference.sha256
                    }
                }
            }
            pushed += request.mutations
            return nil
        }
        if missing != nil {
            throw .http(status: 409, body: ErrorBody(ErrorDetail(code: .fileMissing, message: "upload it first")), retryAfter: nil)
        }
        return PushResponse(
            results: request.mutations.map { MutationResult(seq: $0.seq, clientMutationId: $0.clientMutationId, status: .applied, serverVersion: 1) },
            lastSeq: request.mutations.last?.seq ?? 0)
    }

    func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError) -> Data {
        Data(#"{"changes":[],"cursor":"c","has_more":false}"#.utf8)
    }

    func health() async -> Bool { true }

    func startFileUpload(_ request: FileUploadRequest) async throws(TransportError) -> FileUploadAnswer {
        defer { requestAnswered() }
        return locked {
            calls.append("POST")
            if files[request.sha256] != nil { return FileUploadAnswer(sha256: request.sha256, state: .stored, uploadID: nil, offset: request.size) }
            if let (id, upload) = uploads.first(where: { $0.value.sha256 == request.sha256 }) {
                return FileUploadAnswer(sha256: request.sha256, state: .uploading, uploadID: id, offset: Int64(upload.data.count))
            }
            let id = "u\(nextUpload)"
            nextUpload += 1
            uploads[id] = (request.sha256, request.size, Data())
            return FileUploadAnswer(sha256: request.sha256, state: .uploading, uploadID: id, offset: 0)
        }
    }

    func fileUploadOffset(uploadID: String) async throws(TransportError) -> Int64 {
        defer { requestAnswered() }
        let offset: Int64? = locked {
            calls.append("HEAD \(uploadID)")
            return uploads[uploadID].map { Int64($0.data.count) - headLag }
        }
        guard let offset else { throw .http(status: 404, body: nil, retryAfter: nil) }
        return offset
    }

    func sendFileBytes(_ bytes: Data, uploadID: String, offset: Int64) async throws(TransportError) -> FileChunkAnswer {
        defer { requestAnswered() }
        let answer: Result<FileChunkAnswer, TransportError> = locked {
            patchCount += 1
            calls.append("PATCH \(uploadID) \(offset)+\(bytes.count)")
            if failPatches.contains(patchCount) { return .failure(.network("the connection was lost")) }
            guard var upload = uploads[uploadID] else { return .failure(.http(status: 404, body: nil, retryAfter: nil)) }
            guard offset == Int64(upload.data.count) else { return .success(.offsetMismatch(serverOffset: Int64(upload.data.count))) }
            upload.data.append(bytes)
            uploads[uploadID] = upload
            if Int64(upload.data.count) >= upload.size {
                uploads[uploadID] = nil
                guard sha256Hex(upload.data) == upload.sha256 else {
                    return .failure(.http(status: 422, body: ErrorBody(ErrorDetail(code: .hashMismatch, message: "no")), retryAfter: nil))
                }
                files[upload.sha256] = upload.data
            }
            return .success(.accepted(offset: Int64(upload.data.count)))
        }
        return try answer.get()
    }

    func abandonFileUpload(uploadID: String) async throws(TransportError) {
        locked {
            calls.append("DELETE \(uploadID)")
            uploads[uploadID] = nil
        }
    }

    func fileBytes(sha256: String, range: ClosedRange<Int64>) async throws(TransportError) -> FileChunk {
        let answer: Result<FileChunk, TransportError> = locked {
            getCount += 1
            calls.append("GET \(sha256.prefix(8)) \(range.lowerBound)-\(range.upperBound)")
            if failGets.contains(getCount) { return .failure(.network("the connection was lost")) }
            guard let data = corrupt[sha256] ?? files[sha256] else { return .failure(.http(status: 404, body: nil, retryAfter: nil)) }
            let upper = min(Int(range.upperBound), data.count - 1)
            let slice = Int(range.lowerBound) <= upper ? data.subdata(in: Int(range.lowerBound)..<(upper + 1)) : Data()
            return .success(FileChunk(start: range.lowerBound, data: slice, totalSize: Int64(data.count)))
        }
        return try answer.get()
    }
}
