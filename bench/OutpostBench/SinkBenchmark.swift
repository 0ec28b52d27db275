import ContractRuntime
import Foundation
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import SampleServerApps
import SyncProtocol
import SyncServer

/// A webhook sink's lag under a push load: a receiver on loopback gets the batches a
/// ``SinkDelivery`` sends while pushes of 50 `Task` creates arrive every 50 ms (1 000 changes a
/// second) for 5 s, on SQLite and on PostgreSQL. The lag of a change is the time from its
/// commit (its audit entry's clock) to its arrival at the receiver. No bar: the figures are
/// recorded, beside the time of the pushes themselves. Invariant: every change arrives, once,
/// in commit order.
enum SinkBenchmark {
    static let benchmark = Benchmark(
        name: "sinks",
        summary: "a webhook sink's lag from commit to receiver under 1 000 changes/s of pushes, on SQLite and on PostgreSQL"
    ) { try run() }

    static let pushes = 100
    static let perPush = 50
    static let interval: Duration = .milliseconds(50)

    static func run() throws -> BenchmarkResult {
        var result = BenchmarkResult()
        #if DEBUG
            result.fact("build", "DEBUG — these figures are not representative; run `make bench` (release)")
        #endif
        let workspace = try TemporaryFolder("sinks")
        defer { workspace.remove() }
        let storages = try PostgresBenchmark.Storages(noting: &result)
        result.fact(
            "workload",
            "\(pushes) pushes of \(perPush) Task creates, one every \(interval) (\(Format.grouped(perPush * 1000 / 50)) changes/s), "
                + "to a webhook sink (batches of up to 100) whose receiver is on loopback in the same process")
        var allOnce = true
        for kind in storages.kinds {
            let storage = try storages.open(kind, folder: workspace.folder("sinks-\(kind)"))
            let measured = try runBlocking { try await measure(storage) }
            try PostgresBenchmark.close(storage)
            let name = kind == .sqlite ? "SQLite" : "PostgreSQL"
            allOnce = allOnce && measured.ids == (1...(pushes * perPush)).map { "task-\($0)" }
            result.rows += [
                .init(
                    "lag, \(name)", median: Format.duration(measured.lags.median), min: Format.duration(measured.lags.min),
                    note: "p99 \(Format.duration(measured.lags.percentile(0.99))), max \(Format.duration(measured.lags.max)); "
                        + "\(measured.batches) batches for \(Format.grouped(measured.lags.count)) changes"),
                .init(
                    "push of \(perPush), \(name)", median: Format.duration(measured.pushes.median), min: Format.duration(measured.pushes.min),
                    note: "p99 \(Format.duration(measured.pushes.percentile(0.99))) (the load itself)"),
            ]
        }
        result.check("every change once, in commit order", allOnce, "the receiver got every change of every storage once, in the order it was pushed")
        return result
    }

    struct Measured {
        var lags = Samples()
        var pushes = Samples()
        var ids: [String] = []
        var batches = 0
    }

    private struct Arrivals {
        var ids: [String] = []
        var lags: [Double] = []
        var batches = 0
    }

    static func measure(_ storage: any SyncStorage) async throws -> Measured {
        let arrivals = NIOLockedValueBox(Arrivals())
        let router = Router()
        router.post("/hooks") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 64 << 20)
            let now = Date().timeIntervalSince1970
            guard let json = try JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any],
                let changes = json["changes"] as? [[String: Any]]
            else { return Response(status: .badRequest) }
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            arrivals.withLockedValue { arrivals in
                arrivals.batches += 1
                for change in changes {
                    arrivals.ids.append(change["id"] as? String ?? "?")
                    if let text = change["recorded_at"] as? String, let recorded = formatter.date(from: text) {
                        arrivals.lags.append(now - recorded.timeIntervalSince1970)
                    }
                }
            }
            return Response(status: .ok)
        }
        let port = NIOLockedValueBox<Int?>(nil)
        var quiet = Logger(label: "bench.receiver")
        // Its shutdown at the end of a run logs the cancelled connections as errors.
        quiet.logLevel = .critical
        let receiver = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in port.withLockedValue { $0 = channel.localAddress?.port } }, logger: quiet)
        let serving = Task { try await receiver.runService(gracefulShutdownSignals: []) }
        defer { serving.cancel() }
        while port.withLockedValue({ $0 }) == nil { try await Task.sleep(for: .milliseconds(10)) }
        let receiverPort = port.withLockedValue { $0 }!

        var configuration = SinkDeliveryConfiguration()
        configuration.pollInterval = .milliseconds(200)
        var silent = Logger(label: "bench.sinks")
        silent.logLevel = .error
        // The receiver is on loopback, which outbound requests refuse unless allowed.
        let loopback = OutboundAddressPolicy(allowList: [CIDRBlock("127.0.0.1/32")!])
        let delivery = SinkDelivery(
            storage: storage, configuration: configuration, metrics: ServerMetrics(), clock: SystemClock(), logger: silent, outbound: loopback)
        var request = SinkAdministration.Request(url: "http://127.0.0.1:\(receiverPort)/hooks", secret: "the-benchmark-webhook-secret")
        request.id = "bench"
        _ = try await SinkAdministration(storage: storage, outbound: loopback).add(request, tenant: PostgresBenchmark.teamDevice.tenant)
        let delivering = Task { try await delivery.run() }
        defer { delivering.cancel() }
        delivery.sinkAdded()

        var measured = Measured()
        let service = PushService(storage: storage, reducers: SampleServerApps.reducers)
        let total = pushes * perPush
        var next = ContinuousClock.now
        for push in 0..<pushes {
            let mutations = (0..<perPush).map { index -> Mutation in
                let seq = Int64(push * perPush + index + 1)
                let id = "task-\(seq)"
                return Mutation(
                    seq: seq, clientMutationId: "cm-\(id)", entity: "Task", op: .create, id: id,
                    payload: .object([
                        "id": .string(id), "team_id": .string("north"), "title": .string("Swap the battery of scooter \(seq)"),
                        "task_kind": .string("battery_swap"), "status": .string("assigned"),
                    ]))
            }
            let started = ContinuousClock.now
            _ = try await service.push(PushRequest(clientId: "tablet-1", schema: [:], mutations: mutations), identity: PostgresBenchmark.teamDevice)
            let took = ContinuousClock.now - started
            measured.pushes.append(Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18)
            next += interval
            try await Task.sleep(until: next, clock: .continuous)
        }
        let deadline = ContinuousClock.now + .seconds(60)
        while arrivals.withLockedValue({ $0.ids.count }) < total, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        let arrived = arrivals.withLockedValue { $0 }
        for lag in arrived.lags { measured.lags.append(lag) }
        measured.ids = arrived.ids
        measured.batches = arrived.batches
        return measured
    }
}
