import ContractRuntime
import Contracts
import Foundation
import LearningClient
import SyncClient
import SyncProtocol
import SyncServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `outpost-bench radio`: what an hour of automatic syncing costs a phone's radio — the
/// requests and bytes of a device that writes every minute, with coalescing on and off, and in
/// low-power mode.
///
/// One device (`OfflineStore`, `SyncEngine`, `URLSessionTransport`) against the sync server on
/// loopback (SQLite), its engine started online with the standard preferences (a timer sync
/// every 15 minutes; the live channel off, so each request counted comes from the writes and
/// the timer). Time is simulated: the engine's sleeper and the store's clock move by hand, a
/// second at a time around writes, so an hour takes a few seconds; every request is real.
/// Each minute the user saves: one write, or a form saved as 3 writes a second apart. Every
/// request goes through a counting ``HTTPExchange``: requests, and bytes of request and response
/// (headers and bodies; response bodies as received after any decompression, no TLS).
///
/// Bars: with coalescing on, the 3-write saves cost one push a minute (60 an hour, not 180)
/// and fewer requests and bytes than with it off; one write a minute costs no more with it on;
/// low-power mode (hourly) makes the hour at most 4 requests.
enum RadioBenchmark {
    static let minutes = 60
    static let benchmark = Benchmark(
        name: "radio",
        summary: "requests and bytes an hour for a device writing every minute (1 write, or 3 a second apart), coalescing on and off, "
            + "and in low-power mode (bar: one push a minute with coalescing, at most 4 requests an hour in low-power mode)",
        run: { try run() }
    )

    struct Outcome: Sendable {
        var requests = 0
        var pushes = 0
        var bytes = 0
        var writes = 0
    }

    enum Mode: String, CaseIterable {
        case coalescingOn = "coalescing on (3 s)"
        case coalescingOff = "coalescing off"
        case lowPower = "low-power mode, coalescing on"
    }

    static func run() throws -> BenchmarkResult {
        var result = BenchmarkResult()
        result.columns = ["measurement", "requests / h", "bytes / h", "note"]
        #if DEBUG
            result.fact("build", "DEBUG — the counts are the same in release; only the run time differs")
        #endif
        result.fact("machine", "\(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(LoadBenchmark.loadAverage()) at the start")
        let workspace = try TemporaryFolder("radio")
        defer { workspace.remove() }
        let storage = try SQLiteStorage(directory: workspace.url.appendingPathComponent("server"), contracts: ContractRegistry.self)
        _ = try runBlocking {
            try await storage.write { try await $0.setTeamMembership(tenant: "acme", team: "team-1", userID: "u-1", isMember: true) }
        }
        let signer = try TokenSigner(secret: Data((0..<32).map { UInt8($0 * 5 + 1) }), source: "the benchmark")
        result.fact("server", "sync server on 127.0.0.1 (buildApplication), SQLiteStorage")
        result.fact("workload", "\(minutes) simulated minutes, a save every minute; engine started online, timer every 15 min, live channel off")

        var outcomes: [String: Outcome] = [:]
        try PullCompressionBenchmark.withServer(storage: storage, signer: signer) { port in
            for burst in [1, 3] {
                for mode in Mode.allCases {
                    let device = burst * 10 + (Mode.allCases.firstIndex(of: mode) ?? 0)
                    let outcome = try runBlocking {
                        try await hour(
                            port: port, signer: signer, folder: workspace.url.appendingPathComponent("device-\(device)"), device: "radio-\(device)",
                            burst: burst, mode: mode)
                    }
                    outcomes["\(burst)-\(mode.rawValue)"] = outcome
                    result.rows.append(
                        BenchmarkResult.Row(
                            "\(burst == 1 ? "1 write" : "3 writes 1 s apart") a minute, \(mode.rawValue)", median: "\(outcome.requests)",
                            min: "\(outcome.bytes)", note: "\(outcome.pushes) pushes, \(outcome.writes) writes delivered"
                        )
                    )
                }
            }
        }
        func get(_ burst: Int, _ mode: Mode) -> Outcome { outcomes["\(burst)-\(mode.rawValue)"] ?? Outcome() }
        let on3 = get(3, .coalescingOn)
        let off3 = get(3, .coalescingOff)
        let on1 = get(1, .coalescingOn)
        let off1 = get(1, .coalescingOff)
        let low = get(3, .lowPower)
        for burst in [1, 3] {
            for mode in Mode.allCases {
                let outcome = get(burst, mode)
                result.check(
                    "every write delivered (\(burst) a minute, \(mode.rawValue))", outcome.writes == burst * minutes,
                    "\(outcome.writes) of \(burst * minutes)")
            }
        }
        result.check("coalescing: 3 writes a minute are one push a minute", on3.pushes == minutes, "\(on3.pushes) pushes (off: \(off3.pushes))")
        result.check(
            "coalescing saves requests and bytes for 3 writes a minute", on3.requests < off3.requests && on3.bytes < off3.bytes,
            "\(on3.requests) vs \(off3.requests) requests, \(on3.bytes) vs \(off3.bytes) bytes")
        result.check(
            "coalescing costs nothing for 1 write a minute", on1.requests <= off1.requests,
            "\(on1.requests) vs \(off1.requests) requests")
        result.check("low-power mode: at most 4 requests an hour", low.requests <= 4, "\(low.requests) requests, \(low.bytes) bytes")
        return result
    }

