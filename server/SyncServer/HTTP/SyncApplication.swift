import ContractRuntime
import Foundation
public import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
public import Logging
import NIOCore
import ServiceLifecycle
package import SyncProtocol

/// One route the server answers: a method and a path template (`/assets/{id}`).
public struct RouteDescription: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The HTTP method (`GET`, `POST`…).
    public var method: String
    /// The path template.
    public var path: String

    /// A route with its method and path template.
    public init(method: String, path: String) {
        self.method = method
        self.path = path
    }

    /// The route as `METHOD /path`.
    public var description: String { "\(method) \(path)" }

    /// Orders routes by path, then method.
    public static func < (lhs: RouteDescription, rhs: RouteDescription) -> Bool {
        (lhs.path, lhs.method) < (rhs.path, rhs.method)
    }
}

/// The server's router and the list of routes it registered (the OpenAPI test compares that
/// list with `docs/openapi.yaml`, so the two cannot drift).
public struct SyncRouter {
    /// The Hummingbird router with every route registered.
    public let router: Router<SyncRequestContext>
    /// Every route registered, as the OpenAPI test compares them with `docs/openapi.yaml`.
    public let routes: [RouteDescription]
    /// Delivers the sinks (webhooks, learning record stores); runs beside the server as one of
    /// its services (``buildApplication(configuration:environment:logger:onServerRunning:)``).
    package let sinkDelivery: SinkDelivery
    /// The fleet census; writes its observations as one of the server's services.
    package let census: FleetCensus
}

/// What the routes call: storage, services and the token signer.
public struct ServerEnvironment: Sendable {
    /// The database (``SQLiteStorage`` or ``PostgresStorage``).
    public var storage: any ServerStorage
    /// Signs and verifies the bearer tokens.
    public var signer: TokenSigner
    /// The Prometheus metrics the server records.
    public var metrics: ServerMetrics
    /// The server's clock.
    public var clock: any ServerClock
    /// `nil` builds one from ``ServerConfiguration/rateLimit``.
    public var rateLimiter: RateLimiter?
    /// The apps built on this server: their reducers, computed fields and routes.
    public var apps: [any ServerApp]
    /// Test-only pauses (`OUTPOST_FAULT_DELAY_MS`), for crash tests that kill the server at a
    /// chosen point; none by default.
    package var faultPauses = FaultPauses.none

    /// An environment on `storage` and `signer`; the rest have defaults.
    public init(
        storage: any ServerStorage, signer: TokenSigner, metrics: ServerMetrics = ServerMetrics(),
        clock: any ServerClock = SystemClock(), rateLimiter: RateLimiter? = nil, apps: [any ServerApp] = []
    ) {
        self.storage = storage
        self.signer = signer
        self.metrics = metrics
        self.clock = clock
        self.rateLimiter = rateLimiter
        self.apps = apps
    }
}

