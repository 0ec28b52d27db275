import ContractRuntime
public import Foundation
public import SyncProtocol

/// How the sync engine talks to the server. `URLSessionTransport` is the real one; tests can
/// substitute a failing or scripted transport.
public protocol SyncTransport: Sendable {
    /// `POST /sync/v1/push`.
    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse
    /// `POST /sync/v1/push`, telling `sent` the size of each body it sends as it goes on the wire
    /// (compressed when it is; a push sent again uncompressed after a refusal is told twice): what
    /// a data budget counts. The default sends ``push(_:)`` and tells the size of the push's JSON.
    func push(_ request: PushRequest, sent: @Sendable (Int) -> Void) async throws(TransportError) -> PushResponse
    /// Whether the server refused a compressed push (`415`), so that this transport sends its
    /// pushes as they are. The engine keeps it in its store once it is `true`, and tells the
    /// next launch's transport (``rememberPushCompressionRefused()``). Default `false`.
    var pushCompressionRefused: Bool { get }
    /// The engine's store remembers that the server refused a compressed push (in an earlier
    /// launch): send every push as it is. The default does nothing.
    func rememberPushCompressionRefused()
    /// `GET /sync/v1/pull`, one page: its JSON body as the server sent it (inflated when it came
    /// gzipped). The engine reads it straight into the store's column values
    /// (`PullResponse(json:)` parses it, for anything else that wants to look at it); a 2xx body
    /// that is not a pull page fails the sync with ``TransportError/decoding(_:)``.
    func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError)
        -> Data
    /// `GET /sync/v1/pull?contracts=…`: one page of only `contracts`' rows (`nil`: all), for a
    /// fresh device downloading its contracts by priority. Called with a filter only when
    /// ``filtersPullsByContract`` is true; the default ignores it.
    func pull(
        scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String, contracts: [String]?
    ) async throws(TransportError) -> Data
    /// `GET /sync/v1/pull?fields=changed`: as ``pull(scope:cursor:limit:schema:clientID:contracts:)``,
    /// telling the server (when `changedFields`) that the device merges rows sent with only the
    /// fields changed since `cursor` (rows with `_base_version`). The default ignores
    /// `changedFields` (every row comes whole).
    func pull(
        scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String, contracts: [String]?, changedFields: Bool
    ) async throws(TransportError) -> Data
    /// `GET /sync/v1/pull?urgent=true`: the changes the operator marked urgent in a scope after
    /// `cursor` (a withdrawn unit), as a pull page whose cursor is `cursor` unchanged, taken
    /// before any other page of a sync. `nil` when this transport cannot ask (the default): the
    /// changes then arrive with the pages.
    func urgentChanges(scope: String, cursor: String, schema: [String: Int], clientID: String) async throws(TransportError) -> Data?
    /// `POST /sync/v1/subscriptions/pull`: a page of each subscription in `request` (at most 64),
    /// with the schema in `X-Outpost-Schema` and `clientID` in `X-Outpost-Client`, as on a pull
    /// (SyncProtocol's `SubscriptionPullResponse`). The default throws
    /// ``TransportError/subscriptionsUnsupported``: the engine then leaves the subscriptions
    /// unsynced (``SubscriptionStatus/lastFailure``) and syncs the scopes all the same.
    func pullSubscriptions(_ request: SubscriptionPullRequest, schema: [String: Int], clientID: String) async throws(TransportError)
        -> SubscriptionPullResponse
    /// `GET /sync/v1/live`: opens the live channel and answers its events as they arrive
    /// (SyncProtocol's `LiveEvent`); the sequence ends when the server closes the channel and throws when
    /// the connection fails or falls silent. `nil` when this transport or the server has no
    /// live channel (the default): the engine then syncs on its timer alone.
    func liveEvents() async throws(TransportError) -> AsyncThrowingStream<LiveEvent, any Error>?
    /// `GET /health`: whether the server answers at all.
    func health() async -> Bool
    /// Whether ``pull(scope:cursor:limit:schema:clientID:contracts:)`` passes its filter to the
    /// server, so the engine may download a fresh scope by priority tiers. Default `false`: the
    /// engine then pulls every scope whole.
    var filtersPullsByContract: Bool { get }

    /// Registers the device's public key for the token's identity (`PUT /sync/v1/device-key`),
    /// or returns `nil` when this transport cannot (the default): the server then refuses the
    /// device's signed writes with `signature_invalid`.
    func registerDeviceKey(_ registration: DeviceKeyRegistration) async throws(TransportError) -> DeviceKeyRegistered?

    /// `POST /sync/v1/files`: declares a file to upload. The answer says the server holds it
    /// already (`stored`: nothing to send) or where its upload stands (an unfinished one of this
    /// user for the same hash is answered again, with its offset). The default throws
    /// ``TransportError/filesUnsupported``.
    func startFileUpload(_ request: FileUploadRequest) async throws(TransportError) -> FileUploadAnswer
    /// `HEAD /sync/v1/files/uploads/{id}`: how many bytes the upload holds (`Upload-Offset`).
    /// A `404` means the upload is gone (expired or abandoned): start again. The default throws
    /// ``TransportError/filesUnsupported``.
    func fileUploadOffset(uploadID: String) async throws(TransportError) -> Int64
    /// `PATCH /sync/v1/files/uploads/{id}`: `bytes` from `offset`. The default throws
    /// ``TransportError/filesUnsupported``.
    func sendFileBytes(_ bytes: Data, uploadID: String, offset: Int64) async throws(TransportError) -> FileChunkAnswer
    /// `GET /sync/v1/files/{sha256}` with `Range: bytes=<lower>-<upper>`: those bytes of the file
    /// (or the whole file, when the server ignores the range). The default throws
    /// ``TransportError/filesUnsupported``.
    func fileBytes(sha256: String, range: ClosedRange<Int64>) async throws(TransportError) -> FileChunk
    /// ``fileBytes(sha256:range:)`` with the bytes written into a new file at `destination`
    /// (replacing one there) instead of held in memory, so a range of many MiB costs no memory
    /// and the engine can move the bytes into place rather than copy them. Nothing is left at
    /// `destination` when this throws. The default asks ``fileBytes(sha256:range:)`` and writes
    /// what it answers.
    func fileBytes(sha256: String, range: ClosedRange<Int64>, into destination: URL) async throws(TransportError) -> ReceivedFileBytes
    /// `DELETE /sync/v1/files/uploads/{id}`: gives up an upload no write needs any more, so the
    /// server frees what it held at once (an upload already gone is not an error). The default
    /// throws ``TransportError/filesUnsupported``.
    func abandonFileUpload(uploadID: String) async throws(TransportError)
}

