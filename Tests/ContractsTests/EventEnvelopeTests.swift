import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import Testing

@Suite("Event envelopes", .blockingWork)
struct EventEnvelopeTests {
    static let occurredAt = Timestamp(millisecondsSince1970: 1_769_846_400_123)

    static func sampleAnswer(timeSpentMs: Int64 = 1200) -> AnswerRecorded {
        AnswerRecorded(attemptId: "attempt-1", questionId: "q-7", answer: .object(["choice": .string("b")]), timeSpentMs: timeSpentMs)
    }

    static func envelope(_ payload: AnswerRecorded = sampleAnswer(), eventId: String = "01HZX3V9Q8K7M6N5P4R3S2T1A0") throws
        -> AnswerRecordedEnvelope
    {
        try AnswerRecordedEnvelope(eventId: eventId, userId: "user-1", deviceId: "device-1", occurredAt: occurredAt, payload: payload)
    }

    @Test("init takes the type and schema version from the descriptor and hashes the payload")
    func initFillsTheEnvelope() throws {
        let envelope = try Self.envelope()
        #expect(envelope.type == AnswerRecorded.descriptor.name)
        #expect(envelope.type == "AnswerRecorded")
        #expect(envelope.schemaVersion == AnswerRecorded.descriptor.currentVersion)
        #expect(envelope.schemaVersion == CURRENT_ANSWER_RECORDED_SCHEMA)
        #expect(envelope.eventId == "01HZX3V9Q8K7M6N5P4R3S2T1A0")
        #expect(envelope.userId == "user-1" && envelope.deviceId == "device-1")
        #expect(envelope.occurredAt == Self.occurredAt)
        #expect(envelope.recordedAt == nil, "a device never sets recorded_at")
        #expect(isLowercaseSHA256Hex(envelope.hash), "hash \(envelope.hash)")
        #expect(try envelope.hasValidHash())
    }

    @Test("The canonical payload sorts keys, has no whitespace, and the hash is its SHA-256")
    func canonicalPayloadAndHash() throws {
        let payload = Self.sampleAnswer()
        let canonical = String(decoding: try AnswerRecordedEnvelope.canonicalPayload(payload), as: UTF8.self)
        #expect(canonical == #"{"answer":{"choice":"b"},"attempt_id":"attempt-1","question_id":"q-7","time_spent_ms":1200}"#)
        #expect(try AnswerRecordedEnvelope.hash(of: payload) == ReferenceSHA256.hex(canonical))
        #expect(try Self.envelope().hash == ReferenceSHA256.hex(canonical))
        // Slashes are not escaped, so other implementations can reproduce the hash.
        let slashed = AnswerRecorded(attemptId: "a/b", questionId: "q", answer: .string("https://x/y"), timeSpentMs: 1)
        let slashedText = String(decoding: try AnswerRecordedEnvelope.canonicalPayload(slashed), as: UTF8.self)
        #expect(!slashedText.contains("\\/"), "\(slashedText)")
    }

    /// The hash must be reproducible by the server and by other platforms, so the key order
    /// of the canonical payload must not depend on Foundation's locale-aware, numeric or
    /// case-insensitive string comparison.
    @Test("The canonical payload orders keys by UTF-8 bytes at every depth")
    func canonicalKeyOrderIsBytewise() throws {
        let answer = JSONValue.object([
            "b": .int(1), "B": .int(2), "a10": .int(3), "a9": .int(4), "a_b": .int(5), "a1": .int(6), "é": .int(7),
            "nested": .array([.object(["z": .null, "Z": .bool(true), "10": .int(0), "9": .int(0)])]),
        ])
        let payload = AnswerRecorded(attemptId: "attempt-1", questionId: "q-7", answer: answer, timeSpentMs: 5)
        let canonical = String(decoding: try AnswerRecordedEnvelope.canonicalPayload(payload), as: UTF8.self)
        let expected =
            #"{"answer":{"B":2,"a1":6,"a10":3,"a9":4,"a_b":5,"b":1,"nested":[{"10":0,"9":0,"Z":true,"z":null}],"é":7},"#
            + #""attempt_id":"attempt-1","question_id":"q-7","time_spent_ms":5}"#
        #expect(canonical == expected)
        #expect(try AnswerRecordedEnvelope.hash(of: payload) == ReferenceSHA256.hex(expected))
    }

