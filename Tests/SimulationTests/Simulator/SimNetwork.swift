import Foundation
import HTTPTypes
import SyncClient
import SyncProtocol

/// What the simulated network does to one request.
enum NetworkFault: String, Codable, Sendable, CaseIterable {
    /// Delivered, answered.
    case deliver
    /// Lost on the way: the server never sees it, the device times out.
    case dropRequest
    /// The server handles it, the answer is lost: the device times out.
    case dropAnswer
    /// Delivered twice in a row (a retransmission); the device reads the second answer.
    case duplicateNow
    /// Delivered and answered, and a copy arrives again later, after newer requests.
    case duplicateLater
    /// Held back: the device times out, the server sees it later, after newer requests.
    case delay
    /// The device dies before the request leaves.
    case crashBeforeSend
    /// The server handles it and the device dies before reading the answer.
    case crashAfterAnswer
}

/// The network between the devices and the server: partitions, faults drawn per request from
/// the current sync step's seed, requests held back for later, and the trace of every exchange.
final class SimNetwork: Sendable {
    private struct State {
        var server: SimServer?
        var partitionedUntil: [Int: Date] = [:]
        /// Per device, the generator of the faults of the sync in progress (`nil`: a clean network).
        var faults: [Int: SimRandom] = [:]
        var held: [SimRequest] = []
        var crashHooks: [Int: @Sendable () -> Void] = [:]
        var crashed: Set<Int> = []
        var trace: [String] = []
    }

    private let state = Locked(State())
    let clock: SimClock

    init(clock: SimClock) { self.clock = clock }

    var server: SimServer? {
        get { state.current.server }
        set { state.withLock { $0.server = newValue } }
    }

    // MARK: Driving from the simulator

    func partition(_ device: Int, for seconds: TimeInterval) {
        let until = clock.date.addingTimeInterval(seconds)
        state.withLock { $0.partitionedUntil[device] = max(until, $0.partitionedUntil[device] ?? until) }
    }

    func healPartitions() { state.withLock { $0.partitionedUntil = [:] } }

    func isPartitioned(_ device: Int) -> Bool {
        let now = clock.date
        return state.withLock { ($0.partitionedUntil[device] ?? .distantPast) > now }
    }

    /// Faults for `device`'s requests from now on, drawn from `random`; `nil` stops them.
    func setFaults(_ device: Int, _ random: SimRandom?) { state.withLock { $0.faults[device] = random } }

    /// What to call to kill `device`'s process (closes its database, as `kill -9` would leave it).
    func onCrash(_ device: Int, _ hook: @escaping @Sendable () -> Void) { state.withLock { $0.crashHooks[device] = hook } }

    /// Whether `device` crashed since the last call (and forgets it).
    func takeCrash(_ device: Int) -> Bool { state.withLock { $0.crashed.remove(device) != nil } }

    var heldCount: Int { state.current.held.count }

    /// One held-back request reaches the server now; its answer goes nowhere.
    func deliverHeld(salt: UInt64) async {
        let request: SimRequest? = state.withLock { state in
            guard !state.held.isEmpty else { return nil }
            var random = SimRandom(seed: salt)
            return state.held.remove(at: random.below(state.held.count))
        }
        guard let request, let server else { return }
        let response = await server.respond(to: request)
        record("late \(request.method) from device \(request.device) → \(response.status)")
    }

    func deliverAllHeld() async {
        while heldCount > 0 { await deliverHeld(salt: 0) }
    }

    var trace: [String] { state.current.trace }

    func record(_ line: String) { state.withLock { $0.trace.append(line) } }

    // MARK: Carrying a request

    /// Carries `request` for its device under the current partitions and faults.
    func carry(_ request: SimRequest) async throws(TransportError) -> SimResponse {
        let device = request.device
        if isPartitioned(device) {
            record("device \(device) \(request.method): partitioned")
            throw .network("no route to the server (partitioned)")
        }
        let fault = nextFault(device, push: request.isPush)
        guard let server else { throw .network("the server is down") }
        let label = "device \(device) \(request.method) \(request.path.prefix(40))"
        switch fault {
        case .deliver:
            let response = await server.respond(to: request)
            record("\(label) → \(response.status)")
            return response
        case .dropRequest:
            record("\(label): request lost")
            throw .network("the request timed out")
        case .dropAnswer:
            let response = await server.respond(to: request)
            record("\(label) → \(response.status), answer lost")
            throw .network("the request timed out")
        case .duplicateNow:
            let first = await server.respond(to: request)
            let second = await server.respond(to: request)
            record("\(label) → \(first.status), resent → \(second.status)")
            return second
        case .duplicateLater:
            state.withLock { $0.held.append(request) }
            let response = await server.respond(to: request)
            record("\(label) → \(response.status), a copy held back")
            return response
        case .delay:
            state.withLock { $0.held.append(request) }
            record("\(label): held back")
            throw .network("the request timed out")
        case .crashBeforeSend:
            record("\(label): the device crashes before sending")
            crash(device)
            throw .network("the device crashed")
        case .crashAfterAnswer:
            let response = await server.respond(to: request)
            record("\(label) → \(response.status): the device crashes before reading it")
            crash(device)
            throw .network("the device crashed")
        }
    }

