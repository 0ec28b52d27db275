public import ContractRuntime
package import Foundation

/// `GET /sync/v1/pull?scope=…&cursor=…&limit=…`: one page of changes in a scope.
public struct PullResponse: Codable, Sendable, Hashable {
    /// Where the next page starts; store it with the page, in the same transaction.
    public var cursor: String
    /// Whether more pages follow; pull again with ``cursor`` until it is `false`.
    public var hasMore: Bool
    /// Rows written since the cursor, latest state only, per contract name, shaped for the
    /// device's schema version. Entity rows also carry `_server_version` (the row's server
    /// version, sent back as `base_version` under `version_check`). When the device asked for
    /// changed fields only (`fields=changed`), an entity row it holds as of the cursor may carry
    /// only its primary key, the fields changed since, `_server_version` and `_base_version`
    /// (the row's server version at the cursor): merged into the device's copy, never stored
    /// as a whole row.
    public var upserts: [String: [JSONValue]]
    /// Primary keys of rows deleted since the cursor, per contract name.
    public var deletes: [String: [String]]
    /// The last of this device's pushes (`seq`) the server has done.
    public var lastSeq: Int64

    /// A page from its parts.
    public init(cursor: String, hasMore: Bool, upserts: [String: [JSONValue]], deletes: [String: [String]], lastSeq: Int64) {
        self.cursor = cursor
        self.hasMore = hasMore
        self.upserts = upserts
        self.deletes = deletes
        self.lastSeq = lastSeq
    }

    enum CodingKeys: String, CodingKey {
        case cursor
        case hasMore = "has_more"
        case upserts
        case deletes
        case lastSeq = "last_seq"
    }
}

/// The position in a scope's change sequence. Opaque to devices: they store and send back the
/// text; the server encodes the format version so it can change the inside later.
public struct SyncCursor: Hashable, Sendable {
    /// The version of the cursor's inside, written in every cursor.
    public static let formatVersion = 1

    /// The scope key the cursor belongs to (`progress:user:u-1`).
    public var scopeKey: String
    /// The scope's Lamport sequence number of the last change the device has.
    public var sequence: Int64
    /// The scope's compacted sequence (deletes removed past the server's tombstone horizon) when
    /// the cursor was issued: a cursor below the compacted sequence is still good if no
    /// compaction ran since (a pull from scratch pages through old rows), and expired if one did.
    /// Written only when above 0, so cursors of scopes never compacted keep their text.
    public var horizon: Int64

    /// A cursor at a sequence of a scope.
    public init(scopeKey: String, sequence: Int64, horizon: Int64 = 0) {
        self.scopeKey = scopeKey
        self.sequence = sequence
        self.horizon = horizon
    }

    /// Errors reading a cursor sent by a device.
    public enum DecodingFailure: Error, Hashable, Sendable {
        case malformed
        case unsupportedVersion(Int)
    }

    /// Base64url text of `{"v":1,"k":"<scope key>","s":<sequence>}` (with `"h":<horizon>` when
    /// above 0).
    public var encoded: String {
        var fields: [String: JSONValue] = ["v": .int(Int64(Self.formatVersion)), "k": .string(scopeKey), "s": .int(sequence)]
        if horizon > 0 { fields["h"] = .int(horizon) }
        let json = CanonicalJSON.text(.object(fields))
        return Data(json.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// Reads a cursor a device sent; throws when it is not one this server wrote.
    public init(encoded text: String) throws(DecodingFailure) {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard text.count <= 1024, let data = Data(base64Encoded: base64),
            let value = try? JSONDecoder().decode(JSONValue.self, from: data), case .object(let fields) = value,
            case .int(let version)? = fields["v"]
        else { throw .malformed }
        guard version == Int64(Self.formatVersion) else { throw .unsupportedVersion(Int(version)) }
        guard case .string(let key)? = fields["k"], case .int(let sequence)? = fields["s"], sequence >= 0 else {
            throw .malformed
        }
        var horizon: Int64 = 0
        if let field = fields["h"] {
            guard case .int(let value) = field, value >= 0 else { throw .malformed }
            horizon = value
        }
        self.init(scopeKey: key, sequence: sequence, horizon: horizon)
    }
}

extension PullResponse {
    /// Why a body is not a pull page.
    package struct JSONFailure: Error, Hashable, Sendable, CustomStringConvertible {
        package var description: String
    }

    /// Reads a pull page from its JSON body in one pass over the bytes (``JSONParser``): the
    /// same value, and the same refusals, as `JSONDecoder` with the `Decodable` conformance,
    /// which decodes each row value by trying every JSON type in turn and throwing away an
    /// error at each miss (most of a device's time on a page of 1 000 rows).
    package init(json data: Data) throws(JSONFailure) {
        guard case .object(let page)? = JSONParser.parse(data) else {
            throw JSONFailure(description: "the body is not a JSON object")
        }
        func member(_ key: CodingKeys) throws(JSONFailure) -> JSONValue {
            guard let value = page[key.rawValue] else { throw JSONFailure(description: "'\(key.rawValue)' is missing") }
            return value
        }
        func wrong(_ key: CodingKeys, _ expected: String) -> JSONFailure {
            JSONFailure(description: "'\(key.rawValue)' must be \(expected)")
        }
        guard case .string(let cursor) = try member(.cursor) else { throw wrong(.cursor, "text") }
        guard case .bool(let hasMore) = try member(.hasMore) else { throw wrong(.hasMore, "true or false") }
        guard case .int(let lastSeq) = try member(.lastSeq) else { throw wrong(.lastSeq, "a whole number") }
        guard case .object(let upsertMembers) = try member(.upserts) else { throw wrong(.upserts, "an object of arrays") }
        var upserts: [String: [JSONValue]] = [:]
        upserts.reserveCapacity(upsertMembers.count)
        for (contract, rows) in upsertMembers {
            guard case .array(let rows) = rows else { throw wrong(.upserts, "an object of arrays") }
            upserts[contract] = rows
        }
        guard case .object(let deleteMembers) = try member(.deletes) else { throw wrong(.deletes, "an object of arrays of text") }
        var deletes: [String: [String]] = [:]
        for (contract, ids) in deleteMembers {
            guard case .array(let ids) = ids else { throw wrong(.deletes, "an object of arrays of text") }
            var texts: [String] = []
            texts.reserveCapacity(ids.count)
            for id in ids {
                guard case .string(let text) = id else { throw wrong(.deletes, "an object of arrays of text") }
                texts.append(text)
            }
            deletes[contract] = texts
        }
        self.init(cursor: cursor, hasMore: hasMore, upserts: upserts, deletes: deletes, lastSeq: lastSeq)
    }
}

extension PullResponse {
    /// Rows the page carries: upserts and deletes.
    public var rowCount: Int {
        upserts.values.reduce(0) { $0 + $1.count } + deletes.values.reduce(0) { $0 + $1.count }
    }
}
