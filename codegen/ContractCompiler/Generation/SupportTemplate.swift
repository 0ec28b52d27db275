/// The hand-designed runtime types every generated file relies on. The compiler writes them
/// into `Sources/Contracts/ContractSupport.swift` so the whole folder is generated output.
enum SupportTemplate {
    static let text = #"""
public import Foundation
import Crypto

// MARK: - Values

/// A point in time with millisecond precision: ISO-8601 text on the wire
/// (`2026-01-31T08:00:00.000Z`), integer milliseconds since 1970 in SQLite.
public struct Timestamp: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    public var millisecondsSince1970: Int64

    public init(millisecondsSince1970: Int64) {
        self.millisecondsSince1970 = millisecondsSince1970
    }

    /// The timestamp of a `Date`, truncated to the millisecond.
    public init(_ date: Date) {
        self.millisecondsSince1970 = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
    }

    /// The current time of the device's clock.
    public static func now() -> Timestamp { Timestamp(Date()) }

    public var date: Date { Date(timeIntervalSince1970: Double(millisecondsSince1970) / 1000) }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; fractions beyond milliseconds are truncated.
    public init?(iso8601 text: String) {
        let bytes = Array(text.utf8)
        func digits(_ start: Int, _ count: Int) -> Int? {
            guard start + count <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[start..<(start + count)] {
                guard (48...57).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            return value
        }
        guard bytes.count >= 20, bytes[4] == 45, bytes[7] == 45, bytes[10] == 84 || bytes[10] == 116,
            bytes[13] == 58, bytes[16] == 58,
            let year = digits(0, 4), let month = digits(5, 2), let day = digits(8, 2),
            let hour = digits(11, 2), let minute = digits(14, 2), let second = digits(17, 2),
            CalendarDate.isValid(year: year, month: month, day: day), hour < 24, minute < 60, second < 61
        else { return nil }
        var index = 19
        var millis = 0
        if bytes[index] == 46 {
            index += 1
            var scale = 100
            let start = index
            while index < bytes.count, (48...57).contains(bytes[index]) {
                millis += Int(bytes[index] - 48) * scale
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }
        guard index < bytes.count else { return nil }
        var offsetSeconds = 0
        if bytes[index] == 90 || bytes[index] == 122 {
            index += 1
        } else if bytes[index] == 43 || bytes[index] == 45, let hours = digits(index + 1, 2),
            index + 3 < bytes.count, bytes[index + 3] == 58, let minutes = digits(index + 4, 2),
            hours < 24, minutes < 60
        {
            offsetSeconds = (hours * 3600 + minutes * 60) * (bytes[index] == 43 ? 1 : -1)
            index += 6
        } else {
            return nil
        }
        guard index == bytes.count else { return nil }
        let days = CalendarDate(year: year, month: month, day: day).daysSince1970
        let seconds = ((days * 24 + hour) * 60 + minute) * 60 + min(second, 59) - offsetSeconds
        self.millisecondsSince1970 = Int64(seconds) * 1000 + Int64(millis)
    }

    /// `2026-01-31T08:00:00.000Z`, always UTC with three fraction digits.
    public var iso8601: String {
        // Floor division that cannot overflow, so every Int64 formats (far dates included).
        func floorDivision(_ value: Int64, _ divisor: Int64) -> (quotient: Int64, remainder: Int64) {
            let (quotient, remainder) = value.quotientAndRemainder(dividingBy: divisor)
            return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
        }
        let (seconds, fraction64) = floorDivision(millisecondsSince1970, 1000)
        let (days, secondOfDay64) = floorDivision(seconds, 86_400)
        let fraction = Int(fraction64)
        let secondOfDay = Int(secondOfDay64)
        let date = CalendarDate(daysSince1970: Int(days))
        func pad(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return pad(date.year, 4) + "-" + pad(date.month, 2) + "-" + pad(date.day, 2) + "T"
            + pad(secondOfDay / 3600, 2) + ":" + pad(secondOfDay / 60 % 60, 2) + ":" + pad(secondOfDay % 60, 2)
            + "." + pad(fraction, 3) + "Z"
    }

    public var description: String { iso8601 }

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        lhs.millisecondsSince1970 < rhs.millisecondsSince1970
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let value = Timestamp(iso8601: text) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "expected an ISO-8601 timestamp such as 2026-01-31T08:00:00.000Z"
            )
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(iso8601)
    }
}

/// A calendar day without a time or time zone: `YYYY-MM-DD` on the wire and in SQLite.
public struct CalendarDate: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    public var year: Int
    public var month: Int
    public var day: Int

