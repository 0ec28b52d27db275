import ContractRuntime
import Contracts
import Foundation
import Hummingbird
import HummingbirdTesting
import OutpostTestSupport
import SampleServerApps
import SyncProtocol
import Testing

@testable import SyncServer

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A real sync server on loopback (HummingbirdTesting's `.live` mode) over a fresh storage of
/// either kind, with tokens for two devices of one tenant: `owner`, an honest device, and
/// `hostile`, another user's device of the same tenant that tries what an attacker would.
final class HostileHarness: Sendable {
    static let secret = Data(repeating: 9, count: 32)
    static let metricsToken = "metrics-token-for-the-hostile-tests"
    static let tenant = "acme"

    private let directory: TemporaryDirectory
    let storage: any SyncStorage
    let signer: TokenSigner
    let configuration: ServerConfiguration
    /// The data folder (a SQLite storage's database lives here).
    var folder: URL { directory.url }

    /// The default configuration of these tests: a free port, no per-device rate limit, a metrics token.
    static var defaultConfiguration: ServerConfiguration {
        var configuration = ServerConfiguration(host: "127.0.0.1", port: 0, rateLimit: nil)
        configuration.metricsToken = metricsToken
        return configuration
    }

    private init(directory: TemporaryDirectory, storage: any SyncStorage, configuration: ServerConfiguration) throws {
        self.directory = directory
        self.storage = storage
        self.configuration = configuration
        signer = try TokenSigner(secret: Self.secret)
    }

    static func make(
        _ kind: StorageKind, contracts: any ContractSchema.Type = ContractRegistry.self, configure: (inout ServerConfiguration) -> Void = { _ in }
    ) async throws -> HostileHarness {
        let directory = try TemporaryDirectory(prefix: "sync-hostile")
        var configuration = defaultConfiguration
        configure(&configuration)
        return try HostileHarness(
            directory: directory, storage: try await kind.makeStorage(in: directory.url, contracts: contracts), configuration: configuration)
    }

    /// Runs `body` against the server listening on loopback, with `apps` (the sample's by default).
    func live<Value: Sendable>(
        apps: [any ServerApp] = SampleServerApps.all, _ body: @Sendable (any TestClientProtocol) async throws -> Value
    ) async throws -> Value {
        let environment = ServerEnvironment(storage: storage, signer: signer, apps: apps)
        return try await LoopbackServer.run(configuration: configuration, environment: environment) { server in try await body(server.client) }
    }

    /// Runs `body` against the server listening on loopback, with its URL for clients of other
    /// connections (HummingbirdTesting's client sends one request at a time).
    func serve<Value: Sendable>(_ body: @Sendable (LoopbackServer) async throws -> Value) async throws -> Value {
        let environment = ServerEnvironment(storage: storage, signer: signer, apps: SampleServerApps.all)
        return try await LoopbackServer.run(configuration: configuration, environment: environment) { server in try await body(server) }
    }

    /// A token of a device of the tenant.
    func token(user: String, device: String, admin: Bool = false) -> String {
        signer.token(tenant: Self.tenant, user: user, device: device, teams: ["team-1"], isAdmin: admin)
    }

    var ownerToken: String { token(user: "alice", device: "alice-phone") }
    var hostileToken: String { token(user: "mallory", device: "mallory-phone") }
    var adminToken: String { token(user: "admin", device: "console", admin: true) }

    static func headers(_ token: String, _ extra: HTTPFields = [:]) -> HTTPFields {
        var headers = extra
        headers[.authorization] = "Bearer \(token)"
        return headers
    }

    /// Number of audit entries (nothing written leaves it unchanged).
    func auditCount() async throws -> Int {
        try await storage.read { reader in try await reader.auditEntries(after: 0, limit: 100_000).count }
    }
}

extension TestClientProtocol {
    func push(_ request: PushRequest, token: String) async throws -> TestResponse {
        try await execute(
            uri: "/sync/v1/push", method: .post, headers: HostileHarness.headers(token), body: ByteBuffer(bytes: try JSONEncoder().encode(request))
        )
    }

    func push(raw body: String, token: String) async throws -> TestResponse {
        try await execute(uri: "/sync/v1/push", method: .post, headers: HostileHarness.headers(token), body: ByteBuffer(string: body))
    }
}

extension TestResponse {
    var pushResults: [MutationResult] {
        get throws { try JSONDecoder().decode(PushResponse.self, from: Data(body.readableBytesView)).results }
    }

    var errorDetail: ErrorDetail {
        get throws { try JSONDecoder().decode(ErrorBody.self, from: Data(body.readableBytesView)).error }
    }

    var bodyText: String { String(buffer: body) }
}
