import Foundation

/// The audit log's hash chain: each entry's hash covers its content and the previous entry's
/// hash, so editing, removing or reordering any entry breaks every hash after it.
public enum AuditChain {
    /// The `previousHash` of the first entry.
    public static let genesis = String(repeating: "0", count: 64)

    /// SHA-256 (hex) over the previous hash and the entry's fields, newline separated.
    public static func hash(of entry: AuditEntry, previousHash: String) -> String {
        let text = [
            previousHash, String(entry.id), entry.tenant, String(entry.recordedAt), entry.userID, entry.deviceID,
            entry.entity, entry.rowID, entry.operation, entry.outcome, entry.detail,
        ].joined(separator: "\n")
        return Hex.sha256(Data(text.utf8))
    }

    /// The result of verifying a log.
    public enum Verification: Hashable, Sendable {
        case intact(entries: Int)
        /// The first entry whose link does not hold, and why.
        case broken(entryID: Int64, reason: String)
    }

    /// Recomputes the chain over every entry, in pages.
    public static func verify(_ storage: any SyncStorage, pageSize: Int = 1000) async throws -> Verification {
        var previous = genesis
        var lastID: Int64 = 0
        var count = 0
        while true {
            let after = lastID
            let page = try await storage.read { reader in try await reader.auditEntries(after: after, limit: pageSize) }
            if page.isEmpty { return .intact(entries: count) }
            for entry in page {
                if entry.previousHash != previous {
                    return .broken(entryID: entry.id, reason: "its previous-hash does not match the entry before it")
                }
                if hash(of: entry, previousHash: previous) != entry.hash {
                    return .broken(entryID: entry.id, reason: "its content does not match its hash")
                }
                previous = entry.hash
                lastID = entry.id
                count += 1
            }
        }
    }
}
