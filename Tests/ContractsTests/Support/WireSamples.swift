import ContractRuntime
import Contracts
import Foundation
import Testing

// Helpers shared by the suites: sample wire values built from the descriptors, canonical JSON,
// and the opened-existential round trip through the generated DTOs.

/// Every contract of the registry (entities, then events), by name.
enum AllContracts {
    static let entityNames: [String] = ContractRegistry.entities.map(\.name)
    static let eventNames: [String] = ContractRegistry.events.map(\.name)
    static let names: [String] = entityNames + eventNames

    /// The wire fields (never the local ones) of a contract.
    static func wireFields(of name: String) -> [FieldDescriptor]? {
        if let entity = ContractRegistry.entity(named: name) { return entity.fields }
        return ContractRegistry.event(named: name)?.fields
    }
}

/// Canonical JSON text: keys sorted, no whitespace, so two documents compare as strings and a
/// failing comparison prints both sides readably.
enum CanonicalJSON {
    static func parse(_ data: Data) throws -> Any {
        try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
    }

    static func object(_ data: Data) throws -> [String: Any] {
        guard let object = try parse(data) as? [String: Any] else {
            throw SampleError("expected a JSON object, got \(String(decoding: data, as: UTF8.self))")
        }
        return object
    }

    static func data(_ value: Any) throws -> Data {
        try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed, .withoutEscapingSlashes])
    }

    /// The canonical text of a JSON value (a parsed document or a literal built in a test).
    static func text(_ value: Any) throws -> String {
        // Serialise, parse and serialise again, so literals built in Swift and documents parsed
        // from an encoder take the same path and numbers print the same way.
        String(decoding: try data(try parse(try data(value))), as: UTF8.self)
    }

    static func text(of data: Data) throws -> String { try text(try parse(data)) }

    /// The canonical text of a descriptor's default value, as the generated encoder writes it.
    static func text(_ value: JSONValue) throws -> String { try text(of: try JSONEncoder().encode(value)) }
}

struct SampleError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Valid (and invalid) wire values for each field kind, derived only from the descriptors.
enum WireSamples {
    static let timestamp = "2026-01-31T08:00:00.123Z"
    static let date = "2026-01-31"
    static let uuid = "3f2b8c1e-9a4d-4e6f-8b1a-0c2d3e4f5a6b"
    /// Bytes 0x00 0x01 0x02 0xFF: the base64 text contains `/` and padding.
    static let bytesBase64 = "AAEC/w=="
    /// A reference to the empty file, as a JPEG (a type every sample `file` field accepts).
    static let fileReference = try! FileReference(sha256: FileReference.emptySHA256, byteCount: 0, contentType: "image/jpeg")
    static let unknownEnumValue = "zz_value_from_the_future"

    /// A valid value of `field` on the wire.
    static func value(for field: FieldDescriptor) throws -> Any {
        try value(for: field.kind, maxLength: field.maxLength, name: field.name)
    }

    static func value(for kind: FieldKind, maxLength: Int?, name: String) throws -> Any {
        switch kind {
        case .id:
            return text("\(name)-0001", maxLength: maxLength)
        case .string:
            // Non-ASCII text and a slash, to prove the encoder keeps them intact.
            return text("\(name) é✓/ü", maxLength: maxLength)
        case .int:
            // Beyond 32 bits: ints are 64-bit.
            return 4_000_000_123
        case .double:
            return 1.5
        case .bool:
            return true
        case .timestamp:
            return timestamp
        case .date:
            return date
        case .uuid:
            return uuid
        case .json:
            let list: [Any] = [1, 2.5, "x", true, NSNull()]
            let nested: [String: Any] = ["list": list, "empty": [String: Any]()]
            return ["nested": nested, "n": 7] as [String: Any]
        case .bytes:
            return bytesBase64
        case .file:
            return ["sha256": fileReference.sha256, "size": fileReference.byteCount, "content_type": fileReference.contentType] as [String: Any]
        case .enumeration(let values, _):
            guard let first = values.first else { throw SampleError("\(name): enumeration without values") }
            return first
        case .list(let element):
            return [try value(for: element, maxLength: nil, name: name)]
        case .ref(let target):
            guard let entity = ContractRegistry.entity(named: target) else {
                throw SampleError("\(name): ref<\(target)> names no entity of the registry")
            }
            guard let key = entity.field(named: entity.primaryKey) else {
                throw SampleError("\(name): \(target) has no primary key field \(entity.primaryKey)")
            }
            return try value(for: key.kind, maxLength: key.maxLength, name: "\(target.lowercased())")
        }
    }

