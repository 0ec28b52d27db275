import ContractRuntime
import Crypto

/// How a PostgreSQL commit tells every server process which scopes it moved: `NOTIFY` on one
/// channel per schema, payloads of JSON arrays `[[tenant, scope key, sequence], …]`, each under
/// PostgreSQL's 8 000-byte payload limit (a commit that moved many scopes sends several).
enum CommitNotification {
    static let maximumPayloadBytes = 7_900

    /// The channel of the tables in `schema` (`nil`: the default schema). Notifications are
    /// database-wide, so each schema (each deployment sharing a database) has its own; a hash
    /// keeps the name a short identifier whatever the schema's length.
    static func channel(schema: String?) -> String {
        let digest = SHA256.hash(data: Array((schema ?? "").utf8))
        return "outpost_changes_" + Hex.string(digest.prefix(8))
    }

    static func payloads(_ changes: [ScopeChange]) -> [String] {
        var payloads: [String] = []
        var current: [JSONValue] = []
        var size = 2
        for change in changes {
            let item = JSONValue.array([.string(change.tenant), .string(change.scopeKey), .int(change.sequence)])
            let itemSize = CanonicalJSON.bytes(item).count + 1
            // A scope key this long is no key a contract makes; its devices learn of the change
            // when they sync, rather than the commit failing on PostgreSQL's payload limit.
            if itemSize + 2 > maximumPayloadBytes { continue }
            if !current.isEmpty, size + itemSize > maximumPayloadBytes {
                payloads.append(CanonicalJSON.text(.array(current)))
                current = []
                size = 2
            }
            current.append(item)
            size += itemSize
        }
        if !current.isEmpty { payloads.append(CanonicalJSON.text(.array(current))) }
        return payloads
    }

    /// The changes of one payload; a payload this version cannot read gives none (it was not
    /// written by a server of this protocol).
    static func changes(in payload: String) -> [ScopeChange] {
        guard case .array(let items)? = JSONParser.parse(payload) else { return [] }
        return items.compactMap { item in
            guard case .array(let parts) = item, parts.count == 3, case .string(let tenant) = parts[0],
                case .string(let scopeKey) = parts[1], case .int(let sequence) = parts[2]
            else { return nil }
            return ScopeChange(tenant: tenant, scopeKey: scopeKey, sequence: sequence)
        }
    }
}
