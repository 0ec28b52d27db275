public import Contracts
import SyncProtocol

/// Turns stored rows into the wire form a device understands: the fields its schema version
/// of the contract knows, under the names that version uses, and nothing else.
///
/// A device on `Unit` version 2 receives `position` (the name before version 3) and no
/// `estimated_minutes` (added in 3); a device on the current version receives every field.
/// The field lists come from the contract registry's ``EntityDescriptor/knownFieldsByVersion``,
/// which the compiler derives from the released history in `contracts.lock`.
public enum RowShaping {
    /// The version a device runs for a contract: what it sent in `schema`, or the current
    /// version when it sent nothing for that contract. A version above the current one (a
    /// newer build) gets the current shape.
    public static func schemaVersion(of name: String, current: Int, in schema: [String: Int]) -> Int {
        guard let version = schema[name] else { return current }
        return min(version, current)
    }

    /// Refuses (426 `schema_too_old`) when `schema` names a version of a contract below the
    /// contract's `oldest_supported`. Names this server does not know are ignored: a newer
    /// device may know contracts the server does not.
    ///
    /// The details name the first such contract (in name order):
    /// `{"entity": "Unit", "oldest_supported": 2, "current": 3}`.
    public static func requireSupported(_ schema: [String: Int]) throws(ServiceError) {
        for name in schema.keys.sorted() {
            let version = schema[name]!
            let range: (oldest: Int, current: Int)?
            if let entity = ContractRegistry.entity(named: name) {
                range = (entity.oldestSupported, entity.currentVersion)
            } else if let event = ContractRegistry.event(named: name) {
                range = (event.oldestSupported, event.currentVersion)
            } else {
                range = nil
            }
            guard let range, version < range.oldest else { continue }
            throw ServiceError(
                status: 426, .schemaTooOld,
                "\(name) version \(version) is no longer supported (oldest supported \(range.oldest), current \(range.current)); update the app",
                details: .object([
                    "entity": .string(name), "oldest_supported": .int(Int64(range.oldest)), "current": .int(Int64(range.current)),
                ])
            )
        }
    }

    /// The fields a device at `version` knows; the current version's when that version is not
    /// supported or not recorded.
    static func knownFields(_ entity: EntityDescriptor, version: Int) -> [KnownField] {
        entity.knownFields(forSchemaVersion: version) ?? entity.knownFieldsByVersion[entity.currentVersion]
            ?? entity.fields.map { KnownField(wireName: $0.name, currentName: $0.name) }
    }

    static func knownFields(_ event: EventDescriptor, version: Int) -> [KnownField] {
        event.knownFields(forSchemaVersion: version) ?? event.knownFieldsByVersion[event.currentVersion]
            ?? event.fields.map { KnownField(wireName: $0.name, currentName: $0.name) }
    }

    /// The fields a device at one version of a contract knows, each with the key it goes
    /// under; worked out once per page, not per row. A field the version knows but the contract
    /// has since removed has no column any more and is left out.
    public struct Plan: Sendable {
        let fields: [(wireName: String, field: FieldDescriptor)]

        init(fields: [FieldDescriptor], known: [KnownField]) {
            var byName: [String: FieldDescriptor] = [:]
            for field in fields {
                byName[field.name] = field
            }
            self.fields = known.compactMap { knownField in
                knownField.currentName.flatMap { byName[$0] }.map { (knownField.wireName, $0) }
            }
        }

        /// The plan for schema `version` of an entity.
        public init(_ entity: EntityDescriptor, version: Int) {
            self.init(fields: entity.fields, known: RowShaping.knownFields(entity, version: version))
        }

        /// The plan for the payload of schema `version` of an event.
        public init(_ event: EventDescriptor, version: Int) {
            self.init(fields: event.fields, known: RowShaping.knownFields(event, version: version))
        }

