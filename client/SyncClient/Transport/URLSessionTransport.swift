import ContractRuntime
public import Foundation
public import SyncProtocol

#if canImport(FoundationNetworking)
    public import FoundationNetworking
#endif

/// `SyncTransport` over URLSession: JSON bodies, gzip accepted, a timeout per request and the
/// device token as `Authorization: Bearer`, asked again of the ``TokenProvider`` after a 401.
public final class URLSessionTransport: SyncTransport {
    /// The server's address; every route is relative to it.
    public let baseURL: URL
    let tokens: any TokenProvider
    /// The session every request goes through; an app's own routes use it too.
    public let session: URLSession
    /// Seconds per request.
    public let timeout: TimeInterval
    /// Sent as `X-Outpost-App` with every request, for the server's fleet census (`fieldops-ios/1.4.2`).
    public let appVersion: String?
    /// Sent with every request when given (opt-in): the counts since the last accepted request.
    public let telemetry: SyncTelemetry?
    /// What every request goes through instead of ``session``, when given (pinned connections):
    /// the sync and app routes, health checks and asset ranges alike, and the live channel
    /// through ``HTTPExchange/stream(_:)`` (an exchange that cannot stream opens none:
    /// ``liveEvents()`` answers `nil` and the engine syncs on its timer).
    public let exchange: (any HTTPExchange)?
    /// The size in bytes from which a push's JSON body is sent gzip-compressed
    /// (`Content-Encoding: gzip`); `nil` never compresses. A server that refuses the encoding is
    /// sent the push again as is, and no more compressed pushes (``compressesPushes``).
    public let pushCompressionThreshold: Int?
    /// Whether the server refused a compressed push (415, or an older server's 400 naming the
    /// encoding), or the engine's store remembers it did: this transport then sends its pushes
    /// uncompressed.
    let compressionRefusal = Locked(false)

    /// - Parameters:
    ///   - baseURL: the server, e.g. `https://sync.example.com`.
    ///   - timeout: seconds per request.
    ///   - session: the session requests go through; `nil` makes an ephemeral one with
    ///     `timeout` and `Accept-Encoding: gzip`.
    ///   - tokenProvider: where device tokens come from (asked before each request, and again
    ///     with `refresh` after a 401, then the request is retried once).
    ///   - appVersion: the app and its version, sent as `X-Outpost-App` (1 to 64 printable
    ///     ASCII characters; the server refuses anything else with 400).
    ///   - telemetry: the store's ``OfflineStore/telemetry`` to send its counts with every
    ///     request (opt-in); `nil` sends none.
    ///   - exchange: sends the requests instead of `session` (``exchange``); `nil` uses the session.
    ///   - compressPushesFrom: the size in bytes from which push bodies are sent gzip-compressed
    ///     (``pushCompressionThreshold``, default ``defaultPushCompressionThreshold``); `nil`
    ///     sends them as they are.
    public init(
        baseURL: URL, timeout: TimeInterval = 30, session: URLSession? = nil, tokenProvider: any TokenProvider, appVersion: String? = nil,
        telemetry: SyncTelemetry? = nil, exchange: (any HTTPExchange)? = nil,
        compressPushesFrom: Int? = URLSessionTransport.defaultPushCompressionThreshold
    ) {
        self.baseURL = baseURL
        self.pushCompressionThreshold = compressPushesFrom.map { max(0, $0) }
        self.timeout = timeout
        self.tokens = tokenProvider
        self.appVersion = appVersion
        self.telemetry = telemetry
        self.exchange = exchange
        if let session {
            self.session = session
        } else {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.timeoutIntervalForRequest = timeout
            configuration.timeoutIntervalForResource = timeout * 4
            configuration.httpAdditionalHeaders = ["Accept-Encoding": "gzip"]
            self.session = URLSession(configuration: configuration)
        }
    }

    /// A transport whose token is read from `token` for every request.
    public convenience init(
        baseURL: URL, timeout: TimeInterval = 30, session: URLSession? = nil, appVersion: String? = nil, telemetry: SyncTelemetry? = nil,
        compressPushesFrom: Int? = URLSessionTransport.defaultPushCompressionThreshold, token: @escaping @Sendable () -> String
    ) {
        self.init(
            baseURL: baseURL, timeout: timeout, session: session, tokenProvider: ClosureTokenProvider(token), appVersion: appVersion,
            telemetry: telemetry, compressPushesFrom: compressPushesFrom)
    }

