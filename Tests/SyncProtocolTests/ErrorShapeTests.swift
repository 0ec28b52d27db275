import ContractRuntime
import Contracts
import Foundation
import SyncProtocol
import Testing

/// Error bodies (`{"error": {"code", "message", "details"}}`) and the published error codes.
@Suite("Error wire shape")
struct ErrorShapeTests {
    /// Every published code, in declaration order. Codes never change once published: a
    /// renamed constant fails to compile here, a changed raw value fails the comparison, and a
    /// new or removed constant fails ``everyDeclaredCodeIsPinned()`` until it is listed here.
    static let published: [(constant: String, code: ErrorCode, wire: String)] = [
        ("malformedRequest", .malformedRequest, "malformed_request"),
        ("unauthorized", .unauthorized, "unauthorized"),
        ("tokenMissing", .tokenMissing, "token_missing"),
        ("tokenMalformed", .tokenMalformed, "token_malformed"),
        ("tokenAlgorithmRefused", .tokenAlgorithmRefused, "token_algorithm_refused"),
        ("tokenUnknownKey", .tokenUnknownKey, "token_unknown_key"),
        ("tokenInvalidSignature", .tokenInvalidSignature, "token_invalid_signature"),
        ("tokenWrongAudience", .tokenWrongAudience, "token_wrong_audience"),
        ("tokenExpired", .tokenExpired, "token_expired"),
        ("tokenNotYetValid", .tokenNotYetValid, "token_not_yet_valid"),
        ("tokenRevoked", .tokenRevoked, "token_revoked"),
        ("userErased", .userErased, "user_erased"),
        ("forbidden", .forbidden, "forbidden"),
        ("nestingTooDeep", .nestingTooDeep, "nesting_too_deep"),
        ("nulCharacter", .nulCharacter, "nul_character"),
        ("signatureInvalid", .signatureInvalid, "signature_invalid"),
        ("clientNotOwned", .clientNotOwned, "client_not_owned"),
        ("notFound", .notFound, "not_found"),
        ("sequenceGap", .sequenceGap, "sequence_gap"),
        ("sinkExists", .sinkExists, "sink_exists"),
        ("sinkKindUnknown", .sinkKindUnknown, "sink_kind_unknown"),
        ("cursorExpired", .cursorExpired, "cursor_expired"),
        ("payloadTooLarge", .payloadTooLarge, "payload_too_large"),
        ("unsupportedEncoding", .unsupportedEncoding, "unsupported_encoding"),
        ("rangeNotSatisfiable", .rangeNotSatisfiable, "range_not_satisfiable"),
        ("unknownEntity", .unknownEntity, "unknown_entity"),
        ("schemaTooOld", .schemaTooOld, "schema_too_old"),
        ("rateLimited", .rateLimited, "rate_limited"),
        ("liveCapacity", .liveCapacity, "live_capacity"),
        ("serverBusy", .serverBusy, "server_busy"),
        ("storageUnavailable", .storageUnavailable, "storage_unavailable"),
        ("identifierNotNormalized", .identifierNotNormalized, "identifier_not_normalized"),
        ("identifierInvalid", .identifierInvalid, "identifier_invalid"),
        ("limitReached", .limitReached, "limit_reached"),
        ("tooManySubscriptions", .tooManySubscriptions, "too_many_subscriptions"),
        ("subscriptionTooBroad", .subscriptionTooBroad, "subscription_too_broad"),
        ("unknownSubscription", .unknownSubscription, "unknown_subscription"),
        ("internalError", .internalError, "internal_error"),
        ("invalidPayload", .invalidPayload, "invalid_payload"),
        ("valueTooLarge", .valueTooLarge, "value_too_large"),
        ("rowTooLarge", .rowTooLarge, "row_too_large"),
        ("occurredAtOutOfRange", .occurredAtOutOfRange, "occurred_at_out_of_range"),
        ("notWritable", .notWritable, "not_writable"),
        ("missingPolicyData", .missingPolicyData, "missing_policy_data"),
        ("rowNotFound", .rowNotFound, "row_not_found"),
        ("hashMismatch", .hashMismatch, "hash_mismatch"),
        ("fileMissing", .fileMissing, "file_missing"),
        ("offsetMismatch", .offsetMismatch, "offset_mismatch"),
        ("quotaExceeded", .quotaExceeded, "quota_exceeded"),
        ("contentTypeMismatch", .contentTypeMismatch, "content_type_mismatch"),
        ("schemaTooNew", .schemaTooNew, "schema_too_new"),
        ("clockSkew", .clockSkew, "clock_skew"),
        ("invalidTransition", .invalidTransition, "invalid_transition"),
        ("assessmentClosed", .assessmentClosed, "assessment_closed"),
        ("timeLimitExceeded", .timeLimitExceeded, "time_limit_exceeded"),
    ]

