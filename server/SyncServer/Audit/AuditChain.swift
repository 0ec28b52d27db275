public import Foundation

/// The audit log's chain: each entry is sealed with an HMAC (under the ``AuditKey``, which is not
/// in the database) over an unambiguous encoding of its fields and the previous entry's seal, and
/// the chain's head (last id, last seal) is itself sealed and updated in the same transaction as
/// the entries. Editing, removing or reordering an entry, or cutting the log's tail, then breaks a
/// seal that cannot be made again without the key.
///
/// Entries written before the chain was keyed (a database from an earlier release) keep their
/// plain SHA-256 links; the head (`keyed_from`) says where the keyed chain starts, and
/// verification reports the unkeyed prefix as such.
public enum AuditChain {
    /// The `previousHash` of the first entry.
    public static let genesis = String(repeating: "0", count: 64)

    /// The seal of an entry: HMAC-SHA256 over its fields, each length-prefixed (so no two
    /// different entries encode alike, whatever their text holds), after the previous seal.
    package static func seal(of entry: AuditEntry, previousHash: String, key: AuditKey) -> String {
        var encoding: [UInt8] = []
        encoding.reserveCapacity(entry.detail.utf8.count + previousHash.utf8.count + 256)
        appendLengthPrefixed("outpost.audit.v2", to: &encoding)
        appendLengthPrefixed(previousHash, to: &encoding)
        appendLengthPrefixed(String(entry.id), to: &encoding)
        appendLengthPrefixed(entry.tenant, to: &encoding)
        appendLengthPrefixed(String(entry.recordedAt), to: &encoding)
        appendLengthPrefixed(entry.userID, to: &encoding)
        appendLengthPrefixed(entry.deviceID, to: &encoding)
        appendLengthPrefixed(entry.entity, to: &encoding)
        appendLengthPrefixed(entry.rowID, to: &encoding)
        appendLengthPrefixed(entry.operation.rawValue, to: &encoding)
        appendLengthPrefixed(entry.outcome.rawValue, to: &encoding)
        appendLengthPrefixed(entry.detail, to: &encoding)
        return key.mac(encoding)
    }

    /// The link of an entry written before the chain was keyed: SHA-256 over the previous hash
    /// and the fields, newline separated.
    static func legacyHash(of entry: AuditEntry, previousHash: String) -> String {
        let text = [
            previousHash, String(entry.id), entry.tenant, String(entry.recordedAt), entry.userID, entry.deviceID,
            entry.entity, entry.rowID, entry.operation.rawValue, entry.outcome.rawValue, entry.detail,
        ].joined(separator: "\n")
        return Hex.sha256(Data(text.utf8))
    }

    /// The seal of the chain's head.
    static func seal(lastID: Int64, lastHash: String, keyedFrom: Int64, key: AuditKey) -> String {
        var encoding: [UInt8] = []
        for field in ["outpost.audit.head.v2", String(lastID), lastHash, String(keyedFrom)] {
            appendLengthPrefixed(field, to: &encoding)
        }
        return key.mac(encoding)
    }

    /// The seal of an archive base (``AuditBase``): a domain of its own, so no head or
    /// checkpoint seal (which the database and exports show) can stand for a base.
    static func seal(baseID: Int64, baseHash: String, keyedFrom: Int64, key: AuditKey) -> String {
        var encoding: [UInt8] = []
        for field in ["outpost.audit.base.v1", String(baseID), baseHash, String(keyedFrom)] {
            appendLengthPrefixed(field, to: &encoding)
        }
        return key.mac(encoding)
    }