/// The router of a sync server: every route of `docs/openapi.yaml`.
///
/// Middleware order: security headers (outermost, on every response), the refusal of transfer
/// codings other than chunked, Hummingbird's request log
/// (`debug`: method and path), metrics and the outcome log line (see every final status), the
/// per-address limit on failed authentication and `/metrics` (never `/health`), errors (the one place
/// errors become JSON), the identifier check of every path segment, query parameter and
/// identifier header (`RequestInputMiddleware`), then, for everything but `/health` and `/metrics`, authentication,
/// the per-device rate limit and the fleet census (which notes only what those let through); admin
/// routes also require an admin token. The operator console
/// (`/console`, ``ServerConfiguration/console``) signs in with its own session cookie.
public func buildRouter(configuration: ServerConfiguration, environment: ServerEnvironment) -> SyncRouter {
    let router = Router(context: SyncRequestContext.self)
    router.add(middleware: SecurityHeadersMiddleware())
    router.add(middleware: TransferCodingMiddleware())
    router.add(middleware: LogRequestsMiddleware(.debug))
    router.add(middleware: RequestMetricsMiddleware(metrics: environment.metrics))
    if let peerLimit = configuration.peerLimit {
        router.add(middleware: PeerLimitMiddleware(limiter: RateLimiter(peerLimit), trustedProxies: configuration.trustedProxies))
    }
    router.add(middleware: ErrorMiddleware())
    // Every path segment, query parameter and identifier header, once, before any route.
    router.add(middleware: RequestInputMiddleware())
    let routes = SyncRoutes(configuration: configuration, environment: environment)
    let table = RouteTable()

    table.add(.get, "/health", on: router, use: routes.health)
    table.add(.get, "/metrics", on: router, use: routes.metrics)

    let authenticated = router.group()
    // On a storage several processes share, the limit is counted there, so it holds across
    // processes, and checked while the identity is read; otherwise in this process's memory.
    let shared = configuration.rateLimit.flatMap { limit in
        environment.storage.engine.sharedRateWindows.map { SharedRateLimiter(limit: limit, windows: $0, clock: environment.clock) }
    }
    authenticated.add(
        middleware: AuthenticationMiddleware(
            signer: environment.signer, storage: environment.storage, clock: environment.clock,
            sharedRateLimit: environment.rateLimiter == nil ? shared : nil))
    if let limiter = environment.rateLimiter {
        authenticated.add(middleware: RateLimitMiddleware(limiter: limiter))
    } else if let limit = configuration.rateLimit, shared == nil {
        authenticated.add(middleware: RateLimitMiddleware(limiter: .local(RateLimiter(limit))))
    }
    // After authentication and the rate limit: a request refused for its token or its rate
    // (429) is not noted, so a device makes the census work no faster than its rate allows.
    if configuration.fleetCensus {
        authenticated.add(middleware: FleetCensusMiddleware(census: routes.census, clock: environment.clock))
    }
    table.add(.post, "/sync/v1/push", on: authenticated, use: routes.push)
    table.add(.get, "/sync/v1/pull", on: authenticated, use: routes.pull)
    table.add(.post, "/sync/v1/subscriptions/pull", on: authenticated, use: routes.subscriptionPull)
    table.add(.get, "/sync/v1/live", on: authenticated, use: routes.live)
    table.add(.put, "/sync/v1/device-key", on: authenticated, use: routes.registerDeviceKey)
    table.add(.post, FileRoutes.files, on: authenticated, use: routes.declareFile)
    table.add(.head, "/sync/v1/files/uploads/{upload}", on: authenticated, use: routes.fileUploadOffset)
    table.add(.patch, "/sync/v1/files/uploads/{upload}", on: authenticated, use: routes.receiveFileBytes)
    table.add(.delete, "/sync/v1/files/uploads/{upload}", on: authenticated, use: routes.abandonFileUpload)
    table.add(.get, "/sync/v1/files/{sha256}", on: authenticated, use: routes.downloadFile)
    table.add(.head, "/sync/v1/files/{sha256}", on: authenticated, use: routes.downloadFile)

    let feedReaders = authenticated.group()
    feedReaders.add(middleware: FeedReaderMiddleware())
    table.add(.get, "/admin/v1/changes", on: feedReaders, use: routes.changes)

    let admin = authenticated.group()
    admin.add(middleware: AdminOnlyMiddleware())
    table.add(.post, "/admin/v1/content/{entity}", on: admin, use: routes.publish)
    table.add(.delete, "/admin/v1/content/{entity}/{id}", on: admin, use: routes.deleteContent)
    table.add(.post, "/admin/v1/revocations", on: admin, use: routes.revoke)
    table.add(.delete, "/admin/v1/users/{user}", on: admin, use: routes.eraseUser)
    table.add(.get, "/admin/v1/users/{user}/export", on: admin, use: routes.exportUser)
    table.add(.get, "/admin/v1/fleet", on: admin, use: routes.fleet)
    table.add(.get, "/admin/v1/fleet/devices", on: admin, use: routes.fleetDevices)
    table.add(.get, "/admin/v1/fleet/devices/{user}/{device}", on: admin, use: routes.fleetDevice)
    table.add(.put, "/admin/v1/teams/{team}/members/{user}", on: admin, use: routes.addTeamMember)
    table.add(.delete, "/admin/v1/teams/{team}/members/{user}", on: admin, use: routes.removeTeamMember)
    let sinkRoutes = SinkRoutes(
        storage: environment.storage.engine, clock: environment.clock, delivery: routes.sinkDelivery, configuration: configuration,
        listing: routes.listing, kinds: SinkKinds(apps: environment.apps))
    table.add(.post, "/admin/v1/sinks", on: admin, use: sinkRoutes.add)
    table.add(.get, "/admin/v1/sinks", on: admin, use: sinkRoutes.list)
    table.add(.get, "/admin/v1/sinks/{sink}", on: admin, use: sinkRoutes.show)
    table.add(.delete, "/admin/v1/sinks/{sink}", on: admin, use: sinkRoutes.remove)
    table.add(.get, "/admin/v1/sinks/{sink}/dead-letters", on: admin, use: sinkRoutes.deadLetters)
    table.add(.post, "/admin/v1/sinks/{sink}/dead-letters/replay", on: admin, use: sinkRoutes.replay)

    let appRoutes = AppRoutes(configuration: configuration, environment: environment, table: table, authenticated: authenticated, admin: admin)
    for app in environment.apps { app.addRoutes(to: appRoutes) }

    // HTML for operators, not API: on the router itself, outside the route table.
    if configuration.console.isEnabled {
        ConsoleRoutes(configuration: configuration, environment: environment, census: routes.census, listing: routes.listing).register(on: router)
    }

    return SyncRouter(router: router, routes: table.routes, sinkDelivery: routes.sinkDelivery, census: routes.census)
}

