import ArgumentParser
import CoreMetrics
import Foundation
import Logging
import SyncProtocol
import SyncServer

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the sync server until SIGINT or SIGTERM.",
        discussion: """
            Opens (or creates) the SQLite database in DIR and applies the server migrations, then serves
            the routes of docs/openapi.yaml. On SIGINT or SIGTERM it stops accepting connections, lets
            requests in flight finish, and exits 0.

            With --postgres URL (or $\(PostgresStorage.environmentVariable)) everything is stored in that
            PostgreSQL database instead, and several processes may serve the same database behind a load
            balancer (docs/scaling.md); give them the same token key and a shared DIR for assets.

            Tokens are checked with the key of --secret-file, else of $\(TokenKey.environmentVariable), else
            of DIR/\(TokenKey.fileName) (created with 32 random bytes on first use).

            At start and every --housekeeping-interval it applies the data horizons: acknowledged push
            results older than --push-result-retention and tombstones older than --tombstone-horizon
            are deleted (docs/server.md, Data horizons); `sync-server housekeeping` does it once.

            Logs go to standard error, one line per answered request at `info` (method, route,
            status, milliseconds) and every line about a request with its hb.request.id; set
            LOG_LEVEL (trace, debug, info, notice, warning, error) to change how much is logged.

            For crash tests only: \(FaultPauses.environmentVariable)=push-before-answer:MS makes every push
            pause MS milliseconds after it is committed and before it is answered (push-before-apply:
            after it is read, before anything of it is applied), announced on standard error, so a
            test can kill the server exactly there.
            """
    )

    @OptionGroup var data: DataOptions
    @OptionGroup var horizonOptions: HorizonOptions

    @Option(
        name: .customLong("housekeeping-interval"),
        help: ArgumentHelp(
            "How often the data horizons are applied (at start, then every DURATION: 1h, 30m; a bare number is seconds); 0 or off never.",
            valueName: "DURATION")
    )
    var housekeepingInterval = "1h"

    @Option(
        name: .customLong("audit-verify-interval"),
        help: ArgumentHelp(
            "How often this process verifies the audit chain (as `audit verify` does) and counts the outcome in outpost_audit_verifications_total (6h, 30m; a bare number is seconds); 0 or off never.",
            valueName: "DURATION")
    )
    var auditVerifyInterval = "6h"

    @Flag(
        name: .customLong("no-sink-delivery"),
        help: "Do not deliver sinks from this process (another process of the same database does).")
    var noSinkDelivery = false

    @Flag(
        name: .customLong("no-census"),
        help: "Do not note the devices' requests in the fleet census (app and schema versions, latest syncs, telemetry).")
    var noCensus = false

    @Flag(
        name: .customLong("no-console"),
        help: "Do not serve the operator console at /console (it is on by default; signing in needs an admin token).")
    var noConsole = false

    @Flag(
        name: .customLong("console-secure-cookie"),
        help: "Always mark the console's session cookie Secure (it is anyway under --tls-cert, an https --public-url or a trusted proxy's https).")
    var consoleSecureCookie = false

    @Option(
        name: .customLong("console-sessions-per-tenant"),
        help: ArgumentHelp("Console sessions open at once in one tenant; signing in past it ends the tenant's oldest session.", valueName: "N"))
    var consoleSessionsPerTenant = IdentityStateLimits().consoleSessionsPerTenant

    @Option(
        name: .customLong("census-contracts-per-device"),
        help: ArgumentHelp("Contract names the fleet census keeps for one device (only contracts this server knows).", valueName: "N"))
    var censusContractsPerDevice = IdentityStateLimits().censusContractsPerDevice

    @Option(
        name: .customLong("sinks-per-tenant"),
        help: ArgumentHelp("Sinks one tenant may hold; adding one more is 409 limit_reached.", valueName: "N"))
    var sinksPerTenant = IdentityStateLimits().sinksPerTenant

    @Option(
        name: .customLong("maximum-file-bytes"),
        help: ArgumentHelp("The largest file the server takes, whatever a contract allows; larger is 413 payload_too_large.", valueName: "BYTES"))
    var maximumFileBytes = FileLimits().maximumFileBytes

    @Option(
        name: .customLong("file-quota-per-user"),
        help: ArgumentHelp("Bytes of files one user may keep (uploads under way included); past it 413 quota_exceeded.", valueName: "BYTES"))
    var fileQuotaPerUser = FileLimits().bytesPerUser

    @Option(
        name: .customLong("file-quota-per-tenant"),
        help: ArgumentHelp("Bytes of files one tenant may keep; past it 413 quota_exceeded.", valueName: "BYTES"))
    var fileQuotaPerTenant = FileLimits().bytesPerTenant

    @Option(
        name: .customLong("subscriptions-per-device"),
        help: ArgumentHelp("Subscriptions one device pulls at once; a subscription pull naming more is 400 too_many_subscriptions.", valueName: "N"))
    var subscriptionsPerDevice = IdentityStateLimits().subscriptionsPerDevice

    @Option(
        name: .customLong("rows-per-subscription"),
        help: ArgumentHelp("Rows one subscription may select, included rows counted; past it its page is subscription_too_broad.", valueName: "N"))
    var rowsPerSubscription = IdentityStateLimits().rowsPerSubscription

    @Option(
        name: .customLong("sink-lease"),
        help: ArgumentHelp(
            "Seconds a process holds a sink between renewals (a receiver gets at most half of it to answer); a sink whose process was killed is taken over within about this long.",
            valueName: "SECONDS"))
    var sinkLeaseSeconds = 30

    @Option(help: "The address to listen on; 0.0.0.0 serves every interface.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on; 0 picks a free one (printed at start).")
    var port = 8080

    @Option(name: .customLong("secret-file"), help: ArgumentHelp("A file holding the token signing key (at least 32 bytes).", valueName: "FILE"))
    var secretFile: String?

    @Option(name: .customLong("max-body-bytes"), help: "The largest request body (after gzip inflation), except asset uploads.")
    var maximumBodyBytes = ServerConfiguration().maximumBodyBytes

    @Option(name: .customLong("max-asset-bytes"), help: "The largest asset upload.")
    var maximumAssetBytes = ServerConfiguration().maximumAssetBytes

    @Option(name: .customLong("rate"), help: "Requests per second per device; 0 turns the rate limit off.")
    var requestsPerSecond = ServerConfiguration.RateLimit().requestsPerSecond

    @Option(help: "Requests a device may send at once before the rate applies.")
    var burst = ServerConfiguration.RateLimit().burst

    @Option(
        name: .customLong("public-url"),
        help: ArgumentHelp(
            "The URL devices reach the server at, for asset download links (default: the address and port the connection reached, https with --tls-cert; never the request's Host header).",
            valueName: "URL"))
    var publicURL: String?

    @Option(
        name: .customLong("jwt-public-key"),
        help: ArgumentHelp(
            "Also accept device tokens an identity provider signs: KID=FILE, a PEM public key (EC P-256 for ES256, Ed25519 for EdDSA, RSA for RS256); repeat for several.",
            valueName: "KID=FILE"))
    var publicKeys: [String] = []

    @Option(
        name: .customLong("jwks"),
        help: ArgumentHelp("Also accept device tokens signed by the keys of this JWKS file (each key with kid and alg).", valueName: "FILE"))
    var jwksFile: String?

    @Option(
        name: .customLong("jwks-url"),
        help: ArgumentHelp(
            "Also accept device tokens signed by the keys an identity provider publishes at this JWKS URL (https; http for loopback and tests), fetched at start and again as its keys change; repeat for several.",
            valueName: "URL"))
    var jwksURLs: [String] = []

    @Option(name: .customLong("token-audience"), help: "The audience (`aud`) tokens must name.")
    var audience = TokenSigner.defaultAudience

    @Option(
        name: .customLong("max-clock-skew"),
        help: ArgumentHelp(
            "How many seconds ahead of this server's clock a pushed hybrid clock may be; later ones are rejected with clock_skew.",
            valueName: "SECONDS"))
    var maximumClockSkewSeconds = 300

    @Option(
        name: .customLong("metrics-token-file"),
        help: ArgumentHelp(
            "A file holding the bearer token /metrics requires (else OUTPOST_METRICS_TOKEN; with neither, /metrics is off).", valueName: "FILE"))
    var metricsTokenFile: String?

    @Option(
        name: .customLong("live-heartbeat"),
        help: ArgumentHelp("Seconds between heartbeats on a quiet live channel (GET /sync/v1/live).", valueName: "SECONDS"))
    var liveHeartbeatSeconds = 15.0

    @Option(name: .customLong("live-connections-per-device"), help: "Live channels one device may hold open; one more closes its oldest.")
    var liveConnectionsPerDevice = 2

    @Option(name: .customLong("live-max-connections"), help: "Live channels this process holds at most; one more is refused (503 live_capacity).")
    var liveMaximumConnections = 10_000

    @Option(
        name: .customLong("pull-read-ahead"),
        help: "Pull pages written ahead of their request at most at once, for all devices, up to 4 per device (0: off).")
    var pullReadAheadPages = 256

    @Option(
        name: .customLong("page-bytes"),
        help:
            "The bytes of items one page of any listing (pull, change feed, export chunk, fleet, sinks, console) holds at most, whatever its limit; a larger item travels alone."
    )
    var pageBytes = PullService.defaultPageBytes

    @Option(
        name: .customLong("response-memory"),
        help: "The bytes all listing pages (pulls included) may take at once in this process; past it requests wait, then get 503 server_busy.")
    var responseMemoryBytes = 256 * 1024 * 1024

    /// `--pull-page-bytes`, the earlier name of `--page-bytes`, still taken.
    @Option(name: .customLong("pull-page-bytes"), help: .hidden)
    var pullPageBytes: Int?

    /// `--pull-memory`, the earlier name of `--response-memory`, still taken.
    @Option(name: .customLong("pull-memory"), help: .hidden)
    var pullMemoryBytes: Int?

    /// `--page-bytes`, or its earlier name.
    var effectivePageBytes: Int { pullPageBytes ?? pageBytes }
    /// `--response-memory`, or its earlier name.
    var effectiveResponseMemoryBytes: Int { pullMemoryBytes ?? responseMemoryBytes }

    @Option(
        name: .customLong("peer-rate"),
        help:
            "Failed authentications (401) and /metrics requests per second per client address; 0 turns the limit off. /health and valid tokens are never limited."
    )
    var peerRequestsPerSecond: Double = 10

    @Option(name: .customLong("peer-burst"), help: "Failed authentications a client address may make at once before --peer-rate applies.")
    var peerBurst = 100

    @Option(
        name: .customLong("trusted-proxy"),
        help: ArgumentHelp(
            "A reverse proxy (CIDR, like 10.0.0.0/8 or ::1/128) whose X-Forwarded-For names the client for the per-address limit; repeat for several.",
            valueName: "CIDR"))
    var trustedProxies: [String] = []

    @Option(
        name: .customLong("tls-cert"),
        help: ArgumentHelp(
            "Serve HTTPS (HTTP/2 to clients that offer it) with this PEM certificate chain, the server's certificate first; read again when it changes. Needs --tls-key.",
            valueName: "FILE"))
    var tlsCertificate: String?

    @Option(
        name: .customLong("tls-key"),
        help: ArgumentHelp("The PEM private key of --tls-cert's certificate; read again when it changes.", valueName: "FILE"))
    var tlsKey: String?

    @Option(
        name: .customLong("tls-handshake-timeout"),
        help: ArgumentHelp("Seconds a connection has to complete its TLS handshake (with --tls-cert); a slower one is closed.", valueName: "SECONDS"))
    var tlsHandshakeTimeoutSeconds = 10.0

    @Option(
        name: .customLong("outbound-allow"),
        help: ArgumentHelp(
            "Let sinks and --jwks-url reach this address or CIDR block (like 10.0.0.0/8 or ::1/128) although it is loopback, private, link-local or otherwise refused; repeat for several.",
            valueName: "CIDR"))
    var outboundAllow: [String] = []

    func validate() throws {
        guard (tlsCertificate == nil) == (tlsKey == nil) else {
            throw ValidationError("--tls-cert and --tls-key go together: give both (the certificate chain and its private key) or neither")
        }
        guard effectivePageBytes >= 1024, effectiveResponseMemoryBytes >= effectivePageBytes else {
            throw ValidationError("--page-bytes must be at least 1024 and --response-memory at least --page-bytes")
        }
        guard peerRequestsPerSecond >= 0, peerBurst > 0 else { throw ValidationError("--peer-rate must be 0 or more and --peer-burst at least 1") }
        for block in outboundAllow where CIDRBlock(block) == nil {
            throw ValidationError("--outbound-allow takes an address or a CIDR block like 10.0.0.0/8 or fd00::/8, not \(block)")
        }
        guard tlsHandshakeTimeoutSeconds >= 0.1, tlsHandshakeTimeoutSeconds <= 300 else {
            throw ValidationError("--tls-handshake-timeout must be between 0.1 and 300 seconds, not \(tlsHandshakeTimeoutSeconds)")
        }
        for proxy in trustedProxies where TrustedProxies.Block(proxy) == nil {
            throw ValidationError("--trusted-proxy takes an address or a CIDR block like 10.0.0.0/8 or fd00::/8, not \(proxy)")
        }
        guard liveHeartbeatSeconds >= 0.05, liveHeartbeatSeconds <= 3600 else {
            throw ValidationError("--live-heartbeat must be between 0.05 and 3600 seconds, not \(liveHeartbeatSeconds)")
        }
        guard consoleSessionsPerTenant >= 1 else {
            throw ValidationError("--console-sessions-per-tenant must be at least 1, not \(consoleSessionsPerTenant)")
        }
        guard censusContractsPerDevice >= 1 else {
            throw ValidationError("--census-contracts-per-device must be at least 1, not \(censusContractsPerDevice)")
        }
        guard sinksPerTenant >= 1 else {
            throw ValidationError("--sinks-per-tenant must be at least 1, not \(sinksPerTenant)")
        }
        guard subscriptionsPerDevice >= 1, rowsPerSubscription >= 1 else {
            throw ValidationError("--subscriptions-per-device and --rows-per-subscription must be at least 1")
        }
        guard pullReadAheadPages >= 0 else {
            throw ValidationError("--pull-read-ahead must be 0 or more, not \(pullReadAheadPages)")
        }
        guard liveConnectionsPerDevice >= 1, liveMaximumConnections >= 0 else {
            throw ValidationError("--live-connections-per-device must be at least 1 and --live-max-connections 0 or more")
        }
        guard ServerHousekeeping.parseDuration(housekeepingInterval, bareUnit: 1) != nil else {
            throw ValidationError("--housekeeping-interval takes a duration such as 1h, 30m or off, not \(housekeepingInterval)")
        }
        guard ServerHousekeeping.parseDuration(auditVerifyInterval, bareUnit: 1) != nil else {
            throw ValidationError("--audit-verify-interval takes a duration such as 6h, 30m or off, not \(auditVerifyInterval)")
        }
        for entry in publicKeys where entry.split(separator: "=", maxSplits: 1).count != 2 {
            throw ValidationError("--jwt-public-key takes KID=FILE, not \(entry)")
        }
        guard (0...(30 * 86_400)).contains(maximumClockSkewSeconds) else {
            throw ValidationError("--max-clock-skew must be between 0 and 2592000 seconds (30 days), not \(maximumClockSkewSeconds)")
        }
        guard (0...65535).contains(port) else { throw ValidationError("--port must be between 0 and 65535, not \(port)") }
        guard maximumBodyBytes > 0, maximumAssetBytes > 0 else { throw ValidationError("--max-body-bytes and --max-asset-bytes must be positive") }
        guard requestsPerSecond >= 0, burst > 0 else { throw ValidationError("--rate must be 0 or more and --burst at least 1") }
        if let publicURL, URL(string: publicURL)?.scheme == nil {
            throw ValidationError("--public-url must be an absolute URL like https://sync.example.com, not \(publicURL)")
        }
    }

    func run() async throws {
        let directory = data.directory
        var tls: TLSFiles?
        if let tlsCertificate, let tlsKey {
            tls = TLSFiles(certificateChain: URL(fileURLWithPath: tlsCertificate), privateKey: URL(fileURLWithPath: tlsKey))
        }
        if let tls {
            // Checked before anything is opened: a bad file is a clear error, not a failed start.
            do {
                _ = try ServerCertificate(files: tls)
            } catch {
                throw fail(error.description)
            }
        }
        var signer: TokenSigner
        do {
            signer = try TokenKey.signer(secretFile: secretFile.map { URL(fileURLWithPath: $0) }, dataDirectory: directory.url)
            signer.audience = audience
            for entry in publicKeys {
                let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
                guard let pem = try? String(contentsOfFile: parts[1], encoding: .utf8) else {
                    throw fail("cannot read the public key file \(parts[1])")
                }
                try await signer.addPublicKey(pem: pem, kid: parts[0])
            }
            if let jwksFile {
                guard let json = try? String(contentsOfFile: jwksFile, encoding: .utf8) else { throw fail("cannot read the JWKS file \(jwksFile)") }
                try await signer.addJWKS(json)
            }
            try await addJWKSURLs(to: &signer)
        } catch let error as TokenKeyError {
            throw fail(error.description)
        }
        let storage = try await data.openStorage()
        var configuration = ServerConfiguration(
            host: host, port: port, maximumBodyBytes: maximumBodyBytes, maximumAssetBytes: maximumAssetBytes,
            rateLimit: requestsPerSecond > 0 ? ServerConfiguration.RateLimit(requestsPerSecond: requestsPerSecond, burst: burst) : nil,
            publicBaseURL: publicURL
        )
        configuration.maximumClockSkew = .seconds(maximumClockSkewSeconds)
        configuration.peerLimit =
            peerRequestsPerSecond > 0 ? ServerConfiguration.RateLimit(requestsPerSecond: peerRequestsPerSecond, burst: peerBurst) : nil
        configuration.trustedProxies = TrustedProxies(trustedProxies.compactMap(TrustedProxies.Block.init))
        configuration.pullReadAheadPages = pullReadAheadPages
        configuration.pageBytes = effectivePageBytes
        configuration.responseMemoryBytes = effectiveResponseMemoryBytes
        configuration.sinks.isEnabled = !noSinkDelivery
        configuration.fleetCensus = !noCensus
        configuration.console.isEnabled = !noConsole
        configuration.console.secureCookie = consoleSecureCookie
        configuration.identityLimits.consoleSessionsPerTenant = consoleSessionsPerTenant
        configuration.identityLimits.censusContractsPerDevice = censusContractsPerDevice
        configuration.identityLimits.sinksPerTenant = sinksPerTenant
        configuration.identityLimits.subscriptionsPerDevice = subscriptionsPerDevice
        configuration.identityLimits.rowsPerSubscription = rowsPerSubscription
        guard maximumFileBytes >= 0, fileQuotaPerUser >= 0, fileQuotaPerTenant >= 0 else {
            throw ValidationError("--maximum-file-bytes, --file-quota-per-user and --file-quota-per-tenant must not be negative")
        }
        configuration.files.maximumFileBytes = maximumFileBytes
        configuration.files.bytesPerUser = fileQuotaPerUser
        configuration.files.bytesPerTenant = fileQuotaPerTenant
        configuration.tls = tls
        configuration.timeouts.handshake = .milliseconds(Int64(tlsHandshakeTimeoutSeconds * 1000))
        configuration.outboundAllowList = outboundAllow.compactMap(CIDRBlock.init)
        guard (2...3600).contains(sinkLeaseSeconds) else { throw ValidationError("--sink-lease takes 2 to 3600 seconds, not \(sinkLeaseSeconds)") }
        configuration.sinks.lease = .seconds(sinkLeaseSeconds)
        configuration.sinks.pollInterval = min(configuration.sinks.pollInterval, .seconds(sinkLeaseSeconds))
        configuration.live = LiveChannelConfiguration(
            heartbeat: .milliseconds(Int64(liveHeartbeatSeconds * 1000)), connectionsPerDevice: liveConnectionsPerDevice,
            maximumConnections: liveMaximumConnections
        )
        do {
            configuration.metricsToken = try MetricsToken.load(file: metricsTokenFile.map { URL(fileURLWithPath: $0) })
        } catch {
            throw fail(error.description)
        }
        if let prepare = SyncServerCommands.program.preparation {
            do {
                if let line = try await prepare(storage, configuration.files, directory.url) { say(line) }
            } catch {
                await data.close(storage)
                throw fail("preparing the storage failed: \(error)")
            }
        }
        var environment = ServerEnvironment(storage: storage, signer: signer, apps: SyncServerCommands.program.apps)
        do {
            environment.faultPauses = try FaultPauses.fromEnvironment()
        } catch {
            throw fail(error.description)
        }
        let host = self.host
        let scheme = tls == nil ? "http" : "https"
        let started = StartFlag()
        let storageDescription = data.storageDescription
        // The process-wide systems point at this server's: libraries that log or count through
        // swift-log and swift-metrics land in the same stream and the same /metrics.
        LoggingSystem.bootstrap(StreamLogHandler.standardError)
        MetricsSystem.bootstrap(environment.metrics.factory)
        var logger = Logger(label: "outpost.sync-server")
        logger.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0.lowercased()) } ?? .info
        let app = buildApplication(configuration: configuration, environment: environment, logger: logger) { boundPort in
            started.set()
            say(
                "\(SyncServerCommands.program.name) listening on \(scheme)://\(host):\(boundPort.map(String.init) ?? "?") (data: \(directory.url.path), storage: \(storageDescription))"
            )
        }
        let files = FileService(
            storage: storage.engine, blobs: storage.engine.defaultBlobStore, limits: configuration.files, clock: environment.clock)
        let housekeeping = try startHousekeeping(storage: storage, files: files, metrics: environment.metrics, logger: logger)
        let verification = startAuditVerification(storage: storage, metrics: environment.metrics, logger: logger)
        do {
            try await app.runService()
            housekeeping?.cancel()
            verification?.cancel()
            await housekeeping?.value
            await verification?.value
            await data.close(storage)
        } catch {
            housekeeping?.cancel()
            verification?.cancel()
            await housekeeping?.value
            await verification?.value
            await data.close(storage)
            throw fail(started.isSet ? "the server stopped: \(error)" : "cannot listen on \(host):\(port): \(error)")
        }
        say("sync-server stopped")
    }
}