    /// `POST /sync/v1/push`.
    public func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        try await push(request, sent: { _ in })
    }

    /// `PUT /sync/v1/device-key`: registers the device's public key.
    public func registerDeviceKey(_ registration: DeviceKeyRegistration) async throws(TransportError) -> DeviceKeyRegistered? {
        var urlRequest = makeRequest(path: "sync/v1/device-key", query: [])
        urlRequest.httpMethod = "PUT"
        urlRequest.setValue("application/json", forHTTPHeaderField: "Content-Type")
        do {
            urlRequest.httpBody = try JSONEncoder().encode(registration)
        } catch {
            throw .decoding("encoding the key registration: \(error)")
        }
        return try await send(urlRequest, as: DeviceKeyRegistered.self)
    }

    /// `GET /sync/v1/pull`: one page of a scope, as its JSON body.
    public func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError)
        -> Data
    {
        try await pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: nil)
    }

    /// Always: the server reads `contracts`.
    public var filtersPullsByContract: Bool { true }

    /// `GET /sync/v1/pull?contracts=…`: one page of only the contracts named (`nil`: all).
    public func pull(
        scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String, contracts: [String]?
    ) async throws(TransportError) -> Data {
        try await pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: contracts, changedFields: false)
    }

    /// `GET /sync/v1/pull`, with `fields=changed` when `changedFields`.
    public func pull(
        scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String, contracts: [String]?, changedFields: Bool
    ) async throws(TransportError) -> Data {
        var query = [URLQueryItem(name: "scope", value: scope)]
        if let cursor { query.append(URLQueryItem(name: "cursor", value: cursor)) }
        if let limit { query.append(URLQueryItem(name: "limit", value: String(limit))) }
        if let contracts { query.append(URLQueryItem(name: "contracts", value: contracts.joined(separator: ","))) }
        if changedFields { query.append(URLQueryItem(name: "fields", value: "changed")) }
        var urlRequest = makeRequest(path: "sync/v1/pull", query: query)
        urlRequest.httpMethod = "GET"
        urlRequest.setValue(SchemaHeader.encode(schema), forHTTPHeaderField: ProtocolHeaders.schema)
        urlRequest.setValue(clientID, forHTTPHeaderField: ProtocolHeaders.clientID)
        return try await body(of: urlRequest)
    }

    /// `POST /sync/v1/subscriptions/pull`: a page of each subscription in `request`.
    public func pullSubscriptions(
        _ request: SubscriptionPullRequest, schema: [String: Int], clientID: String
    ) async throws(TransportError) -> SubscriptionPullResponse {
        var urlRequest = makeRequest(path: "sync/v1/subscriptions/pull", query: [])
        urlRequest.httpMethod = "POST"
        urlRequest.setValue("application/json", forHTTPHeaderField: "Content-Type")
        urlRequest.setValue(SchemaHeader.encode(schema), forHTTPHeaderField: ProtocolHeaders.schema)
        urlRequest.setValue(clientID, forHTTPHeaderField: ProtocolHeaders.clientID)
        do {
            urlRequest.httpBody = try JSONEncoder().encode(request)
        } catch {
            throw .decoding("encoding the subscription pull: \(error)")
        }
        return try await send(urlRequest, as: SubscriptionPullResponse.self)
    }

    /// `GET /sync/v1/pull?urgent=true`: the scope's urgent changes after `cursor`.
    public func urgentChanges(scope: String, cursor: String, schema: [String: Int], clientID: String) async throws(TransportError) -> Data? {
        var urlRequest = makeRequest(
            path: "sync/v1/pull",
            query: [
                URLQueryItem(name: "scope", value: scope), URLQueryItem(name: "cursor", value: cursor), URLQueryItem(name: "urgent", value: "true"),
            ]
        )
        urlRequest.httpMethod = "GET"
        urlRequest.setValue(SchemaHeader.encode(schema), forHTTPHeaderField: ProtocolHeaders.schema)
        urlRequest.setValue(clientID, forHTTPHeaderField: ProtocolHeaders.clientID)
        return try await body(of: urlRequest)
    }

    /// `GET /health`: whether the server answers.
    public func health() async -> Bool {
        var request = makeRequest(path: "health", query: [])
        request.httpMethod = "GET"
        request.timeoutInterval = min(timeout, 10)
        guard let (_, http) = try? await perform(request) else { return false }
        return (200..<300).contains(http.statusCode)
    }

    // MARK: An app's own routes
    // What an app needs to call its own routes on the same server (the learning app's units
    // route and asset files): requests built, authorized and answered as the sync routes are.

    /// A request to `path` under ``baseURL``, with `query`, the timeout and the JSON and gzip
    /// `Accept` headers; ``send(_:as:)`` adds the token.
    public func makeRequest(path: String, query: [URLQueryItem]) -> URLRequest {
        var components = URLComponents(url: baseURL.appendingPathComponent(path), resolvingAgainstBaseURL: false)!
        if !query.isEmpty { components.queryItems = query }
        var request = URLRequest(url: components.url!, timeoutInterval: timeout)
        request.setValue("gzip", forHTTPHeaderField: "Accept-Encoding")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        return request
    }

    /// Sends `request` with the device token and decodes the JSON body of its 2xx answer; any
    /// other status is its typed error (a 401 is tried once more with a fresh token).
    public func send<T: Decodable>(_ request: URLRequest, as type: T.Type) async throws(TransportError) -> T {
        let data = try await body(of: request)
        do {
            return try JSONDecoder().decode(T.self, from: data)
        } catch {
            throw .decoding(String(describing: error))
        }
    }

    /// The body of a 2xx answer; any other status is its typed error. A 401 asks the token
    /// provider for a fresh token and sends the request once more.
    func body(of request: URLRequest) async throws(TransportError) -> Data {
        var refresh = false
        var request = request
        if let appVersion { request.setValue(appVersion, forHTTPHeaderField: ProtocolHeaders.appVersion) }
        // Taken for this request; given back unless the server accepts it.
        let counts = telemetry?.takeUnsent() ?? [:]
        if !counts.isEmpty { request.setValue(TelemetryHeader.encode(counts), forHTTPHeaderField: ProtocolHeaders.telemetry) }
        var accepted = false
        defer { if !accepted, !counts.isEmpty { telemetry?.giveBack(counts) } }
        while true {
            var request = request
            try await authorize(&request, refresh: refresh)
            let (data, http) = try await perform(request)
            if http.statusCode == 401, !refresh {
                refresh = true
                continue
            }
            guard (200..<300).contains(http.statusCode) else {
                throw Self.error(status: http.statusCode, data: data, retryAfter: http.value(forHTTPHeaderField: "Retry-After"))
            }
            accepted = true
            if !counts.isEmpty { telemetry?.sent() }
            return data
        }
    }

    /// One request as it is, and its answer of any status, through ``exchange`` when there is
    /// one, else ``session``; nothing is added (no token: see ``authorize(_:refresh:)``).
    public func perform(_ request: URLRequest) async throws(TransportError) -> (Data, HTTPURLResponse) {
        if let exchange { return try await exchange.send(request) }
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: request)
        } catch {
            throw .network(String(describing: error))
        }
        guard let http = response as? HTTPURLResponse else { throw .network("not an HTTP response") }
        return (data, http)
    }

    /// Sets `Authorization: Bearer` from the token provider (a fresh token with `refresh`).
    public func authorize(_ request: inout URLRequest, refresh: Bool) async throws(TransportError) {
        do {
            request.setValue("Bearer \(try await tokens.token(refresh: refresh))", forHTTPHeaderField: "Authorization")
        } catch {
            throw .network("no device token: \(error)")
        }
    }

    /// The typed error for an HTTP error answer.
    public static func error(status: Int, data: Data, retryAfter: String?) -> TransportError {
        let body = try? JSONDecoder().decode(ErrorBody.self, from: data)
        if status == 426 {
            var requirement = UpdateRequired()
            var lastSeq: Int64?
            if case .object(let details)? = body?.error.details {
                if case .string(let name)? = details["entity"] { requirement.entity = name }
                if case .int(let value)? = details["oldest_supported"] { requirement.oldestSupported = Int(value) }
                if case .int(let value)? = details["current"] { requirement.current = Int(value) }
                if case .int(let value)? = details["last_seq"] { lastSeq = value }
            }
            return .updateRequired(requirement, lastSeq: lastSeq)
        }
        return .http(status: status, body: body, retryAfter: retryAfter.flatMap(parseRetryAfter))
    }

    /// `Retry-After` as seconds (delta-seconds or an HTTP date).
    static func parseRetryAfter(_ text: String) -> TimeInterval? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let seconds = Double(trimmed) { return max(0, seconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: trimmed).map { max(0, $0.timeIntervalSinceNow) }
    }
}