/// The sync server as a Hummingbird application, ready for `runService()` or `test(.router)`.
///
/// - Parameters:
///   - configuration: the address, limits and timeouts.
///   - environment: storage, file store, signer, clock, metrics and apps (``buildRouter(configuration:environment:)``).
///   - logger: where the server logs; every line about a request carries its
///     `hb.request.id`. `nil` uses Hummingbird's default (level from `LOG_LEVEL`).
///   - onServerRunning: called once the server listens, with the port it listens on (the
///     one picked when ``ServerConfiguration/port`` is 0).
public func buildApplication(
    configuration: ServerConfiguration, environment: ServerEnvironment, logger: Logger? = nil,
    onServerRunning: @escaping @Sendable (_ port: Int?) async -> Void = { _ in }
) -> some ApplicationProtocol {
    let built = buildRouter(configuration: configuration, environment: environment)
    let timeouts = configuration.timeouts
    let http1 = HTTP1Channel.Configuration(
        additionalChannelHandlers: [
            RequestDeadlineHandler(headers: TimeAmount(timeouts.headers), body: TimeAmount(timeouts.body), idle: TimeAmount(timeouts.idle))
        ],
        idleTimeout: TimeAmount(timeouts.idle)
    )
    var services: [any Service] = [built.sinkDelivery, built.census]
    let server: HTTPServerBuilder
    if let files = configuration.tls {
        do {
            let certificate = try ServerCertificate(files: files, logger: logger ?? Logger(label: "outpost.tls"))
            services.append(certificate)
            // ALPN offers h2 and http/1.1: a client that offers h2 gets it, any other HTTP/1.1. A
            // connection whose handshake is not done within `timeouts.handshake` is closed.
            server = try .http2Upgrade(
                tlsConfiguration: certificate.tlsConfiguration(),
                configuration: HTTP2UpgradeChannel.Configuration(idleTimeout: timeouts.idle, streamConfiguration: http1),
                handshakeTimeout: timeouts.handshake
            )
        } catch {
            // Reported when the server starts (`runService` throws it): this function cannot throw.
            server = HTTPServerBuilder { _ in throw error }
        }
    } else {
        server = .http1(configuration: http1)
    }
    return Application(
        responder: ChildTaskResponder(built.router.buildResponder()),
        server: server,
        configuration: ApplicationConfiguration(
            address: .hostname(configuration.host, port: configuration.port), serverName: "outpost-sync-server"
        ),
        services: services,
        onServerRunning: { channel in await onServerRunning(channel.localAddress?.port) },
        logger: logger
    )
}

/// The sync server with the default metrics, system clock and rate limiter of `configuration`.
public func buildApplication(
    configuration: ServerConfiguration, storage: any ServerStorage, signer: TokenSigner
) -> some ApplicationProtocol {
    buildApplication(configuration: configuration, environment: ServerEnvironment(storage: storage, signer: signer))
}

/// Registers routes and remembers them.
final class RouteTable {
    private(set) var routes: [RouteDescription] = []

    func add(
        _ method: HTTPRequest.Method, _ path: String, on group: some RouterMethods<SyncRequestContext>,
        use handler: @escaping @Sendable (Request, SyncRequestContext) async throws -> Response
    ) {
        group.on(RouterPath(path), method: method, use: handler)
        routes.append(RouteDescription(method: method.rawValue, path: path))
    }
}

