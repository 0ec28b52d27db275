import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOEmbedded
import SyncServer

/// The real sync server's router, answering in-process: every request goes through the same
/// middleware (authentication, limits, errors as JSON) as on a socket, but the simulator decides
/// when it arrives. A restart drops it and opens the same data folder again.
final class SimServer: Sendable {
    static let secret = Data(repeating: 11, count: 32)

    let folder: URL
    let storage: SQLiteStorage
    let signer: TokenSigner
    let clock: SimClock
    private let responder: RouterResponder<SyncRequestContext>
    private let logger: Logger

    /// Opens (or creates) the server's data in `folder`: both users are members of `team-1`.
    init(folder: URL, clock: SimClock) async throws {
        self.folder = folder
        self.clock = clock
        let firstStart = !DataDirectory(folder).hasDatabase
        storage = try SQLiteStorage(directory: folder)
        if firstStart {
            try await storage.write { transaction in
                for user in ["u-1", "u-2"] {
                    try await transaction.setTeamMembership(tenant: SimServer.tenant, team: SimServer.team, userID: user, isMember: true)
                }
            }
        }
        signer = try TokenSigner(secret: Self.secret)
        var logger = Logger(label: "outpost.simulation")
        logger.logLevel = .critical
        self.logger = logger
        let environment = ServerEnvironment(
            storage: storage, assets: AssetStore(directory: folder.appendingPathComponent("assets")), signer: signer, clock: clock
        )
        var configuration = ServerConfiguration(port: 0, rateLimit: nil)
        configuration.peerLimit = nil
        responder = buildRouter(configuration: configuration, environment: environment).router.buildResponder()
    }

    static let tenant = "acme"
    static let team = "team-1"

    /// What an admin publishes with.
    var content: ContentService { ContentService(storage: storage, assets: AssetStore(directory: folder.appendingPathComponent("assets")), clock: clock) }

    static let admin = DeviceIdentity(tenant: tenant, userID: "admin", deviceID: "admin", isAdmin: true, expiresAt: Int64.max)

    /// A token for a device, valid for an hour of simulated time.
    func token(user: String, device: String) -> String {
        let now = clock.seconds
        return signer.sign(
            DeviceIdentity(tenant: Self.tenant, userID: user, deviceID: device, teams: [Self.team], expiresAt: now + 3_600),
            issuedAt: now
        )
    }

    /// One HTTP exchange, as a socket would carry it.
    func respond(to exchange: SimRequest) async -> SimResponse {
        var fields = HTTPFields()
        for (name, value) in exchange.headers {
            if let name = HTTPField.Name(name) { fields[name] = value }
        }
        if let body = exchange.body { fields[.contentLength] = String(body.count) }
        let head = HTTPRequest(method: exchange.method, scheme: "http", authority: "sim", path: exchange.path, headerFields: fields)
        let request = Request(head: head, body: RequestBody(buffer: ByteBuffer(bytes: exchange.body ?? Data())))
        let context = SyncRequestContext(source: ApplicationRequestContextSource(channel: NIOAsyncTestingChannel(), logger: logger))
        do {
            let response = try await responder.respond(to: request, context: context)
            let collector = BodyCollector()
            try await response.body.write(collector)
            var headers: [String: String] = [:]
            for field in response.headers { headers[field.name.canonicalName] = field.value }
            return SimResponse(status: Int(response.status.code), headers: headers, body: collector.data)
        } catch {
            return SimResponse(status: 500, headers: [:], body: Data("\(error)".utf8))
        }
    }

    /// Collects a response body.
    private struct BodyCollector: ResponseBodyWriter {
        let box = Locked(Data())
        var data: Data { box.current }
        func write(_ buffer: ByteBuffer) async throws { box.withLock { $0.append(contentsOf: buffer.readableBytesView) } }
        func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }
}

/// A request as the device's transport sends it.
struct SimRequest: Sendable {
    var method: HTTPRequest.Method
    /// Path and query (`/sync/v1/pull?scope=team`).
    var path: String
    var headers: [String: String]
    var body: Data?
    /// Which device sent it (for the trace and for late delivery).
    var device: Int
    /// `push` or `pull`: only pushes change the server.
    var isPush: Bool { method == .post }
}

struct SimResponse: Sendable {
    var status: Int
    var headers: [String: String]
    var body: Data
}
