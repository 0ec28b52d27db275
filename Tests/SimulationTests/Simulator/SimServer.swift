import ContractRuntime
import Contracts
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOEmbedded
import SampleServerApps
import SyncProtocol
import SyncServer

/// The real sync server's router, answering in-process: every request goes through the same
/// middleware (authentication, limits, errors as JSON) as on a socket, but the simulator decides
/// when it arrives. A restart drops it and opens the same data folder again.
///
/// Several processes are several routers (each its own live channels and pull read-ahead, as
/// `buildRouter` makes them per process) over one storage instance: on SQLite, commit notices
/// reach only the observers of the storage instance that committed (PostgreSQL's `NOTIFY`
/// carries them between processes), so two processes on one SQLite file would not poke each
/// other's channels; sharing the instance is what a balancer over PostgreSQL behaves like.
final class SimServer: Sendable {
    static let secret = Data(repeating: 11, count: 32)

    let folder: URL
    let storage: SQLiteStorage
    let signer: TokenSigner
    let clock: SimClock
    private let processes: [RouterResponder<SyncRequestContext>]
    private let logger: Logger
    /// The highest sequence every scope key reached, as the storage's commits announced it.
    let committed = Locked<[String: Int64]>([:])

    var processCount: Int { processes.count }

    /// Opens (or creates) the server's data in `folder`: both users are members of `team-1`.
    init(folder: URL, clock: SimClock, processes count: Int = 1) async throws {
        self.folder = folder
        self.clock = clock
        let firstStart = !DataDirectory(folder).hasDatabase
        storage = try SQLiteStorage(directory: folder, contracts: ContractRegistry.self)
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
        var configuration = ServerConfiguration(port: 0, rateLimit: nil)
        configuration.peerLimit = nil
        // A channel's heartbeat and revalidation timer runs in real time: a year keeps it out of
        // a run (the simulator closes the channels of revoked and erased devices itself).
        configuration.live = LiveChannelConfiguration(heartbeat: .seconds(31_536_000), revalidationInterval: .seconds(31_536_000))
        var processes: [RouterResponder<SyncRequestContext>] = []
        for _ in 0..<max(1, count) {
            let environment = ServerEnvironment(
                storage: storage, signer: signer, clock: clock,
                apps: SampleServerApps.all
            )
            processes.append(buildRouter(configuration: configuration, environment: environment).router.buildResponder())
        }
        self.processes = processes
        storage.observeCommits { [committed] notice in
            guard case .changed(let changes) = notice else { return }
            committed.withLock { highest in
                for change in changes { highest[change.scopeKey] = max(highest[change.scopeKey] ?? 0, change.sequence) }
            }
        }
    }

    static let tenant = "acme"
    static let team = "team-1"

    /// What an admin publishes with.
    var content: SampleContentService {
        SampleContentService(storage: storage, clock: clock)
    }

    static let admin = DeviceIdentity(tenant: tenant, userID: "admin", deviceID: "admin", isAdmin: true, expiresAt: Int64.max)

    /// A token for a device, valid for an hour of simulated time, and when it was issued: now,
    /// or for a device revoked at `revokedAt` or a user erased at `erasedAt`, dated past the
    /// leeway a revocation or an erasure covers (as far as the server takes a token dated ahead
    /// of its clock).
    func token(user: String, device: String, revokedAt: Int64? = nil, erasedAt: Int64? = nil) -> (token: String, issuedAt: Int64) {
        let now = clock.seconds
        let notBefore = [revokedAt, erasedAt].compactMap { $0.map { $0 + TokenSigner.issuedAtLeeway + 1 } }.max() ?? now
        let issued = max(now, min(notBefore, now + TokenSigner.issuedAtLeeway))
        let token = signer.sign(
            DeviceIdentity(tenant: Self.tenant, userID: user, deviceID: device, teams: [Self.team], expiresAt: now + 3_600),
            issuedAt: issued
        )
        return (token, issued)
    }

    /// An admin's request through the router (as the admin tools send it).
    func admin(_ method: HTTPRequest.Method, _ path: String, body: Data? = nil) async -> SimResponse {
        let now = clock.seconds
        let token = signer.sign(
            DeviceIdentity(tenant: Self.tenant, userID: "admin", deviceID: "admin-console", isAdmin: true, expiresAt: now + 3_600),
            issuedAt: now
        )
        var headers = ["Authorization": "Bearer \(token)"]
        if body != nil { headers["Content-Type"] = "application/json" }
        return await respond(to: SimRequest(method: method, path: path, headers: headers, body: body, device: -1), process: 0)
    }

    /// Every scope key `user`'s devices may read, as the live channels file them.
    static func readableKeys(user: String) -> Set<String> {
        Set(ContractRegistry.scopes.flatMap { ScopeAccess.readableKeys(in: $0, identity: identity(of: user)) })
    }

    /// The scope (by name, as devices pull it) a key of `user`'s belongs to.
    static func scope(ofKey key: String, user: String) -> ScopeDescriptor? {
        ContractRegistry.scopes.first { ScopeAccess.readableKeys(in: $0, identity: identity(of: user)).contains(key) }
    }

    private static func identity(of user: String) -> DeviceIdentity {
        DeviceIdentity(tenant: tenant, userID: user, deviceID: "any", teams: [team], expiresAt: .max)
    }