/// The route handlers. Each reads and checks its input, calls one service, and answers; errors
/// are thrown to ``ErrorMiddleware``.
struct SyncRoutes: Sendable {
    let configuration: ServerConfiguration
    let environment: ServerEnvironment
    let pushService: PushService
    let pullService: PullService
    /// Pages of the subscriptions devices hold (`POST /sync/v1/subscriptions/pull`).
    let subscriptionService: SubscriptionService
    let fileService: FileService
    let contentService: ContentService
    let liveChannels: LiveChannels
    /// Pull pages written ahead of their request (see ``PullReadAhead``).
    let pullReadAhead: PullReadAhead
    /// The memory pull pages and every other listing page may take at once
    /// (``ServerConfiguration/responseMemoryBytes``).
    let responseMemory: ResponseMemoryBudget
    /// What one pull page reserves of ``responseMemory`` while it is built.
    let pullPageReservation: Int
    /// The byte budget of every listing response (``ListingBudget``): pages in bytes, and their
    /// room in ``responseMemory``.
    let listing: ListingBudget
    /// A tenant's applied changes for backend services (`GET /admin/v1/changes`).
    let changeFeed: ChangeFeed
    /// Wakes change-feed requests that wait for the next commit.
    let commitSignal: CommitSignal
    /// Delivers the sinks.
    let sinkDelivery: SinkDelivery
    /// What the server knows of each device (`/admin/v1/fleet`).
    let census: FleetCensus

    init(configuration: ServerConfiguration, environment: ServerEnvironment) {
        self.configuration = configuration
        self.environment = environment
        pushService = PushService(
            storage: environment.storage, clock: environment.clock, maximumClockSkew: configuration.maximumClockSkew,
            reducers: environment.apps.flatMap(\.reducers)
        )
        pullService = PullService(storage: environment.storage, pageBytes: configuration.pageBytes)
        subscriptionService = SubscriptionService(storage: environment.storage, pages: pullService, limits: configuration.identityLimits)
        fileService = FileService(
            storage: environment.storage.engine, blobs: environment.storage.engine.defaultBlobStore, limits: configuration.files,
            clock: environment.clock)
        let responseMemory = ResponseMemoryBudget(capacity: configuration.responseMemoryBytes, maximumWait: configuration.responseMemoryWait)
        self.responseMemory = responseMemory
        pullPageReservation = responseMemory.reservation(
            pageBytes: configuration.pageBytes, largestRowBytes: environment.storage.contracts.largestRowBytes)
        listing = ListingBudget(
            pageBytes: configuration.pageBytes, memory: responseMemory, largestItemBytes: environment.storage.contracts.largestRowBytes)
        contentService = ContentService(storage: environment.storage, clock: environment.clock, apps: environment.apps)
        liveChannels = LiveChannels(
            configuration: configuration.live, storage: environment.storage, clock: environment.clock, metrics: environment.metrics
        )
        pullReadAhead = PullReadAhead(maximumPages: configuration.pullReadAheadPages)
        changeFeed = ChangeFeed(storage: environment.storage)
        let signal = CommitSignal()
        commitSignal = signal
        environment.storage.engine.observeCommits { _ in signal.signal() }
        census = FleetCensus(
            storage: environment.storage.engine, clock: environment.clock, metrics: environment.metrics,
            contracts: Set(environment.storage.contracts.currentVersions.keys),
            contractsPerDevice: configuration.identityLimits.censusContractsPerDevice)
        sinkDelivery = SinkDelivery(
            storage: environment.storage.engine, configuration: configuration.sinks, metrics: environment.metrics, clock: environment.clock,
            logger: Logger(label: "outpost.sinks"), outbound: OutboundAddressPolicy(allowList: configuration.outboundAllowList),
            kinds: SinkKinds(apps: environment.apps))
    }

    // MARK: Operations

    @Sendable func health(_ request: Request, context: SyncRequestContext) async throws -> Response {
        do {
            _ = try await environment.storage.engine.read { reader in try await reader.lastSequence(tenant: "", clientID: "") }
        } catch {
            context.logger.error("health: storage unreachable: \(String(reflecting: error))")
            throw ServiceError(status: 503, .internalError, "storage is unreachable")
        }
        return try .json(["status": "ok"], request: request)
    }

