import Crypto
public import Foundation

/// The wrapper every event travels in: who recorded it, when, and a hash of its payload.
public struct EventEnvelope<Payload: ContractEvent>: Codable, Sendable, Hashable {
    /// A ULID made on the device; the event's identity and idempotency key.
    public var eventId: String
    /// The event contract's name, for example `AnswerRecorded`.
    public var type: String
    /// The event contract's version the device wrote.
    public var schemaVersion: Int
    /// The user who recorded the event, as the device's token names them.
    public var userId: String
    /// The device that recorded the event.
    public var deviceId: String
    /// When it happened, by the device's clock.
    public var occurredAt: Timestamp
    /// When the server stored it, by the server's clock; `nil` until then.
    public var recordedAt: Timestamp?
    /// SHA-256 (hex) of the canonical payload: detects replays with other content and tampering.
    public var hash: String
    /// The event's fields, as its contract types them.
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

    /// The payload as canonical JSON (see `CanonicalJSON`).
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

    /// Decodes an envelope from its wire form, payload included.
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

    /// Encodes the envelope in its wire form, payload included.
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