        /// The row's fields in wire form, read from their columns (which carry the current names).
        public func shape(_ row: StoredRow) -> [String: JSONValue] {
            var wire: [String: JSONValue] = [:]
            wire.reserveCapacity(fields.count)
            for (wireName, field) in fields {
                wire[wireName] = RowCodec.wireValue(row[field.name], for: field)
            }
            // Entity rows carry the server's row version (`_version`), which a device sends back as
            // `base_version` under `version_check`. Contract fields never start with `_`.
            if let version = row.integer("_version") {
                wire[Self.serverVersionKey] = .int(version)
            }
            return wire
        }

        /// The key of the server's row version in a pulled entity row.
        public static let serverVersionKey = "_server_version"
    }

    /// An entity row in the wire form of schema `version` of its contract.
    public static func wireRow(_ row: StoredRow, entity: EntityDescriptor, version: Int) -> [String: JSONValue] {
        Plan(entity, version: version).shape(row)
    }

    /// An entity row in the wire form of its contract's current version.
    public static func currentWireRow(_ row: StoredRow, entity: EntityDescriptor) -> [String: JSONValue] {
        var wire: [String: JSONValue] = [:]
        for field in entity.fields {
            wire[field.name] = RowCodec.wireValue(row[field.name], for: field)
        }
        return wire
    }

    /// An event row as a device receives it: the envelope (`event_id`, `type`, `schema_version`,
    /// `user_id`, `device_id`, `occurred_at`, `recorded_at`, `hash`) and the `payload` shaped
    /// for schema `version`. `schema_version` says the version the payload is shaped for;
    /// `hash` stays the one the recording device computed over its own payload.
    public static func wireEvent(_ row: StoredRow, event: EventDescriptor, version: Int) -> [String: JSONValue] {
        wireEvent(row, event: event, version: version, plan: Plan(event, version: version))
    }

    static func wireEvent(_ row: StoredRow, event: EventDescriptor, version: Int, plan: Plan) -> [String: JSONValue] {
        let shapedVersion = event.knownFields(forSchemaVersion: version) == nil ? event.currentVersion : version
        func timestamp(_ column: String) -> JSONValue {
            guard let millis = row.integer(column) else { return .null }
            return .string(Timestamp(millisecondsSince1970: millis).iso8601)
        }
        func text(_ column: String) -> JSONValue { row.text(column).map(JSONValue.string) ?? .null }
        return [
            "event_id": text("event_id"),
            "type": .string(event.name),
            "schema_version": .int(Int64(shapedVersion)),
            "user_id": text("user_id"),
            "device_id": text("device_id"),
            "occurred_at": timestamp("occurred_at"),
            "recorded_at": timestamp("recorded_at"),
            "hash": text("hash"),
            "payload": .object(plan.shape(row)),
        ]
    }
}

/// Reads the JSON text of `json` and `list` columns (canonical JSON, see ``CanonicalJSON``)
/// back into a ``JSONValue``, for every row a pull sends. It reads what `JSONDecoder` reads,
/// into the same values.
///
/// `JSONDecoder` through `JSONValue`'s `Decodable` conformance tries each type in turn and
/// pays for a thrown error at every miss, which made these columns the most expensive part of
/// a pull page. This reads the bytes once. Whole numbers that fit in 64 bits are `.int`, other
/// numbers `.double`; anything that is not one whole JSON value is `nil`.
enum StoredJSON {
    static func parse(_ text: String) -> JSONValue? {
        var text = text
        return text.withUTF8 { buffer in
            var parser = Parser(bytes: buffer)
            guard let value = parser.value(depth: 0) else { return nil }
            parser.skipWhitespace()
            return parser.index == buffer.count ? value : nil
        }
    }

    private struct Parser {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        init(bytes: UnsafeBufferPointer<UInt8>) {
            self.bytes = bytes
        }

        mutating func skipWhitespace() {
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 {
                index += 1
            }
        }

        mutating func literal(_ word: StaticString, _ value: JSONValue) -> JSONValue? {
            let count = word.utf8CodeUnitCount
            guard index + count <= bytes.count else { return nil }
            for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] {
                return nil
            }
            index += count
            return value
        }

