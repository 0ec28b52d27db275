package import ContractRuntime
import Crypto
package import Foundation
import NIOCore
import SyncProtocol

/// Files the server itself publishes (an app's content files: a lesson's audio, a diagram), as
/// opposed to those devices upload: the same blob store, the same records, grants, quotas and
/// audit as any file, without the upload routes.
extension FileService {
    /// Stores `data` as a file of `identity`'s tenant and returns its reference: checked against
    /// its SHA-256 once staged and against `contentType`'s signature, counted in the tenant's
    /// files (uploaded by `identity`'s user, who is granted it), audited with its hash
    /// (`file` / `upload`). A file the tenant already holds is not stored again.
    ///
    /// - Throws: ``ServiceError``: 400 for a content type or name a reference cannot hold; 413
    ///   `payload_too_large` or `quota_exceeded` past ``FileLimits``; 422 `content_type_mismatch`
    ///   when the bytes do not begin as a file of `contentType` does.
    package func publish(_ data: Data, contentType: String, name: String?, identity: DeviceIdentity) async throws(ServiceError) -> FileReference {
        let reference = try Self.reference(sha256: Hex.sha256(data), size: Int64(data.count), contentType: contentType, name: name)
        return try await publish(reference, identity: identity) { offset, maxLength in
            let start = Int(offset)
            var buffer = ByteBuffer()
            buffer.writeBytes(data[(data.startIndex + start)..<(data.startIndex + min(data.count, start + maxLength))])
            return buffer
        }
    }

    /// Stores the file at `url` (read a piece at a time, never whole in memory) as
    /// ``publish(_:contentType:name:identity:)`` does. Its hash is read through first, then the
    /// bytes staged are checked against it: a file that changed in between is refused (422
    /// `hash_mismatch`).
    package func publish(contentsOf url: URL, contentType: String, name: String?, identity: DeviceIdentity) async throws(ServiceError)
        -> FileReference
    {
        let (hash, size): (String, Int64)
        do {
            (hash, size) = try Self.digest(of: url)
        } catch {
            throw ServiceError(status: 500, .internalError, "the server could not read the file \(url.lastPathComponent)")
        }
        let reference = try Self.reference(sha256: hash, size: size, contentType: contentType, name: name)
        return try await publish(reference, identity: identity) { offset, maxLength in
            let handle = try FileHandle(forReadingFrom: url)
            defer { try? handle.close() }
            try handle.seek(toOffset: UInt64(offset))
            var buffer = ByteBuffer()
            buffer.writeBytes(try handle.read(upToCount: maxLength) ?? Data())
            return buffer
        }
    }

    private static func reference(sha256: String, size: Int64, contentType: String, name: String?) throws(ServiceError) -> FileReference {
        do {
            return try FileReference(sha256: sha256, byteCount: size, contentType: contentType, name: name)
        } catch {
            throw .malformed("the file \(error.description)")
        }
    }

    /// The SHA-256 and size of the file at `url`, read in pieces.
    private static func digest(of url: URL) throws -> (String, Int64) {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        var hasher = SHA256()
        var size: Int64 = 0
        while let piece = try handle.read(upToCount: FileSystemBlobStore.chunkBytes), !piece.isEmpty {
            hasher.update(data: piece)
            size += Int64(piece.count)
        }
        return (hasher.finalize().map { String(format: "%02x", $0) }.joined(), size)
    }

