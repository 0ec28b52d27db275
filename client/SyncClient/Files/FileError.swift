public import ContractRuntime
public import Foundation
public import SyncProtocol

/// Why the store refused a file for a `file` field, or cannot find one: the case of
/// ``OfflineStoreError/file(_:)``. Whenever it is thrown, nothing of the file stays in the store.
public enum FileError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The file has more bytes than the field allows (its contract's `max_bytes`).
    case tooLarge(contract: String, field: String, byteCount: Int64, limit: Int64)
    /// The field does not accept the file's content type (its contract's `content_types`).
    case contentTypeNotAllowed(contract: String, field: String, contentType: String, allowed: [String])
    /// The content type or the name given with the file is not one a reference may carry
    /// (`FileReference.init(sha256:byteCount:contentType:name:)`).
    case invalidReference(String)
    /// The file to import could not be read.
    case unreadable(path: String, reason: String)
    /// A write names a file imported in this run whose copy is gone: a transaction naming it
    /// failed, or it was discarded (``OfflineStore/discardImportedFile(_:)``). Import it again.
    case notImported(sha256: String)
    /// The bytes do not begin as a file of the declared content type does (a file declared
    /// `image/jpeg` that is an HTML page): the server would refuse them (`422
    /// content_type_mismatch`).
    case contentMismatch(contentType: String)
    /// The volume has too little free space for the file (``StorageLimits/downloadSpaceFactor``
    /// times its size).
    case insufficientSpace(neededBytes: Int64, availableBytes: Int64)

    /// What went wrong, for logs and the command-line device.
    public var description: String {
        switch self {
        case .tooLarge(let contract, let field, let size, let limit):
            "\(contract).\(field): the file has \(size) bytes, more than the field's limit of \(limit)"
        case .contentTypeNotAllowed(let contract, let field, let type, let allowed):
            "\(contract).\(field): files of type \(type) are not accepted (only \(allowed.joined(separator: ", ")))"
        case .invalidReference(let reason): "the file cannot be named: \(reason)"
        case .unreadable(let path, let reason): "the file at \(path) cannot be read: \(reason)"
        case .notImported(let hash): "the file \(hash.prefix(12))… is not in the store any more; import it again"
        case .contentMismatch(let type): "the file's bytes are not those of a \(type) file (they do not begin as one does)"
        case .insufficientSpace(let needed, let available):
            "not enough free space for the file: \(needed) bytes needed, \(available) available"
        }
    }
}

/// Why ``SyncEngine/file(for:)`` could not give a file.
public enum FileDownloadError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The server could not be asked, or refused (`404`: it does not hold the file, or this
    /// identity may not read it; ``TransportError/filesUnsupported`` for a transport without
    /// the file routes).
    case transport(TransportError)
    /// The store failed (no room for the file: ``OfflineStoreError/file(_:)``).
    case store(OfflineStoreError)
    /// The downloaded bytes do not hash to the reference's SHA-256 (or not to its size): they
    /// were deleted, and the next call downloads the file again from its start.
    case hashMismatch(expected: String, received: String)

    /// What went wrong, for logs and the command-line device.
    public var description: String {
        switch self {
        case .transport(let error): "the file could not be downloaded: \(error.detail.message)"
        case .store(let error): error.description
        case .hashMismatch(let expected, let received):
            "the downloaded file does not match its reference (SHA-256 \(received.prefix(12))…, expected \(expected.prefix(12))…): it was deleted"
        }
    }
}

/// Where a file of the store stands (``StoredFile/state``).
public enum StoredFileState: String, Hashable, Sendable {
    /// Imported on this device and named by a write: its bytes go to the server before the write.
    case waitingToUpload = "waiting"
    /// On the server (uploaded by this device, or found there): kept as a cached copy.
    case uploaded
    /// Downloaded from the server and cached.
    case cached
}

/// A file the store holds in its files folder (``OfflineStore/storedFiles()``).
public struct StoredFile: Hashable, Sendable {
    /// The file's SHA-256, its size, content type and name as first imported or downloaded.
    public var reference: FileReference
    /// Waiting to upload, uploaded, or downloaded and cached.
    public var state: StoredFileState
    /// The upload under way on the server (`upload_id`), while waiting to upload.
    public var uploadID: String?
    /// How many bytes of the upload the server acknowledged.
    public var acknowledgedOffset: Int64
    /// The last upload's error when the server refused the file (`quota_exceeded`, `hash_mismatch`).
    public var lastError: ErrorDetail?
    /// When a write or a read last used the file: the cache evicts the least recently used first.
    public var lastUsedAt: Date
    /// The file on the device.
    public var url: URL
}

/// A `file` field of a contract, whose limits an import checks as it copies
/// (``OfflineStore/importFile(at:contentType:name:for:)``).
public struct FileField: Hashable, Sendable {
    /// The contract's name (`Receipt`).
    public var contract: String
    /// The field's name (`photo`).
    public var field: String

    /// The field `field` of the contract `contract`.
    public init(contract: String, field: String) {
        self.contract = contract
        self.field = field
    }
}

extension OfflineStoreError {
    /// The error of a value `field` refused: ``file(_:)`` when it is a file reference the field's
    /// limits refuse (too large, a content type it does not accept), else ``invalidValue(contract:field:reason:)``.
    static func refusal(_ error: FieldValueError, field: FieldDescriptor, value: JSONValue, contract: String) -> OfflineStoreError {
        guard OfflineStore.isFileKind(field.kind) else { return .invalidValue(contract: contract, field: field.name, reason: error.reason) }
        let references: [FileReference]
        switch value {
        case .array(let items): references = items.compactMap { try? FileReference(json: $0) }
        default: references = (try? FileReference(json: value)).map { [$0] } ?? []
        }
        switch error.kind {
        case .tooLarge:
            let limit = Int64(field.maxBytes ?? 0)
            if let file = references.first(where: { $0.byteCount > limit }) {
                return .file(.tooLarge(contract: contract, field: field.name, byteCount: file.byteCount, limit: limit))
            }
        case .contentTypeNotAllowed:
            if let file = references.first(where: { !$0.hasContentType(in: field.contentTypes) }) {
                return .file(
                    .contentTypeNotAllowed(contract: contract, field: field.name, contentType: file.contentType, allowed: field.contentTypes))
            }
        default:
            break
        }
        return .invalidValue(contract: contract, field: field.name, reason: error.reason)
    }
}
