import ContractRuntime
import Foundation
import NIOCore
import NIOHTTP1
import SyncProtocol
import SyncServer

/// What the simulated devices of one run share: the event loops, the latencies, the errors and
/// what the server answered for (for the exactly-once check).
final class LoadRun: @unchecked Sendable {
    let group: any EventLoopGroup
    let latencies = LatencyRecorder()
    let errors = LoadErrorLog()
    private let lock = NSLock()
    private var expected = ExactlyOnce.Expected()
    private var liveMissing = false
    private var stormReturns: [UInt64] = []

    init(group: any EventLoopGroup) {
        self.group = group
    }

    func answered(client: String, team: String, ids: [String], lastSeq: Int64) {
        lock.withLock {
            expected.idsByTeam[team, default: []].formUnion(ids)
            expected.lastSeqByClient[client] = lastSeq
        }
    }

    var answeredMutations: ExactlyOnce.Expected { lock.withLock { expected } }

    /// The server answered 404 to `GET /sync/v1/live`: a build without the live channel.
    func markLiveMissing() { lock.withLock { liveMissing = true } }
    var isLiveMissing: Bool { lock.withLock { liveMissing } }

    /// A device's live channel said hello again after the outage.
    func returned(at instant: UInt64) { lock.withLock { stormReturns.append(instant) } }
    var returns: [UInt64] { lock.withLock { stormReturns } }
}

/// Every answer that was not the one expected, by route and status, and the 429s apart: those
/// of the devices that exceed their rate on purpose are deliberate, any other is an error.
final class LoadErrorLog: @unchecked Sendable {
    private let lock = NSLock()
    private var counts: [String: Int] = [:]
    private var samples: [String] = []
    private(set) var deliberateRateLimited = 0

    func status(_ route: String, _ status: Int, body: String) {
        note("\(route): HTTP \(status)", sample: "\(route): HTTP \(status) \(body.prefix(300))")
    }

    func transport(_ route: String, _ error: any Error) {
        note("\(route): transport", sample: "\(route): \(error)")
    }

    func other(_ route: String, _ what: String) {
        note("\(route): \(what)", sample: "\(route): \(what)")
    }

    func rateLimitedOnPurpose() { lock.withLock { deliberateRateLimited += 1 } }

    private func note(_ key: String, sample: String) {
        lock.withLock {
            counts[key, default: 0] += 1
            if samples.count < 8 { samples.append(sample) }
        }
    }

    var total: Int { lock.withLock { counts.values.reduce(0, +) } }
    var deliberate: Int { lock.withLock { deliberateRateLimited } }
    var byKind: [(String, Int)] { lock.withLock { counts.sorted { $0.key < $1.key } } }
    var firstSamples: [String] { lock.withLock { samples } }
}

/// What wakes a device's loop.
enum LoadWake: Sendable {
    /// Its next scheduled action.
    case tick
    /// A `change` event of its live channel, received at that instant.
    case poke(receivedAt: UInt64)
    /// The outage: drop every connection and come back at that instant.
    case outage(backAt: UInt64)
    /// Send pulls back to back, beyond the rate limit, on purpose.
    case exceedRate
    case stop
}

/// One simulated device: a keep-alive connection for its requests, its live channel, its
/// cursor in its team's scope and its push stream. Its state is touched by its own loop only
/// (``run(_:wakes:)``); the live channel's callback only records and wakes the loop.
final class LoadDevice: @unchecked Sendable {
    static let routePush = "push (1–5 Task creates)"
    static let routePull = "pull by cursor (scheduled)"
    static let routePokePull = "pull by cursor (on a poke)"
    static let routeAsset = "asset range (64 KiB of 4 MiB)"
    static let routeLiveOpen = "live: connect to hello"
    static let routeStormLive = "storm: reconnect to hello"
    static let routeStormPull = "storm: catch-up pull"
    static let routeStormPush = "storm: push written offline"
    static let routeOverRate = "pull beyond the rate limit"
    static let rangeBytes = 64 * 1024
    static let pullPageSize = 200

    let index: Int
    let team: String
    let clientID: String
    let token: String
    let port: Int
    let holdsLiveChannel: Bool
    let exceedsRate: Bool
    let wakes: AsyncStream<LoadWake>
    let wake: AsyncStream<LoadWake>.Continuation

    private var generator: SeededGenerator
    private var nextSeq: Int64 = 1
    /// A push sent without an answer (a dropped connection): sent again as it is.
    private var unanswered: [Mutation] = []
    private var cursor: String?
    private var connection: LoadConnection?
    private var live: EventStreamConnection?
    private var liveState: LoadLiveChannel?
    private var lastPullStarted: UInt64 = 0

