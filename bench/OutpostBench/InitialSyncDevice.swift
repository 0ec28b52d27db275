import Foundation
import SyncClient
import SyncProtocol
import SyncServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The device side of `initial-sync`, run as a child process of `outpost-bench` so that its
/// peak memory is its own: a fresh ``OfflineStore`` in an empty folder, a ``SyncEngine`` on a
/// ``URLSessionTransport``, one `syncNow()` of the `user` scope. It prints one JSON line (a
/// ``Report``) and exits 0, or prints the problem on standard error and exits 1.
///
///     outpost-bench initial-sync-device --server URL --token TOKEN --folder DIR --page-size 1000
///     outpost-bench initial-sync-device --pages DIR --folder DIR --page-size 1000   (recorded pages, no server)
///
/// Not a benchmark of its own (`--list` does not show it): only `initial-sync` starts it.
enum InitialSyncDevice {
    static let command = "initial-sync-device"

    /// What the device measured on itself.
    struct Report: Codable, Sendable {
        /// Opening the fresh store (migrations, metadata), before the sync.
        var openSeconds: Double
        /// `syncNow()`: push (nothing queued), pull of every page, purge, bookkeeping.
        var syncSeconds: Double
        /// User + system CPU time of the device during `syncNow()`, every thread.
        var syncCPUSeconds: Double
        /// Rows the sync reported pulled (upserts and deletes).
        var pulled: Int
        /// Resident memory right after the store opened (VmRSS), before the sync.
        var residentBeforeSyncKiB: Int
        /// The high-water mark of resident memory (VmHWM) before the sync started.
        var peakBeforeSyncKiB: Int
        /// The high-water mark of resident memory (VmHWM) of the whole process, at its end.
        var peakKiB: Int
        /// `getrusage(RUSAGE_SELF).ru_maxrss`, the kernel's own peak figure, as a cross-check.
        var maxRSSKiB: Int
    }

    static func main(_ arguments: [String]) -> Int32 {
        var options: [String: String] = [:]
        var index = 0
        while index + 1 < arguments.count, arguments[index].hasPrefix("--") {
            options[String(arguments[index].dropFirst(2))] = arguments[index + 1]
            index += 2
        }
        let transport: (any SyncTransport)?
        if let server = options["server"].flatMap(URL.init(string:)), let token = options["token"] {
            transport = URLSessionTransport(baseURL: server, timeout: 120) { token }
        } else if let pages = options["pages"] {
            transport = try? RecordedPages(folder: URL(fileURLWithPath: pages, isDirectory: true))
        } else {
            transport = nil
        }
        guard index == arguments.count, let transport, let folder = options["folder"], let pageSize = options["page-size"].flatMap(Int.init) else {
            Console.error("usage: outpost-bench \(command) (--server URL --token TOKEN | --pages DIR) --folder DIR --page-size N")
            return 2
        }
        do {
            let report = try runBlocking {
                try await sync(transport: transport, folder: URL(fileURLWithPath: folder, isDirectory: true), pageSize: pageSize)
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            Console.out(String(decoding: try encoder.encode(report), as: UTF8.self))
            return 0
        } catch {
            Console.error("error: the device could not sync: \(error)")
            return 1
        }
    }

    static func sync(transport: any SyncTransport, folder: URL, pageSize: Int) async throws -> Report {
        let opened = try Timing.measure { try ClientStoreBenchmarks.openStore(folder, tenantId: InitialSyncSeed.tenant) }
        let store = opened.value
        let engine = SyncEngine(
            store: store, transport: transport,
            configuration: SyncEngineConfiguration(scopes: ["user"], pullPageSize: pageSize, retriesAutomatically: false)
        )
        let residentBefore = ProcessMemory.status("VmRSS")
        let peakBefore = ProcessMemory.status("VmHWM")
        let cpu = Timing.processCPUSeconds()
        let clock = ContinuousClock()
        let start = clock.now
        let result = await engine.syncNow()
        let seconds = Timing.seconds(clock.now - start)
        let syncCPU = Timing.processCPUSeconds() - cpu
        guard case .succeeded(_, let pulled) = result else { throw BenchmarkError("syncNow() answered \(result)") }
        await engine.stop()
        try store.close()
        return Report(
            openSeconds: opened.seconds, syncSeconds: seconds, syncCPUSeconds: syncCPU, pulled: pulled,
            residentBeforeSyncKiB: residentBefore, peakBeforeSyncKiB: peakBefore, peakKiB: ProcessMemory.status("VmHWM"),
            maxRSSKiB: ProcessMemory.maxRSSKiB()
        )
    }
}

/// Pull pages recorded from the server (``InitialSyncBenchmark/downloadOnly(port:token:recordInto:)``),
/// served from files as `URLSessionTransport` serves them from HTTP: the gzip body inflated
/// and read with `PullResponse(json:)`. The device's own cost, with no server and no network.
struct RecordedPages: SyncTransport {
    let folder: URL
    /// The page answering each cursor (`""` for the first).
    let pageForCursor: [String: Int]

