import ContractRuntime
import Contracts
import Foundation
import Hummingbird
import NIOCore
import NIOHTTP1
import NIOPosix
import SampleServerApps
import SyncProtocol
import SyncServer

/// What the fleet census costs a push and a pull: two servers on loopback, each on its own
/// SQLite database, alike but for the census (``ServerConfiguration/fleetCensus``), take the
/// same traffic in alternating rounds: 64 devices at once, each pushing 5 `AssessmentResponse`
/// creates and pulling its `user` scope by cursor, with `X-Outpost-App`, `X-Outpost-Schema` and
/// `X-Outpost-Telemetry` on every request. The census writes every 5 s as it does in production,
/// so its writes fall inside the timed rounds. Bar: a round with the census within 1.05× of
/// the round without it next to it (the median of the pairs' ratios, which a machine's load
/// drifting over the run moves less than a ratio of medians).
enum CensusBenchmark {
    static let benchmark = Benchmark(
        name: "census",
        summary: "pushes and pulls over HTTP with the fleet census on, beside the same server with it off"
    ) { try run() }

    static let devices = 64
    static let requestsPerDevice = 40
    static let rounds = 11
    static let bar = 1.05

    static func run() throws -> BenchmarkResult {
        var result = BenchmarkResult()
        #if DEBUG
            result.fact("build", "DEBUG — these figures are not representative; run `make bench` (release)")
        #endif
        setenv("LOG_LEVEL", "critical", 0)
        result.fact(
            "workload",
            "\(devices) devices at once, \(requestsPerDevice) requests each per round (a push of 5 creates, then a pull by cursor), "
                + "\(rounds) rounds per server, alternating; the census writes every 5 s")
        let workspace = try TemporaryFolder("census")
        defer { workspace.remove() }
        let signer = try TokenSigner(secret: Data(repeating: 3, count: 32))
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let (withCensus, without, observed) = try runBlocking { () async throws -> (Samples, Samples, Int) in
            var withCensus = Samples(), without = Samples()
            var observed = 0
            try await withServers(workspace: workspace, signer: signer) { on, off in
                var sequences = [Int: [Int64]]()
                for round in 0..<(rounds * 2) {
                    let censusOn = round % 2 == 0
                    let server = censusOn ? on : off
                    let seconds = try await traffic(
                        port: server.port, signer: signer, group: group, round: round / 2, sequences: &sequences, censusOn: censusOn)
                    if censusOn { withCensus.append(seconds) } else { without.append(seconds) }
                }
                observed = try await on.census.summary(tenant: "bench", now: Int64(Date().timeIntervalSince1970), activeSeconds: 3600).devices.active
            }
            return (withCensus, without, observed)
        }
        var pairs = Samples()
        for (on, off) in zip(withCensus.values, without.values) { pairs.append(on / off) }
        let ratio = pairs.median
        result.rows.append(BenchmarkResult.Row("round, census on", median: Format.duration(withCensus.median), min: Format.duration(withCensus.min)))
        result.rows.append(BenchmarkResult.Row("round, census off", median: Format.duration(without.median), min: Format.duration(without.min)))
        result.check(
            "a round with the census within \(bar)× of the one without it next to it", ratio <= bar,
            String(format: "%.3f× (median of %d pairs; pairs from %.3f× to %.3f×)", ratio, pairs.count, pairs.min, pairs.max))
        result.check("the census saw every device", observed == devices, "\(observed) of \(devices) devices")
        return result
    }

    struct Server {
        var port: Int
        var census: FleetCensus
    }

    /// Two servers alike but for the census, running while `body` does.
    static func withServers(workspace: TemporaryFolder, signer: TokenSigner, _ body: (Server, Server) async throws -> Void) async throws {
        var servers: [Server] = []
        var tasks: [Task<Void, any Error>] = []
        defer { for task in tasks { task.cancel() } }
        for censusOn in [true, false] {
            let folder = try workspace.folder(censusOn ? "on" : "off")
            let storage = try SQLiteStorage(directory: folder, contracts: ContractRegistry.self)
            var configuration = ServerConfiguration(host: "127.0.0.1", port: 0, rateLimit: nil)
            configuration.fleetCensus = censusOn
            configuration.peerLimit = nil
            let environment = ServerEnvironment(storage: storage, signer: signer, apps: SampleServerApps.all)
            let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
            let router = buildRouter(configuration: configuration, environment: environment)
            let app = buildApplication(configuration: configuration, environment: environment, onServerRunning: { continuation.yield($0 ?? -1) })
            tasks.append(Task { try await app.run() })
            var port = -1
            for await bound in stream {
                port = bound
                break
            }
            guard port > 0 else { throw BenchmarkError("a sync server did not start listening") }
            servers.append(Server(port: port, census: router.census))
        }
        try await body(servers[0], servers[1])
    }