    private func request(_ exchange: SimRequest) -> Request {
        var fields = HTTPFields()
        for (name, value) in exchange.headers {
            if let name = HTTPField.Name(name) { fields[name] = value }
        }
        if let body = exchange.body { fields[.contentLength] = String(body.count) }
        let head = HTTPRequest(method: exchange.method, scheme: "http", authority: "sim", path: exchange.path, headerFields: fields)
        return Request(head: head, body: RequestBody(buffer: ByteBuffer(bytes: exchange.body ?? Data())))
    }

    private var context: SyncRequestContext {
        SyncRequestContext(source: ApplicationRequestContextSource(channel: NIOAsyncTestingChannel(), logger: logger))
    }

    /// One HTTP exchange, as a socket would carry it, answered by server process `process`.
    func respond(to exchange: SimRequest, process: Int) async -> SimResponse {
        do {
            let response = try await processes[process % processes.count].respond(to: request(exchange), context: context)
            let collector = BodyCollector()
            try await response.body.write(collector)
            var headers: [String: String] = [:]
            for field in response.headers { headers[field.name.canonicalName] = field.value }
            return SimResponse(status: Int(response.status.code), headers: headers, body: collector.data)
        } catch {
            return SimResponse(status: 500, headers: [:], body: Data("\(error)".utf8))
        }
    }

    /// Opens `GET /sync/v1/live` on process `process`: a refusal comes back whole; an open
    /// channel streams its events into a ``SimLiveChannel`` until it is closed.
    func openLive(_ exchange: SimRequest, process: Int) async -> (SimResponse, SimLiveChannel?) {
        let response: Response
        do {
            response = try await processes[process % processes.count].respond(to: request(exchange), context: context)
        } catch {
            return (SimResponse(status: 500, headers: [:], body: Data("\(error)".utf8)), nil)
        }
        guard response.status == .ok else {
            let collector = BodyCollector()
            try? await response.body.write(collector)
            return (SimResponse(status: Int(response.status.code), headers: [:], body: collector.data), nil)
        }
        let channel = SimLiveChannel(committed: committed.current)
        channel.stream(response.body)
        return (SimResponse(status: 200, headers: [:], body: Data()), channel)
    }

    /// Collects a response body.
    private struct BodyCollector: ResponseBodyWriter {
        let box = Locked(Data())
        var data: Data { box.current }
        func write(_ buffer: ByteBuffer) async throws { box.withLock { $0.append(contentsOf: buffer.readableBytesView) } }
        func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }
}

/// An open live channel: the events the server wrote, read with the device's own parser.
final class SimLiveChannel: Sendable {
    private struct State {
        var parser = ServerSentEventParser()
        var events: [LiveEvent] = []
        /// The highest sequence poked per scope key.
        var poked: [String: Int64] = [:]
        var ended = false
    }

    private let state = Locked(State())
    private let task = Locked<Task<Void, Never>?>(nil)
    /// What the scopes had reached when the channel opened: later commits are the ones poked.
    let committedAtOpening: [String: Int64]

    init(committed: [String: Int64]) { committedAtOpening = committed }

    fileprivate func stream(_ body: ResponseBody) {
        let writer = Writer(channel: self)
        task.withLock { $0 = Task { try? await body.write(writer) } }
    }

    fileprivate func received(_ bytes: ByteBuffer) {
        state.withLock { state in
            guard let events = try? state.parser.feed(bytes.readableBytesView) else { return }
            for event in events.compactMap(LiveEvent.init) {
                state.events.append(event)
                if case .change(let scope, let sequence) = event { state.poked[scope] = max(state.poked[scope] ?? 0, sequence) }
            }
        }
    }

    fileprivate func ended() { state.withLock { $0.ended = true } }

    /// The events received since the last call.
    func take() -> [LiveEvent] {
        state.withLock { state in
            defer { state.events = [] }
            return state.events
        }
    }

    var isOpen: Bool { !state.current.ended }

    /// Waits (in real time: the route writes on its own task) until every scope in `expected`
    /// was poked at least to its sequence; false when that does not happen within seconds.
    func settle(_ expected: [String: Int64]) async -> Bool {
        for attempt in 0..<4_000 {
            let (poked, ended) = state.withLock { ($0.poked, $0.ended) }
            if ended || expected.allSatisfy({ (poked[$0.key] ?? 0) >= $0.value }) { return true }
            if attempt < 100 { await Task.yield() } else { try? await Task.sleep(for: .milliseconds(1)) }
        }
        return false
    }

    func close() { task.withLock { $0?.cancel() } }

    private struct Writer: ResponseBodyWriter {
        let channel: SimLiveChannel
        func write(_ buffer: ByteBuffer) async throws { channel.received(buffer) }
        func finish(_ trailingHeaders: HTTPFields?) async throws { channel.ended() }
    }
}

/// A request as the device's transport sends it.
struct SimRequest: Sendable {
    var method: HTTPRequest.Method
    /// Path and query (`/sync/v1/pull?scope=team`).
    var path: String
    var headers: [String: String]
    var body: Data?
    /// Which device sent it (for the trace and for late delivery); -1 for an admin.
    var device: Int
    /// Who sent it and when its token was issued (seconds since 1970), for the revocation and erasure checks.
    var user = ""
    var deviceID = ""
    var tokenIssuedAt: Int64 = 0
    /// `push` or `pull`: only pushes change the server.
    var isPush: Bool { method == .post }
}

struct SimResponse: Sendable {
    var status: Int
    var headers: [String: String]
    var body: Data
}
