import ContractRuntime
import Foundation
import NIOCore
package import SyncProtocol

/// How large files may be and how much of them one user and one tenant may keep.
public struct FileLimits: Sendable, Hashable {
    /// The largest file the server takes, whatever a contract allows (2 GiB).
    public var maximumFileBytes: Int64
    /// The bytes of the files one user uploaded, and of their uploads under way (10 GiB): a
    /// declaration past it is 413 `quota_exceeded`.
    public var bytesPerUser: Int64
    /// The same for a whole tenant (100 GiB).
    public var bytesPerTenant: Int64
    /// Uploads one user may have under way at once (64): one more is 409 `limit_reached`.
    public var uploadsPerUser: Int
    /// An upload nothing was sent to for this long is dropped by housekeeping (24 hours).
    public var abandonedUploadSeconds: Int64

    /// Limits with the given sizes, counts and ages; the defaults are the server's.
    public init(
        maximumFileBytes: Int64 = 2 << 30, bytesPerUser: Int64 = 10 << 30, bytesPerTenant: Int64 = 100 << 30, uploadsPerUser: Int = 64,
        abandonedUploadSeconds: Int64 = 86_400
    ) {
        self.maximumFileBytes = maximumFileBytes
        self.bytesPerUser = bytesPerUser
        self.bytesPerTenant = bytesPerTenant
        self.uploadsPerUser = uploadsPerUser
        self.abandonedUploadSeconds = abandonedUploadSeconds
    }
}

