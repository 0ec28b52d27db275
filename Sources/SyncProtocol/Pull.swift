public import Contracts
import Foundation

/// `GET /sync/v1/pull?scope=…&cursor=…&limit=…`: one page of changes in a scope.
public struct PullResponse: Codable, Sendable, Hashable {
    /// Where the next page starts; store it with the page, in the same transaction.
    public var cursor: String
    public var hasMore: Bool
    /// Rows written since the cursor, latest state only, per contract name, shaped for the
    /// device's schema version. Entity rows also carry `_server_version` (the row's server
    /// version, sent back as `base_version` under `version_check`).
    public var upserts: [String: [JSONValue]]
    /// Primary keys of rows deleted since the cursor, per contract name.
    public var deletes: [String: [String]]
    /// The last of this device's pushes (`seq`) the server has done.
    public var lastSeq: Int64

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
    public static let formatVersion = 1

    /// The scope key the cursor belongs to (`progress:user:u-1`).
    public var scopeKey: String
    /// The scope's Lamport sequence number of the last change the device has.
    public var sequence: Int64

    public init(scopeKey: String, sequence: Int64) {
        self.scopeKey = scopeKey
        self.sequence = sequence
    }

    /// Errors reading a cursor sent by a device.
    public enum DecodingFailure: Error, Hashable, Sendable {
        case malformed
        case unsupportedVersion(Int)
    }

    /// Base64url text of `{"v":1,"k":"<scope key>","s":<sequence>}`.
    public var encoded: String {
        let json = CanonicalJSON.text(.object([
            "v": .int(Int64(Self.formatVersion)), "k": .string(scopeKey), "s": .int(sequence),
        ]))
        return Data(json.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

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
        self.init(scopeKey: key, sequence: sequence)
    }
}