    private func crash(_ device: Int) {
        let hook = state.withLock { state -> (@Sendable () -> Void)? in
            state.crashed.insert(device)
            return state.crashHooks[device]
        }
        hook?()
    }

    /// Three in four requests go through; pulls are never duplicated, held or crashed on (a GET
    /// changes nothing, and the engine fetches pages ahead on another task, so a crash there
    /// would not land at one reproducible point).
    private func nextFault(_ device: Int, push: Bool) -> NetworkFault {
        state.withLock { state in
            guard var random = state.faults[device] else { return .deliver }
            defer { state.faults[device] = random }
            guard random.chance(30) else { return .deliver }
            let faults: [NetworkFault] =
                push ? [.dropRequest, .dropAnswer, .duplicateNow, .duplicateLater, .delay, .crashBeforeSend, .crashAfterAnswer]
                : [.dropRequest, .dropAnswer]
            return random.pick(faults) ?? .deliver
        }
    }
}

/// A device's ``SyncTransport`` over the simulated network: the same requests, headers and
/// error mapping as ``URLSessionTransport``, a token renewed after a 401.
final class SimTransport: SyncTransport {
    let network: SimNetwork
    let device: Int
    let user: String
    let deviceID: String
    private let token = Locked<String?>(nil)

    init(network: SimNetwork, device: Int, user: String, deviceID: String) {
        self.network = network
        self.device = device
        self.user = user
        self.deviceID = deviceID
    }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        let body: Data
        do { body = try JSONEncoder().encode(request) } catch { throw .decoding("encoding the push: \(error)") }
        let headers = [
            "Content-Type": "application/json", ProtocolHeaders.schema: SchemaHeader.encode(request.schema),
            ProtocolHeaders.clientID: request.clientId,
        ]
        let data = try await exchange(SimRequest(method: .post, path: "/sync/v1/push", headers: headers, body: body, device: device))
        let response: PushResponse
        do { response = try JSONDecoder().decode(PushResponse.self, from: data) } catch { throw .decoding(String(describing: error)) }
        network.record(
            "device \(device) push answer: "
                + response.results.map { "\($0.clientMutationId.suffix(6)) \($0.status.rawValue)\($0.resolution.map { " (\($0))" } ?? "")" }
                .joined(separator: ", ")
        )
        return response
    }

    func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError) -> Data {
        try await pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: nil)
    }

    var filtersPullsByContract: Bool { true }

    func pull(
        scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String, contracts: [String]?
    ) async throws(TransportError) -> Data {
        var components = URLComponents()
        components.path = "/sync/v1/pull"
        var query = [URLQueryItem(name: "scope", value: scope)]
        if let cursor { query.append(URLQueryItem(name: "cursor", value: cursor)) }
        if let limit { query.append(URLQueryItem(name: "limit", value: String(limit))) }
        if let contracts { query.append(URLQueryItem(name: "contracts", value: contracts.joined(separator: ","))) }
        components.queryItems = query
        let headers = [ProtocolHeaders.schema: SchemaHeader.encode(schema), ProtocolHeaders.clientID: clientID]
        let path = components.percentEncodedPath + "?" + (components.percentEncodedQuery ?? "")
        return try await exchange(SimRequest(method: .get, path: path, headers: headers, body: nil, device: device))
    }

    func health() async -> Bool { !network.isPartitioned(device) && network.server != nil }

    private func exchange(_ request: SimRequest) async throws(TransportError) -> Data {
        var refresh = false
        while true {
            var request = request
            request.headers["Authorization"] = "Bearer \(currentToken(refresh: refresh))"
            let response = try await network.carry(request)
            if response.status == 401, !refresh {
                refresh = true
                continue
            }
            guard (200..<300).contains(response.status) else {
                throw URLSessionTransport.error(status: response.status, data: response.body, retryAfter: response.headers["Retry-After"])
            }
            return response.body
        }
    }

    private func currentToken(refresh: Bool) -> String {
        let server = network.server
        return token.withLock { token in
            if refresh || token == nil, let server { token = server.token(user: user, device: deviceID) }
            return token ?? ""
        }
    }
}