    private static func appendLengthPrefixed(_ field: String, to data: inout [UInt8]) {
        withUnsafeBytes(of: UInt64(field.utf8.count).bigEndian) { data.append(contentsOf: $0) }
        data.append(contentsOf: field.utf8)
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
    /// With an archive base (the base `sync-server audit archive` moves), the chain starts there: the base's seal must hold and
    /// the first remaining entry must link to it; `entries` counts the entries in the database.
    /// - Parameters:
    ///   - storage: the storage whose log is verified.
    ///   - key: the key to check the seals with; the storage's own when `nil`.
    ///   - checkpoint: a checkpoint ``export(_:to:pageSize:)`` returned earlier, or `nil`.
    ///   - pageSize: the entries read per storage read.
    public static func verify(
        _ storage: any ServerStorage, key: AuditKey? = nil, checkpoint: AuditCheckpoint? = nil, pageSize: Int = 1000
    ) async throws -> Verification {
        let storage = storage.engine
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
        if let base = head.base {
            // Entries up to the base were archived: the base's seal vouches for where they ended.
            guard base.seal == seal(baseID: base.lastID, baseHash: base.lastHash, keyedFrom: head.keyedFrom, key: key) else {
                return .broken(entryID: base.lastID, reason: "the archive base's seal does not hold: it was rewritten without the audit key")
            }
            if let checkpoint, checkpoint.lastID == base.lastID, checkpoint.lastHash != base.lastHash {
                return .broken(entryID: base.lastID, reason: "the archive base differs from the entry the checkpoint sealed")
            }
            previous = base.lastHash
            expectedID = base.lastID + 1
        }
        let firstID = expectedID
        while true {
            let after = expectedID - 1
            let page = try await storage.read { reader in try await reader.auditEntries(after: after, limit: pageSize) }
            if page.isEmpty { break }
            for entry in page {
                if entry.id != expectedID {
                    return .broken(entryID: expectedID, reason: "the entry is missing: the log goes from \(expectedID - 1) to \(entry.id)")
                }
                if entry.previousHash != previous {
                    let before = entry.id == firstID && firstID > 1 ? "the archive base" : "the entry before it"
                    return .broken(entryID: entry.id, reason: "its previous-hash does not match \(before)")
                }
                let expected =
                    entry.id < head.keyedFrom ? legacyHash(of: entry, previousHash: previous) : seal(of: entry, previousHash: previous, key: key)
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
        return .intact(entries: Int(last - firstID + 1), keyedFrom: head.keyedFrom)
    }

    /// Writes every entry as a JSON line, then the head as a checkpoint line, to `output`.
    /// Returns the checkpoint, which verification takes back (`audit verify --checkpoint FILE`).
    /// Details are written in clear (decrypted with the audit key); an erased one is `null` with
    /// `"detail_erased": true`, and an encrypted one keeps its stored text as `sealed_detail`, so
    /// every line can still be checked against its seal.
    @discardableResult
    public static func export(_ storage: any ServerStorage, to output: (Data) throws -> Void, pageSize: Int = 1000) async throws -> AuditCheckpoint? {
        let storage = storage.engine
        // The head first, in the same snapshot as nothing: entries appended meanwhile come after it
        // and are exported too; the checkpoint names what the head said when the export began.
        guard let head = try await storage.read({ try await $0.auditHead() }) else { return nil }
        let key = storage.auditKey
        var after: Int64 = 0
        while after < head.lastID {
            let from = after
            let page = try await storage.read { reader in
                // Users' keys are read once a page, in the page's snapshot.
                let details = AuditDetails.Reader(key: key)
                var page: [(AuditEntry, String?)] = []
                for entry in try await reader.auditEntries(after: from, limit: pageSize) {
                    page.append((entry, try await details.detail(of: entry, in: reader)))
                }
                return page
            }
            if page.isEmpty { break }
            for (entry, readable) in page where entry.id <= head.lastID {
                try output(try encodedLine(ExportedEntry(entry, readable: .some(readable))))
            }
            after = page.last!.0.id
        }
        let checkpoint = AuditCheckpoint(head)
        try output(try encodedLine(["checkpoint": checkpoint]))
        return checkpoint
    }

    static func encodedLine(_ value: some Encodable) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(value) + Data("\n".utf8)
    }

    /// An entry as `audit export` and `audit archive` write it. `detail` is the detail in clear
    /// (`null` when erased, or, in an archive, when encrypted: archives keep encrypted details
    /// encrypted, so erasing a user later reaches them too); `sealed_detail`, for encrypted
    /// details, is the stored text the seal covers.
    struct ExportedEntry: Codable {
        var id: Int64, tenant: String, recorded_at: Int64, user_id: String, device_id: String, entity: String, row_id: String
        var operation: String, outcome: String, detail: String?, sealed_detail: String?, detail_erased: Bool?
        var previous_hash: String, hash: String

        /// - Parameter readable: the detail in clear (`.some(nil)`: erased); `nil` to keep an
        ///   encrypted detail encrypted.
        init(_ entry: AuditEntry, readable: String??) {
            id = entry.id
            tenant = entry.tenant
            recorded_at = entry.recordedAt
            user_id = entry.userID
            device_id = entry.deviceID
            entity = entry.entity
            row_id = entry.rowID
            operation = entry.operation.rawValue
            outcome = entry.outcome.rawValue
            if AuditDetails.isSealed(entry.detail) {
                sealed_detail = entry.detail
                switch readable {
                case .some(.some(let text)): detail = text
                case .some(.none): detail = nil; detail_erased = true
                case .none: detail = nil
                }
            } else {
                detail = entry.detail
            }
            previous_hash = entry.previousHash
            hash = entry.hash
        }

        /// The entry as the database held it (the detail its seal covers).
        var entry: AuditEntry {
            AuditEntry(
                id: id, tenant: tenant, recordedAt: recorded_at, userID: user_id, deviceID: device_id, entity: entity, rowID: row_id,
                operation: AuditOperation(rawValue: operation), outcome: AuditOutcome(rawValue: outcome),
                detail: sealed_detail ?? detail ?? "", previousHash: previous_hash, hash: hash
            )
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encode(tenant, forKey: .tenant)
            try container.encode(recorded_at, forKey: .recorded_at)
            try container.encode(user_id, forKey: .user_id)
            try container.encode(device_id, forKey: .device_id)
            try container.encode(entity, forKey: .entity)
            try container.encode(row_id, forKey: .row_id)
            try container.encode(operation, forKey: .operation)
            try container.encode(outcome, forKey: .outcome)
            try container.encode(detail, forKey: .detail)
            try container.encodeIfPresent(sealed_detail, forKey: .sealed_detail)
            try container.encodeIfPresent(detail_erased, forKey: .detail_erased)
            try container.encode(previous_hash, forKey: .previous_hash)
            try container.encode(hash, forKey: .hash)
        }
    }
}

/// The head of the audit chain as the database holds it.
package struct AuditHead: Hashable, Sendable {
    /// The last entry's id (entries are numbered 1, 2, 3, … without gaps).
    package var lastID: Int64
    /// The last entry's seal (or hash, before the chain was keyed).
    package var lastHash: String
    /// The first entry sealed with the audit key.
    package var keyedFrom: Int64
    /// The fingerprint of the key the log is sealed with; `nil` until a keyed storage opened it.
    package var keyFingerprint: String?
    /// The head's own seal.
    package var seal: String?
    /// The first entry whose detail may be encrypted (``AuditDetails``): entries before it were
    /// written before the upgrade and keep their details in clear. `nil` before the upgrade.
    package var detailsFrom: Int64?
    /// Where the entries still in the database start; `nil` when none was archived.
    package var base: AuditBase?

    package init(
        lastID: Int64, lastHash: String, keyedFrom: Int64, keyFingerprint: String?, seal: String?, detailsFrom: Int64? = nil,
        base: AuditBase? = nil
    ) {
        self.lastID = lastID
        self.lastHash = lastHash
        self.keyedFrom = keyedFrom
        self.keyFingerprint = keyFingerprint
        self.seal = seal
        self.detailsFrom = detailsFrom
        self.base = base
    }
}

/// The last archived entry (`audit archive`): its id and seal, sealed under the audit key in a
/// domain of its own. Verification of the database starts from it.
package struct AuditBase: Hashable, Sendable {
    /// The last archived entry's id; 0 for the genesis (nothing archived).
    package var lastID: Int64
    /// The last archived entry's seal (hash); ``AuditChain/genesis`` for the genesis.
    package var lastHash: String
    /// The base's own seal, over `lastID`, `lastHash` and the head's `keyedFrom`.
    package var seal: String

    package init(lastID: Int64, lastHash: String, seal: String) {
        self.lastID = lastID
        self.lastHash = lastHash
        self.seal = seal
    }

    /// The base sealed with `key`.
    static func sealed(lastID: Int64, lastHash: String, keyedFrom: Int64, key: AuditKey) -> AuditBase {
        AuditBase(lastID: lastID, lastHash: lastHash, seal: AuditChain.seal(baseID: lastID, baseHash: lastHash, keyedFrom: keyedFrom, key: key))
    }
}

/// A sealed head exported outside the database: kept elsewhere, it proves how long the log was.
public struct AuditCheckpoint: Codable, Hashable, Sendable {
    /// The id of the last entry the checkpoint covers.
    public var lastID: Int64
    /// That entry's hash.
    public var lastHash: String
    /// The first entry id sealed with the audit key (those before are only hash-chained).
    public var keyedFrom: Int64
    /// The keyed seal over the three values above.
    public var seal: String

    /// A checkpoint from its parts, as an audit export's last line holds them.
    public init(lastID: Int64, lastHash: String, keyedFrom: Int64, seal: String) {
        self.lastID = lastID
        self.lastHash = lastHash
        self.keyedFrom = keyedFrom
        self.seal = seal
    }

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
        return data.split(separator: UInt8(ascii: "\n")).reversed().lazy.compactMap { try? decoder.decode(Line.self, from: Data($0)).checkpoint }
            .first
    }
}