    /// Stages the bytes `read` gives (at most `maxLength` from an offset), checks them against
    /// `reference`, then stores them as a device's completed upload is stored.
    private func publish(
        _ reference: FileReference, identity: DeviceIdentity, read: @escaping @Sendable (Int64, Int) throws -> ByteBuffer
    ) async throws(ServiceError) -> FileReference {
        try Self.requireWithinMaximum(reference, limits)
        let (tenant, user) = (identity.tenant, identity.userID)
        let now = clock.now().millisecondsSince1970
        let limits = self.limits
        let id = Self.newUploadID()
        // The upload is recorded first, so housekeeping drops what a crash leaves staged.
        let stored: Bool = try await ServiceError.catchingStorageFailures {
            try await storage.write { transaction in
                if try await Self.isStored(reference.sha256, tenant: tenant, in: transaction) {
                    try await Self.grant(reference.sha256, to: identity, at: now, in: transaction)
                    return true
                }
                let used = try await Self.bytes(tenant: tenant, user: nil, in: transaction)
                guard used + reference.byteCount <= limits.bytesPerTenant else {
                    throw Self.quotaExceeded("this tenant's", used: used, limit: limits.bytesPerTenant, adding: reference.byteCount)
                }
                try await Self.recordUpload(id, of: reference, by: identity, at: now, in: transaction)
                return false
            }
        }
        if stored { return reference }
        do {
            try await stage(id, size: reference.byteCount, read: read)
            let digest = try await blobs.stagedDigest(upload: id)
            guard digest.sha256 == reference.sha256 else {
                throw ServiceError(
                    status: 422, .hashMismatch, "the bytes read have the SHA-256 \(digest.sha256), not the \(reference.sha256) expected",
                    details: .object(["sha256": .string(digest.sha256)]))
            }
            guard FileSignature.matches(digest.head, contentType: reference.contentType) else {
                throw ServiceError(
                    status: 422, .contentTypeMismatch, "the bytes are not a \(reference.contentType) file (they do not begin as one does)")
            }
            try await blobs.promote(upload: id, to: BlobKey(tenant: tenant, sha256: reference.sha256))
            try await storage.write { transaction in
                _ = try await transaction.serverTableQuery(
                    """
                    INSERT INTO "\(Table.files.rawValue)" ("tenant", "sha256", "size", "content_type", "uploaded_by", "stored_at")
                    VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT ("tenant", "sha256") DO NOTHING RETURNING "sha256"
                    """,
                    [
                        .text(tenant), .text(reference.sha256), .integer(reference.byteCount), .text(reference.contentType), .text(user),
                        .integer(now),
                    ])
                try await Self.grant(reference.sha256, to: identity, at: now, in: transaction)
                try await Self.dropUpload(id, in: transaction)
                try await transaction.appendAudit(
                    AuditEntry(
                        tenant: tenant, recordedAt: now, userID: user, deviceID: identity.deviceID, entity: Self.auditEntity,
                        rowID: reference.sha256, operation: Self.uploadOperation, outcome: .applied,
                        detail: CanonicalJSON.text(
                            .object([
                                "sha256": .string(reference.sha256), "size": .int(reference.byteCount),
                                "content_type": .string(reference.contentType), "published": .bool(true),
                            ]))))
            }
        } catch {
            try? await blobs.discard(upload: id)
            _ = try? await storage.write { transaction in try await Self.dropUpload(id, in: transaction) }
            if let error = error as? ServiceError { throw error }
            if StorageAvailability.isUnavailable(error) { throw .storageUnavailable }
            throw ServiceError(status: 500, .internalError, "the server could not store the file")
        }
        return reference
    }

    /// Appends the bytes `read` gives to the upload's staging, a piece at a time.
    private func stage(_ id: String, size: Int64, read: @escaping @Sendable (Int64, Int) throws -> ByteBuffer) async throws {
        var offset: Int64 = 0
        while offset < size {
            let piece = try read(offset, Int(min(Int64(FileSystemBlobStore.chunkBytes), size - offset)))
            guard piece.readableBytes > 0 else {
                throw ServiceError(status: 422, .hashMismatch, "the file ended after \(offset) of its \(size) bytes")
            }
            try await blobs.append(upload: id, at: offset, piece)
            offset += Int64(piece.readableBytes)
        }
    }

    /// The bytes of a tenant's stored files and uploads under way.
    private static func dropUpload(_ id: String, in transaction: any StorageTransaction) async throws {
        _ = try await transaction.serverTableQuery("DELETE FROM \"\(Table.fileUploads.rawValue)\" WHERE \"id\" = ? RETURNING \"id\"", [.text(id)])
    }
}
