public import ContractRuntime
import Logging
public import SyncProtocol

/// A refusal of a whole request, with the HTTP status it maps to and a stable error code.
/// Services throw it; the HTTP layer turns it into `{"error": {...}}` in one place.
public struct ServiceError: Error, Hashable, Sendable {
    /// The HTTP status to answer with.
    public var status: Int
    /// The error body's code, message and details.
    public var detail: ErrorDetail
    /// Seconds, for 429.
    public var retryAfter: Int?

    /// An error with its status, code, message and optional details and `Retry-After`.
    public init(status: Int, _ code: ErrorCode, _ message: String, details: ContractRuntime.JSONValue? = nil, retryAfter: Int? = nil) {
        self.status = status
        self.detail = ErrorDetail(code: code, message: message, details: details)
        self.retryAfter = retryAfter
    }

    /// 400 `malformed_request`.
    public static func malformed(_ message: String) -> ServiceError { ServiceError(status: 400, .malformedRequest, message) }
    /// 401 `unauthorized`.
    public static func unauthorized(_ message: String) -> ServiceError { ServiceError(status: 401, .unauthorized, message) }
    /// 403 `forbidden`.
    public static func forbidden(_ message: String) -> ServiceError { ServiceError(status: 403, .forbidden, message) }
    /// 404 `not_found`.
    public static func notFound(_ message: String) -> ServiceError { ServiceError(status: 404, .notFound, message) }
    /// 403 for a `client_id` whose stream another identity owns; says nothing of that identity or stream.
    public static func clientNotOwned() -> ServiceError {
        ServiceError(status: 403, .clientNotOwned, "this client_id belongs to another device; use the client_id this device was given")
    }
    /// 410 for a pull cursor older than its scope's data horizon: deletes after it were compacted.
    public static func cursorExpired(scopeKey: String) -> ServiceError {
        ServiceError(
            status: 410, .cursorExpired,
            "this cursor is older than the data horizon of the scope '\(scopeKey)': deletes after it are no longer kept; "
                + "pull the scope again from scratch (without a cursor) and drop the synced rows that pull does not deliver"
        )
    }
    /// 422 `unknown_entity`: the name is not a contract of this server.
    public static func unknownEntity(_ name: String) -> ServiceError {
        ServiceError(status: 422, .unknownEntity, "'\(name)' is not a contract of this server")
    }
}

extension ServiceError {
    /// Runs storage work; a failure of storage becomes a 500 that leaks nothing (a 503
    /// `storage_unavailable` with `Retry-After` while the database cannot be reached), and a
    /// ``ServiceError`` thrown inside a transaction passes through unchanged.
    public static func catchingStorageFailures<T>(_ work: () async throws -> T) async throws(ServiceError) -> T {
        do {
            return try await work()
        } catch let error as ServiceError {
            throw error
        } catch {
            if StorageAvailability.isUnavailable(error) { throw .storageUnavailable }
            storageLogger.error("storage failure: \(String(reflecting: error))")
            throw ServiceError(status: 500, .internalError, "the server could not read or write its storage")
        }
    }

    /// Where the causes of storage failures go (the answer says nothing of them).
    private static let storageLogger = Logger(label: "outpost.storage")

    /// The seconds a client is told to wait while the database cannot be reached.
    package static let storageRetryAfter = 5

    /// 503: the database cannot be reached now; nothing of the request was done, or, when the
    /// connection dropped at the commit, perhaps all of it (a push sent again is answered
    /// from what was stored, never applied twice).
    package static var storageUnavailable: ServiceError {
        ServiceError(
            status: 503, .storageUnavailable, "the server cannot use its database now (unreachable, or locked by another process); try again shortly",
            retryAfter: storageRetryAfter)
    }
}