    /// Wire values the kind must reject (wrong JSON type or bad format); empty for `json`, which
    /// accepts any document.
    static func invalidValues(for kind: FieldKind) -> [Any] {
        switch kind {
        case .id, .string: return [12_345, true, ["x"]]
        case .int: return ["12", 1.5, true]
        case .double: return ["1.5", true]
        case .bool: return ["true", "yes"]
        case .timestamp:
            return ["2026-01-31", "2026-01-31T08:00:00", "2026-02-30T08:00:00.000Z", "yesterday", 1_769_846_400_000]
        case .date: return ["2026-02-30", "2026-01-31T08:00:00.000Z", "31/01/2026", 20_260_131]
        case .uuid: return ["not-a-uuid", "3f2b8c1e9a4d4e6f8b1a0c2d3e4f5a6b0", 42]
        case .json: return []
        case .bytes: return ["***not base64***", 42]
        case .file:
            return [
                "not a reference", 42, ["sha256": "abc", "size": 1, "content_type": "image/png"] as [String: Any],
                ["sha256": FileReference.emptySHA256, "size": -1, "content_type": "image/png"] as [String: Any],
                ["sha256": FileReference.emptySHA256, "size": 0, "content_type": "image/png", "name": "../etc/passwd"] as [String: Any],
            ]
        case .enumeration(_, let fallback):
            // With a fallback any string decodes; a non-string never does.
            return fallback == nil ? [unknownEnumValue, 1] : [1, true]
        case .list: return ["not a list", 1]
        case .ref: return [12_345, false]
        }
    }

    private static func text(_ text: String, maxLength: Int?) -> String {
        guard let maxLength else { return text }
        return String(text.prefix(maxLength))
    }

    /// A JSON object with every field present.
    static func fullObject(_ fields: [FieldDescriptor]) throws -> [String: Any] {
        var object: [String: Any] = [:]
        for field in fields { object[field.name] = try value(for: field) }
        return object
    }

    /// A JSON object with only the fields the wire requires: not optional and without a default.
    static func requiredObject(_ fields: [FieldDescriptor]) throws -> [String: Any] {
        var object: [String: Any] = [:]
        for field in fields where isRequired(field) { object[field.name] = try value(for: field) }
        return object
    }

    static func isRequired(_ field: FieldDescriptor) -> Bool { !field.isOptional && field.defaultValue == nil }

    /// Whether the field holds a UUID on the wire (directly, through a ref, or in a list).
    static func holdsUUID(_ kind: FieldKind) -> Bool {
        switch kind {
        case .uuid: return true
        case .list(let element): return holdsUUID(element)
        case .ref(let target):
            guard let entity = ContractRegistry.entity(named: target),
                let key = entity.field(named: entity.primaryKey)
            else { return false }
            return holdsUUID(key.kind)
        default: return false
        }
    }
}

/// A generated DTO, reached through an opened existential: decode it from JSON and encode it again.
struct WireCodec: Sendable {
    let name: String
    let typeName: String
    let fields: [FieldDescriptor]
    let reencode: @Sendable (Data) throws -> Data
    /// Decodes a payload and wraps it in a fresh envelope (events only).
    let envelope: (@Sendable (Data) throws -> EnvelopeProbe)?