    init(index: Int, team: String, token: String, port: Int, holdsLiveChannel: Bool, exceedsRate: Bool) {
        self.index = index
        self.team = team
        self.token = token
        self.port = port
        self.holdsLiveChannel = holdsLiveChannel
        self.exceedsRate = exceedsRate
        clientID = "load-device-\(index)"
        generator = SeededGenerator(seed: 0x10ad_0000 &+ UInt64(index))
        let stream = AsyncStream.makeStream(of: LoadWake.self, bufferingPolicy: .bufferingNewest(8))
        wakes = stream.stream
        wake = stream.continuation
    }

    static func user(_ index: Int) -> String { "load-user-\(index)" }
    static func deviceID(_ index: Int) -> String { "load-device-\(index)" }
    /// Every id a load device makes starts with this (the exactly-once check looks for it).
    static let idPrefix = "ld-"

    /// The device's life: connect, then act on each wake until told to stop.
    func run(_ run: LoadRun) async {
        await openLiveChannel(run, route: Self.routeLiveOpen)
        loop: for await wake in wakes {
            switch wake {
            case .stop: break loop
            case .tick: await act(run)
            case .poke(let receivedAt):
                // Coalesced: a pull that started after the poke already covers it.
                if receivedAt > lastPullStarted { await pullTeam(run, route: Self.routePokePull) }
            case .outage(let backAt): await outage(run, backAt: backAt)
            case .exceedRate: await exceedRate(run)
            }
        }
        await disconnect()
    }

    private func act(_ run: LoadRun) async {
        switch generator.weighted([(0, 40), (1, 35), (2, 25)]) {
        case 0: await push(run, route: Self.routePush)
        case 1: await pullTeam(run, route: Self.routePull)
        default: await assetRange(run)
        }
    }

    // MARK: Requests

    private func headers(_ extra: [(String, String)] = []) -> [(String, String)] {
        [("Authorization", "Bearer \(token)")] + extra
    }

    /// Sends on the device's connection (made again if it was dropped); the answer when its
    /// status is one of `expected`, else `nil` with the error logged.
    private func send(_ run: LoadRun, route: String, _ request: LoadRequest, expected: Set<Int>) async -> LoadResponse? {
        let start = monotonicNanoseconds()
        do {
            let connection: LoadConnection
            if let existing = self.connection, existing.isActive {
                connection = existing
            } else {
                connection = try await LoadConnection.connect(port: port, group: run.group)
                self.connection = connection
            }
            let response = try await connection.send(request)
            if expected.contains(response.status) {
                run.latencies.record(route, from: start)
                return response
            }
            if response.status == 429, exceedsRate {
                run.errors.rateLimitedOnPurpose()
            } else {
                run.errors.status(route, response.status, body: response.body.map { String(buffer: $0) } ?? "")
            }
            return nil
        } catch {
            run.errors.transport(route, error)
            await self.connection?.close()
            self.connection = nil
            return nil
        }
    }

    private func push(_ run: LoadRun, route: String) async {
        let resending = !unanswered.isEmpty
        if !resending {
            let count = generator.int(in: 1...5)
            unanswered = (0..<count).map { _ in
                let seq = nextSeq
                nextSeq += 1
                return LoadMutations.taskCreate(id: "\(Self.idPrefix)\(index)-\(seq)", team: team, seq: seq, clientMutationID: "cm-\(index)-\(seq)")
            }
        }
        let body: Data
        do {
            body = try JSONEncoder().encode(PushRequest(clientId: clientID, schema: [:], mutations: unanswered))
        } catch {
            run.errors.other(route, "cannot encode the push: \(error)")
            return
        }
        let request = LoadRequest(
            method: .POST, path: "/sync/v1/push", headers: headers([("Content-Type", "application/json")]), body: ByteBuffer(bytes: body)
        )
        guard let response = await send(run, route: route, request, expected: [200]) else { return }
        guard let answer = try? JSONDecoder().decode(PushResponse.self, from: Data((response.body ?? ByteBuffer()).readableBytesView)) else {
            run.errors.other(route, "an answer that is not a push response")
            return
        }
        // A resend after a lost answer may find its mutations done already: `duplicate` then.
        let accepted: Set<MutationStatus> = resending ? [.applied, .duplicate] : [.applied]
        guard answer.results.count == unanswered.count, answer.results.allSatisfy({ accepted.contains($0.status) }) else {
            run.errors.other(route, "results \(answer.results.map(\.status.rawValue)) for \(unanswered.count) mutations")
            unanswered = []
            return
        }
        run.answered(client: clientID, team: team, ids: unanswered.map(\.id), lastSeq: unanswered.last!.seq)
        unanswered = []
    }

    private struct PullPage: Decodable {
        var cursor: String
        var hasMore: Bool
        enum CodingKeys: String, CodingKey {
            case cursor
            case hasMore = "has_more"
        }
    }

