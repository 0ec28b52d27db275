import Contracts
import SyncProtocol
import Foundation
import GRDB

/// Converts between a field's wire form (JSON) and its SQLite column value, following the
/// field's contract type — the client's counterpart of the server's `RowCodec`, with the same
/// storage rules so both sides agree:
///
/// | kind | wire | column |
/// | --- | --- | --- |
/// | `id`, `string`, `date`, enum | text | TEXT |
/// | `uuid` | text | TEXT, lowercased |
/// | `int` | integer | INTEGER |
/// | `double` | number | REAL |
/// | `bool` | `true`/`false` | INTEGER 0/1 |
/// | `timestamp` | ISO-8601 text | INTEGER milliseconds |
/// | `json`, `list<T>` | any / array | TEXT, canonical JSON |
/// | `bytes` | base64 text | BLOB |
/// | `ref<E>` | as `E`'s primary key | as `E`'s primary key |
///
/// Encrypted fields are sealed on top of this by ``RowCodec``; this type never sees them sealed.
enum ColumnCodec {
    /// How strictly values are checked.
    enum Mode {
        /// Writes made on this device: every rule of the contract (enum values, `max_length`,
        /// required fields).
        case local
        /// Rows from the server: an unknown enum value becomes the contract's fallback, the
        /// way the generated types decode it; lengths are the server's business.
        case server
        /// Values of a query filter: converted like stored values, never refused for length or
        /// enum values (a filter on a value nothing has matches nothing).
        case query
    }

    struct Failure: Error {
        var reason: String
    }

    /// The column value of a field's wire value.
    static func columnValue(_ value: JSONValue, for field: FieldDescriptor, mode: Mode) throws(Failure) -> DatabaseValue {
        if case .null = value {
            guard field.isOptional else { throw Failure(reason: "is required") }
            return .null
        }
        return try columnValue(value, kind: field.kind, field: field, mode: mode)
    }

    private static func columnValue(
        _ value: JSONValue, kind: FieldKind, field: FieldDescriptor, mode: Mode
    ) throws(Failure) -> DatabaseValue {
        switch kind {
        case .id, .string:
            guard case .string(let text) = value else { throw Failure(reason: "must be text") }
            if mode == .local, let limit = field.maxLength, text.count > limit {
                throw Failure(reason: "is longer than \(limit) characters")
            }
            return text.databaseValue
        case .int:
            switch value {
            case .int(let number): return number.databaseValue
            case .double(let number) where number == number.rounded() && abs(number) < 9.0e15:
                return Int64(number).databaseValue
            default: throw Failure(reason: "must be a whole number")
            }
        case .double:
            switch value {
            case .int(let number): return Double(number).databaseValue
            case .double(let number): return number.databaseValue
            default: throw Failure(reason: "must be a number")
            }
        case .bool:
            guard case .bool(let flag) = value else { throw Failure(reason: "must be true or false") }
            return (flag ? 1 as Int64 : 0).databaseValue
        case .timestamp:
            guard case .string(let text) = value, let timestamp = Timestamp(iso8601: text) else {
                throw Failure(reason: "must be an ISO-8601 timestamp such as 2026-01-31T08:00:00.000Z")
            }
            return timestamp.millisecondsSince1970.databaseValue
        case .date:
            guard case .string(let text) = value, let date = CalendarDate(text) else {
                throw Failure(reason: "must be a date such as 2026-01-31")
            }
            return date.description.databaseValue
        case .uuid:
            guard case .string(let text) = value, let uuid = normalizedUUID(text) else { throw Failure(reason: "must be a UUID") }
            return uuid.databaseValue
        case .json:
            return CanonicalJSON.text(value).databaseValue
        case .bytes:
            guard case .string(let text) = value, let data = Data(base64Encoded: text) else {
                throw Failure(reason: "must be base64 text")
            }
            if mode == .local, let limit = field.maxLength, data.count > limit {
                throw Failure(reason: "is longer than \(limit) bytes")
            }
            return data.databaseValue
        case .enumeration(let values, let fallback):
            guard case .string(let text) = value else { throw Failure(reason: "must be one of \(values.joined(separator: ", "))") }
            if values.contains(text) || mode == .query { return text.databaseValue }
            if mode == .server, let fallback { return fallback.databaseValue }
            throw Failure(reason: "must be one of \(values.joined(separator: ", "))")
        case .list(let element):
            guard case .array(let items) = value else { throw Failure(reason: "must be a list") }
            if mode == .local, let limit = field.maxLength, items.count > limit {
                throw Failure(reason: "has more than \(limit) items")
            }
            var normalized: [JSONValue] = []
            normalized.reserveCapacity(items.count)
            for item in items {
                guard item != .null else { throw Failure(reason: "must not contain null") }
                let stored = try columnValue(item, kind: element, field: field, mode: mode)
                normalized.append(wireValue(stored, kind: element))
            }
            return CanonicalJSON.text(.array(normalized)).databaseValue
        case .ref(let target):
            return try columnValue(value, kind: primaryKeyKind(of: target), field: field, mode: mode)
        }
    }

