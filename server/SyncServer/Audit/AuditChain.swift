public import Foundation

/// The audit log's chain: each entry is sealed with an HMAC (under the ``AuditKey``, which is not
/// in the database) over an unambiguous encoding of its fields and the previous entry's seal, and
/// the chain's head (last id, last seal) is itself sealed and updated in the same transaction as
/// the entries. Editing, removing or reordering an entry, or cutting the log's tail, then breaks a
/// seal that cannot be made again without the key.
///
/// Entries written before the chain was keyed (a database from an earlier release) keep their
/// plain SHA-256 links; ``AuditHead/keyedFrom`` says where the keyed chain starts, and
/// verification reports the unkeyed prefix as such.
public enum AuditChain {
    /// The `previousHash` of the first entry.
    public static let genesis = String(repeating: "0", count: 64)

    /// The seal of an entry: HMAC-SHA256 over its fields, each length-prefixed (so no two
    /// different entries encode alike, whatever their text holds), after the previous seal.
    public static func seal(of entry: AuditEntry, previousHash: String, key: AuditKey) -> String {
        var encoding = Data()
        encoding.reserveCapacity(entry.detail.utf8.count + 256)
        for field in [
            "outpost.audit.v2", previousHash, String(entry.id), entry.tenant, String(entry.recordedAt), entry.userID, entry.deviceID,
            entry.entity, entry.rowID, entry.operation, entry.outcome, entry.detail,
        ] {
            appendLengthPrefixed(field, to: &encoding)
        }
        return key.mac(encoding)
    }

    /// The link of an entry written before the chain was keyed: SHA-256 over the previous hash
    /// and the fields, newline separated.
    static func legacyHash(of entry: AuditEntry, previousHash: String) -> String {
        let text = [
            previousHash, String(entry.id), entry.tenant, String(entry.recordedAt), entry.userID, entry.deviceID,
            entry.entity, entry.rowID, entry.operation, entry.outcome, entry.detail,
        ].joined(separator: "\n")
        return Hex.sha256(Data(text.utf8))
    }

    /// The seal of the chain's head.
    static func seal(lastID: Int64, lastHash: String, keyedFrom: Int64, key: AuditKey) -> String {
        var encoding = Data()
        for field in ["outpost.audit.head.v2", String(lastID), lastHash, String(keyedFrom)] {
            appendLengthPrefixed(field, to: &encoding)
        }
        return key.mac(encoding)
    }

    private static func appendLengthPrefixed(_ field: String, to data: inout Data) {
        let bytes = Data(field.utf8)
        withUnsafeBytes(of: UInt64(bytes.count).bigEndian) { data.append(contentsOf: $0) }
        data.append(bytes)
    }

    /// The result of verifying a log.
    public enum Verification: Hashable, Sendable {
        /// Every link holds; entries below `keyedFrom` are only hash-chained (written before the key).
        case intact(entries: Int, keyedFrom: Int64)
        /// The first position where the log does not hold, and why.
        case broken(entryID: Int64, reason: String)
    }

    /// Recomputes the chain over every entry, in pages, and checks it against the sealed head and,
    /// when given, a checkpoint exported earlier (which catches a log cut back to an older head).
    /// - Parameter key: the key to check the seals with; the storage's own when `nil`.
    public static func verify(
        _ storage: any SyncStorage, key: AuditKey? = nil, checkpoint: AuditCheckpoint? = nil, pageSize: Int = 1000
    ) async throws -> Verification {
        let key = key ?? storage.auditKey
        guard let head = try await storage.read({ try await $0.auditHead() }) else {
            return .broken(entryID: 1, reason: "the log has no head: the database's migrations have not run")
        }
        if let fingerprint = head.keyFingerprint, fingerprint != key.fingerprint {
            return .broken(entryID: 1, reason: "the log is sealed with another key (fingerprint \(fingerprint), this key's \(key.fingerprint))")
        }
        guard head.seal == seal(lastID: head.lastID, lastHash: head.lastHash, keyedFrom: head.keyedFrom, key: key) else {
            return .broken(entryID: head.lastID, reason: "the head's seal does not hold: it was rewritten without the audit key")
        }
        if let checkpoint {
            guard checkpoint.seal == seal(lastID: checkpoint.lastID, lastHash: checkpoint.lastHash, keyedFrom: checkpoint.keyedFrom, key: key) else {
                return .broken(entryID: checkpoint.lastID, reason: "the checkpoint's seal does not hold under this key")
            }
        }
        var previous = genesis
        var expectedID: Int64 = 1
        while true {
            let after = expectedID - 1
            let page = try await storage.read { reader in try await reader.auditEntries(after: after, limit: pageSize) }
            if page.isEmpty { break }
            for entry in page {
                if entry.id != expectedID {
                    return .broken(entryID: expectedID, reason: "the entry is missing: the log goes from \(expectedID - 1) to \(entry.id)")
                }
                if entry.previousHash != previous {
                    return .broken(entryID: entry.id, reason: "its previous-hash does not match the entry before it")
                }
                let expected = entry.id < head.keyedFrom ? legacyHash(of: entry, previousHash: previous) : seal(of: entry, previousHash: previous, key: key)
                if expected != entry.hash {
                    return .broken(entryID: entry.id, reason: "its content does not match its seal")
                }
                if let checkpoint, entry.id == checkpoint.lastID, entry.hash != checkpoint.lastHash {
                    return .broken(entryID: entry.id, reason: "it differs from the entry the checkpoint sealed")
                }
                previous = entry.hash
                expectedID += 1
            }
        }
        let last = expectedID - 1
        if last != head.lastID || previous != head.lastHash {
            return .broken(
                entryID: last + 1,
                reason: "the log ends at entry \(last) but its sealed head says \(head.lastID): entries were cut from its end"
            )
        }
        if let checkpoint, checkpoint.lastID > last {
            return .broken(
                entryID: last + 1,
                reason: "the log ends at entry \(last) but a checkpoint exported earlier sealed entry \(checkpoint.lastID): the log was cut back"
            )
        }
        return .intact(entries: Int(last), keyedFrom: head.keyedFrom)
    }