    public init(year: Int, month: Int, day: Int) {
        self.year = year
        self.month = month
        self.day = day
    }

    /// Parses `YYYY-MM-DD` (ASCII digits only); `nil` for anything else or a day that does not exist.
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count == 10, bytes[4] == 45, bytes[7] == 45 else { return nil }
        var values: [Int] = []
        for range in [0..<4, 5..<7, 8..<10] {
            var value = 0
            for byte in bytes[range] {
                guard (48...57).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            values.append(value)
        }
        guard Self.isValid(year: values[0], month: values[1], day: values[2]) else { return nil }
        self.init(year: values[0], month: values[1], day: values[2])
    }

    static func isValid(year: Int, month: Int, day: Int) -> Bool {
        guard (1...12).contains(month), day >= 1 else { return false }
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
        let lengths = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        return day <= lengths[month - 1]
    }

    /// Days since 1970-01-01 (proleptic Gregorian calendar).
    public var daysSince1970: Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    public init(daysSince1970: Int) {
        let z = daysSince1970 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        self.init(year: yoe + era * 400 + (month <= 2 ? 1 : 0), month: month, day: day)
    }

    public var description: String {
        func pad(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2)
    }

    public static func < (lhs: CalendarDate, rhs: CalendarDate) -> Bool {
        (lhs.year, lhs.month, lhs.day) < (rhs.year, rhs.month, rhs.day)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let value = CalendarDate(text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "expected a date such as 2026-01-31")
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// Any JSON document, for `json` fields.
public enum JSONValue: Hashable, Sendable, Codable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    /// The JSON form of any `Encodable` value (a field value, a DTO).
    public init<Value: Encodable>(encoding value: Value) throws {
        self = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(value))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}

/// One JSON text per value, the same on every platform: object keys sorted by their UTF-8
/// bytes, no insignificant whitespace, integers in decimal, other numbers in Swift's shortest
/// round-trip form, `/` and non-ASCII characters unescaped.
///
/// `JSONEncoder`'s `.sortedKeys` is not enough: its order differs between Apple platforms and
/// Linux, so a hash computed on a device would not match the server's.
public enum CanonicalJSON {
    /// The canonical JSON text of any `Encodable` value.
    public static func encode<Value: Encodable>(_ value: Value) throws -> Data {
        let tree = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(value))
        return Data(text(tree).utf8)
    }

    /// The canonical JSON text of a JSON value.
    public static func text(_ value: JSONValue) -> String {
        var output: [UInt8] = []
        output.reserveCapacity(256)
        write(value, into: &output)
        return String(decoding: output, as: UTF8.self)
    }