/// The answer to a file upload's `PATCH`.
public enum FileChunkAnswer: Hashable, Sendable {
    /// `204`: the upload now holds `offset` bytes (all of them: the server checked and stored the file).
    case accepted(offset: Int64)
    /// `409 offset_mismatch`: the upload holds `serverOffset` bytes; send from there.
    case offsetMismatch(serverOffset: Int64)
}

/// Bytes of a file the server sent (``SyncTransport/fileBytes(sha256:range:)``).
public struct FileChunk: Hashable, Sendable {
    /// Where `data` starts in the file: the range's lower bound (`206`), or 0 when the server sent
    /// the whole file (`200`).
    public var start: Int64
    /// The bytes received.
    public var data: Data
    /// The file's size, when the server said (`Content-Range`, or a whole body).
    public var totalSize: Int64?

    /// `data`, which starts at byte `start` of a file of `totalSize` bytes.
    public init(start: Int64, data: Data, totalSize: Int64?) {
        self.start = start
        self.data = data
        self.totalSize = totalSize
    }
}

/// Bytes of a file the server sent into a file on the device
/// (``SyncTransport/fileBytes(sha256:range:into:)``).
public struct ReceivedFileBytes: Hashable, Sendable {
    /// Where the bytes start in the file: the range's lower bound (`206`), or 0 when the server
    /// sent the whole file (`200`).
    public var start: Int64
    /// How many bytes were written.
    public var byteCount: Int64
    /// The file's size, when the server said (`Content-Range`, or a whole body).
    public var totalSize: Int64?