    /// Behind its own token (``ServerConfiguration/metricsToken``), compared in constant time;
    /// closed (404) when none is configured, so a server never shows its traffic by default.
    @Sendable func metrics(_ request: Request, context: SyncRequestContext) async throws -> Response {
        guard let expected = configuration.metricsToken else {
            throw ServiceError.notFound("/metrics is off on this server: start it with a metrics token (--metrics-token-file)")
        }
        let sent = request.headers[.authorization].flatMap { header -> Substring? in
            header.lowercased().hasPrefix("bearer ") ? header.dropFirst("bearer ".count) : nil
        }
        guard let sent, MetricsToken.matches(String(sent.trimmingCharacters(in: .whitespaces)), expected) else {
            throw ServiceError.unauthorized("/metrics needs Authorization: Bearer <metrics token>")
        }
        return Response(
            status: .ok, headers: [.contentType: ServerMetrics.contentType],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: environment.metrics.exposition()))
        )
    }

    // MARK: Sync

    @Sendable func push(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let body = try await request.pushBody(limit: configuration.maximumBodyBytes, maximumDepth: configuration.maximumJSONDepth)
        await environment.faultPauses.pause(at: .pushBeforeApply)
        let response = try await pushService.push(body, identity: identity)
        pullReadAhead.discard(identity: identity, clientID: body.clientId)
        await environment.faultPauses.pause(at: .pushBeforeAnswer)
        environment.metrics.record(response)
        context.logger.debug(
            "push applied",
            metadata: ["mutations": .stringConvertible(response.results.count), "last_seq": .stringConvertible(response.lastSeq)]
        )
        return try .json(response, request: request)
    }

    /// `PUT /sync/v1/device-key`: files the body's public key under the token's (tenant, user,
    /// device), never an identity the body names (``DeviceKeyStore``). Idempotent; another key
    /// replaces the device's earlier one (a reinstall), audited.
    @Sendable func registerDeviceKey(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        guard !identity.isAdmin, !identity.isIntegration else {
            throw ServiceError.forbidden("only a device token registers a device key")
        }
        guard case .object(let body) = try await request.jsonBody(limit: 4096, maximumDepth: 4),
            case .string(let publicKey)? = body["public_key"]
        else {
            throw ServiceError.malformed("the body must be {\"public_key\": \"<base64>\", \"algorithm\": \"ES256\"}")
        }
        var registration = DeviceKeyRegistration(publicKey: publicKey)
        switch body["algorithm"] {
        case nil: break
        case .string(let algorithm)?: registration.algorithm = algorithm
        default: throw ServiceError.malformed("algorithm must be a string")
        }
        let key = try DeviceKeyStore.publicKey(of: registration)
        let now = environment.clock.now()
        let outcome = try await ServiceError.catchingStorageFailures {
            try await environment.storage.engine.write { try await DeviceKeyStore.register(key, for: identity, at: now, in: $0) }
        }
        return try .json(DeviceKeyRegistered(fingerprint: DeviceKeyStore.fingerprint(of: key), outcome: outcome.rawValue), request: request)
    }

    @Sendable func pull(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        guard let scope = request.query("scope"), !scope.isEmpty else {
            throw ServiceError.malformed("the `scope` query parameter is required (a scope name like `user`, or a scope key)")
        }
        try Identifier.require(scope, as: "scope")
        if let client = request.headers[.outpostClient] { try Identifier.require(client, as: ProtocolHeaders.clientID) }
        let cursor = request.query("cursor").flatMap { $0.isEmpty ? nil : $0 }
        if try flag("urgent", request) {
            let lease = try await responseMemory.acquire(pullPageReservation)
            let page = try await pullService.urgentPage(scope: scope, cursor: cursor, schema: try schema(request), identity: identity)
            environment.metrics.recordPull(rows: page.rowCount)
            let response = Response.json(encoded: Data(page.json()), request: request, compressible: true)
            lease.release()
            return response
        }
        let asked = PullReadAhead.Request(
            identity: identity, scope: scope, cursor: cursor, limit: try limit(request), schema: try schema(request),
            clientID: request.headers[.outpostClient],
            contracts: request.query("contracts").map { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) },
            gzip: request.acceptsGzip, changedFields: try changedFields(request)
        )
        let body: PullReadAhead.Body
        let readAhead: Bool
        switch await pullReadAhead.take(asked) {
        case .hit(let ready):
            (body, readAhead) = (ready, true)
        case .miss:
            let lease = try await responseMemory.acquire(pullPageReservation)
            (body, readAhead) = (try await readPull(asked, lease: lease).write(), false)
            pullReadAhead.readAhead(after: asked, answered: body) { [self] next in
                // Read-ahead only uses room that is free: it never makes a request wait.
                guard let lease = responseMemory.tryAcquire(pullPageReservation) else { throw CancellationError() }
                return try await readPull(next, lease: lease)
            }
        }
        environment.metrics.recordPull(rows: body.rowCount, readAhead: readAhead)
        context.logger.debug(
            "pull page", metadata: ["scope": .string(scope), "rows": .stringConvertible(body.rowCount), "has_more": .stringConvertible(body.hasMore)]
        )
        // The page's memory goes back to the budget once its bytes are handed to the connection
        // (or, should the connection fail first, when the response is dropped).
        let lease = body.lease
        return .json(compressible: body.bytes, gzipped: asked.gzip) { lease?.release() }
    }

    /// A pull page read from storage, and how to write its response body: its JSON, compressed
    /// when the device takes gzip.
    /// `lease` holds the page's room in the response memory budget; once the body is written it keeps
    /// only the body's bytes, and goes with the body.
    private func readPull(_ asked: PullReadAhead.Request, lease: ResponseMemoryBudget.Lease) async throws(ServiceError) -> PullReadAhead.Read {
        let page = try await pullService.page(
            scope: asked.scope, cursor: asked.cursor, limit: asked.limit, schema: asked.schema, clientID: asked.clientID,
            identity: asked.identity, contracts: asked.contracts, changedFields: asked.changedFields
        )
        return PullReadAhead.Read(cursor: page.cursor, hasMore: page.hasMore) { [gzip = asked.gzip] in
            let json = page.json()
            let bytes = gzip ? Gzip.compress(json) : Data(json)
            lease.shrink(to: bytes.count)
            return PullReadAhead.Body(bytes: bytes, rowCount: page.rowCount, cursor: page.cursor, hasMore: page.hasMore, lease: lease)
        }
    }

    // MARK: Admin

    @Sendable func publish(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let entity = try parameter("entity", context)
        let row = try await request.jsonBody(limit: configuration.maximumBodyBytes, maximumDepth: configuration.maximumJSONDepth)
        guard case .object = row else { throw ServiceError.malformed("the body must be a JSON object: the row to publish") }
        let published = try await contentService.publish(entity: entity, row: row, identity: identity, urgent: try flag("urgent", request))
        return try .json(published, request: request)
    }

    @Sendable func deleteContent(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        try await contentService.delete(
            entity: try parameter("entity", context), id: try parameter("id", context), identity: identity, urgent: try flag("urgent", request)
        )
        return Response(status: .noContent)
    }

    // MARK: Identity held by the server

    // MARK: A user's data

    /// Erases the user's data in the admin's tenant (``UserErasure``) and answers what was erased.
    @Sendable func eraseUser(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let user = try parameter("user", context)
        // The admin's own tokens would be refused from then on, this one included.
        guard user != identity.userID else { throw ServiceError.malformed("an admin token cannot erase its own user ('\(user)')") }
        let report = try await UserErasure(storage: environment.storage, clock: environment.clock).erase(
            tenant: identity.tenant, userID: user,
            requestedBy: UserErasure.Requester(userID: identity.userID, deviceID: identity.deviceID)
        )
        context.logger.notice("user erased", metadata: ["user": .string(report.userID), "rows": .stringConvertible(report.rowsErased)])
        return try .json(report, request: request)
    }

    /// Everything held about the user in the admin's tenant, as JSON lines (``UserExport``),
    /// streamed as it is read: chunks of the listing page budget, each holding its room in the
    /// response memory (``ListingBudget/stream(request:contentType:lease:produce:)``), never the
    /// whole body at once.
    @Sendable func exportUser(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let user = try parameter("user", context)
        let (tenant, export) = (identity.tenant, UserExport(storage: environment.storage, clock: environment.clock))
        let lease = try await listing.reserve()
        let found: Bool
        do {
            found = try await export.holdsAnything(tenant: tenant, userID: user)
        } catch let error as ServiceError {
            throw error
        } catch {
            throw ServiceError(status: 500, .internalError, "the export could not be read; try again")
        }
        guard found else { throw ServiceError.notFound("the server holds nothing about user '\(user)' in tenant \(tenant)") }
        let (pageBytes, logger) = (listing.pageBytes, context.logger)
        return listing.stream(request: request, contentType: "application/x-ndjson; charset=utf-8", lease: lease) { output in
            do {
                try await export.export(tenant: tenant, userID: user, pageBytes: pageBytes, to: output)
            } catch {
                // The status is sent: the body ends short, and the client sees it cut.
                logger.error("user export failed while it was sent: \(String(reflecting: error))")
                throw error
            }
        }
    }

    /// `{"device": "D"}` or `{"user": "U"}`: every token of it in the admin's tenant issued until
    /// now is refused from the next request on, on every process.
    /// `GET /admin/v1/changes?after=CURSOR&contracts=A,B&limit=N&wait=S`: the admin's tenant's
    /// applied changes in commit order (``ChangeFeed``); with `wait`, an empty page waits up to
    /// that many seconds for a commit. A page is bounded in bytes and holds its room in the
    /// response memory while it is read and sent (``ListingBudget``), never while it waits.
    @Sendable func changes(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        var cursor: ChangeFeed.Cursor?
        if let text = request.query("after"), !text.isEmpty {
            guard let parsed = ChangeFeed.Cursor(text: text) else {
                throw ServiceError.malformed("`after` must be a cursor the change feed returned")
            }
            cursor = parsed
        }
        var contracts: Set<String>?
        if let names = request.query("contracts") {
            let listed = Set(names.split(separator: ",", omittingEmptySubsequences: false).map(String.init))
            let catalog = environment.storage.contracts
            if let unknown = listed.sorted().first(where: { catalog.entity(named: $0) == nil && catalog.event(named: $0) == nil }) {
                throw ServiceError(status: 400, .unknownEntity, "'\(unknown)' is not a contract of this server")
            }
            contracts = listed
        }
        let limit = try RequestInput.limit(request) ?? 100
        guard (1...1000).contains(limit) else { throw ServiceError.malformed("`limit` must be from 1 to 1000") }
        var wait = 0
        if let text = request.query("wait") {
            guard let seconds = Int(text), (0...60).contains(seconds) else { throw ServiceError.malformed("`wait` must be seconds from 0 to 60") }
            wait = seconds
        }
        let deadline = ContinuousClock.now + .seconds(wait)
        while true {
            let generation = commitSignal.generation
            let lease = try await listing.reserve()
            let page = try await changeFeed.page(
                tenant: identity.tenant, after: cursor, contracts: contracts, limit: limit, byteBudget: listing.pageBytes)
            if !page.changes.isEmpty || page.hasMore || ContinuousClock.now >= deadline {
                return listing.respond(Data(CanonicalJSON.bytes(page.json)), request: request, lease: lease)
            }
            lease.release()
            cursor = page.cursor
            await commitSignal.wait(after: generation, until: deadline)
        }
    }

    @Sendable func revoke(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        guard case .object(let body) = try await request.jsonBody(limit: 4096, maximumDepth: 4) else {
            throw ServiceError.malformed("the body must be {\"device\": \"…\"} or {\"user\": \"…\"}")
        }
        let target: (RevocationKind, String)
        switch (body["device"], body["user"]) {
        case (.string(let device)?, nil) where !device.isEmpty: target = (.device, device)
        case (nil, .string(let user)?) where !user.isEmpty: target = (.user, user)
        default: throw ServiceError.malformed("the body must name one non-empty `device` or `user`")
        }
        try Identifier.require(target.1, as: target.0.rawValue)
        let (tenant, now) = (identity.tenant, environment.clock.now().millisecondsSince1970 / 1000)
        try await ServiceError.catchingStorageFailures {
            try await environment.storage.engine.write { try await $0.revoke(tenant: tenant, kind: target.0, subject: target.1, at: now) }
        }
        return try .json(["revoked": target.0.rawValue, "subject": target.1, "tenant": tenant], request: request)
    }

    // MARK: The fleet census

    /// `GET /admin/v1/fleet?active=30d`: the admin's tenant's devices per contract version and app
    /// version, active (seen within the window) and stale: the census file `contractc check --fleet` reads.
    @Sendable func fleet(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let tenant = try context.requireIdentity().tenant
        let window = try activeWindow(request)
        let now = environment.clock.now().millisecondsSince1970 / 1000
        let lease = try await listing.reserve()
        let pageBytes = listing.pageBytes
        let summary = try await ServiceError.catchingStorageFailures {
            try await census.summary(tenant: tenant, now: now, activeSeconds: window, pageBytes: pageBytes)
        }
        return listing.respond(Data(CanonicalJSON.bytes(summary.json)), request: request, lease: lease)
    }

    /// `GET /admin/v1/fleet/devices?active=30d&limit=N&after=CURSOR`: the tenant's devices, the
    /// latest seen first; only those seen within `active` when it is given. A page is bounded in
    /// bytes (``ListingBudget``): `has_more` and `cursor` say where the next one starts.
    @Sendable func fleetDevices(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let tenant = try context.requireIdentity().tenant
        let since = try request.query("active").map { _ in environment.clock.now().millisecondsSince1970 / 1000 - (try activeWindow(request)) }
        let limit = try RequestInput.limit(request) ?? 100
        guard (1...1000).contains(limit) else { throw ServiceError.malformed("`limit` must be from 1 to 1000") }
        var after: FleetCensus.DevicesCursor?
        if let text = request.query("after"), !text.isEmpty {
            let key = try ListingCursor.decode(text, count: 3)
            guard case .int(let seen) = key[0], case .string(let user) = key[1], case .string(let device) = key[2] else {
                throw ServiceError.malformed("`after` must be the `cursor` a page of this list returned")
            }
            after = FleetCensus.DevicesCursor(lastSeenAt: seen, userID: user, deviceID: device)
        }
        let lease = try await listing.reserve()
        let pageBytes = listing.pageBytes
        let (devices, hasMore) = try await ServiceError.catchingStorageFailures {
            try await census.devicesPage(tenant: tenant, activeSince: since, after: after, limit: limit, pageBytes: pageBytes)
        }
        var page: [String: JSONValue] = ["devices": .array(devices.map(\.json)), "has_more": .bool(hasMore)]
        if let last = devices.last {
            page["cursor"] = .string(ListingCursor.encode([.int(last.lastSeenAt), .string(last.userID), .string(last.deviceID)]))
        } else if let text = request.query("after"), !text.isEmpty {
            page["cursor"] = .string(text)
        }
        return listing.respond(Data(CanonicalJSON.bytes(.object(page))), request: request, lease: lease)
    }

    /// `GET /admin/v1/fleet/devices/{user}/{device}`: one device as the census knows it.
    @Sendable func fleetDevice(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let tenant = try context.requireIdentity().tenant
        let (user, device) = (try parameter("user", context), try parameter("device", context))
        let lease = try await listing.reserve()
        let found = try await ServiceError.catchingStorageFailures { try await census.device(tenant: tenant, userID: user, deviceID: device) }
        guard let found else { throw ServiceError.notFound("the census has not seen device '\(device)' of user '\(user)' in tenant \(tenant)") }
        return listing.respond(Data(CanonicalJSON.bytes(found.json)), request: request, lease: lease)
    }

    private func activeWindow(_ request: Request) throws(ServiceError) -> Int64 {
        guard let text = request.query("active") else { return FleetSummary.defaultActiveWindow }
        guard let seconds = FleetSummary.window(text) else {
            throw ServiceError.malformed("`active` is a window like `30d`, `12h`, `90m` or seconds, not '\(text)'")
        }
        return seconds
    }

    @Sendable func addTeamMember(_ request: Request, context: SyncRequestContext) async throws -> Response {
        try await setTeamMember(true, context)
    }

    @Sendable func removeTeamMember(_ request: Request, context: SyncRequestContext) async throws -> Response {
        try await setTeamMember(false, context)
    }

    private func setTeamMember(_ isMember: Bool, _ context: SyncRequestContext) async throws -> Response {
        let tenant = try context.requireIdentity().tenant
        let (team, user) = (try parameter("team", context), try parameter("user", context))
        let changed = try await ServiceError.catchingStorageFailures {
            try await environment.storage.engine.write {
                try await $0.setTeamMembership(tenant: tenant, team: team, userID: user, isMember: isMember)
            }
        }
        // Adding a member twice is the same request twice; removing one who is not a member
        // matched nothing, and the operator must hear so rather than believe it done.
        if !isMember, !changed { throw ServiceError.notFound("'\(user)' is not a member of team '\(team)' in tenant \(tenant)") }
        return Response(status: .noContent)
    }

    // MARK: Input (RequestInput: the same rules for the apps' routes)

    private func schema(_ request: Request) throws(ServiceError) -> [String: Int] { try RequestInput.schema(request) }

    private func limit(_ request: Request) throws(ServiceError) -> Int? { try RequestInput.limit(request) }

    private func flag(_ name: String, _ request: Request) throws(ServiceError) -> Bool { try RequestInput.flag(name, request) }

    /// A pull's `fields`: `changed` when the device merges rows sent with only their changed
    /// fields, `all` (or absent) for whole rows.
    private func changedFields(_ request: Request) throws(ServiceError) -> Bool {
        switch request.query("fields") {
        case nil, "all"?: return false
        case "changed"?: return true
        case let other?: throw .malformed("fields must be `changed` or `all`, not '\(other)'")
        }
    }

    private func parameter(_ name: String, _ context: SyncRequestContext) throws(ServiceError) -> String {
        try RequestInput.parameter(name, context)
    }

}