    private static let cursorCharacters = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))

    /// Pulls the team's scope from the device's cursor to its end.
    private func pullTeam(_ run: LoadRun, route: String) async {
        lastPullStarted = monotonicNanoseconds()
        while true {
            var path = "/sync/v1/pull?scope=team&limit=\(Self.pullPageSize)"
            if let cursor { path += "&cursor=" + (cursor.addingPercentEncoding(withAllowedCharacters: Self.cursorCharacters) ?? cursor) }
            let request = LoadRequest(
                method: .GET, path: path, headers: headers([("Accept-Encoding", "gzip"), ("X-Outpost-Client", clientID)]), body: nil
            )
            guard let response = await send(run, route: route, request, expected: [200]) else { return }
            var body = Data((response.body ?? ByteBuffer()).readableBytesView)
            if response.headers["Content-Encoding"].first == "gzip" {
                guard let inflated = try? Gzip.decompress(body, limit: 256 << 20) else {
                    run.errors.other(route, "a gzip body that does not inflate")
                    return
                }
                body = inflated
            }
            guard let page = try? JSONDecoder().decode(PullPage.self, from: body) else {
                run.errors.other(route, "an answer that is not a pull page")
                return
            }
            cursor = page.cursor
            if !page.hasMore { return }
        }
    }

    private func assetRange(_ run: LoadRun) async {
        let start = generator.int(in: 0...(LoadSeed.rangedAssetBytes / Self.rangeBytes - 1)) * Self.rangeBytes
        let request = LoadRequest(
            method: .GET, path: "/assets/\(LoadSeed.rangedAsset)",
            headers: headers([("Range", "bytes=\(start)-\(start + Self.rangeBytes - 1)")]), body: nil, keepsBody: false
        )
        guard let response = await send(run, route: Self.routeAsset, request, expected: [206]) else { return }
        if response.bodyBytes != Self.rangeBytes {
            run.errors.other(Self.routeAsset, "\(response.bodyBytes) bytes for a range of \(Self.rangeBytes)")
        }
    }

    /// Pulls back to back until the limiter answers 429 a few times (its burst is 100).
    private func exceedRate(_ run: LoadRun) async {
        let request = LoadRequest(method: .GET, path: "/sync/v1/pull?scope=team&limit=1", headers: headers(), body: nil)
        for _ in 0..<160 { _ = await send(run, route: Self.routeOverRate, request, expected: [200]) }
    }

    // MARK: The live channel and the outage

    private func openLiveChannel(_ run: LoadRun, route: String) async {
        guard holdsLiveChannel, !run.isLiveMissing else { return }
        let state = LoadLiveChannel(run: run, route: route, device: self)
        do {
            live = try await EventStreamConnection.open(port: port, token: token, group: run.group) { update in state.handle(update) }
            liveState = state
        } catch {
            run.errors.transport(route, error)
        }
    }

    private func disconnect() async {
        liveState?.closing()
        await live?.close()
        await connection?.close()
        live = nil
        liveState = nil
        connection = nil
    }

    private func outage(_ run: LoadRun, backAt: UInt64) async {
        await disconnect()
        let now = monotonicNanoseconds()
        if backAt > now { try? await Task.sleep(nanoseconds: backAt - now) }
        await openLiveChannel(run, route: Self.routeStormLive)
        await pullTeam(run, route: Self.routeStormPull)
        await push(run, route: Self.routeStormPush)
    }
}

/// One live connection's view of its stream, on the event loop: the hello's latency, each
/// `change` passed to the device's loop, and any refusal or unexpected end logged.
final class LoadLiveChannel: @unchecked Sendable {
    private let lock = NSLock()
    private let run: LoadRun
    private let route: String
    private let opened = monotonicNanoseconds()
    private let device: LoadDevice
    private var status = 0
    private var helloSeen = false
    private var closedByDevice = false

    init(run: LoadRun, route: String, device: LoadDevice) {
        self.run = run
        self.route = route
        self.device = device
    }

    func closing() { lock.withLock { closedByDevice = true } }

    func handle(_ update: LiveStreamUpdate) {
        switch update {
        case .opened(let status, _):
            lock.withLock { self.status = status }
            if status == 404 { run.markLiveMissing() }
        case .event(let event, let receivedAt):
            switch event.event {
            case "hello":
                let first = lock.withLock { () -> Bool in
                    defer { helloSeen = true }
                    return !helloSeen
                }
                if first {
                    run.latencies.record(route, from: opened, to: receivedAt)
                    if route == LoadDevice.routeStormLive { run.returned(at: receivedAt) }
                }
            // `resync`: the server lost commits' notifications; the device pulls as on a poke.
            case "change", "resync": device.wake.yield(.poke(receivedAt: receivedAt))
            case "bye":
                if !lock.withLock({ closedByDevice }) { run.errors.other(route, "bye \(event.data)") }
            default: break
            }
        case .heartbeat: break
        case .refusalBody(let body):
            let status = lock.withLock { self.status }
            if status != 404 { run.errors.status(route, status, body: body) }
        case .closed(let error):
            let expected = lock.withLock { closedByDevice || status != 200 }
            if !expected { run.errors.other(route, "the live channel ended: \(error ?? "closed by the server")") }
        }
    }
}