    /// One device's simulated hour; returns what its transport sent.
    static func hour(port: Int, signer: TokenSigner, folder: URL, device: String, burst: Int, mode: Mode) async throws -> Outcome {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let clock = ManualClock(Date())
        let sleeper = BenchSleeper(clock: clock)
        let store = try OfflineStore(
            OfflineStoreConfiguration(
                databaseURL: folder.appendingPathComponent("store.sqlite"), tenantId: "acme", userId: "u-1", deviceId: device,
                keyProvider: FileKeyProvider(directory: folder.appendingPathComponent("keys", isDirectory: true)), clock: clock
            ), contracts: ContractRegistry.self, extensions: [LearningStore()]
        )
        let exchange = CountingExchange()
        let url = URL(string: "http://127.0.0.1:\(port)")!
        let transport = URLSessionTransport(baseURL: url, tokenProvider: BenchTokens(signer: signer, device: device), exchange: exchange)
        let debounce: TimeInterval = mode == .coalescingOff ? 0 : 3
        let engine = SyncEngine(
            store: store, transport: transport,
            configuration: SyncEngineConfiguration(
                scopes: ["team"], retriesAutomatically: false, pushDebounce: debounce, sleeper: sleeper, usesLiveChannel: false
            )
        )
        // The first sync (a fresh device's download) is not part of the hour.
        guard case .succeeded = await engine.syncNow() else { throw BenchmarkError("radio: the first sync failed") }
        if mode == .lowPower { try await engine.setPreferences(SyncPreferences(lowPowerMode: true)) }
        await engine.start(connectivity: ManualConnectivityMonitor(online: true))
        try await settle(engine, store, exchange, sleeper)
        exchange.reset()

        for minute in 0..<minutes {
            for write in 0..<burst {
                try store.create(
                    FieldTask(
                        id: "\(device)-\(minute)-\(write)", teamId: "team-1", title: "Task \(minute).\(write)", taskKind: .inspection, revision: 0)
                )
                // Without coalescing the write goes at once: it is out before the next one.
                if mode == .coalescingOff { try await settle(engine, store, exchange, sleeper, drained: true) }
                if write < burst - 1 {
                    sleeper.advance(by: 1)
                    try await settle(engine, store, exchange, sleeper)
                }
            }
            // The rest of the minute, a second at a time around the debounce, then in one step.
            let spent = TimeInterval(burst - 1)
            for _ in 0..<3 {
                sleeper.advance(by: 1)
                try await settle(engine, store, exchange, sleeper)
            }
            sleeper.advance(by: 60 - spent - 3)
            try await settle(engine, store, exchange, sleeper, drained: mode != .lowPower)
        }
        await engine.stop()
        let counts = exchange.counts
        let delivered = try store.outboxCounts()[.done]
        try store.close()
        return Outcome(requests: counts.requests, pushes: counts.pushes, bytes: counts.bytes, writes: delivered)
    }

    /// Waits (real time) until nothing is under way: no request in flight, no sync running, the
    /// timer asleep again, and with `drained` every write pushed.
    static func settle(
        _ engine: SyncEngine, _ store: OfflineStore, _ exchange: CountingExchange, _ sleeper: BenchSleeper, drained: Bool = false
    ) async throws {
        let deadline = Date().addingTimeInterval(30)
        var quiet = 0
        while Date() < deadline {
            let status = await engine.currentStatus
            let unsent = drained ? ((try? store.outboxCounts().unsent) ?? 1) : 0
            let busy = exchange.inFlight > 0 || status.phase != .idle || sleeper.sleeping == 0 || unsent > 0
            quiet = busy ? 0 : quiet + 1
            // Three looks 2 ms apart with nothing moving.
            if quiet >= 3 { return }
            try await Task.sleep(nanoseconds: 2_000_000)
        }
        throw BenchmarkError("radio: the engine did not settle within 30 s")
    }
}

