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
        /// Picks the server process of each request (a balancer without stickiness).
        var balancer: SimRandom
        /// When each device (by id) was revoked and each user's data erased, seconds since 1970.
        var revokedAt: [String: Int64] = [:]
        var erasedAt: [String: Int64] = [:]
        /// Answers a refused token should not have had.
        var identityViolations: [String] = []
        /// Requests each device's transport set out to send, and the devices answered 410 `cursor_expired`.
        var requests: [Int: Int] = [:]
        var cursorExpired: Set<Int> = []
        /// Per device, the simulated seconds each request takes while set (a background window's
        /// requests spend its time), and the pushes it sent.
        var requestCost: [Int: TimeInterval] = [:]
        var pushes: [Int: Int] = [:]
    }

    private let state: Locked<State>
    let clock: SimClock

    init(clock: SimClock, seed: UInt64) {
        self.clock = clock
        state = Locked(State(balancer: SimRandom(seed: seed, salt: 0xBA1A_4CE5)))
    }

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

    /// Each request of `device` takes `seconds` of simulated time from now (`nil`: none), the
    /// clock moved once its answer (or failure) is back: a request as the engine makes it,
    /// whatever its transport does inside (a token renewed after a 401 and the request sent again).
    /// Requests in flight together overlap (the engine fetches pages ahead): each ends `seconds`
    /// after it started, and the clock goes to the latest end.
    func setRequestCost(_ device: Int, _ seconds: TimeInterval?) { state.withLock { $0.requestCost[device] = seconds } }

    /// One request of `device`'s transport, started at `start`, ended: its simulated time passes
    /// (``setRequestCost(_:_:)``).
    func requestEnded(_ device: Int, startedAt start: Date) {
        guard let cost = state.withLock({ $0.requestCost[device] }) else { return }
        clock.advance(to: start.addingTimeInterval(cost))
    }

    /// `device`'s transport sends a push.
    func countPush(_ device: Int) { state.withLock { $0.pushes[device, default: 0] += 1 } }

    /// Pushes `device` sent (`POST /sync/v1/push`), delivered or not.
    func pushCount(_ device: Int) -> Int { state.withLock { $0.pushes[device] ?? 0 } }

    /// What to call to kill `device`'s process (closes its database, as `kill -9` would leave it).
    func onCrash(_ device: Int, _ hook: @escaping @Sendable () -> Void) { state.withLock { $0.crashHooks[device] = hook } }

    /// Whether `device` crashed since the last call (and forgets it).
    func takeCrash(_ device: Int) -> Bool { state.withLock { $0.crashed.remove(device) != nil } }

    var heldCount: Int { state.current.held.count }

    func requestCount(_ device: Int) -> Int { state.withLock { $0.requests[device] ?? 0 } }

    /// The device's transport set out to send a request (whether a token, a route or an answer follows).
    func countRequest(_ device: Int) { state.withLock { $0.requests[device, default: 0] += 1 } }

    /// Whether `device` was answered 410 `cursor_expired` since the last call (and forgets it).
    func takeCursorExpiry(_ device: Int) -> Bool { state.withLock { $0.cursorExpired.remove(device) != nil } }

    func revoked(deviceID: String, at seconds: Int64) { state.withLock { $0.revokedAt[deviceID] = seconds } }

    /// When the device (by id) was last revoked (seconds since 1970), if ever.
    func revokedAt(deviceID: String) -> Int64? { state.withLock { $0.revokedAt[deviceID] } }

    func erased(user: String, at seconds: Int64) { state.withLock { $0.erasedAt[user] = seconds } }

    /// When `user`'s data was last erased (seconds since 1970), if ever.
    func erasedAt(_ user: String) -> Int64? { state.withLock { $0.erasedAt[user] } }

    /// The answers a refused token got that it should not have, since the last call.
    func takeIdentityViolations() -> [String] {
        state.withLock { state in
            defer { state.identityViolations = [] }
            return state.identityViolations
        }
    }

    /// The server process the balancer sends the next request to.
    private func nextProcess(of server: SimServer) -> Int {
        state.withLock { $0.balancer.below(server.processCount) }
    }

    /// `request` answered by a process the balancer picks, then checked: a token issued at or
    /// before its device's revocation or its user's erasure must be refused, whenever the
    /// request arrives (late deliveries included), 401 `token_revoked` or 410 `user_erased`.
    private func serve(_ request: SimRequest, by server: SimServer) async -> SimResponse {
        let response = await server.respond(to: request, process: nextProcess(of: server))
        checkIdentity(request, response.status, response.body)
        return response
    }

    private func checkIdentity(_ request: SimRequest, _ status: Int, _ body: Data) {
        guard request.device >= 0 else { return }
        let code = (try? JSONDecoder().decode(ErrorBody.self, from: body))?.error.code.rawValue ?? ""
        let issued = request.tokenIssuedAt
        let unexpired = clock.seconds < issued + 3_600
        state.withLock { state in
            if status == 410, code == "cursor_expired" { state.cursorExpired.insert(request.device) }
            let label = "device \(request.device)'s \(request.method) (token issued at \(issued))"
            if let erased = state.erasedAt[request.user], issued <= erased {
                if (200..<300).contains(status) || (unexpired && (status != 410 || code != "user_erased")) {
                    state.identityViolations.append("\(label), after its user's erasure at \(erased), was answered \(status) \(code)")
                }
            } else if let revoked = state.revokedAt[request.deviceID], issued <= revoked {
                if (200..<300).contains(status) || (unexpired && (status != 401 || code != "token_revoked")) {
                    state.identityViolations.append("\(label), after the device's revocation at \(revoked), was answered \(status) \(code)")
                }
            }
        }
    }

    /// One held-back request reaches the server now; its answer goes nowhere.
    func deliverHeld(salt: UInt64) async {
        let request: SimRequest? = state.withLock { state in
            guard !state.held.isEmpty else { return nil }
            var random = SimRandom(seed: salt)
            return state.held.remove(at: random.below(state.held.count))
        }
        guard let request, let server else { return }
        let response = await serve(request, by: server)
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
            let response = await serve(request, by: server)
            record("\(label) → \(response.status)")
            return response
        case .dropRequest:
            record("\(label): request lost")
            throw .network("the request timed out")
        case .dropAnswer:
            let response = await serve(request, by: server)
            record("\(label) → \(response.status), answer lost")
            throw .network("the request timed out")
        case .duplicateNow:
            let first = await serve(request, by: server)
            let second = await serve(request, by: server)
            record("\(label) → \(first.status), resent → \(second.status)")
            return second
        case .duplicateLater:
            state.withLock { $0.held.append(request) }
            let response = await serve(request, by: server)
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
            let response = await serve(request, by: server)
            record("\(label) → \(response.status): the device crashes before reading it")
            crash(device)
            throw .network("the device crashed")
        }
    }

    /// Opens the live channel of `request`'s device, unless it is partitioned.
    func openLive(_ request: SimRequest) async throws(TransportError) -> (SimResponse, SimLiveChannel?) {
        if isPartitioned(request.device) { throw .network("no route to the server (partitioned)") }
        guard let server else { throw .network("the server is down") }
        let process = nextProcess(of: server)
        let (response, channel) = await server.openLive(request, process: process)
        checkIdentity(request, response.status, response.body)
        record("device \(request.device) GET /sync/v1/live on process \(process) → \(response.status)")
        return (response, channel)
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
                push
                ? [.dropRequest, .dropAnswer, .duplicateNow, .duplicateLater, .delay, .crashBeforeSend, .crashAfterAnswer]
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
    private let token = Locked<(token: String, issuedAt: Int64)?>(nil)
    /// Set while the device is revoked and not enrolled again: the app's sign-in refuses it a token.
    private let signInRefused = Locked(false)
    /// When the app's session on this device began (its store was made), and whether the sign-in
    /// has since said the user's account was erased (the app then wipes the store itself).
    private let sessionStart: Locked<Int64>
    private let accountErased = Locked(false)
    /// Whether the sign-in renews a session begun before its user's erasure (``SimSchedule/renewsErasedSessions``).
    let renewsErasedSessions: Bool

    init(network: SimNetwork, device: Int, user: String, deviceID: String, renewsErasedSessions: Bool) {
        self.network = network
        self.device = device
        self.user = user
        self.deviceID = deviceID
        self.renewsErasedSessions = renewsErasedSessions
        sessionStart = Locked(network.clock.seconds)
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
        try await pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: contracts, changedFields: false)
    }

    /// With `fields=changed` when the engine asks for it, as URLSessionTransport sends it: rows
    /// the device holds come with only their changed fields.
    func pull(
        scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String, contracts: [String]?, changedFields: Bool
    ) async throws(TransportError) -> Data {
        var components = URLComponents()
        components.path = "/sync/v1/pull"
        var query = [URLQueryItem(name: "scope", value: scope)]
        if let cursor { query.append(URLQueryItem(name: "cursor", value: cursor)) }
        if let limit { query.append(URLQueryItem(name: "limit", value: String(limit))) }
        if let contracts { query.append(URLQueryItem(name: "contracts", value: contracts.joined(separator: ","))) }
        if changedFields { query.append(URLQueryItem(name: "fields", value: "changed")) }
        components.queryItems = query
        let headers = [ProtocolHeaders.schema: SchemaHeader.encode(schema), ProtocolHeaders.clientID: clientID]
        let path = components.percentEncodedPath + "?" + (components.percentEncodedQuery ?? "")
        return try await exchange(SimRequest(method: .get, path: path, headers: headers, body: nil, device: device))
    }

    func pullSubscriptions(
        _ request: SubscriptionPullRequest, schema: [String: Int], clientID: String
    ) async throws(TransportError) -> SubscriptionPullResponse {
        let body: Data
        do { body = try JSONEncoder().encode(request) } catch { throw .decoding("encoding the subscription pull: \(error)") }
        let headers = ["Content-Type": "application/json", ProtocolHeaders.schema: SchemaHeader.encode(schema), ProtocolHeaders.clientID: clientID]
        let data = try await exchange(SimRequest(method: .post, path: "/sync/v1/subscriptions/pull", headers: headers, body: body, device: device))
        do { return try JSONDecoder().decode(SubscriptionPullResponse.self, from: data) } catch { throw .decoding(String(describing: error)) }
    }

    func health() async -> Bool { !network.isPartitioned(device) && network.server != nil }

    /// The device was revoked: the sign-in gives it no new token until ``enrol()``.
    func revoke() { signInRefused.withLock { $0 = true } }

    /// The device signs in (again): a fresh token on the next request.
    func enrol() {
        signInRefused.withLock { $0 = false }
        token.withLock { $0 = nil }
    }

    /// A new session (a new store after a wipe).
    func beginSession() {
        sessionStart.withLock { $0 = network.clock.seconds }
        accountErased.withLock { $0 = false }
    }

    /// Whether the sign-in said the account was erased since the last call (and forgets it).
    func takeAccountErased() -> Bool {
        accountErased.withLock { erased in
            defer { erased = false }
            return erased
        }
    }

    var accountErasedPending: Bool { accountErased.current }

    /// `GET /sync/v1/live`, authorized as every request is (a 401 asks for a fresh token once):
    /// the open channel, or the answer that refused it.
    func openLive() async throws(TransportError) -> SimLiveChannel {
        network.countRequest(device)
        var refresh = false
        while true {
            var request = SimRequest(method: .get, path: "/sync/v1/live", headers: [:], body: nil, device: device, user: user, deviceID: deviceID)
            try authorize(&request, refresh: refresh)
            let (response, channel) = try await network.openLive(request)
            if response.status == 401, !refresh {
                refresh = true
                continue
            }
            guard let channel else { throw URLSessionTransport.error(status: response.status, data: response.body, retryAfter: nil) }
            return channel
        }
    }

    private func authorize(_ request: inout SimRequest, refresh: Bool) throws(TransportError) {
        guard let current = currentToken(refresh: refresh) else {
            throw .network("no device token: the sign-in refuses this device (revoked, or its account erased)")
        }
        request.headers["Authorization"] = "Bearer \(current.token)"
        request.tokenIssuedAt = current.issuedAt
    }

    private func exchange(_ request: SimRequest) async throws(TransportError) -> Data {
        network.countRequest(device)
        if request.isPush, request.path.hasPrefix("/sync/v1/push") { network.countPush(device) }
        let started = network.clock.date
        defer { network.requestEnded(device, startedAt: started) }
        var refresh = false
        while true {
            var request = request
            request.user = user
            request.deviceID = deviceID
            try authorize(&request, refresh: refresh)
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

    /// The token to send; `nil` when a new one is needed and the sign-in refuses the device.
    private func currentToken(refresh: Bool) -> (token: String, issuedAt: Int64)? {
        let server = network.server
        var refused = signInRefused.current
        // The app's backend knows of the erasure it asked for: a session begun before it is over.
        if !renewsErasedSessions, let erased = network.erasedAt(user), erased >= sessionStart.current {
            refused = true
            accountErased.withLock { $0 = true }
        }
        return token.withLock { token in
            if refresh || token == nil {
                guard !refused, let server else { return nil }
                // A revocation or an erasure refuses tokens dated up to the issuers' clock leeway
                // after it: the sign-in dates a re-enrolled device's or an erased user's token past that.
                token = server.token(
                    user: user, device: deviceID, revokedAt: network.revokedAt(deviceID: deviceID), erasedAt: network.erasedAt(user))
            }
            return token
        }
    }
}
