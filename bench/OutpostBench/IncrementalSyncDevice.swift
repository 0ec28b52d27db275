import Foundation
import SyncClient
import SyncClientNIO
import SyncProtocol

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The warm device of `incremental-sync-cpu`: one process, one ``OfflineStore`` and one
/// ``SyncEngine`` on one ``URLSessionTransport`` that stay alive across the benchmark's rounds, as
/// in a running app. Each line `sync` on standard input runs one `syncNow()` and prints one JSON
/// line (a ``Report``, `round` counting from 1); `stop`, or the end of standard input, closes the
/// store and exits 0. A failed sync prints the problem on standard error and exits 1.
///
///     outpost-bench incremental-sync-device --server URL --token TOKEN --folder DIR --page-size 1000
///
/// The server may be stopped and started again on the same port between rounds: the transport's
/// idle connection is then closed and the next request opens another, as after a phone's radio
/// slept. Not a benchmark of its own (`--list` does not show it): only `incremental-sync-cpu`
/// starts it.
enum IncrementalSyncDevice {
    static let command = "incremental-sync-device"

    /// What the device measured on one sync.
    struct Report: Codable, Sendable {
        /// 1 for the first sync of the process.
        var round: Int
        /// `syncNow()`: push (nothing queued), urgent changes, the pull, purge, bookkeeping.
        var syncSeconds: Double
        /// User + system CPU time of the device during `syncNow()`, every thread.
        var syncCPUSeconds: Double
        /// Rows the sync reported pulled.
        var pulled: Int
        /// CPU from the start of `syncNow()` to ``settleSeconds`` after its end: the sync and
        /// what it left to run in the background (the write-ahead log's checkpoint it asks for).
        var settledCPUSeconds: Double
    }

    /// How long after a sync its background work is given before the settled CPU is read.
    static let settleSeconds = 0.3

    static func main(_ arguments: [String]) -> Int32 {
        var options: [String: String] = [:]
        var index = 0
        while index + 1 < arguments.count, arguments[index].hasPrefix("--") {
            options[String(arguments[index].dropFirst(2))] = arguments[index + 1]
            index += 2
        }
        guard index == arguments.count, let server = options["server"].flatMap(URL.init(string:)), let token = options["token"],
            let folder = options["folder"], let pageSize = options["page-size"].flatMap(Int.init)
        else {
            Console.error("usage: outpost-bench \(command) --server URL --token TOKEN --folder DIR --page-size N [--http urlsession|nio]")
            return 2
        }
        guard let http = HTTP(rawValue: options["http"] ?? HTTP.urlSession.rawValue) else {
            Console.error("--http must be \(HTTP.allCases.map(\.rawValue).joined(separator: " or "))")
            return 2
        }
        let transport = URLSessionTransport(
            baseURL: server, timeout: 120, tokenProvider: ClosureTokenProvider { token }, exchange: http.exchange(timeout: .seconds(120))
        )
        do {
            let store = try ClientStoreBenchmarks.openStore(URL(fileURLWithPath: folder, isDirectory: true), tenantId: InitialSyncSeed.tenant)
            let engine = SyncEngine(
                store: store, transport: transport,
                configuration: SyncEngineConfiguration(scopes: ["user"], pullPageSize: pageSize, retriesAutomatically: false)
            )
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            var round = 0
            while let line = readLine(), line != "stop" {
                guard line == "sync" else { continue }
                round += 1
                let report = try runBlocking { [round] in try await sync(engine, round: round) }
                Console.out(String(decoding: try encoder.encode(report), as: UTF8.self))
            }
            try runBlocking { await engine.stop() }
            try store.close()
            return 0
        } catch {
            Console.error("error: the device could not sync: \(error)")
            return 1
        }
    }

    static func sync(_ engine: SyncEngine, round: Int) async throws -> Report {
        let cpu = Timing.processCPUSeconds()
        let clock = ContinuousClock()
        let start = clock.now
        let result = await engine.syncNow()
        let seconds = Timing.seconds(clock.now - start)
        let syncCPU = Timing.processCPUSeconds() - cpu
        guard case .succeeded(_, let pulled) = result else { throw BenchmarkError("syncNow() answered \(result)") }
        try await Task.sleep(for: .seconds(settleSeconds))
        return Report(
            round: round, syncSeconds: seconds, syncCPUSeconds: syncCPU, pulled: pulled, settledCPUSeconds: Timing.processCPUSeconds() - cpu)
    }
}

extension IncrementalSyncDevice {
    /// What the device's transport sends its requests through.
    enum HTTP: String, CaseIterable {
        /// URLSession itself (on Linux, libcurl under swift-corelibs-foundation).
        case urlSession = "urlsession"
        /// SyncClientNIO's HTTPClientExchange (AsyncHTTPClient).
        case nio

        /// What an app on this platform is told to use (docs/client.md): URLSession on Apple
        /// platforms, the NIO exchange on Linux.
        static var defaultForPlatform: HTTP {
            #if canImport(FoundationNetworking)
                .nio
            #else
                .urlSession
            #endif
        }

        func exchange(timeout: Duration) -> (any HTTPExchange)? {
            switch self {
            case .urlSession: nil
            case .nio: HTTPClientExchange(timeout: timeout)
            }
        }

        var description: String {
            switch self {
            case .urlSession: "its requests through URLSession (OUTPOST_BENCH_DEVICE_HTTP=urlsession)"
            case .nio:
                "its requests through SyncClientNIO's HTTPClientExchange, what docs/client.md tells a Linux app to use (OUTPOST_BENCH_DEVICE_HTTP=urlsession for URLSession)"
            }
        }
    }
}