    /// `byteCount` bytes from byte `start` of a file of `totalSize` bytes.
    public init(start: Int64, byteCount: Int64, totalSize: Int64?) {
        self.start = start
        self.byteCount = byteCount
        self.totalSize = totalSize
    }

    /// `chunk`'s bytes written to `destination`, for a transport that answers in memory.
    static func writing(_ chunk: FileChunk, to destination: URL) throws(TransportError) -> ReceivedFileBytes {
        do {
            try chunk.data.write(to: destination)
        } catch {
            try? FileManager.default.removeItem(at: destination)
            throw .network("writing the received bytes to \(destination.path): \(error)")
        }
        return ReceivedFileBytes(start: chunk.start, byteCount: Int64(chunk.data.count), totalSize: chunk.totalSize)
    }
}

extension SyncTransport {
    /// `false`: pulls are not filtered by contract.
    public var filtersPullsByContract: Bool { false }

    /// Sends ``push(_:)`` and tells `sent` the size of the push's JSON.
    public func push(_ request: PushRequest, sent: @Sendable (Int) -> Void) async throws(TransportError) -> PushResponse {
        sent((try? JSONEncoder().encode(request).count) ?? 0)
        return try await push(request)
    }

    /// `false`: no refusal is known.
    public var pushCompressionRefused: Bool { false }

    /// Does nothing.
    public func rememberPushCompressionRefused() {}

    /// Throws ``TransportError/filesUnsupported``.
    public func startFileUpload(_ request: FileUploadRequest) async throws(TransportError) -> FileUploadAnswer {
        throw .filesUnsupported
    }

    /// Throws ``TransportError/filesUnsupported``.
    public func fileUploadOffset(uploadID: String) async throws(TransportError) -> Int64 {
        throw .filesUnsupported
    }

    /// Throws ``TransportError/filesUnsupported``.
    public func sendFileBytes(_ bytes: Data, uploadID: String, offset: Int64) async throws(TransportError) -> FileChunkAnswer {
        throw .filesUnsupported
    }

    /// Throws ``TransportError/filesUnsupported``.
    public func fileBytes(sha256: String, range: ClosedRange<Int64>) async throws(TransportError) -> FileChunk {
        throw .filesUnsupported
    }

    /// Asks ``fileBytes(sha256:range:)`` and writes what it answers to `destination`.
    public func fileBytes(sha256: String, range: ClosedRange<Int64>, into destination: URL) async throws(TransportError) -> ReceivedFileBytes {
        try ReceivedFileBytes.writing(try await fileBytes(sha256: sha256, range: range), to: destination)
    }

    /// Throws ``TransportError/filesUnsupported``.
    public func abandonFileUpload(uploadID: String) async throws(TransportError) {
        throw .filesUnsupported
    }

    /// Returns `nil`: this transport cannot register a key.
    public func registerDeviceKey(_ registration: DeviceKeyRegistration) async throws(TransportError) -> DeviceKeyRegistered? {
        nil
    }

    /// Returns `nil`: urgent changes arrive with the pages.
    public func urgentChanges(scope: String, cursor: String, schema: [String: Int], clientID: String) async throws(TransportError) -> Data? {
        nil
    }

    /// Throws ``TransportError/subscriptionsUnsupported``.
    public func pullSubscriptions(
        _ request: SubscriptionPullRequest, schema: [String: Int], clientID: String
    ) async throws(TransportError) -> SubscriptionPullResponse {
        throw .subscriptionsUnsupported
    }

    /// Returns `nil`: no live channel.
    public func liveEvents() async throws(TransportError) -> AsyncThrowingStream<LiveEvent, any Error>? {
        nil
    }