/// Device tokens for the benchmark's device, signed by the server's key.
struct BenchTokens: TokenProvider {
    let signer: TokenSigner
    let device: String

    func token(refresh: Bool) async throws -> String {
        let now = Int64(Date().timeIntervalSince1970)
        return signer.sign(
            DeviceIdentity(tenant: "acme", userID: "u-1", deviceID: device, teams: ["team-1"], expiresAt: now + 3_600), issuedAt: now)
    }
}

/// Sends through URLSession and counts each request and its bytes (the request line and
/// headers, the body; the response's status line, headers and body as received).
final class CountingExchange: HTTPExchange, @unchecked Sendable {
    struct Counts {
        var requests = 0
        var pushes = 0
        var bytes = 0
    }

    private let lock = NSLock()
    private var current = Counts()
    private var running = 0
    private let session: URLSession

    init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpAdditionalHeaders = ["Accept-Encoding": "gzip"]
        session = URLSession(configuration: configuration)
    }

    var counts: Counts { lock.withLock { current } }
    var inFlight: Int { lock.withLock { running } }
    func reset() { lock.withLock { current = Counts() } }

    func send(_ request: URLRequest) async throws(TransportError) -> (Data, HTTPURLResponse) {
        lock.withLock { running += 1 }
        defer { lock.withLock { running -= 1 } }
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: request)
        } catch {
            throw .network(String(describing: error))
        }
        guard let http = response as? HTTPURLResponse else { throw .network("not an HTTP response") }
        let requestHeaders = (request.allHTTPHeaderFields ?? [:]).reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count + 4 }
        let requestLine = (request.httpMethod ?? "GET").utf8.count + (request.url?.absoluteString.utf8.count ?? 0) + 11
        let responseHeaders = http.allHeaderFields.reduce(0) { $0 + "\($1.key)".utf8.count + "\($1.value)".utf8.count + 4 }
        let bytes = requestLine + requestHeaders + (request.httpBody?.count ?? 0) + 17 + responseHeaders + data.count
        let isPush = request.url?.path.hasSuffix("/sync/v1/push") ?? false
        lock.withLock {
            current.requests += 1
            current.bytes += bytes
            if isPush { current.pushes += 1 }
        }
        return (data, http)
    }
}

/// A ``Sleeper`` whose time moves only by ``advance(by:)``, with the store's clock.
final class BenchSleeper: Sleeper, @unchecked Sendable {
    private struct Waiter {
        let id: UUID
        let deadline: TimeInterval
        let continuation: CheckedContinuation<Void, any Error>
    }

    private let lock = NSLock()
    private var elapsed: TimeInterval = 0
    private var waiters: [Waiter] = []
    private var cancelled: Set<UUID> = []
    let clock: ManualClock

    init(clock: ManualClock) { self.clock = clock }

    var sleeping: Int { lock.withLock { waiters.count } }

    func sleep(for seconds: TimeInterval) async throws {
        let id = UUID()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow: Bool? = lock.withLock {
                    if cancelled.remove(id) != nil { return false }
                    if seconds <= 0 { return true }
                    waiters.append(Waiter(id: id, deadline: elapsed + seconds, continuation: continuation))
                    return nil
                }
                switch resumeNow {
                case true?: continuation.resume()
                case false?: continuation.resume(throwing: CancellationError())
                case nil: break
                }
            }
        } onCancel: {
            let waiter: Waiter? = lock.withLock {
                guard let index = waiters.firstIndex(where: { $0.id == id }) else {
                    cancelled.insert(id)
                    return nil
                }
                return waiters.remove(at: index)
            }
            waiter?.continuation.resume(throwing: CancellationError())
        }
    }

    func advance(by seconds: TimeInterval) {
        clock.advance(by: seconds)
        let due: [Waiter] = lock.withLock {
            elapsed += seconds
            let due = waiters.filter { $0.deadline <= elapsed }
            waiters.removeAll { $0.deadline <= elapsed }
            return due
        }
        for waiter in due { waiter.continuation.resume() }
    }
}