/// The files rows name (``FileReference``): their declaration, resumable upload and download
/// (``FileRoutes``), who may name and read each, the quotas.
///
/// - A file is stored once per tenant, by its SHA-256, checked over its bytes before it is
///   stored: no partial or wrong file is ever served.
/// - An identity may **name** a file in a pushed row when it uploaded it (a grant, kept in
///   `file_grants`) or may read a row that already names it; a push naming any other file is
///   refused whole (409 `file_missing`), so no device pulls a row whose file the server lacks,
///   and no one reaches another user's file by knowing its hash.
/// - An identity may **read** a file it may name. A file no one may read answers as one that
///   does not exist (404).
/// - Declaring a file the server holds and the identity may name sends nothing (`stored`);
///   a file the server holds but the identity may not name must be uploaded (its bytes prove
///   the device has it), and is then stored only once.
package struct FileService: Sendable {
    let storage: any SyncStorage
    let blobs: any BlobStore
    let limits: FileLimits
    let clock: any ServerClock

    typealias Table = EngineNames.ServerTable

    package init(storage: any SyncStorage, blobs: any BlobStore, limits: FileLimits = FileLimits(), clock: any ServerClock) {
        self.storage = storage
        self.blobs = blobs
        self.limits = limits
        self.clock = clock
    }

    // MARK: Declare

    /// An upload under way.
    struct Upload: Sendable {
        var id: String
        var reference: FileReference
        var userID: String
    }

    /// `POST /sync/v1/files`: `stored` when there is nothing to send, else the upload to send
    /// to (this user's unfinished one for the same file, or a new one) and its offset.
    ///
    /// - Throws: ``ServiceError``: 400 for a reference that is not valid; 413 `payload_too_large`
    ///   past ``FileLimits/maximumFileBytes``, 413 `quota_exceeded` past a quota; 409
    ///   `limit_reached` past ``FileLimits/uploadsPerUser``.
    package func declare(_ request: FileUploadRequest, identity: DeviceIdentity) async throws(ServiceError) -> (FileUploadAnswer, created: Bool) {
        let reference: FileReference
        do {
            reference = try request.reference()
        } catch {
            throw .malformed("the file \(error.description)")
        }
        try Self.requireWithinMaximum(reference, limits)
        let (tenant, user) = (identity.tenant, identity.userID)
        let now = clock.now().millisecondsSince1970
        let limits = self.limits
        let contracts = storage.contracts
        let decided: (FileUploadAnswer.State, String?, Bool) = try await ServiceError.catchingStorageFailures {
            try await storage.write { transaction in
                if try await Self.isStored(reference.sha256, tenant: tenant, in: transaction),
                    try await Self.unnamable([reference.sha256], identity: identity, contracts: contracts, in: transaction).isEmpty
                {
                    try await Self.grant(reference.sha256, to: identity, at: now, in: transaction)
                    return (.stored, nil, false)
                }
                if let id = try await transaction.serverTableQuery(
                    "SELECT \"id\" FROM \"\(Table.fileUploads.rawValue)\" WHERE \"tenant\" = ? AND \"user_id\" = ? AND \"sha256\" = ?",
                    [.text(tenant), .text(user), .text(reference.sha256)]
                ).first?.text("id") {
                    return (.uploading, id, false)
                }
                let open =
                    try await transaction.serverTableQuery(
                        "SELECT COUNT(*) AS \"n\" FROM \"\(Table.fileUploads.rawValue)\" WHERE \"tenant\" = ? AND \"user_id\" = ?",
                        [.text(tenant), .text(user)]
                    ).first?.integer("n") ?? 0
                guard open < Int64(limits.uploadsPerUser) else {
                    throw ServiceError(
                        status: 409, .limitReached,
                        "this user has \(open) uploads under way, the most the server keeps; finish or abandon one first",
                        details: .object(["limit": .int(Int64(limits.uploadsPerUser))]))
                }
                let userBytes = try await Self.bytes(tenant: tenant, user: user, in: transaction)
                let tenantBytes = try await Self.bytes(tenant: tenant, user: nil, in: transaction)
                if userBytes + reference.byteCount > limits.bytesPerUser {
                    throw Self.quotaExceeded("this user's", used: userBytes, limit: limits.bytesPerUser, adding: reference.byteCount)
                }
                if tenantBytes + reference.byteCount > limits.bytesPerTenant {
                    throw Self.quotaExceeded("this tenant's", used: tenantBytes, limit: limits.bytesPerTenant, adding: reference.byteCount)
                }
                let id = Self.newUploadID()
                try await Self.recordUpload(id, of: reference, by: identity, at: now, in: transaction)
                return (.uploading, id, true)
            }
        }
        let (state, id, created) = decided
        guard let id else { return (FileUploadAnswer(sha256: reference.sha256, state: state, uploadID: nil, offset: reference.byteCount), false) }
        let offset = try await ServiceError.catchingStorageFailures { try await blobs.stagedLength(upload: id) }
        return (FileUploadAnswer(sha256: reference.sha256, state: .uploading, uploadID: id, offset: offset), created)
    }

    /// 413 `payload_too_large` for a file past ``FileLimits/maximumFileBytes``.
    static func requireWithinMaximum(_ reference: FileReference, _ limits: FileLimits) throws(ServiceError) {
        guard reference.byteCount <= limits.maximumFileBytes else {
            throw ServiceError(
                status: 413, .payloadTooLarge,
                "the file has \(reference.byteCount) bytes; this server takes files of at most \(limits.maximumFileBytes)",
                details: .object(["limit": .int(limits.maximumFileBytes)]))
        }
    }

    /// Records an upload under way of `reference` by `identity` (counted in the quotas from now).
    static func recordUpload(
        _ id: String, of reference: FileReference, by identity: DeviceIdentity, at now: Int64, in transaction: any StorageTransaction
    ) async throws {
        _ = try await transaction.serverTableQuery(
            """
            INSERT INTO "\(Table.fileUploads.rawValue)" ("id", "tenant", "user_id", "device_id", "sha256", "size", "content_type", "name", "created_at", "updated_at")
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .text(id), .text(identity.tenant), .text(identity.userID), .text(identity.deviceID), .text(reference.sha256),
                .integer(reference.byteCount), .text(reference.contentType), reference.name.map(ColumnValue.text) ?? .null, .integer(now),
                .integer(now),
            ])
    }

    static func quotaExceeded(_ whose: String, used: Int64, limit: Int64, adding: Int64) -> ServiceError {
        ServiceError(
            status: 413, .quotaExceeded, "\(whose) files take \(used) of \(limit) bytes; this file's \(adding) would go past it",
            details: .object(["limit": .int(limit), "used": .int(used)]))
    }

    /// The bytes of the files `user` (or the whole tenant, `nil`) uploaded, with uploads under way.
    static func bytes(tenant: String, user: String?, in reader: any StorageReader) async throws -> Int64 {
        let userClause = user == nil ? "" : " AND \"uploaded_by\" = ?"
        let uploadClause = user == nil ? "" : " AND \"user_id\" = ?"
        let arguments: [ColumnValue] = [.text(tenant)] + (user.map { [ColumnValue.text($0)] } ?? [])
        let stored =
            try await reader.serverTableQuery(
                "SELECT CAST(COALESCE(SUM(\"size\"), 0) AS BIGINT) AS \"n\" FROM \"\(Table.files.rawValue)\" WHERE \"tenant\" = ?\(userClause)",
                arguments
            ).first?.integer("n") ?? 0
        let pending =
            try await reader.serverTableQuery(
                "SELECT CAST(COALESCE(SUM(\"size\"), 0) AS BIGINT) AS \"n\" FROM \"\(Table.fileUploads.rawValue)\" WHERE \"tenant\" = ?\(uploadClause)",
                arguments
            ).first?.integer("n") ?? 0
        return stored + pending
    }

    /// 32 lowercase hex digits from the system's random source.
    static func newUploadID() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    // MARK: Upload

    /// Whether `text` is an upload id this server makes: 32 lowercase hex digits.
    static func isUploadID(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// This identity's upload with this id; 404 for any other (another user's is not told apart).
    func upload(_ id: String, identity: DeviceIdentity) async throws(ServiceError) -> Upload {
        guard Self.isUploadID(id) else { throw .notFound("no upload '\(id.prefix(64))'") }
        let row = try await ServiceError.catchingStorageFailures {
            try await storage.read { reader in
                try await reader.serverTableQuery(
                    "SELECT \"sha256\", \"size\", \"content_type\", \"name\" FROM \"\(Table.fileUploads.rawValue)\" WHERE \"id\" = ? AND \"tenant\" = ? AND \"user_id\" = ?",
                    [.text(id), .text(identity.tenant), .text(identity.userID)]
                ).first
            }
        }
        guard let row, let hash = row.text("sha256"), let size = row.integer("size"), let type = row.text("content_type"),
            let reference = try? FileReference(sha256: hash, byteCount: size, contentType: type, name: row.text("name"))
        else { throw .notFound("no upload '\(id)'") }
        return Upload(id: id, reference: reference, userID: identity.userID)
    }

    /// `HEAD`: how many bytes the upload holds.
    package func offset(of id: String, identity: DeviceIdentity) async throws(ServiceError) -> (offset: Int64, size: Int64) {
        let upload = try await upload(id, identity: identity)
        let offset = try await ServiceError.catchingStorageFailures { try await blobs.stagedLength(upload: id) }
        return (offset, upload.reference.byteCount)
    }

    /// What a `PATCH` did: the upload's offset after it, and whether that completed the file.
    package struct Received: Sendable {
        package var offset: Int64
        package var stored: Bool
        /// The file's SHA-256.
        package var sha256: String
    }

    /// `PATCH`: appends `body` to the upload from `offset`, in pieces of the blob store's size as
    /// they arrive; the request that sends the last byte has the file checked and stored.
    ///
    /// - Throws: ``ServiceError``: 409 `offset_mismatch` (details `offset`) when `offset` is not
    ///   the upload's; 413 `payload_too_large` for bytes past the declared size (those before
    ///   them are kept); 422 `hash_mismatch` when the whole file is not what was declared (the
    ///   upload is then gone, to begin again).
    func receive(_ id: String, at offset: Int64, body: BoundedBody, identity: DeviceIdentity) async throws(ServiceError) -> Received {
        let upload = try await upload(id, identity: identity)
        let size = upload.reference.byteCount
        let start = try await ServiceError.catchingStorageFailures { try await blobs.stagedLength(upload: id) }
        guard offset == start else { throw Self.offsetMismatch(start) }
        let position: Int64
        var running = RunningUploadDigests.shared.resume(id, at: start)
        let appended: Result<Int64, any Error>
        do {
            appended = .success(try await Self.append(body, to: id, from: start, size: size, blobs: blobs, hashing: &running))
        } catch {
            appended = .failure(error)
        }
        // Kept whatever happened: it covers the bytes stored, which the next piece goes on from.
        if let running { RunningUploadDigests.shared.keep(id, running) }
        do {
            position = try appended.get()
        } catch let error as ServiceError {
            throw error
        } catch let error as BlobStoreError {
            guard case .offsetMismatch(let expected) = error else {
                throw ServiceError(status: 500, .internalError, "the upload could not be stored")
            }
            throw Self.offsetMismatch(expected)
        } catch {
            // A connection that ended mid-body: what arrived is kept, the device asks where it got.
            if StorageAvailability.isUnavailable(error) { throw .storageUnavailable }
            throw ServiceError(status: 400, .malformedRequest, "the upload's body ended early: \(error)")
        }
        let now = clock.now().millisecondsSince1970
        guard position == size else {
            _ = try? await storage.write { transaction in
                try await transaction.serverTableQuery(
                    "UPDATE \"\(Table.fileUploads.rawValue)\" SET \"updated_at\" = ? WHERE \"id\" = ? RETURNING \"id\"", [.integer(now), .text(id)])
            }
            return Received(offset: position, stored: false, sha256: upload.reference.sha256)
        }
        try await complete(upload, identity: identity, at: now)
        return Received(offset: position, stored: true, sha256: upload.reference.sha256)
    }

    /// Appends `body` to the upload from `start`, in pieces of the blob store's size; the
    /// upload's length after it.
    private static func append(
        _ body: BoundedBody, to id: String, from start: Int64, size: Int64, blobs: any BlobStore, hashing running: inout RunningUploadDigests.Entry?
    ) async throws -> Int64 {
        var position = start
        var pending = ByteBuffer()
        // Each piece is hashed once the store took it, so the hash covers what the store holds.
        func store(_ piece: ByteBuffer) async throws {
            try await blobs.append(upload: id, at: position, piece)
            running?.add(piece)
        }
        for try await var part in body {
            guard position + Int64(pending.readableBytes) + Int64(part.readableBytes) <= size else {
                if pending.readableBytes > 0 { try await store(pending) }
                throw ServiceError(
                    status: 413, .payloadTooLarge, "the body goes past the file's \(size) bytes; the bytes up to its end were kept",
                    details: .object(["offset": .int(position + Int64(pending.readableBytes))]))
            }
            pending.writeBuffer(&part)
            if pending.readableBytes >= FileSystemBlobStore.chunkBytes {
                try await store(pending)
                position += Int64(pending.readableBytes)
                pending.clear()
            }
        }
        if pending.readableBytes > 0 {
            try await store(pending)
            position += Int64(pending.readableBytes)
        }
        return position
    }

    static func offsetMismatch(_ offset: Int64) -> ServiceError {
        ServiceError(
            status: 409, .offsetMismatch, "the upload holds \(offset) bytes; send from there", details: .object(["offset": .int(offset)]))
    }

    /// Checks the whole upload against its hash, then stores it: the bytes first (so a file the
    /// database names is always there), then the file's record, this user's grant and an audit
    /// entry with its hash, in one transaction that also ends the upload.
    private func complete(_ upload: Upload, identity: DeviceIdentity, at now: Int64) async throws(ServiceError) {
        let reference = upload.reference
        let key = BlobKey(tenant: identity.tenant, sha256: reference.sha256)
        let digest: StagedDigest
        if let followed = RunningUploadDigests.shared.finish(upload.id, length: reference.byteCount) {
            digest = followed
        } else {
            digest = try await ServiceError.catchingStorageFailures { try await blobs.stagedDigest(upload: upload.id) }
        }
        let hash = digest.sha256
        guard hash == reference.sha256 else {
            try await ServiceError.catchingStorageFailures {
                try await blobs.discard(upload: upload.id)
                try await storage.write { transaction in try await Self.endUpload(upload.id, in: transaction) }
            }
            throw ServiceError(
                status: 422, .hashMismatch,
                "the bytes sent have the SHA-256 \(hash), not the \(reference.sha256) declared; the upload is dropped, declare the file again",
                details: .object(["sha256": .string(hash)]))
        }
        // A type whose files begin with a known signature must begin with it: a file declared
        // `image/jpeg` that is an HTML page is not stored as a JPEG.
        if !FileSignature.matches(digest.head, contentType: reference.contentType) {
            try await ServiceError.catchingStorageFailures {
                try await blobs.discard(upload: upload.id)
                try await storage.write { transaction in try await Self.endUpload(upload.id, in: transaction) }
            }
            throw ServiceError(
                status: 422, .contentTypeMismatch,
                "the bytes sent are not a \(reference.contentType) file (they do not begin as one does); the upload is dropped")
        }
        try await ServiceError.catchingStorageFailures {
            try await blobs.promote(upload: upload.id, to: key)
            try await storage.write { transaction in
                _ = try await transaction.serverTableQuery(
                    """
                    INSERT INTO "\(Table.files.rawValue)" ("tenant", "sha256", "size", "content_type", "uploaded_by", "stored_at")
                    VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT ("tenant", "sha256") DO NOTHING RETURNING "sha256"
                    """,
                    [
                        .text(identity.tenant), .text(reference.sha256), .integer(reference.byteCount), .text(reference.contentType),
                        .text(identity.userID), .integer(now),
                    ])
                try await Self.grant(reference.sha256, to: identity, at: now, in: transaction)
                try await Self.endUpload(upload.id, in: transaction)
                try await transaction.appendAudit(
                    AuditEntry(
                        tenant: identity.tenant, recordedAt: now, userID: identity.userID, deviceID: identity.deviceID, entity: Self.auditEntity,
                        rowID: reference.sha256, operation: Self.uploadOperation, outcome: .applied,
                        detail: CanonicalJSON.text(
                            .object([
                                "sha256": .string(reference.sha256), "size": .int(reference.byteCount),
                                "content_type": .string(reference.contentType),
                            ]))))
            }
        }
    }

    /// The audit entry of a stored file: its entity and operation.
    static let auditEntity = "file"
    static let uploadOperation = AuditOperation(rawValue: "upload")

    private static func endUpload(_ id: String, in transaction: any StorageTransaction) async throws {
        _ = try await transaction.serverTableQuery("DELETE FROM \"\(Table.fileUploads.rawValue)\" WHERE \"id\" = ? RETURNING \"id\"", [.text(id)])
    }

    /// `DELETE`: drops the upload and what it holds.
    package func abandon(_ id: String, identity: DeviceIdentity) async throws(ServiceError) {
        _ = try await upload(id, identity: identity)
        RunningUploadDigests.shared.forget(id)
        try await ServiceError.catchingStorageFailures {
            try await blobs.discard(upload: id)
            try await storage.write { transaction in try await Self.endUpload(id, in: transaction) }
        }
    }

    // MARK: Housekeeping

    /// What ``collect(abandonedBefore:unreferencedBefore:limit:)`` removed.
    package struct Collected: Sendable, Hashable {
        package var uploads = 0
        package var files = 0
        package var bytes: Int64 = 0
    }

    /// Drops, in batches of `limit`: uploads nothing was sent to since `abandonedBefore`
    /// (milliseconds), and stored files no row names that no one uploaded or declared since
    /// `unreferencedBefore` (the data horizon), with their grants. A file's record goes in the
    /// transaction that checks it is still unnamed; its bytes after.
    package func collect(abandonedBefore: Int64, unreferencedBefore: Int64, limit: Int) async throws -> Collected {
        var collected = Collected()
        while true {
            try Task.checkCancellation()
            let ids = try await storage.write { transaction in
                try await transaction.serverTableQuery(
                    "DELETE FROM \"\(Table.fileUploads.rawValue)\" WHERE \"id\" IN (SELECT \"id\" FROM \"\(Table.fileUploads.rawValue)\" WHERE \"updated_at\" < ? LIMIT ?) RETURNING \"id\"",
                    [.integer(abandonedBefore), .integer(Int64(limit))]
                ).compactMap { $0.text("id") }
            }
            for id in ids { try await blobs.discard(upload: id) }
            collected.uploads += ids.count
            if ids.count < limit { break }
        }
        let (files, grants, references) = (Table.files.rawValue, Table.fileGrants.rawValue, Table.fileReferences.rawValue)
        while true {
            try Task.checkCancellation()
            let gone = try await storage.write { transaction -> [(BlobKey, Int64)] in
                let rows = try await transaction.serverTableQuery(
                    """
                    DELETE FROM "\(files)" WHERE ("tenant", "sha256") IN (
                        SELECT f."tenant", f."sha256" FROM "\(files)" f WHERE f."stored_at" < ?
                        AND NOT EXISTS (SELECT 1 FROM "\(references)" r WHERE r."tenant" = f."tenant" AND r."sha256" = f."sha256")
                        AND NOT EXISTS (SELECT 1 FROM "\(grants)" g WHERE g."tenant" = f."tenant" AND g."sha256" = f."sha256" AND g."granted_at" >= ?)
                        LIMIT ?)
                    RETURNING "tenant", "sha256", "size"
                    """,
                    [.integer(unreferencedBefore), .integer(unreferencedBefore), .integer(Int64(limit))])
                var gone: [(BlobKey, Int64)] = []
                for row in rows {
                    guard let tenant = row.text("tenant"), let hash = row.text("sha256") else { continue }
                    _ = try await transaction.serverTableQuery(
                        "DELETE FROM \"\(grants)\" WHERE \"tenant\" = ? AND \"sha256\" = ? RETURNING \"sha256\"", [.text(tenant), .text(hash)])
                    gone.append((BlobKey(tenant: tenant, sha256: hash), row.integer("size") ?? 0))
                }
                return gone
            }
            for (key, size) in gone {
                try await blobs.delete(key)
                collected.bytes += size
            }
            collected.files += gone.count
            if gone.count < limit { break }
        }
        return collected
    }

    // MARK: Read

    /// A stored file this identity may read: its size and content type.
    package struct Readable: Sendable {
        package var key: BlobKey
        package var size: Int64
        package var contentType: String
    }

    /// `GET`: the file, when the server holds it and the identity may read it; 404 alike otherwise.
    package func readable(_ sha256: String, identity: DeviceIdentity) async throws(ServiceError) -> Readable {
        guard FileReference.isSHA256(sha256) else { throw .notFound("no file '\(sha256.prefix(64))'") }
        let contracts = storage.contracts
        let found = try await ServiceError.catchingStorageFailures {
            try await storage.read { reader -> (Int64, String)? in
                guard
                    let row = try await reader.serverTableQuery(
                        "SELECT \"size\", \"content_type\" FROM \"\(Table.files.rawValue)\" WHERE \"tenant\" = ? AND \"sha256\" = ?",
                        [.text(identity.tenant), .text(sha256)]
                    ).first,
                    let size = row.integer("size"), let type = row.text("content_type"),
                    try await Self.unnamable([sha256], identity: identity, contracts: contracts, in: reader).isEmpty
                else { return nil }
                return (size, type)
            }
        }
        guard let (size, type) = found else { throw .notFound("no file '\(sha256)' this token may read") }
        return Readable(key: BlobKey(tenant: identity.tenant, sha256: sha256), size: size, contentType: type)
    }

    // MARK: Naming

    /// Of `hashes`, those `identity` may not name in a row: with neither a grant (it uploaded the
    /// file) nor a readable row naming it. Admins may name any file of their tenant.
    static func unnamable(
        _ hashes: Set<String>, identity: DeviceIdentity, contracts: ContractCatalog, in reader: any StorageReader
    ) async throws -> Set<String> {
        guard !hashes.isEmpty else { return [] }
        var left = hashes
        for part in Array(left).sorted().chunked(SubscriptionPlan.chunk) {
            let marks = Array(repeating: "?", count: part.count).joined(separator: ", ")
            let granted = try await reader.serverTableQuery(
                "SELECT \"sha256\" FROM \"\(Table.fileGrants.rawValue)\" WHERE \"tenant\" = ? AND \"user_id\" = ? AND \"sha256\" IN (\(marks))",
                [.text(identity.tenant), .text(identity.userID)] + part.map(ColumnValue.text))
            for row in granted { if let hash = row.text("sha256") { left.remove(hash) } }
        }
        guard !left.isEmpty else { return [] }
        if identity.isAdmin { return [] }
        let scopes = Self.scopesByTable(contracts)
        for part in Array(left).sorted().chunked(SubscriptionPlan.chunk) {
            let marks = Array(repeating: "?", count: part.count).joined(separator: ", ")
            let named = try await reader.serverTableQuery(
                "SELECT DISTINCT \"sha256\", \"table_name\", \"scope_key\" FROM \"\(Table.fileReferences.rawValue)\" WHERE \"tenant\" = ? AND \"sha256\" IN (\(marks))",
                [.text(identity.tenant)] + part.map(ColumnValue.text))
            for row in named {
                guard let hash = row.text("sha256"), let table = row.text("table_name"), let key = row.text("scope_key"),
                    let scope = scopes[table].flatMap(contracts.scope(named:))
                else { continue }
                if ScopeAccess.canRead(key, in: scope, identity: identity) { left.remove(hash) }
            }
        }
        return left
    }

    /// The scope name of each contract table.
    static func scopesByTable(_ contracts: ContractCatalog) -> [String: String] {
        var scopes: [String: String] = [:]
        for entity in contracts.entities { scopes[entity.table] = entity.scope }
        for event in contracts.events { scopes[event.table] = event.scope }
        return scopes
    }

    static func isStored(_ sha256: String, tenant: String, in reader: any StorageReader) async throws -> Bool {
        !(try await reader.serverTableQuery(
            "SELECT 1 AS \"present\" FROM \"\(Table.files.rawValue)\" WHERE \"tenant\" = ? AND \"sha256\" = ?", [.text(tenant), .text(sha256)]
        ).isEmpty)
    }

    static func grant(_ sha256: String, to identity: DeviceIdentity, at now: Int64, in transaction: any StorageTransaction) async throws {
        _ = try await transaction.serverTableQuery(
            """
            INSERT INTO "\(Table.fileGrants.rawValue)" ("tenant", "sha256", "user_id", "granted_at") VALUES (?, ?, ?, ?)
            ON CONFLICT ("tenant", "sha256", "user_id") DO NOTHING RETURNING "sha256"
            """,
            [.text(identity.tenant), .text(sha256), .text(identity.userID), .integer(now)])
    }

    /// The files the new mutations of a push name (by their contracts' `file` fields), refused
    /// together when any is not stored or not this identity's to name: 409 `file_missing`, its
    /// details listing them. Nothing of the push is applied.
    static func requireNamable(
        _ mutations: some Sequence<Mutation>, identity: DeviceIdentity, contracts: ServerContracts, in transaction: any StorageTransaction
    ) async throws {
        // Most contracts have no file field: nothing is read for their pushes.
        guard !contracts.fileFieldNames.isEmpty else { return }
        var hashes: Set<String> = []
        for mutation in mutations {
            guard let names = contracts.fileFieldNames[mutation.entity], case .object(let payload)? = mutation.payload else { continue }
            for name in names {
                if let value = payload[name], let reference = try? FileReference(json: value) { hashes.insert(reference.sha256) }
            }
        }
        guard !hashes.isEmpty else { return }
        var missing: Set<String> = []
        for part in Array(hashes).sorted().chunked(SubscriptionPlan.chunk) {
            let marks = Array(repeating: "?", count: part.count).joined(separator: ", ")
            let stored = Set(
                try await transaction.serverTableQuery(
                    "SELECT \"sha256\" FROM \"\(Table.files.rawValue)\" WHERE \"tenant\" = ? AND \"sha256\" IN (\(marks))",
                    [.text(identity.tenant)] + part.map(ColumnValue.text)
                ).compactMap { $0.text("sha256") })
            missing.formUnion(Set(part).subtracting(stored))
        }
        missing.formUnion(try await unnamable(hashes.subtracting(missing), identity: identity, contracts: contracts.catalog, in: transaction))
        guard missing.isEmpty else {
            throw ServiceError(
                status: 409, .fileMissing,
                "the push names \(missing.count) file(s) the server does not hold for this identity; upload them (POST /sync/v1/files), then push again",
                details: .object(["files": .array(missing.sorted().map(JSONValue.string))]))
        }
    }
}