    @Test("Every published code keeps its wire text")
    func publishedCodesKeepTheirText() {
        for entry in Self.published {
            #expect(entry.code.rawValue == entry.wire, "ErrorCode.\(entry.constant)")
            #expect(entry.code.description == entry.wire, "ErrorCode.\(entry.constant)")
        }
    }

    @Test("Every code is distinct and snake_case")
    func codesAreDistinctSnakeCase() throws {
        let snakeCase = try Regex("^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
        for entry in Self.published {
            #expect(entry.code.rawValue.wholeMatch(of: snakeCase) != nil, "ErrorCode.\(entry.constant) = \(entry.code)")
        }
        #expect(Set(Self.published.map(\.code)).count == Self.published.count, "two constants share a code")
        #expect(Set(Self.published.map(\.constant)).count == Self.published.count)
    }

    /// Reads `Errors.swift` so that adding or removing a constant cannot slip past the list above.
    @Test("The pinned list is every constant ErrorCode declares")
    func everyDeclaredCodeIsPinned() throws {
        let source = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/SyncProtocol/Errors.swift")
        let text = try String(contentsOf: source, encoding: .utf8)
        let declaration = try Regex(#"static let (\w+) = ErrorCode\("([^"]*)"\)"#)
        let declared = text.matches(of: declaration).map { match in
            "\(match.output[1].substring ?? "")=\(match.output[2].substring ?? "")"
        }
        #expect(!declared.isEmpty, "no ErrorCode constants found in \(source.path)")
        #expect(declared == Self.published.map { "\($0.constant)=\($0.wire)" })
    }

    @Test("A code is a bare JSON string both ways")
    func codeIsABareString() throws {
        for entry in Self.published {
            #expect(try WireJSON.encoded(entry.code) == "\"\(entry.wire)\"")
            #expect(try WireJSON.decode(ErrorCode.self, from: "\"\(entry.wire)\"") == entry.code)
        }
        #expect(throws: DecodingError.self) { try WireJSON.decode(ErrorCode.self, from: #"{"code": "not_found"}"#) }
        #expect(throws: DecodingError.self) { try WireJSON.decode(ErrorCode.self, from: "404") }
    }

    @Test("A code a device does not know yet still decodes, so newer servers do not break older devices")
    func unknownCodeDecodes() throws {
        let code = try WireJSON.decode(ErrorCode.self, from: #""replica_lagging""#)
        #expect(code.rawValue == "replica_lagging")
        #expect(!Self.published.map(\.code).contains(code))
    }

    @Test("An error body is {error: {code, message}}; details is absent when nil")
    func errorBodyWithoutDetails() throws {
        try expectWireShape(
            ErrorBody(ErrorDetail(code: .unauthorized, message: "The token has expired.")),
            is: #"{"error": {"code": "unauthorized", "message": "The token has expired."}}"#
        )
    }

    @Test("A sequence gap names the last seq done in error.details")
    func errorBodyWithDetails() throws {
        try expectWireShape(
            ErrorBody(
                ErrorDetail(
                    code: .sequenceGap, message: "Expected seq 42, got 44.", details: .object(["last_seq": .int(41)])
                )
            ),
            is: #"{"error": {"code": "sequence_gap", "message": "Expected seq 42, got 44.", "details": {"last_seq": 41}}}"#
        )
    }

    @Test("details holds any JSON, such as the versions a device must update to")
    func errorDetailsHoldAnyJSON() throws {
        try expectWireShape(
            ErrorDetail(
                code: .schemaTooOld, message: "Update the app.",
                details: .object([
                    "oldest_supported": .object(["Unit": .int(3)]), "yours": .object(["Unit": .int(2)]),
                    "entities": .array([.string("Unit")]),
                ])
            ),
            is: """
                {"code": "schema_too_old", "message": "Update the app.",
                 "details": {"oldest_supported": {"Unit": 3}, "yours": {"Unit": 2}, "entities": ["Unit"]}}
                """
        )
    }

    @Test("An error body without code or message is refused", arguments: ["code", "message"])
    func errorDetailMissingKey(_ key: String) throws {
        let literal = try WireJSON.removing(key, from: #"{"code": "forbidden", "message": "No."}"#)
        #expect(throws: DecodingError.self) { try WireJSON.decode(ErrorDetail.self, from: literal) }
        #expect(throws: DecodingError.self) { try WireJSON.decode(ErrorBody.self, from: #"{"error": \#(literal)}"#) }
    }

    @Test("An error body is wrapped in error, not bare")
    func errorBodyIsWrapped() throws {
        #expect(throws: DecodingError.self) {
            try WireJSON.decode(ErrorBody.self, from: #"{"code": "forbidden", "message": "No."}"#)
        }
    }
}