extension ServeCommand {
    /// Adds the --jwks-url keys. A URL that cannot be fetched at start stops the start when no
    /// other identity provider key was given; otherwise it is said and tried again while serving.
    func addJWKSURLs(to signer: inout TokenSigner) async throws {
        var failures: [String] = []
        for text in jwksURLs {
            guard let url = URL(string: text) else { throw fail("--jwks-url \(text) is not a URL") }
            do {
                try await signer.addJWKS(url: url, outboundAllowList: outboundAllow.compactMap(CIDRBlock.init))
            } catch {
                failures.append(error.description)
            }
        }
        guard !failures.isEmpty else { return }
        let fetched = jwksURLs.count - failures.count
        guard fetched > 0 || !publicKeys.isEmpty || jwksFile != nil else { throw fail(failures.joined(separator: "; ")) }
        for failure in failures { say("warning: \(failure); serving with the other identity provider keys, tried again every 30 seconds") }
    }
}

extension ServeCommand {
    /// Applies the data horizons at start and every --housekeeping-interval, beside the routes.
    func startHousekeeping(storage: any SyncStorage, files: FileService, metrics: ServerMetrics, logger: Logger) throws -> Task<Void, Never>? {
        guard let interval = ServerHousekeeping.parseDuration(housekeepingInterval, bareUnit: 1) ?? nil else { return nil }
        let horizons = try horizonOptions.horizons()
        guard horizons != .off else { return nil }
        var housekeeping = ServerHousekeeping(storage: storage, horizons: horizons, metrics: metrics)
        housekeeping.files = files
        return Task {
            await housekeeping.runPeriodically(every: interval) { result in
                switch result {
                case .success(let counts)
                where counts.pushResults > 0 || counts.tombstones > 0 || counts.abandonedUploads > 0 || counts.unreferencedFiles > 0:
                    logger.info("housekeeping: \(counts)")
                case .success:
                    break
                case .failure(let error):
                    logger.error("housekeeping failed (tried again in \(interval)): \(error)")
                }
            }
        }
    }
}

extension ServeCommand {
    /// Verifies the audit chain every --audit-verify-interval (the first time one interval after
    /// start), counting each outcome in `outpost_audit_verifications_total`: a broken chain
    /// fires the `OutpostAuditChainBroken` alert (docs/alerts).
    func startAuditVerification(storage: any SyncStorage, metrics: ServerMetrics, logger: Logger) -> Task<Void, Never>? {
        guard let interval = ServerHousekeeping.parseDuration(auditVerifyInterval, bareUnit: 1) ?? nil else { return nil }
        metrics.prepareAuditVerifications()
        return Task {
            await repeatEvery(interval, startingNow: false) {
                do {
                    let verification = try await AuditChain.verify(storage)
                    metrics.recordAuditVerification(verification)
                    if case .broken(let entryID, let reason) = verification {
                        logger.critical("the audit chain is broken at entry \(entryID): \(reason)")
                    }
                } catch is CancellationError {
                    return
                } catch {
                    logger.error("the audit chain could not be verified (tried again in \(interval)): \(error)")
                }
            }
        }
    }
}

/// Whether the server got as far as listening, to tell a bind failure from a later one.
private final class StartFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false

    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}