    init(folder: URL) throws {
        self.folder = folder
        let cursors = try String(contentsOf: folder.appendingPathComponent(Self.cursorsFile), encoding: .utf8)
        var pages: [String: Int] = [:]
        for (index, cursor) in cursors.split(separator: "\n", omittingEmptySubsequences: false).dropLast().enumerated() {
            pages[String(cursor)] = index
        }
        pageForCursor = pages
    }

    static let cursorsFile = "cursors.txt"

    static func pageFile(_ index: Int) -> String { "page-\(index).gz" }

    /// The recorded page answering `cursor`, inflated, as `URLSessionTransport` hands it over.
    func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError) -> Data {
        guard let index = pageForCursor[cursor ?? ""] else { throw .http(status: 404, body: nil, retryAfter: nil) }
        do {
            let body = try Data(contentsOf: folder.appendingPathComponent(Self.pageFile(index)))
            return try Gzip.decompress(body, limit: 1 << 30)
        } catch {
            throw .decoding("recorded page \(index): \(error)")
        }
    }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        PushResponse(results: [], lastSeq: 0)
    }

    func health() async -> Bool { true }
}

/// This process's memory figures from `/proc/self/status` and `getrusage`.
enum ProcessMemory {
    /// A `kB` line of `/proc/self/status` (`VmHWM`, `VmRSS`), or of another process's; 0 when absent.
    static func status(_ field: String, pid: Int32? = nil) -> Int {
        let path = pid.map { "/proc/\($0)/status" } ?? "/proc/self/status"
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            let digits = line.dropFirst(field.count + 1).filter(\.isNumber)
            return Int(digits) ?? 0
        }
        return 0
    }

    /// `ru_maxrss` of this process, in KiB (Linux reports kilobytes).
    static func maxRSSKiB() -> Int { Int(Timing.resourceUsage().ru_maxrss) }

    /// User + system CPU seconds of another process so far (`/proc/PID/stat`), or `nil`.
    static func cpuSeconds(pid: Int32) -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        // After "pid (comm) ": state is field 3; utime and stime are fields 14 and 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// User + system CPU seconds so far of every process whose command is `name` (`postgres`:
    /// the database's backends and workers alive now).
    static func cpuSeconds(named name: String) -> Double {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).reduce(0) { total, pid in
            guard let command = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8),
                command.trimmingCharacters(in: .whitespacesAndNewlines) == name
            else { return total }
            return total + (cpuSeconds(pid: pid) ?? 0)
        }
    }

    /// The machine's busy and total CPU seconds so far, over every core (`/proc/stat`).
    static func machineCPUSeconds() -> (busy: Double, total: Double) {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("cpu ") })
        else { return (0, 0) }
        // user nice system idle iowait irq softirq steal: idle and iowait are not busy.
        let ticks = line.split(separator: " ").dropFirst().compactMap { Double($0) }
        guard ticks.count >= 8 else { return (0, 0) }
        let total = ticks.prefix(8).reduce(0, +)
        let busy = total - ticks[3] - ticks[4]
        let perSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
        return (busy / perSecond, total / perSecond)
    }
}