    /// The wire value of a stored column.
    static func wireValue(_ value: DatabaseValue, for field: FieldDescriptor) -> JSONValue {
        wireValue(value, kind: field.kind)
    }

    static func wireValue(_ value: DatabaseValue, kind: FieldKind) -> JSONValue {
        switch (kind, value.storage) {
        case (_, .null): return .null
        case (.int, .int64(let number)): return .int(number)
        case (.int, .double(let number)): return .int(Int64(number))
        case (.double, .double(let number)): return .double(number)
        case (.double, .int64(let number)): return .double(Double(number))
        case (.bool, .int64(let number)): return .bool(number != 0)
        case (.timestamp, .int64(let millis)): return .string(Timestamp(millisecondsSince1970: millis).iso8601)
        case (.json, .string(let text)), (.list, .string(let text)): return StoredJSON.parse(text) ?? .null
        case (.bytes, .blob(let data)): return .string(data.base64EncodedString())
        case (.ref(let target), _): return wireValue(value, kind: primaryKeyKind(of: target))
        case (_, .string(let text)): return .string(text)
        case (_, .int64(let number)): return .int(number)
        case (_, .double(let number)): return .double(number)
        case (_, .blob(let data)): return .string(data.base64EncodedString())
        }
    }

    /// The kind of an entity's primary key (`id` when the entity is unknown).
    static func primaryKeyKind(of entity: String) -> FieldKind {
        primaryKeyKinds[entity] ?? .id
    }

    /// Every entity's primary-key kind, by name: `ref` fields look theirs up for every row.
    private static let primaryKeyKinds = Dictionary(
        ContractRegistry.entities.map { entity in (entity.name, entity.fields.first { $0.name == entity.primaryKey }?.kind ?? .id) },
        uniquingKeysWith: { first, _ in first }
    )

    /// A UUID's text in the stored form (lowercase, hyphenated), or `nil` when it is not a UUID.
    /// Text already in that form (what servers send) is taken as it is, without parsing it into
    /// a `UUID` and printing it again.
    static func normalizedUUID(_ text: String) -> String? {
        var text = text
        let canonical = text.withUTF8 { bytes in
            guard bytes.count == 36 else { return false }
            for (index, byte) in bytes.enumerated() {
                switch index {
                case 8, 13, 18, 23: guard byte == UInt8(ascii: "-") else { return false }
                default: guard (0x30...0x39).contains(byte) || (0x61...0x66).contains(byte) else { return false }
                }
            }
            return true
        }
        if canonical { return text }
        return UUID(uuidString: text)?.uuidString.lowercased()
    }

    /// Parses any JSON text, fragments included.
    static func parseJSON(_ data: Data) -> JSONValue? {
        StoredJSON.parse(String(decoding: data, as: UTF8.self))
    }

    /// The text form of a primary key (ids as they are, UUIDs lowercased, integers in decimal),
    /// the same as the generated `contractPrimaryKey`.
    static func keyText(_ value: JSONValue, kind: FieldKind) -> String? {
        switch (kind, value) {
        case (.uuid, .string(let text)): return normalizedUUID(text) ?? text
        case (.ref(let target), _): return keyText(value, kind: primaryKeyKind(of: target))
        case (_, .string(let text)): return text
        case (_, .int(let number)): return String(number)
        default: return nil
        }
    }
}