    // Bytes, not `String` appends: servers canonicalize every stored result and audit entry.
    private static func write(_ value: JSONValue, into output: inout [UInt8]) {
        switch value {
        case .null: output.append(contentsOf: "null".utf8)
        case .bool(let flag): output.append(contentsOf: (flag ? "true" : "false").utf8)
        case .int(let number): output.append(contentsOf: String(number).utf8)
        case .double(let number):
            if number == number.rounded(), abs(number) < 9.0e15 {
                output.append(contentsOf: String(Int64(number)).utf8)
            } else {
                output.append(contentsOf: number.description.utf8)
            }
        case .string(let text): writeString(text, into: &output)
        case .array(let items):
            output.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                write(item, into: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            let keys = members.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            for (index, key) in keys.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                writeString(key, into: &output)
                output.append(UInt8(ascii: ":"))
                write(members[key]!, into: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    private static func writeString(_ text: String, into output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case UInt8(ascii: "\n"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case UInt8(ascii: "\r"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case UInt8(ascii: "\t"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                output.append(contentsOf: "\\u00".utf8)
                output.append(hexDigits[Int(byte >> 4)])
                output.append(hexDigits[Int(byte & 0x0F)])
            default:
                // Non-ASCII stays as its UTF-8 bytes: canonical form does not escape it.
                output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }
}

// MARK: - Contracts

/// A generated entity: a row that syncs between devices and the server.
public protocol ContractEntity: Codable, Sendable, Hashable {
    /// The contract the type was generated from.
    static var descriptor: EntityDescriptor { get }
    /// The primary key as text (ids as they are, UUIDs lowercased, integers in decimal).
    var contractPrimaryKey: String { get }
}

/// A generated event: an immutable fact recorded on a device.
public protocol ContractEvent: Codable, Sendable, Hashable {
    /// The contract the type was generated from.
    static var descriptor: EventDescriptor { get }
}

/// Errors raised by the generated support code.
public enum ContractError: Error, Hashable, Sendable {
    /// An envelope's `type` names another event than its payload's.
    case eventTypeMismatch(expected: String, found: String)
}

/// The wrapper every event travels in: who recorded it, when, and a hash of its payload.
public struct EventEnvelope<Payload: ContractEvent>: Codable, Sendable, Hashable {
    /// A ULID made on the device; the event's identity and idempotency key.
    public var eventId: String
    /// The event contract's name, for example `AnswerRecorded`.
    public var type: String
    /// The event contract's version the device wrote.
    public var schemaVersion: Int
    public var userId: String
    public var deviceId: String
    /// When it happened, by the device's clock.
    public var occurredAt: Timestamp
    /// When the server stored it, by the server's clock; `nil` until then.
    public var recordedAt: Timestamp?
    /// SHA-256 (hex) of the canonical payload: detects replays with other content and tampering.
    public var hash: String
    public var payload: Payload

    /// A new envelope for a payload recorded now on this device; computes the hash.
    public init(eventId: String, userId: String, deviceId: String, occurredAt: Timestamp, payload: Payload) throws {
        self.eventId = eventId
        self.type = Payload.descriptor.name
        self.schemaVersion = Payload.descriptor.currentVersion
        self.userId = userId
        self.deviceId = deviceId
        self.occurredAt = occurredAt
        self.recordedAt = nil
        self.payload = payload
        self.hash = try Self.hash(of: payload)
    }

    /// The payload as canonical JSON (see ``CanonicalJSON``).
    public static func canonicalPayload(_ payload: Payload) throws -> Data {
        try CanonicalJSON.encode(payload)
    }

    /// The lowercase hex SHA-256 of the canonical payload.
    public static func hash(of payload: Payload) throws -> String {
        let digest = SHA256.hash(data: try canonicalPayload(payload))
        return digest.map { byte in
            let text = String(byte, radix: 16)
            return byte < 16 ? "0" + text : text
        }.joined()
    }

    /// Whether `hash` matches the payload.
    public func hasValidHash() throws -> Bool { try Self.hash(of: payload) == hash }

    enum CodingKeys: String, CodingKey {
        case eventId = "event_id"
        case type
        case schemaVersion = "schema_version"
        case userId = "user_id"
        case deviceId = "device_id"
        case occurredAt = "occurred_at"
        case recordedAt = "recorded_at"
        case hash
        case payload
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        type = try container.decode(String.self, forKey: .type)
        guard type == Payload.descriptor.name else {
            throw ContractError.eventTypeMismatch(expected: Payload.descriptor.name, found: type)
        }
        eventId = try container.decode(String.self, forKey: .eventId)
        schemaVersion = try container.decode(Int.self, forKey: .schemaVersion)
        userId = try container.decode(String.self, forKey: .userId)
        deviceId = try container.decode(String.self, forKey: .deviceId)
        occurredAt = try container.decode(Timestamp.self, forKey: .occurredAt)
        recordedAt = try container.decodeIfPresent(Timestamp.self, forKey: .recordedAt)
        hash = try container.decode(String.self, forKey: .hash)
        payload = try container.decode(Payload.self, forKey: .payload)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(eventId, forKey: .eventId)
        try container.encode(type, forKey: .type)
        try container.encode(schemaVersion, forKey: .schemaVersion)
        try container.encode(userId, forKey: .userId)
        try container.encode(deviceId, forKey: .deviceId)
        try container.encode(occurredAt, forKey: .occurredAt)
        try container.encodeIfPresent(recordedAt, forKey: .recordedAt)
        try container.encode(hash, forKey: .hash)
        try container.encode(payload, forKey: .payload)
    }
}

// MARK: - Descriptors

/// Which way rows of a contract travel.
public enum SyncDirection: String, Hashable, Sendable, CaseIterable {
    /// Server to device only.
    case down
    /// Device to server only.
    case up
    /// Both ways.
    case both
}

/// How the server resolves concurrent writes to the same row.
public enum ConflictPolicy: String, Hashable, Sendable, CaseIterable {
    case appendOnly = "append_only"
    case serverAuthoritative = "server_authoritative"
    case lastWriterWins = "last_writer_wins"
    case versionCheck = "version_check"
    case fieldMerge = "field_merge"
}

/// What a device caches first when space is short.
public enum SyncPriority: String, Hashable, Sendable, CaseIterable, Comparable {
    case critical
    case high
    case normal
    case low

    private var rank: Int {
        switch self {
        case .critical: return 0
        case .high: return 1
        case .normal: return 2
        case .low: return 3
        }
    }

    public static func < (lhs: SyncPriority, rhs: SyncPriority) -> Bool { lhs.rank < rhs.rank }
}

/// The type of a field, as the contract declares it.
public indirect enum FieldKind: Hashable, Sendable {
    case id
    case string
    case int
    case double
    case bool
    case timestamp
    case date
    case uuid
    case json
    case bytes
    case enumeration(values: [String], fallback: String?)
    case list(FieldKind)
    case ref(String)
}

/// One field of a contract.
public struct FieldDescriptor: Hashable, Sendable {
    /// The wire key and column name.
    public var name: String
    public var kind: FieldKind
    public var isOptional: Bool
    /// The default as it appears on the wire, if any.
    public var defaultValue: JSONValue?
    /// The contract version that added the field.
    public var since: Int
    /// The field's previous name, if it was renamed.
    public var renamedFrom: String?
    /// The first version that uses the current name, when renamed.
    public var renamedInVersion: Int?
    /// Why the field is deprecated, if it is.
    public var deprecation: String?
    /// Stored sealed on the device.
    public var isEncrypted: Bool
    public var maxLength: Int?
    public var isPrimaryKey: Bool
    public var isVersionField: Bool
    /// A client-only column: never on the wire, never on the server.
    public var isLocal: Bool

    public init(
        name: String, kind: FieldKind, isOptional: Bool = false, defaultValue: JSONValue? = nil, since: Int = 1,
        renamedFrom: String? = nil, renamedInVersion: Int? = nil, deprecation: String? = nil, isEncrypted: Bool = false,
        maxLength: Int? = nil, isPrimaryKey: Bool = false, isVersionField: Bool = false, isLocal: Bool = false
    ) {
        self.name = name
        self.kind = kind
        self.isOptional = isOptional
        self.defaultValue = defaultValue
        self.since = since
        self.renamedFrom = renamedFrom
        self.renamedInVersion = renamedInVersion
        self.deprecation = deprecation
        self.isEncrypted = isEncrypted
        self.maxLength = maxLength
        self.isPrimaryKey = isPrimaryKey
        self.isVersionField = isVersionField
        self.isLocal = isLocal
    }

    /// The key this field has on the wire for a device running `schemaVersion`, or `nil` when
    /// that version does not know the field.
    public func wireName(forSchemaVersion schemaVersion: Int) -> String? {
        guard schemaVersion >= since else { return nil }
        if let renamedFrom, let renamedInVersion, schemaVersion < renamedInVersion { return renamedFrom }
        return name
    }
}

/// A relation between two entities.
public struct RelationDescriptor: Hashable, Sendable {
    public enum Kind: String, Hashable, Sendable {
        case hasMany = "has_many"
        case belongsTo = "belongs_to"
    }

    public var name: String
    public var kind: Kind
    public var target: String
    public var foreignKey: String

    public init(name: String, kind: Kind, target: String, foreignKey: String) {
        self.name = name
        self.kind = kind
        self.target = target
        self.foreignKey = foreignKey
    }
}

/// An index of an entity's table.
public struct IndexDescriptor: Hashable, Sendable {
    public var name: String
    public var fields: [String]
    public var isUnique: Bool

    public init(name: String, fields: [String], isUnique: Bool) {
        self.name = name
        self.fields = fields
        self.isUnique = isUnique
    }
}

/// A sync scope from the manifest.
public struct ScopeDescriptor: Hashable, Sendable {
    public enum Access: String, Hashable, Sendable {
        /// Devices read; only the server writes.
        case read
        /// Devices read and write.
        case readWrite = "read_write"
    }

    public var name: String
    /// The key template, for example `progress:user:{user_id}`.
    public var keyTemplate: String
    public var access: Access

    public init(name: String, keyTemplate: String, access: Access) {
        self.name = name
        self.keyTemplate = keyTemplate
        self.access = access
    }

    /// The placeholder names of the key template, in order (`user_id` for `progress:user:{user_id}`).
    public var placeholders: [String] {
        var names: [String] = []
        var current: String?
        for character in keyTemplate {
            if character == "{" {
                current = ""
            } else if character == "}", let name = current {
                names.append(name)
                current = nil
            } else if current != nil {
                current!.append(character)
            }
        }
        return names
    }

    /// The key with its placeholders filled (`{user_id}` → `values["user_id"]`); `nil` if one is missing.
    public func key(_ values: [String: String]) -> String? {
        var result = ""
        var placeholder: String?
        for character in keyTemplate {
            if character == "{" {
                placeholder = ""
            } else if character == "}", let name = placeholder {
                guard let value = values[name] else { return nil }
                result += value
                placeholder = nil
            } else if placeholder != nil {
                placeholder!.append(character)
            } else {
                result.append(character)
            }
        }
        // An unclosed `{` is a malformed template, not text.
        return placeholder == nil ? result : nil
    }
}

/// Whether a device running a given schema version of a contract can sync it.
public enum SchemaSupport: String, Hashable, Sendable {
    /// Below `oldest_supported`: the server answers 426 and the device must update; its cached
    /// rows of that version are purged and fetched again.
    case tooOld
    case supported
    /// Above the version this build knows: written by a newer build.
    case tooNew
}

/// A field as a device at some schema version knows it.
public struct KnownField: Hashable, Sendable {
    /// The key that version uses on the wire (the old name before a rename).
    public var wireName: String
    /// The field's name in the current version, or `nil` when it no longer exists.
    public var currentName: String?

    public init(wireName: String, currentName: String?) {
        self.wireName = wireName
        self.currentName = currentName
    }
}

/// Everything client and server need to know about an entity, read instead of hard-coded.
public struct EntityDescriptor: Hashable, Sendable {
    public var name: String
    public var swiftName: String
    public var summary: String
    public var table: String
    public var scope: String
    public var direction: SyncDirection
    public var conflict: ConflictPolicy
    public var tombstones: Bool
    /// How long a device keeps synced rows, in seconds; `nil` for as long as they exist.
    public var retentionSeconds: Int?
    public var priority: SyncPriority
    public var currentVersion: Int
    public var oldestSupported: Int
    public var primaryKey: String
    public var versionField: String?
    /// Synced fields, in contract order.
    public var fields: [FieldDescriptor]
    /// Client-only fields.
    public var localFields: [FieldDescriptor]
    public var relations: [RelationDescriptor]
    public var indexes: [IndexDescriptor]
    /// For every supported schema version, the fields a device at that version knows, from the
    /// contract's released history: what the server sends an older device, under which names.
    public var knownFieldsByVersion: [Int: [KnownField]]
    /// Fields only the server holds (`server_only`): in its table, never in ``fields``, a DTO,
    /// a device's table, a pull page or a content answer.
    public var serverOnlyFields: [FieldDescriptor]

    public init(
        name: String, swiftName: String, summary: String, table: String, scope: String, direction: SyncDirection,
        conflict: ConflictPolicy, tombstones: Bool, retentionSeconds: Int?, priority: SyncPriority, currentVersion: Int,
        oldestSupported: Int, primaryKey: String, versionField: String?, fields: [FieldDescriptor],
        localFields: [FieldDescriptor], relations: [RelationDescriptor], indexes: [IndexDescriptor],
        knownFieldsByVersion: [Int: [KnownField]] = [:], serverOnlyFields: [FieldDescriptor] = []
    ) {
        self.knownFieldsByVersion = knownFieldsByVersion
        self.serverOnlyFields = serverOnlyFields
        self.name = name
        self.swiftName = swiftName
        self.summary = summary
        self.table = table
        self.scope = scope
        self.direction = direction
        self.conflict = conflict
        self.tombstones = tombstones
        self.retentionSeconds = retentionSeconds
        self.priority = priority
        self.currentVersion = currentVersion
        self.oldestSupported = oldestSupported
        self.primaryKey = primaryKey
        self.versionField = versionField
        self.fields = fields
        self.localFields = localFields
        self.relations = relations
        self.indexes = indexes
    }

    public func field(named name: String) -> FieldDescriptor? {
        fields.first { $0.name == name } ?? localFields.first { $0.name == name }
    }

    /// Whether a device at `version` can sync this entity.
    public func support(forSchemaVersion version: Int) -> SchemaSupport {
        version < oldestSupported ? .tooOld : version > currentVersion ? .tooNew : .supported
    }

    /// The fields a device at `version` knows, or `nil` when that version is not supported.
    public func knownFields(forSchemaVersion version: Int) -> [KnownField]? {
        support(forSchemaVersion: version) == .supported ? knownFieldsByVersion[version] : nil
    }
}

/// Everything client and server need to know about an event.
public struct EventDescriptor: Hashable, Sendable {
    public var name: String
    public var swiftName: String
    public var summary: String
    public var table: String
    public var scope: String
    public var direction: SyncDirection
    public var currentVersion: Int
    public var oldestSupported: Int
    /// The entity the server folds this event into, if any.
    public var appliesTo: String?
    public var fields: [FieldDescriptor]
    /// For every supported schema version, the fields a device at that version sends, and the
    /// current field each one maps to.
    public var knownFieldsByVersion: [Int: [KnownField]]

    public init(
        name: String, swiftName: String, summary: String, table: String, scope: String, direction: SyncDirection,
        currentVersion: Int, oldestSupported: Int, appliesTo: String?, fields: [FieldDescriptor],
        knownFieldsByVersion: [Int: [KnownField]] = [:]
    ) {
        self.knownFieldsByVersion = knownFieldsByVersion
        self.name = name
        self.swiftName = swiftName
        self.summary = summary
        self.table = table
        self.scope = scope
        self.direction = direction
        self.currentVersion = currentVersion
        self.oldestSupported = oldestSupported
        self.appliesTo = appliesTo
        self.fields = fields
    }

    public func field(named name: String) -> FieldDescriptor? { fields.first { $0.name == name } }

    /// Whether a device at `version` can send this event.
    public func support(forSchemaVersion version: Int) -> SchemaSupport {
        version < oldestSupported ? .tooOld : version > currentVersion ? .tooNew : .supported
    }

    /// The fields a device at `version` sends, or `nil` when that version is not supported.
    public func knownFields(forSchemaVersion version: Int) -> [KnownField]? {
        support(forSchemaVersion: version) == .supported ? knownFieldsByVersion[version] : nil
    }
}

/// One generated migration: an identifier that never changes once released, and plain SQL.
public struct ContractMigration: Hashable, Sendable {
    /// For example `units.v3.create`.
    public var identifier: String
    public var contract: String
    public var version: Int
    public var statements: [String]
    /// SHA-256 of the statements, as recorded in `contracts.lock` once released.
    public var checksum: String

    public init(identifier: String, contract: String, version: Int, statements: [String], checksum: String) {
        self.identifier = identifier
        self.contract = contract
        self.version = version
        self.statements = statements
        self.checksum = checksum
    }
}
"""#
}
