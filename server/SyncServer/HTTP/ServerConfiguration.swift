public import Foundation

/// How a server listens and what it allows. Every limit has a default fit for one machine.
public struct ServerConfiguration: Sendable {
    /// The address to bind (`127.0.0.1` keeps the server local; `0.0.0.0` serves the network).
    public var host: String
    /// The port to bind; 0 picks a free one.
    public var port: Int
    /// The largest request body outside asset uploads (after gzip inflation): 5 MiB.
    public var maximumBodyBytes: Int
    /// The largest asset upload (`PUT /admin/v1/assets/{id}`): 100 MiB.
    public var maximumAssetBytes: Int
    /// Requests per device, or `nil` for no limit.
    public var rateLimit: RateLimit?
    /// The URL devices reach this server at, for asset download links (`https://sync.example.com`).
    /// `nil` uses the address the request's connection reached, never its `Host` header
    /// (``AppRequest/baseURL``).
    public var publicBaseURL: String?
    /// How far ahead of the server's clock a pushed hybrid clock may be (5 minutes): a later
    /// one is rejected with `clock_skew`, since it would win every later edit of its row.
    public var maximumClockSkew: Duration = PushService.defaultMaximumClockSkew
    /// How deep a request body's JSON may nest (64): deeper is a 400 `nesting_too_deep`.
    public var maximumJSONDepth: Int = 64
    /// Failed authentications (401s) and `/metrics` requests per client address, or `nil` for
    /// no limit: 10 a second, 100 at once. `/health` and valid tokens are never limited by it.
    public var peerLimit: RateLimit? = RateLimit(requestsPerSecond: 10, burst: 100)
    /// The reverse proxies whose `X-Forwarded-For` names the client for the per-address limit
    /// (none by default: every peer is judged by its own address).
    public var trustedProxies = TrustedProxies()
    /// The bearer token `/metrics` requires; `nil` keeps `/metrics` closed (404).
    public var metricsToken: String?
    /// How long a connection may take to send a request's headers (10 s), a request's body once
    /// its headers arrived (120 s), and the next request's headers on a kept-alive connection
    /// (60 s), and, under ``tls``, to complete its TLS handshake (10 s); a slower one is closed.
    public var timeouts = Timeouts()
    /// The live channel's heartbeat and limits.
    public var live = LiveChannelConfiguration()
    /// Pull pages written ahead of their request at most at once, for all devices (256): while
    /// a device receives and stores a page that has more after it, the server writes the next
    /// ones, up to 4 ahead of it. 0 turns read-ahead off.
    public var pullReadAheadPages = 256
    /// The bytes of items one page of any response that lists stored data holds at most,
    /// whatever its `limit` (4 MiB): pull pages, the change feed, the export's chunks, the fleet,
    /// sinks and dead letters, the console's lists. A page ends with the first item that takes it
    /// past this (a larger item travels alone) and says `has_more`.
    public var pageBytes = PullService.defaultPageBytes
    /// The memory all those pages may take at once in this process (256 MiB): pages being read,
    /// written, kept ahead or sent. A request that finds no room waits up to
    /// ``responseMemoryWait``, then gets 503 `server_busy` with `Retry-After`; pull read-ahead
    /// stops while it is full.
    public var responseMemoryBytes = 256 * 1024 * 1024
    /// How long a request waits for room in ``responseMemoryBytes`` before it is refused (10 s).
    public var responseMemoryWait: Duration = .seconds(10)
    /// How this process delivers the sinks (webhooks, learning record stores).
    public var sinks = SinkDeliveryConfiguration()
    /// Addresses the server's own requests (sinks' deliveries and replays, JWKS fetches) may
    /// reach although they are loopback, link-local, private, shared (CGNAT), unspecified,
    /// multicast, reserved or this machine's own (none by default: `serve --outbound-allow
    /// CIDR`, repeatable). Checked after name resolution, at every connection
    /// (`OutboundAddressPolicy`).
    public var outboundAllowList: [CIDRBlock] = []
    /// Whether the fleet census notes the devices' requests (on by default; `serve --no-census`).
    /// Off, its admin routes answer what earlier runs recorded.
    public var fleetCensus = true
    /// The caps on what one identity can make the server keep (census names, sinks, console
    /// sessions).
    public var identityLimits = IdentityStateLimits()
    /// How large files may be, and the users' and tenants' file quotas (``FileLimits``).
    public var files = FileLimits()
    /// The operator console at `/console` (on by default; it needs an admin token to sign in).
    public var console = ConsoleConfiguration()
    /// Serve HTTPS with this certificate and key, HTTP/2 to clients that offer it (ALPN) and
    /// HTTP/1.1 to the others; the files are read again when they change. `nil` (the default)
    /// serves plain HTTP/1.1, as behind a proxy that terminates TLS.
    public var tls: TLSFiles?

