import ContractRuntime
import Crypto
import Foundation
import SyncServer

/// How a contract's rows become xAPI 1.0.3 statements for a learning record store (LRS): the
/// mapping of the `xapi` sink kind (``XAPISinkKind``).
///
/// The contract needs the fields `verb` (an ADL verb's name: `completed`, `passed`…), `object_id`
/// (what the statement is about) and `stated_at` (a timestamp, when it happened); it may have
/// `score` (a number), `success` (bool), `duration_ms` (int), `attempt_id` and `result` (json).
/// The sample's `Statement` contract has them all. Each row becomes:
///
/// | xAPI | from |
/// | --- | --- |
/// | `id` | a name-based UUID (version 5) of tenant, contract and row id: the same row is the same statement, which an LRS deduplicates |
/// | `actor` | an `Agent` with `account` `{homePage: <sink's home page>, name: <user id>}` |
/// | `verb` | `http://adlnet.gov/expapi/verbs/<verb>`, `display` `{"en-US": <verb>}` |
/// | `object` | an `Activity` whose `id` is `<activity base><object_id>` |
/// | `result` | `score.scaled` (a score from -1 to 1; `score.raw` otherwise), `success`, `completion` (true for `completed` and `passed`), `duration` (ISO 8601, from `duration_ms`), the `result` json as the extension `urn:outpost:xapi:result` |
/// | `context` | `platform` `Outpost`; `attempt_id` as the extension `urn:outpost:xapi:attempt` |
/// | `timestamp` | `stated_at` |
/// | `stored` | when the server recorded the row |
/// | `version` | `1.0.3` |
enum XAPIStatements {
    /// The fields a contract needs to be mapped.
    static let requiredFields = ["verb", "object_id", "stated_at"]
    static let resultExtension = "urn:outpost:xapi:result"
    static let attemptExtension = "urn:outpost:xapi:attempt"

    /// Why `entity` cannot be mapped, or `nil` when it can.
    static func problem(with entity: EntityDescriptor) -> String? {
        let names = Set(entity.fields.map(\.name))
        let missing = requiredFields.filter { !names.contains($0) }
        guard missing.isEmpty else {
            return "the contract \(entity.name) lacks the field(s) \(missing.joined(separator: ", ")) an xAPI statement is made of"
        }
        return nil
    }

    /// The statement of a change the feed delivered (``ChangeFeed``); `nil` for a change that is
    /// not a created row of `contract` (statements are immutable: a deletion is not forwarded).
    static func statement(of change: JSONValue, tenant: String, contract: String, homePage: String, activityBase: String) -> JSONValue? {
        guard case .object(let change) = change, change["contract"] == .string(contract), change["operation"] == .string("create"),
            case .object(let row)? = change["row"],
            case .string(let rowID)? = change["id"], case .string(let verb)? = row["verb"], case .string(let objectID)? = row["object_id"],
            let timestamp = timestamp(row["stated_at"]), case .string(let userID)? = change["user_id"]
        else { return nil }
        var result: [String: JSONValue] = [:]
        if let score = number(row["score"]) {
            result["score"] = .object([(-1...1).contains(score) ? "scaled" : "raw": .double(score)])
        }
        if case .bool(let success)? = row["success"] { result["success"] = .bool(success) }
        if verb == "completed" || verb == "passed" { result["completion"] = .bool(true) }
        if let milliseconds = number(row["duration_ms"]), milliseconds >= 0 { result["duration"] = .string(duration(milliseconds: milliseconds)) }
        if let details = row["result"], details != .null { result["extensions"] = .object([resultExtension: details]) }
        var context: [String: JSONValue] = ["platform": .string("Outpost")]
        if case .string(let attempt)? = row["attempt_id"] { context["extensions"] = .object([attemptExtension: .string(attempt)]) }
        var statement: [String: JSONValue] = [
            "id": .string(uuid(name: "\(tenant)\u{0}\(contract)\u{0}\(rowID)")),
            "actor": .object(["objectType": .string("Agent"), "account": .object(["homePage": .string(homePage), "name": .string(userID)])]),
            "verb": .object([
                "id": .string("http://adlnet.gov/expapi/verbs/\(verb)"), "display": .object(["en-US": .string(verb)]),
            ]),
            "object": .object(["objectType": .string("Activity"), "id": .string(activityBase + percentEncoded(objectID))]),
            "context": .object(context),
            "timestamp": .string(timestamp),
            "version": .string("1.0.3"),
        ]
        if !result.isEmpty { statement["result"] = .object(result) }
        if case .string(let stored)? = change["recorded_at"] { statement["stored"] = .string(stored) }
        return .object(statement)
    }

    private static func number(_ value: JSONValue?) -> Double? {
        switch value {
        case .int(let number)?: Double(number)
        case .double(let number)?: number
        default: nil
        }
    }

    private static func timestamp(_ value: JSONValue?) -> String? {
        switch value {
        case .string(let text)?: Timestamp(iso8601: text)?.iso8601
        case .int(let milliseconds)?: Timestamp(millisecondsSince1970: milliseconds).iso8601
        default: nil
        }
    }

    /// ISO 8601 duration with up to millisecond precision: `PT90.5S`.
    static func duration(milliseconds: Double) -> String {
        let millis = Int64(milliseconds.rounded())
        let (seconds, fraction) = (millis / 1000, millis % 1000)
        if fraction == 0 { return "PT\(seconds)S" }
        var text = String(format: "%03lld", fraction)
        while text.hasSuffix("0") { text.removeLast() }
        return "PT\(seconds).\(text)S"
    }

    private static func percentEncoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? text
    }

    /// A name-based UUID (RFC 9562 version 5: SHA-1 of a namespace and the name).
    static func uuid(name: String) -> String {
        // The namespace of Outpost's statements (a fixed random UUID).
        let namespace: [UInt8] = [0x6f, 0x1c, 0x2a, 0x0e, 0x53, 0x9b, 0x4c, 0x8d, 0x9a, 0x51, 0x0b, 0x7e, 0x2f, 0x44, 0x6d, 0x13]
        var hash = Insecure.SHA1()
        hash.update(data: namespace)
        hash.update(data: Data(name.utf8))
        var bytes = Array(hash.finalize().prefix(16))
        bytes[6] = (bytes[6] & 0x0f) | 0x50
        bytes[8] = (bytes[8] & 0x3f) | 0x80
        let hex = Hex.string(bytes)
        let parts = [hex.prefix(8), hex.dropFirst(8).prefix(4), hex.dropFirst(12).prefix(4), hex.dropFirst(16).prefix(4), hex.dropFirst(20)]
        return parts.joined(separator: "-")
    }
}