    static func named(_ name: String) throws -> WireCodec {
        if let index = ContractRegistry.entities.firstIndex(where: { $0.name == name }) {
            guard index < ContractRegistry.entityTypes.count else {
                throw SampleError("entity \(name) has no generated type in ContractRegistry.entityTypes")
            }
            return entity(ContractRegistry.entityTypes[index])
        }
        if let index = ContractRegistry.events.firstIndex(where: { $0.name == name }) {
            guard index < ContractRegistry.eventTypes.count else {
                throw SampleError("event \(name) has no generated type in ContractRegistry.eventTypes")
            }
            return event(ContractRegistry.eventTypes[index])
        }
        throw SampleError("\(name) is neither an entity nor an event of the registry")
    }

    static func entity(_ type: any ContractEntity.Type) -> WireCodec { openEntity(type) }
    static func event(_ type: any ContractEvent.Type) -> WireCodec { openEvent(type) }

    private static func openEntity<T: ContractEntity>(_ type: T.Type) -> WireCodec {
        WireCodec(
            name: T.descriptor.name, typeName: String(describing: T.self), fields: T.descriptor.fields,
            reencode: { try roundTrip(T.self, json: $0) }, envelope: nil
        )
    }

    private static func openEvent<T: ContractEvent>(_ type: T.Type) -> WireCodec {
        WireCodec(
            name: T.descriptor.name, typeName: String(describing: T.self), fields: T.descriptor.fields,
            reencode: { try roundTrip(T.self, json: $0) },
            envelope: { json in
                let payload = try JSONDecoder().decode(T.self, from: json)
                let envelope = try EventEnvelope(
                    eventId: "01HZX3V9Q8K7M6N5P4R3S2T1A0", userId: "user-1", deviceId: "device-1",
                    occurredAt: Timestamp(millisecondsSince1970: 1_769_846_400_123), payload: payload
                )
                let encoded = try JSONEncoder().encode(envelope)
                let decoded = try JSONDecoder().decode(EventEnvelope<T>.self, from: encoded)
                return EnvelopeProbe(
                    type: envelope.type, schemaVersion: envelope.schemaVersion, hash: envelope.hash,
                    hasValidHash: try envelope.hasValidHash(), canonicalPayload: try EventEnvelope<T>.canonicalPayload(payload),
                    encoded: encoded, survivesRoundTrip: decoded == envelope
                )
            }
        )
    }
}

/// What the generic envelope check learns about one event type.
struct EnvelopeProbe: Sendable {
    var type: String
    var schemaVersion: Int
    var hash: String
    var hasValidHash: Bool
    var canonicalPayload: Data
    var encoded: Data
    var survivesRoundTrip: Bool
}

/// Decodes `T` from `json` and encodes it again with a plain `JSONEncoder`.
func roundTrip<T: Decodable & Encodable>(_ type: T.Type, json: Data) throws -> Data {
    let value = try JSONDecoder().decode(T.self, from: json)
    return try JSONEncoder().encode(value)
}

/// Whether `text` is 64 lowercase hexadecimal digits.
func isLowercaseSHA256Hex(_ text: String) -> Bool {
    text.utf8.count == 64 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
}

/// An independent writer of the canonical JSON the event hash is defined over: object keys
/// sorted by their UTF-8 bytes at every depth (as other languages and RFC 8785 would for ASCII
/// keys), no whitespace, slashes unescaped. Scalars are written by `JSONEncoder` one at a time.
enum ReferenceCanonicalJSON {
    static func text(of data: Data) throws -> String {
        try text(try JSONDecoder().decode(JSONValue.self, from: data))
    }

    static func text(_ value: JSONValue) throws -> String {
        switch value {
        case .null: return "null"
        case .bool(let flag): return flag ? "true" : "false"
        case .int(let number): return String(number)
        case .double(let number): return try scalar(number)
        case .string(let text): return try scalar(text)
        case .array(let items): return "[" + (try items.map { try text($0) }).joined(separator: ",") + "]"
        case .object(let members):
            let keys = members.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            let parts = try keys.map { key in try scalar(key) + ":" + text(members[key]!) }
            return "{" + parts.joined(separator: ",") + "}"
        }
    }

    private static func scalar<T: Encodable>(_ value: T) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        let text = String(decoding: try encoder.encode([value]), as: UTF8.self)
        return String(text.dropFirst().dropLast())
    }
}