    /// Deadlines of ``timeouts``.
    public struct Timeouts: Sendable, Hashable {
        /// How long a client may take to send the request's headers.
        public var headers: Duration
        /// How long a client may take to send the request's body.
        public var body: Duration
        /// How long a connection may stay open with no request.
        public var idle: Duration
        /// From a connection's opening to the end of its TLS handshake (under ``ServerConfiguration/tls``).
        public var handshake: Duration

        /// Timeouts with the given deadlines; the defaults are the server's.
        public init(
            headers: Duration = .seconds(10), body: Duration = .seconds(120), idle: Duration = .seconds(60), handshake: Duration = .seconds(10)
        ) {
            self.headers = headers
            self.body = body
            self.idle = idle
            self.handshake = handshake
        }
    }

    /// A configuration with the given address, limits and public URL; the defaults are the server's.
    public init(
        host: String = "127.0.0.1", port: Int = 8080, maximumBodyBytes: Int = 5 * 1024 * 1024,
        maximumAssetBytes: Int = 100 * 1024 * 1024, rateLimit: RateLimit? = RateLimit(), publicBaseURL: String? = nil
    ) {
        self.host = host
        self.port = port
        self.maximumBodyBytes = maximumBodyBytes
        self.maximumAssetBytes = maximumAssetBytes
        self.rateLimit = rateLimit
        self.publicBaseURL = publicBaseURL
    }

    /// A token bucket per device: `burst` requests at once, refilled at `requestsPerSecond`.
    public struct RateLimit: Sendable, Hashable {
        /// Requests a device may make per second, on average.
        public var requestsPerSecond: Double
        /// Requests a device may make at once.
        public var burst: Int

        /// A limit with the given rate and burst.
        public init(requestsPerSecond: Double = 50, burst: Int = 100) {
            self.requestsPerSecond = requestsPerSecond
            self.burst = burst
        }
    }
}

/// The operator console's settings (``ServerConfiguration/console``).
public struct ConsoleConfiguration: Sendable, Hashable {
    /// Whether `/console` is served at all.
    public var isEnabled: Bool
    /// Whether the session cookie is always marked `Secure`, as for a server reached only over
    /// HTTPS. Without it the cookie is `Secure` when the request came over HTTPS: a trusted
    /// proxy's `X-Forwarded-Proto: https`, or an `https` ``ServerConfiguration/publicBaseURL``.
    public var secureCookie: Bool
    /// How long a session lasts at most (8 hours); never past the expiry of the admin token it
    /// was opened with.
    public var sessionLifetime: Duration

    /// Settings with the given switches and session lifetime.
    public init(isEnabled: Bool = true, secureCookie: Bool = false, sessionLifetime: Duration = .seconds(8 * 3600)) {
        self.isEnabled = isEnabled
        self.secureCookie = secureCookie
        self.sessionLifetime = sessionLifetime
    }
}

/// The files of a server's data folder.
public struct DataDirectory: Sendable, Hashable {
    /// Where the data folder is.
    public var url: URL

    /// The data folder at `url`.
    public init(_ url: URL) {
        self.url = url
    }

    /// The SQLite database (`server.sqlite`, with its WAL files) lives in the folder itself.
    public var database: URL { url }
    /// Where a server before the engine's files kept asset files (by SHA-256); `serve` moves
    /// them into the files as it starts, and deletes the folder once it is empty.
    public var assets: URL { url.appendingPathComponent("assets", isDirectory: true) }
    /// The token signing key, unless a secret file or `OUTPOST_TOKEN_SECRET` is given.
    public var tokenKey: URL { url.appendingPathComponent(TokenKey.fileName) }
    /// Whether a server has stored anything here yet.
    public var hasDatabase: Bool { FileManager.default.fileExists(atPath: url.appendingPathComponent("server.sqlite").path) }
}
