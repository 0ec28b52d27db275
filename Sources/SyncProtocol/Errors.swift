public import ContractRuntime

/// A stable, machine-readable error code. Codes never change once published; messages may.
public struct ErrorCode: RawRepresentable, Codable, Hashable, Sendable, CustomStringConvertible {
    /// The code as sent, for example `version_conflict`.
    public var rawValue: String

    /// A code from its raw value; unknown codes are kept as sent.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// A code from its raw value, unlabelled.
    public init(_ rawValue: String) { self.rawValue = rawValue }

    /// The raw value.
    public var description: String { rawValue }

    /// Decodes a code from its JSON string.
    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    /// Encodes the code as its JSON string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    // Whole requests
    /// 400: the body or a parameter is not what the route takes.
    public static let malformedRequest = ErrorCode("malformed_request")
    /// 401: no token, or a token that is invalid or expired.
    public static let unauthorized = ErrorCode("unauthorized")
    /// 401: no `Authorization: Bearer` token.
    public static let tokenMissing = ErrorCode("token_missing")
    /// 401: the token is not a JWT with the claims of a device identity.
    public static let tokenMalformed = ErrorCode("token_malformed")
    /// 401: an unsigned token (`alg: none`), or one signed with an algorithm its key does not use.
    public static let tokenAlgorithmRefused = ErrorCode("token_algorithm_refused")
    /// 401: the token's `kid` names no key the server accepts (retired, or never configured).
    public static let tokenUnknownKey = ErrorCode("token_unknown_key")
    /// 401: the token's signature does not hold.
    public static let tokenInvalidSignature = ErrorCode("token_invalid_signature")
    /// 401: the token's `aud` is not this server's audience.
    public static let tokenWrongAudience = ErrorCode("token_wrong_audience")
    /// 401: the token expired; ask for a new one.
    public static let tokenExpired = ErrorCode("token_expired")
    /// 401: the token is issued in the future.
    public static let tokenNotYetValid = ErrorCode("token_not_yet_valid")
    /// 401: the device or user was revoked after the token was issued.
    public static let tokenRevoked = ErrorCode("token_revoked")
    /// 410: the user's data was erased on the server after this token was issued: the device
    /// wipes its store, and the user signs in again to start afresh.
    public static let userErased = ErrorCode("user_erased")
    /// 403: the token does not grant this scope or route.
    public static let forbidden = ErrorCode("forbidden")
    /// 400: the body's JSON nests deeper than the server reads.
    public static let nestingTooDeep = ErrorCode("nesting_too_deep")
    /// 400: a string in the request holds U+0000.
    public static let nulCharacter = ErrorCode("nul_character")
    /// 403: a mutation's device signature does not hold: missing on a contract with `signed:
    /// true`, made with another key than the one this device registered, or over other bytes
    /// (another mutation, payload, device or user). Nothing of the push is applied.
    public static let signatureInvalid = ErrorCode("signature_invalid")
    /// 403: the `client_id` belongs to another device's push stream.
    public static let clientNotOwned = ErrorCode("client_not_owned")
    /// 404
    public static let notFound = ErrorCode("not_found")
    /// 409: the push does not continue where the server is; `details.last_seq` says where.
    public static let sequenceGap = ErrorCode("sequence_gap")
    /// 409: a sink with this id exists already in the tenant.
    public static let sinkExists = ErrorCode("sink_exists")
    /// 409: the sink is of a kind this server has no longer (the app that added the kind is not
    /// among the server's apps): its dead letters cannot be sent again.
    public static let sinkKindUnknown = ErrorCode("sink_kind_unknown")
    /// 410: the pull's cursor is older than the scope's data horizon (deletes it may not have
    /// seen were compacted); pull the scope again from scratch (no cursor).
    public static let cursorExpired = ErrorCode("cursor_expired")
    /// 413
    public static let payloadTooLarge = ErrorCode("payload_too_large")
    /// 415: the body's `Content-Encoding` is one the server does not read (it reads `gzip` and
    /// `identity`); `details.accepted` lists those. Send the body again as is.
    public static let unsupportedEncoding = ErrorCode("unsupported_encoding")
    /// 416
    public static let rangeNotSatisfiable = ErrorCode("range_not_satisfiable")
    /// 422: an unknown contract, or a request the contracts refuse.
    public static let unknownEntity = ErrorCode("unknown_entity")
    /// 426: the device's schema is older than the oldest supported; `details` lists versions.
    public static let schemaTooOld = ErrorCode("schema_too_old")
    /// 429: over the rate; retry after `Retry-After` seconds.
    public static let rateLimited = ErrorCode("rate_limited")
    /// 503: the server process holds as many live channels as it keeps; retry after
    /// `Retry-After` seconds (the device syncs on its timer meanwhile).
    public static let liveCapacity = ErrorCode("live_capacity")
    /// 503: the server is holding as many pull pages in memory as it allows; retry after
    /// `Retry-After` seconds (nothing is wrong with the request).
    public static let serverBusy = ErrorCode("server_busy")
    /// 503: the server cannot reach its database now; retry after `Retry-After` seconds.
    public static let storageUnavailable = ErrorCode("storage_unavailable")
    /// 400 (a whole request) or per mutation: an identifier (tenant, user, device, team, scope
    /// key, row id, client id, contract name) is not in Unicode Normalization Form C. The server
    /// compares identifiers byte for byte and takes them in NFC only, so two spellings of one
    /// name can never reach each other's data.
    public static let identifierNotNormalized = ErrorCode("identifier_not_normalized")
    /// 400: an identifier from a path, query, header, form or body is empty, longer than the
    /// server takes (256 bytes of UTF-8 by default), or holds a control character.
    public static let identifierInvalid = ErrorCode("identifier_invalid")
    /// 409: the identity already holds as many of something (sinks, console sessions, census
    /// names) as the server keeps for it; `details.limit` says how many. Remove one first.
    public static let limitReached = ErrorCode("limit_reached")
    /// 400: a subscription pull names more subscriptions than the server takes from one device.
    public static let tooManySubscriptions = ErrorCode("too_many_subscriptions")
    /// 400 (in a subscription's page): its filter selects more rows than one subscription may
    /// hold; subscribe to something narrower.
    public static let subscriptionTooBroad = ErrorCode("subscription_too_broad")
    /// 400 (in a subscription's page): the contracts declare no subscription by that name.
    public static let unknownSubscription = ErrorCode("unknown_subscription")
    /// 500: the server failed; nothing was written.
    public static let internalError = ErrorCode("internal_error")