    @Test("The hash depends on the payload only")
    func hashDependsOnThePayload() throws {
        let base = try Self.envelope()
        #expect(try Self.envelope(eventId: "01HZX3V9Q8K7M6N5P4R3S2T1B1").hash == base.hash, "the event id is not hashed")
        #expect(try Self.envelope(Self.sampleAnswer(timeSpentMs: 1201)).hash != base.hash)
        var otherAnswer = Self.sampleAnswer()
        otherAnswer.answer = .object(["choice": .string("c")])
        #expect(try Self.envelope(otherAnswer).hash != base.hash)
        // The same content built in another key order hashes the same.
        let reordered = try JSONDecoder().decode(
            AnswerRecorded.self, from: Data(#"{"time_spent_ms":1200,"question_id":"q-7","answer":{"choice":"b"},"attempt_id":"attempt-1"}"#.utf8)
        )
        #expect(try AnswerRecordedEnvelope.hash(of: reordered) == base.hash)
    }

    @Test("A changed payload or hash no longer validates")
    func tamperingIsDetected() throws {
        var envelope = try Self.envelope()
        envelope.payload.timeSpentMs = 1
        #expect(try !envelope.hasValidHash(), "a changed payload kept a valid hash")
        var forged = try Self.envelope()
        forged.hash = String(repeating: "0", count: 64)
        #expect(try !forged.hasValidHash())
    }

    @Test("Wire form: snake_case envelope keys, ISO-8601 times, the payload nested")
    func wireForm() throws {
        var envelope = try Self.envelope()
        let object = try CanonicalJSON.object(try JSONEncoder().encode(envelope))
        #expect(Set(object.keys) == ["event_id", "type", "schema_version", "user_id", "device_id", "occurred_at", "hash", "payload"])
        #expect(object["occurred_at"] as? String == "2026-01-31T08:00:00.123Z")
        #expect(object["type"] as? String == "AnswerRecorded")
        #expect(object["schema_version"] as? Int == CURRENT_ANSWER_RECORDED_SCHEMA)
        let payload = try #require(object["payload"] as? [String: Any])
        #expect(Set(payload.keys) == Set(AnswerRecorded.descriptor.fields.map(\.name)))

        envelope.recordedAt = Timestamp(millisecondsSince1970: 1_769_846_401_000)
        let recorded = try CanonicalJSON.object(try JSONEncoder().encode(envelope))
        #expect(recorded["recorded_at"] as? String == "2026-01-31T08:00:01.000Z")
        let decoded = try JSONDecoder().decode(AnswerRecordedEnvelope.self, from: try JSONEncoder().encode(envelope))
        #expect(decoded == envelope)
        #expect(try decoded.hasValidHash())
    }

    @Test("Decoding an envelope whose type names another event throws")
    func typeMismatchThrows() throws {
        var object = try CanonicalJSON.object(try JSONEncoder().encode(try Self.envelope()))
        object["type"] = "TaskStarted"
        let data = try CanonicalJSON.data(object)
        #expect(throws: ContractError.eventTypeMismatch(expected: "AnswerRecorded", found: "TaskStarted")) {
            try JSONDecoder().decode(AnswerRecordedEnvelope.self, from: data)
        }
        object["type"] = nil
        let untyped = try CanonicalJSON.data(object)
        #expect(throws: (any Error).self, "an envelope without a type must not decode") {
            try JSONDecoder().decode(AnswerRecordedEnvelope.self, from: untyped)
        }
    }

    @Test("Decoding keeps a tampered payload detectable")
    func decodedTamperingIsDetected() throws {
        var object = try CanonicalJSON.object(try JSONEncoder().encode(try Self.envelope()))
        var payload = try #require(object["payload"] as? [String: Any])
        payload["time_spent_ms"] = 999_999
        object["payload"] = payload
        let decoded = try JSONDecoder().decode(AnswerRecordedEnvelope.self, from: try CanonicalJSON.data(object))
        #expect(try !decoded.hasValidHash())
    }

    @Test("Every event type wraps in an envelope with its own type, version and a valid hash", arguments: AllContracts.eventNames)
    func everyEventWraps(_ name: String) throws {
        let codec = try WireCodec.named(name)
        let makeEnvelope = try #require(codec.envelope, "\(name) is not an event type")
        let descriptor = try #require(ContractRegistry.event(named: name))
        let probe = try makeEnvelope(try CanonicalJSON.data(try WireSamples.fullObject(codec.fields)))
        #expect(probe.type == name)
        #expect(probe.schemaVersion == descriptor.currentVersion)
        #expect(isLowercaseSHA256Hex(probe.hash))
        #expect(probe.hasValidHash)
        #expect(probe.hash == ReferenceSHA256.hex(probe.canonicalPayload), "\(name): hash is not SHA-256 of the canonical payload")
        #expect(probe.survivesRoundTrip, "\(name): envelope changed through JSON")
        let canonical = String(decoding: probe.canonicalPayload, as: UTF8.self)
        #expect(
            try ReferenceCanonicalJSON.text(of: probe.canonicalPayload) == canonical,
            "\(name): canonical payload is not compact with keys in UTF-8 order"
        )
    }
}
