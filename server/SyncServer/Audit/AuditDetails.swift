import Crypto
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Audit details a user's erasure can destroy (crypto-shredding).
///
/// Each new entry's `detail` (the mutation, the resolution: a user's personal data) is stored
/// encrypted with AES-GCM under a data key of the entry's user: 32 random bytes, made the first
/// time the user is audited, in the same transaction, and kept in `audit_user_keys` wrapped
/// (AES-GCM) under a key derived from the ``AuditKey``, so a dump of the database alone reads
/// nothing. The stored text is `enc:v1:`, the key's id (16 hex characters of the SHA-256 of the
/// data key: a user erased, then audited again, has a new key, which does not read the old
/// entries), `:`, and the base64 of nonce, ciphertext and tag; the entry's
/// seal covers that text, so the chain verifies without any user key, and keeps verifying once
/// ``StorageTransaction/eraseAuditDetails(tenant:userID:)`` deleted the key: the details are then
/// unreadable, while the entry's ids, operation, outcome and seals stay.
///
/// Entries that stay in clear: those with no user (`userID` empty) and those of the server's own
/// actor, `sync-server` (sample content seeding): no person's data is in them. Entries written
/// before the `server.v3.audit_details` upgrade keep their plain details (their seals cover them)
/// and cannot be erased; ``AuditHead/detailsFrom`` says where encryption starts.
package enum AuditDetails {
    /// What an encrypted detail starts with. Details in clear are canonical JSON (`{…}`), so the
    /// two never look alike.
    package static let prefix = "enc:v1:"

    /// The server's own actors: their entries' details stay in clear.
    package static let systemActors: Set<String> = ["sync-server"]

    /// Whether an entry of this user has its detail encrypted.
    package static func isEncrypted(userID: String) -> Bool {
        !userID.isEmpty && !systemActors.contains(userID)
    }

    /// Whether a stored detail is encrypted (else it is in clear).
    package static func isSealed(_ storedDetail: String) -> Bool {
        storedDetail.hasPrefix(prefix)
    }

    /// A new user's data key and its wrapped form, as `audit_user_keys` stores it.
    static func newDataKey(tenant: String, userID: String, key: AuditKey) throws -> (SymmetricKey, String) {
        let dataKey = SymmetricKey(size: .bits256)
        let wrapped = try dataKey.withUnsafeBytes { bytes in
            try AES.GCM.seal(Data(bytes), using: key.keyEncryptionKey, authenticating: binding(tenant: tenant, userID: userID))
        }
        guard let combined = wrapped.combined else { throw AuditDetailsError.unreadableKey(tenant: tenant, userID: userID) }
        return (dataKey, combined.base64EncodedString())
    }

    /// The data key a wrapped key holds; the wrapping is bound to its tenant and user, so a key
    /// row copied to another user does not open.
    static func unwrap(_ wrapped: String, tenant: String, userID: String, key: AuditKey) throws -> SymmetricKey {
        guard let combined = Data(base64Encoded: wrapped),
            let box = try? AES.GCM.SealedBox(combined: combined),
            let bytes = try? AES.GCM.open(box, using: key.keyEncryptionKey, authenticating: binding(tenant: tenant, userID: userID))
        else { throw AuditDetailsError.unreadableKey(tenant: tenant, userID: userID) }
        return SymmetricKey(data: bytes)
    }

    private static func binding(tenant: String, userID: String) -> Data {
        Data("outpost.audit.user-key.v1\u{0}\(tenant)\u{0}\(userID)".utf8)
    }

    /// The id of a data key, as encrypted details name it.
    static func keyID(of dataKey: SymmetricKey) -> String {
        String(dataKey.withUnsafeBytes { Hex.sha256(Data($0)) }.prefix(16))
    }

    /// A user's data key with its id, worked out once per transaction rather than per entry.
    struct DataKey {
        let key: SymmetricKey
        let id: String

        init(_ key: SymmetricKey) {
            self.key = key
            id = AuditDetails.keyID(of: key)
        }
    }

    /// The stored text of a detail encrypted under a user's data key, with a fresh random nonce
    /// (one of ``nonces(_:)`` when many details are sealed at once).
    static func seal(_ detail: String, under dataKey: DataKey, nonce: AES.GCM.Nonce = AES.GCM.Nonce()) throws -> String {
        guard let combined = try AES.GCM.seal(Data(detail.utf8), using: dataKey.key, nonce: nonce).combined else {
            throw AuditDetailsError.unreadableDetail
        }
        return prefix + dataKey.id + ":" + combined.base64EncodedString()
    }

    /// `count` random nonces, read from the system's generator in one call: `AES.GCM.Nonce()`
    /// reads it 8 bytes at a time, two system calls per nonce, and a push seals a detail per
    /// mutation.
    static func nonces(_ count: Int) throws -> [AES.GCM.Nonce] {
        let size = 12  // AES-GCM's standard nonce
        var bytes = [UInt8](repeating: 0, count: count * size)
        bytes.withUnsafeMutableBytes { buffer in
            if let base = buffer.baseAddress { arc4random_buf(base, buffer.count) }
        }
        return try (0..<count).map { try AES.GCM.Nonce(data: bytes[($0 * size)..<(($0 + 1) * size)]) }
    }

    /// The detail in clear of an encrypted stored text; `nil` when it was encrypted under
    /// another key of the user (one erased since).
    static func open(_ stored: String, under dataKey: SymmetricKey) throws -> String? {
        let body = stored.dropFirst(prefix.count)
        guard let colon = body.firstIndex(of: ":") else { throw AuditDetailsError.unreadableDetail }
        guard body[..<colon] == keyID(of: dataKey) else { return nil }
        guard let combined = Data(base64Encoded: String(body[body.index(after: colon)...])),
            let box = try? AES.GCM.SealedBox(combined: combined),
            let bytes = try? AES.GCM.open(box, using: dataKey)
        else { throw AuditDetailsError.unreadableDetail }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Reads details in clear, keeping each user's key it unwrapped: for reading many entries
    /// (an export) in one pass. Keep one only as long as the read it serves.
    final class Reader {
        let key: AuditKey
        private var keys: [String: SymmetricKey?] = [:]

        init(key: AuditKey) {
            self.key = key
        }

        /// The entry's detail in clear; `nil` when the user's key it was encrypted under was erased.
        func detail(of entry: AuditEntry, in reader: any StorageReader) async throws -> String? {
            guard AuditDetails.isSealed(entry.detail) else { return entry.detail }
            let name = entry.tenant + "\u{0}" + entry.userID
            let dataKey: SymmetricKey?
            if let known = keys[name] {
                dataKey = known
            } else {
                dataKey = try await reader.wrappedAuditUserKey(tenant: entry.tenant, userID: entry.userID).map {
                    try AuditDetails.unwrap($0, tenant: entry.tenant, userID: entry.userID, key: key)
                }
                keys[name] = .some(dataKey)
            }
            guard let dataKey else { return nil }
            return try AuditDetails.open(entry.detail, under: dataKey)
        }
    }
}

/// A detail or user key that does not decrypt: written under another audit key, or altered.
public enum AuditDetailsError: Error, Hashable, Sendable, CustomStringConvertible {
    case unreadableKey(tenant: String, userID: String)
    case unreadableDetail

    /// What does not decrypt, naming the user when it is their key.
    public var description: String {
        switch self {
        case .unreadableKey(let tenant, let userID):
            return "the audit data key of user '\(userID)' in tenant '\(tenant)' does not unwrap under this audit key"
        case .unreadableDetail: return "an audit detail does not decrypt under its user's key: it was altered"
        }
    }
}

extension AuditChain {
    /// An entry's detail in clear: as stored for entries in clear, decrypted under its user's key
    /// for encrypted ones, `nil` when that key was erased
    /// (``StorageTransaction/eraseAuditDetails(tenant:userID:)``).
    package static func readableDetail(of entry: AuditEntry, in reader: any StorageReader, key: AuditKey) async throws -> String? {
        try await AuditDetails.Reader(key: key).detail(of: entry, in: reader)
    }

    /// The details of many entries in clear, in order (`nil` where erased), each user's key read
    /// once: for an export of one user's entries (``StorageReader/auditEntries(tenant:userID:after:limit:)``).
    package static func readableDetails(of entries: [AuditEntry], in reader: any StorageReader, key: AuditKey) async throws -> [String?] {
        let details = AuditDetails.Reader(key: key)
        var readable: [String?] = []
        readable.reserveCapacity(entries.count)
        for entry in entries { readable.append(try await details.detail(of: entry, in: reader)) }
        return readable
    }
}