    /// Pulls the whole scope, ignoring `contracts`.
    public func pull(
        scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String, contracts: [String]?
    ) async throws(TransportError) -> Data {
        try await pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID)
    }

    /// Pulls with the contract filter, ignoring `changedFields`.
    public func pull(
        scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String, contracts: [String]?, changedFields: Bool
    ) async throws(TransportError) -> Data {
        try await pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: contracts)
    }
}

/// Why a request did not produce a decoded answer.
public enum TransportError: Error, Sendable, Hashable {
    /// The request never got an HTTP answer (offline, DNS, timeout, connection reset).
    case network(String)
    /// An HTTP error answer, with the server's `{"error": …}` body when it sent one and
    /// `Retry-After` in seconds when present.
    case http(status: Int, body: ErrorBody?, retryAfter: TimeInterval?)
    /// A 2xx answer that did not decode.
    case decoding(String)
    /// 426: the device's schema for a contract is below what the server still supports.
    /// `lastSeq` is the last push seq the server applied for this device, when it said (a
    /// refused push's seqs above it were not taken).
    case updateRequired(UpdateRequired, lastSeq: Int64?)
    /// The server's certificate chain validated, but none of its keys is one of the client's
    /// ``PublicKeyPins``: the connection was closed before any request was sent. `served` are the
    /// pins of the chain's keys, the server's own first. Not retried: it needs a pin or a
    /// certificate changed, or it is an interception.
    case publicKeyPinMismatch(expected: [String], served: [String])

    /// The HTTP status, when there was one.
    public var status: Int? {
        switch self {
        case .http(let status, _, _): status
        case .updateRequired: 426
        case .network, .decoding, .publicKeyPinMismatch: nil
        }
    }

    /// The server erased the user's data (`410 user_erased`): the device wipes its store.
    public var isUserErased: Bool {
        if case .http(410, let body?, _) = self { return body.error.code == .userErased }
        return false
    }

    /// The error as the store records it.
    public var detail: ErrorDetail {
        switch self {
        case .network(let message): ErrorDetail(code: ErrorCode("network"), message: message)
        case .http(let status, let body, _):
            body?.error ?? ErrorDetail(code: ErrorCode("http_\(status)"), message: "HTTP \(status)")
        case .decoding(let message): ErrorDetail(code: ErrorCode("decoding"), message: message)
        case .updateRequired(let requirement, _):
            ErrorDetail(code: .schemaTooOld, message: "update required for \(requirement.entity ?? "a contract")")
        case .publicKeyPinMismatch: ErrorDetail(code: ErrorCode("public_key_pin_mismatch"), message: pinMismatchMessage ?? "")
        }
    }

    /// What ``SyncTransport/pullSubscriptions(_:schema:clientID:)`` throws in a transport that
    /// does not implement it: 501 `subscriptions_unsupported`, as a server without the route
    /// would answer. Never retried.
    public static let subscriptionsUnsupported = TransportError.http(
        status: 501,
        body: ErrorBody(
            ErrorDetail(
                code: ErrorCode("subscriptions_unsupported"),
                message: "this transport does not pull subscriptions: it does not implement SyncTransport.pullSubscriptions(_:schema:clientID:)")),
        retryAfter: nil)

    /// What the file routes throw in a transport that does not implement them: 501
    /// `files_unsupported`, as a server without the routes would answer. Never retried: a write
    /// naming a file waits until the app uses a transport that uploads files.
    public static let filesUnsupported = TransportError.http(
        status: 501,
        body: ErrorBody(
            ErrorDetail(
                code: ErrorCode("files_unsupported"),
                message: "this transport does not send or fetch files: it does not implement the file routes of SyncTransport")),
        retryAfter: nil)

    /// For ``publicKeyPinMismatch(expected:served:)``: what the server served and what was pinned.
    public var pinMismatchMessage: String? {
        guard case .publicKeyPinMismatch(let expected, let served) = self else { return nil }
        return "the server's certificate does not match the pinned public keys: it served "
            + (served.isEmpty ? "no key" : served.map { "pin-sha256 \($0)" }.joined(separator: ", "))
            + "; the pins are " + expected.joined(separator: ", ")
    }
}
