import SyncProtocol

/// The one check every identifier a request names passes where it enters (a path parameter, a
/// query parameter, a header, a console form field, a body's id), before it is compared with
/// anything or reaches storage.
///
/// - U+0000 is refused (`nul_character`): SQLite cuts text at it, so `u-nul%00x` would reach
///   the user `u-nul`.
/// - Other control characters (C0, DEL, C1), an empty value and one longer than
///   ``maximumBytes`` are refused (`identifier_invalid`).
/// - Only Unicode Normalization Form C is accepted (`identifier_not_normalized`), never
///   rewritten (see ``UnicodeIdentifier``).
enum Identifier {
    /// The longest identifier the server takes, in UTF-8 bytes.
    static let maximumBytes = 256

    /// Refuses `value` (what the request calls `name`) with a 400 (or `status`) unless it is a
    /// valid identifier: not empty, at most `maximumBytes` bytes, no control character, NFC.
    static func require(
        _ value: some StringProtocol, as name: String, maximumBytes: Int = Identifier.maximumBytes, status: Int = 400
    ) throws(ServiceError) {
        if let problem = problem(value, maximumBytes: maximumBytes) {
            throw refusal(problem, String(value), as: name, status: status)
        }
    }

    /// What is wrong with `value` as an identifier, or `nil` when nothing is.
    static func problem(_ value: some StringProtocol, maximumBytes: Int = Identifier.maximumBytes) -> Problem? {
        let bytes = value.utf8
        if bytes.isEmpty { return .empty }
        if bytes.count > maximumBytes { return .tooLong(maximumBytes) }
        for scalar in value.unicodeScalars {
            if scalar.value == 0 { return .nul }
            if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) { return .controlCharacter }
        }
        return UnicodeIdentifier.isNormalized(value) ? nil : .notNormalized
    }

    /// Why an identifier is refused.
    enum Problem: Equatable {
        case empty, tooLong(Int), nul, controlCharacter, notNormalized
    }

    static func refusal(_ problem: Problem, _ value: String, as name: String, status: Int = 400) -> ServiceError {
        switch problem {
        case .empty:
            return ServiceError(status: status, .identifierInvalid, "`\(name)` must not be empty")
        case .tooLong(let limit):
            return ServiceError(status: status, .identifierInvalid, "`\(name)` is longer than \(limit) bytes of UTF-8")
        case .nul:
            return ServiceError(status: status, .nulCharacter, "`\(name)` holds U+0000, which no identifier may contain")
        case .controlCharacter:
            return ServiceError(status: status, .identifierInvalid, "`\(name)` holds a control character, which no identifier may contain")
        case .notNormalized:
            return refusal(value, as: name, status: status)
        }
    }

    /// The refusal of a value that is not in NFC.
    static func refusal(_ value: String, as name: String, status: Int = 400) -> ServiceError {
        ServiceError(
            status: status, .identifierNotNormalized,
            "`\(name)` must be in Unicode Normalization Form C (NFC): `\(value)` is another spelling of `\(UnicodeIdentifier.normalized(value))`; identifiers are compared byte for byte"
        )
    }
}
