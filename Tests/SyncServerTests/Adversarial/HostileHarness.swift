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
    let assets: AssetStore
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
        assets = AssetStore(directory: DataDirectory(directory.url).assets)
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

    /// Runs `body` against the server listening on loopback.
    func live<Value: Sendable>(_ body: @Sendable (any TestClientProtocol) async throws -> Value) async throws -> Value {
        let environment = ServerEnvironment(storage: storage, assets: assets, signer: signer, apps: SampleServerApps.all)
        return try await LoopbackServer.run(configuration: configuration, environment: environment) { server in try await body(server.client) }
    }

    /// Runs `body` against the server listening on loopback, with its URL for clients of other
    /// connections (HummingbirdTesting's client sends one request at a time).
    func serve<Value: Sendable>(_ body: @Sendable (LoopbackServer) async throws -> Value) async throws -> Value {
        let environment = ServerEnvironment(storage: storage, assets: assets, signer: signer, apps: SampleServerApps.all)
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

/// One HTTP exchange over a plain socket, for requests no HTTP client would send (a bad
/// `Transfer-Encoding`, headers trickled byte by byte).
enum RawHTTP {
    struct SocketError: Error, CustomStringConvertible {
        var description: String
    }

    /// Connects to 127.0.0.1:`port` and returns the socket.
    static func connect(port: Int) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw SocketError(description: "socket() failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(descriptor)
            throw SocketError(description: "connect() to port \(port) failed")
        }
        var timeout = timeval(tv_sec: 15, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return descriptor
    }

    static func send(_ text: String, on descriptor: Int32) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Everything the server sends until it closes the connection or `timeout` passes without
    /// a byte (then `closed` is false).
    static func receive(on descriptor: Int32) -> (text: String, closed: Bool) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count == 0 { return (String(decoding: received, as: UTF8.self), true) }
            if count < 0 { return (String(decoding: received, as: UTF8.self), errno == ECONNRESET) }
            received.append(contentsOf: buffer[0..<count])
        }
    }

    /// Sends `request` whole and returns what came back.
    static func exchange(_ request: String, port: Int) async throws -> String {
        try await onOwnThread {
            let descriptor = try connect(port: port)
            defer { close(descriptor) }
            send(request, on: descriptor)
            shutdown(descriptor, Int32(SHUT_WR))
            return receive(on: descriptor).text
        }
    }

    /// Runs blocking socket work on a thread of its own: blocking one of the few threads of
    /// Swift's concurrency pool would stall every other test (and the server's handlers) meanwhile.
    static func onOwnThread<Value: Sendable>(_ work: @escaping @Sendable () throws -> Value) async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try work() }) }.start()
        }
    }
}