        mutating func value(depth: Int) -> JSONValue? {
            skipWhitespace()
            guard index < bytes.count, depth < 512 else { return nil }
            switch bytes[index] {
            case UInt8(ascii: "{"):
                index += 1
                var members: [String: JSONValue] = [:]
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                    index += 1
                    return .object(members)
                }
                while true {
                    skipWhitespace()
                    guard let key = string() else { return nil }
                    skipWhitespace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
                    index += 1
                    guard let member = value(depth: depth + 1) else { return nil }
                    members[key] = member
                    skipWhitespace()
                    guard index < bytes.count else { return nil }
                    if bytes[index] == UInt8(ascii: ",") {
                        index += 1
                    } else if bytes[index] == UInt8(ascii: "}") {
                        index += 1
                        return .object(members)
                    } else {
                        return nil
                    }
                }
            case UInt8(ascii: "["):
                index += 1
                var items: [JSONValue] = []
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                    index += 1
                    return .array(items)
                }
                while true {
                    guard let item = value(depth: depth + 1) else { return nil }
                    items.append(item)
                    skipWhitespace()
                    guard index < bytes.count else { return nil }
                    if bytes[index] == UInt8(ascii: ",") {
                        index += 1
                    } else if bytes[index] == UInt8(ascii: "]") {
                        index += 1
                        return .array(items)
                    } else {
                        return nil
                    }
                }
            case UInt8(ascii: "\""): return string().map(JSONValue.string)
            case UInt8(ascii: "t"): return literal("true", .bool(true))
            case UInt8(ascii: "f"): return literal("false", .bool(false))
            case UInt8(ascii: "n"): return literal("null", .null)
            default: return number()
            }
        }

        mutating func number() -> JSONValue? {
            let start = index
            var integral = true
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
            let digitsStart = index
            while index < bytes.count, (48...57).contains(bytes[index]) { index += 1 }
            guard index > digitsStart else { return nil }
            if bytes[digitsStart] == 48, index - digitsStart > 1 { return nil }  // no leading zeros
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                integral = false
                index += 1
                let fraction = index
                while index < bytes.count, (48...57).contains(bytes[index]) { index += 1 }
                guard index > fraction else { return nil }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                integral = false
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
                let exponent = index
                while index < bytes.count, (48...57).contains(bytes[index]) { index += 1 }
                guard index > exponent else { return nil }
            }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            if integral, let number = Int64(text) { return .int(number) }
            guard let number = Double(text) else { return nil }
            // Like JSONDecoder: a whole number written with a fraction or exponent (`1E3`, `0.0`) is an int.
            if number == number.rounded(), abs(number) < 9.2e18 { return .int(Int64(number)) }
            return .double(number)
        }

        mutating func string() -> String? {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
            index += 1
            let start = index
            // The common case: no escapes, copied in one go.
            while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\"), bytes[index] >= 0x20 {
                index += 1
            }
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: "\"") {
                defer { index += 1 }
                return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            }
            var scalars = String.UnicodeScalarView()
            var utf8 = Array(bytes[start..<index])
            func flush() {
                scalars.append(contentsOf: String(decoding: utf8, as: UTF8.self).unicodeScalars)
                utf8.removeAll(keepingCapacity: true)
            }
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    index += 1
                    flush()
                    return String(scalars)
                }
                guard byte >= 0x20 else { return nil }
                if byte != UInt8(ascii: "\\") {
                    utf8.append(byte)
                    index += 1
                    continue
                }
                guard index + 1 < bytes.count else { return nil }
                let escape = bytes[index + 1]
                index += 2
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escape)
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0C)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "u"):
                    guard var code = hex4() else { return nil }
                    if (0xD800...0xDBFF).contains(code) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                            return nil
                        }
                        index += 2
                        guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let scalar = Unicode.Scalar(code) else { return nil }
                    flush()
                    scalars.append(scalar)
                default: return nil
                }
            }
            return nil
        }

        mutating func hex4() -> UInt32? {
            guard index + 4 <= bytes.count else { return nil }
            var code: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt32
                switch byte {
                case 48...57: digit = UInt32(byte - 48)
                case 65...70: digit = UInt32(byte - 55)
                case 97...102: digit = UInt32(byte - 87)
                default: return nil
                }
                code = code << 4 | digit
                index += 1
            }
            return code
        }
    }
}