    /// One round: every device's requests, the devices at once; seconds it took.
    static func traffic(
        port: Int, signer: TokenSigner, group: any EventLoopGroup, round: Int, sequences: inout [Int: [Int64]], censusOn: Bool
    ) async throws -> Double {
        let key = censusOn ? 0 : 1
        var next = sequences[key] ?? Array(repeating: 1, count: devices)
        let start = monotonicNanoseconds()
        let ends = try await withThrowingTaskGroup(of: (Int, Int64).self) { tasks in
            for device in 0..<devices {
                let first = next[device]
                tasks.addTask {
                    let connection = try await LoadConnection.connect(port: port, group: group)
                    defer { Task { await connection.close() } }
                    let token = signer.sign(
                        DeviceIdentity(
                            tenant: "bench", userID: "user-\(device)", deviceID: "device-\(device)",
                            expiresAt: Int64(Date().timeIntervalSince1970) + 3600))
                    let headers = [
                        ("Authorization", "Bearer \(token)"), ("Content-Type", "application/json"), ("X-Outpost-App", "bench-app/1.0"),
                        ("X-Outpost-Schema", "AssessmentResponse=1"), ("X-Outpost-Telemetry", "syncs_ok=1,writes_queued=5,outbox_pending=0"),
                    ]
                    var seq = first
                    var cursor: String?
                    for request in 0..<requestsPerDevice {
                        if request % 2 == 0 {
                            let mutations = (0..<5).map { index in
                                answer(seq: seq + Int64(index), id: "r\(round)-d\(device)-\(request)-\(index)", device: device)
                            }
                            let body = try JSONEncoder().encode(PushRequest(clientId: "device-\(device)", schema: [:], mutations: mutations))
                            let response = try await connection.send(
                                LoadRequest(method: .POST, path: "/sync/v1/push", headers: headers, body: ByteBuffer(bytes: body)))
                            guard response.status == 200 else { throw BenchmarkError("push answered \(response.status)") }
                            seq += 5
                        } else {
                            let path = "/sync/v1/pull?scope=user" + (cursor.map { "&cursor=\($0)" } ?? "")
                            let response = try await connection.send(LoadRequest(method: .GET, path: path, headers: headers, body: nil))
                            guard response.status == 200, let body = response.body,
                                case .object(let page) = try JSONDecoder().decode(JSONValue.self, from: Data(buffer: body)),
                                case .string(let next)? = page["cursor"]
                            else { throw BenchmarkError("pull answered \(response.status)") }
                            cursor = next
                        }
                    }
                    return (device, seq)
                }
            }
            var ends: [(Int, Int64)] = []
            for try await end in tasks { ends.append(end) }
            return ends
        }
        let seconds = Double(monotonicNanoseconds() - start) / 1e9
        for (device, seq) in ends { next[device] = seq }
        sequences[key] = next
        return seconds
    }

    static func answer(seq: Int64, id: String, device: Int) -> Mutation {
        Mutation(
            seq: seq, clientMutationId: "cm-\(device)-\(seq)", entity: "AssessmentResponse", op: .create, id: id,
            payload: .object([
                "id": .string(id), "assessment_id": .string("assessment-1"), "attempt_id": .string("attempt-1"),
                "question_id": .string("q-\(seq)"), "answer": .string("B"), "time_spent_ms": .int(1200),
                "flagged_for_review": .bool(false), "updated_at": .string("2026-01-31T08:00:00.000Z"),
            ]),
            hlc: HybridLogicalClock(
                milliseconds: Int64(Date().timeIntervalSince1970 * 1000) - 1000, counter: Int(seq % 1000), node: "device-\(device)"
            ).description)
    }
}
