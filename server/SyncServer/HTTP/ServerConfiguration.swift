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
    /// `nil` uses the request's `Host` header.
    public var publicBaseURL: String?

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
        public var requestsPerSecond: Double
        public var burst: Int

        public init(requestsPerSecond: Double = 50, burst: Int = 100) {
            self.requestsPerSecond = requestsPerSecond
            self.burst = burst
        }
    }
}

/// The files of a server's data folder.
public struct DataDirectory: Sendable, Hashable {
    public var url: URL

    public init(_ url: URL) {
        self.url = url
    }

    /// The SQLite database (`server.sqlite`, with its WAL files) lives in the folder itself.
    public var database: URL { url }
    /// Asset files, by id.
    public var assets: URL { url.appendingPathComponent("assets", isDirectory: true) }
    /// The token signing key, unless a secret file or `OUTPOST_TOKEN_SECRET` is given.
    public var tokenKey: URL { url.appendingPathComponent(TokenKey.fileName) }
    /// Whether a server has stored anything here yet.
    public var hasDatabase: Bool { FileManager.default.fileExists(atPath: url.appendingPathComponent("server.sqlite").path) }
}