    // Per mutation (inside a valid push)
    /// The payload does not match the contract (types, enums, lengths, required fields).
    public static let invalidPayload = ErrorCode("invalid_payload")
    /// A value is larger than its field's `max_bytes` (`details.fields` names it).
    public static let valueTooLarge = ErrorCode("value_too_large")
    /// The row's values together, measured as stored, are larger than its contract's top-level
    /// `max_bytes` (`details.max_bytes`); a patch is measured once merged with the stored row.
    /// Not the sync block's `max_row_bytes`, which only bounds what a device keeps.
    public static let rowTooLarge = ErrorCode("row_too_large")
    /// An event's `occurred_at` is outside what the server knows to be possible: before the
    /// thing it is about existed on the server (an attempt's start, an assessment revision's
    /// publication) or later than its receipt plus the clock skew allowed.
    public static let occurredAtOutOfRange = ErrorCode("occurred_at_out_of_range")
    /// The contract's direction or policy does not let devices write it.
    public static let notWritable = ErrorCode("not_writable")
    /// The operation needs something the policy requires (`base_version`, `hlc`, `base`).
    public static let missingPolicyData = ErrorCode("missing_policy_data")
    /// The row is not there to update, patch or delete.
    public static let rowNotFound = ErrorCode("row_not_found")
    /// An event whose `hash` does not match its payload, or an uploaded file whose bytes do not
    /// match the SHA-256 it was declared with.
    public static let hashMismatch = ErrorCode("hash_mismatch")
    /// 409: a pushed row names a file the server does not hold, or one this identity may not
    /// name; upload it first (`POST /sync/v1/files`).
    public static let fileMissing = ErrorCode("file_missing")
    /// 409: a file upload's `Upload-Offset` is not where the upload stands; its offset is in the
    /// answer's `Upload-Offset`.
    public static let offsetMismatch = ErrorCode("offset_mismatch")
    /// 413: storing this would take the user or the tenant past its file quota.
    public static let quotaExceeded = ErrorCode("quota_exceeded")
    /// 422: an uploaded file does not begin as files of its declared content type do (a JPEG
    /// that is not one); the upload is dropped.
    public static let contentTypeMismatch = ErrorCode("content_type_mismatch")
    /// The mutation uses a contract version newer than the server's.
    public static let schemaTooNew = ErrorCode("schema_too_new")
    /// The mutation's hybrid clock is further ahead of the server's clock than it allows.
    public static let clockSkew = ErrorCode("clock_skew")
    /// A reducer refused the event (for example a transition a task cannot make).
    public static let invalidTransition = ErrorCode("invalid_transition")
    /// A submission after the assessment's `available_until` day (UTC), by the device's time of
    /// the submission: the assessment no longer takes attempts.
    public static let assessmentClosed = ErrorCode("assessment_closed")
    /// An answer or a submission later than the attempt's start plus the assessment's
    /// `time_limit_seconds`: it does not count.
    public static let timeLimitExceeded = ErrorCode("time_limit_exceeded")
}

/// An error: a stable code, a human message, and details where they help.
public struct ErrorDetail: Codable, Sendable, Hashable, Error {
    /// The stable code clients branch on.
    public var code: ErrorCode
    /// What went wrong, for people.
    public var message: String
    /// Structured details, where they help (the field, the limit).
    public var details: JSONValue?

    /// An error from its code, message and optional details.
    public init(code: ErrorCode, message: String, details: JSONValue? = nil) {
        self.code = code
        self.message = message
        self.details = details
    }
}

/// Every error response: `{"error": {"code": …, "message": …}}`.
public struct ErrorBody: Codable, Sendable, Hashable {
    /// The error.
    public var error: ErrorDetail

    /// A body wrapping one error.
    public init(_ error: ErrorDetail) {
        self.error = error
    }
}