    /// Writes every entry as a JSON line, then the head as a checkpoint line, to `output`.
    /// Returns the checkpoint, which verification takes back (`audit verify --checkpoint FILE`).
    @discardableResult
    public static func export(_ storage: any SyncStorage, to output: (Data) throws -> Void, pageSize: Int = 1000) async throws -> AuditCheckpoint? {
        // The head first, in the same snapshot as nothing: entries appended meanwhile come after it
        // and are exported too; the checkpoint names what the head said when the export began.
        guard let head = try await storage.read({ try await $0.auditHead() }) else { return nil }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var after: Int64 = 0
        while after < head.lastID {
            let from = after
            let page = try await storage.read { try await $0.auditEntries(after: from, limit: pageSize) }
            if page.isEmpty { break }
            for entry in page where entry.id <= head.lastID {
                try output(try encoder.encode(ExportedEntry(entry)) + Data("\n".utf8))
            }
            after = page.last!.id
        }
        let checkpoint = AuditCheckpoint(head)
        try output(try encoder.encode(["checkpoint": checkpoint]) + Data("\n".utf8))
        return checkpoint
    }

    /// An entry as `audit export` writes it.
    struct ExportedEntry: Encodable {
        var id: Int64, tenant: String, recorded_at: Int64, user_id: String, device_id: String, entity: String, row_id: String
        var operation: String, outcome: String, detail: String, previous_hash: String, hash: String

        init(_ entry: AuditEntry) {
            id = entry.id
            tenant = entry.tenant
            recorded_at = entry.recordedAt
            user_id = entry.userID
            device_id = entry.deviceID
            entity = entry.entity
            row_id = entry.rowID
            operation = entry.operation
            outcome = entry.outcome
            detail = entry.detail
            previous_hash = entry.previousHash
            hash = entry.hash
        }
    }
}

/// The head of the audit chain as the database holds it.
public struct AuditHead: Hashable, Sendable {
    /// The last entry's id (entries are numbered 1, 2, 3, … without gaps).
    public var lastID: Int64
    /// The last entry's seal (or hash, before the chain was keyed).
    public var lastHash: String
    /// The first entry sealed with the audit key.
    public var keyedFrom: Int64
    /// The fingerprint of the key the log is sealed with; `nil` until a keyed storage opened it.
    public var keyFingerprint: String?
    /// The head's own seal.
    public var seal: String?

    public init(lastID: Int64, lastHash: String, keyedFrom: Int64, keyFingerprint: String?, seal: String?) {
        self.lastID = lastID
        self.lastHash = lastHash
        self.keyedFrom = keyedFrom
        self.keyFingerprint = keyFingerprint
        self.seal = seal
    }
}

/// A sealed head exported outside the database: kept elsewhere, it proves how long the log was.
public struct AuditCheckpoint: Codable, Hashable, Sendable {
    public var lastID: Int64
    public var lastHash: String
    public var keyedFrom: Int64
    public var seal: String

    init(_ head: AuditHead) {
        lastID = head.lastID
        lastHash = head.lastHash
        keyedFrom = head.keyedFrom
        seal = head.seal ?? ""
    }

    enum CodingKeys: String, CodingKey {
        case lastID = "last_id"
        case lastHash = "last_hash"
        case keyedFrom = "keyed_from"
        case seal
    }

    /// The last checkpoint line of an export (or a file holding only checkpoint lines).
    public static func last(in data: Data) -> AuditCheckpoint? {
        struct Line: Decodable { var checkpoint: AuditCheckpoint }
        let decoder = JSONDecoder()
        return data.split(separator: UInt8(ascii: "\n")).reversed().lazy.compactMap { try? decoder.decode(Line.self, from: Data($0)).checkpoint }.first
    }
}
