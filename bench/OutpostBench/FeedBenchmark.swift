import ContractRuntime
import Foundation
import SyncProtocol
import SyncServer

/// The change feed's throughput (`GET /admin/v1/changes`, ``ChangeFeed`` in process): 10 000
/// `Task` creates pushed in pushes of 500, read back through the feed from the start, beside
/// the baseline of pulling the same rows from the start (``PullService``), pages of 500 each,
/// on SQLite and on PostgreSQL. No bar: the figures are recorded. Invariant: the feed delivers
/// every row once, in the order it was pushed.
enum FeedBenchmark {
    static let benchmark = Benchmark(
        name: "feed",
        summary: "the change feed read from the start, beside a pull of the same rows, on SQLite and on PostgreSQL"
    ) { try run() }

    static let runs = 3
    static let page = 500

    static func run() throws -> BenchmarkResult {
        var result = BenchmarkResult()
        #if DEBUG
            result.fact("build", "DEBUG — these figures are not representative; run `make bench` (release)")
        #endif
        let workspace = try TemporaryFolder("feed")
        defer { workspace.remove() }
        let storages = try PostgresBenchmark.Storages(noting: &result)
        result.fact(
            "workload",
            "\(Format.grouped(PostgresBenchmark.pullRows)) Task creates in one team scope, pushes of 500; the feed and a pull read them "
                + "from the start in pages of \(page); \(runs) runs each")
        let expected = (1...PostgresBenchmark.pullRows).map { "task-\($0)" }
        var everyRowOnce = true
        for kind in storages.kinds {
            let storage = try storages.open(kind, folder: workspace.folder("feed-\(kind)"))
            try runBlocking { try await PostgresBenchmark.seedTasks(storage) }
            let feed = ChangeFeed(storage: storage)
            let service = PullService(storage: storage, defaultLimit: page, maximumLimit: page)
            var feedTimes = Samples(), pullTimes = Samples()
            for _ in 0..<runs {
                let read = try Timing.measure { try runBlocking { try await readAll(feed) } }
                everyRowOnce = everyRowOnce && read.value == expected
                feedTimes.append(read.seconds)
                let pulled = try Timing.measure { try runBlocking { try await PostgresBenchmark.pullAll(service) } }
                if pulled.value != PostgresBenchmark.pullRows { throw BenchmarkError("\(kind): pulled \(pulled.value) rows") }
                pullTimes.append(pulled.seconds)
            }
            try PostgresBenchmark.close(storage)
            let name = kind == .sqlite ? "SQLite" : "PostgreSQL"
            let rows = Double(PostgresBenchmark.pullRows)
            result.rows += [
                .init(
                    "feed, \(name)", median: Format.rate(rows / feedTimes.median), min: Format.rate(rows / feedTimes.min),
                    note: "changes/s; \(Format.duration(feedTimes.median)) for all"),
                .init(
                    "pull of the same rows, \(name)", median: Format.rate(rows / pullTimes.median), min: Format.rate(rows / pullTimes.min),
                    note: "rows/s; \(Format.duration(pullTimes.median)); the feed takes \(Format.ratio(feedTimes.median / pullTimes.median)) its time"
                ),
            ]
        }
        result.check(
            "every row once, in order", everyRowOnce,
            "every run on every storage: the feed delivered the \(Format.grouped(PostgresBenchmark.pullRows)) rows once each, in the order they were pushed"
        )
        return result
    }

    /// Every change of the tenant from the start; their row ids in order.
    static func readAll(_ feed: ChangeFeed) async throws -> [String] {
        var ids: [String] = []
        var cursor: ChangeFeed.Cursor?
        while true {
            let page = try await feed.page(tenant: PostgresBenchmark.teamDevice.tenant, after: cursor, contracts: nil, limit: page)
            for change in page.changes {
                guard case .object(let object) = change, case .string(let id)? = object["id"] else { throw BenchmarkError("a change without an id") }
                ids.append(id)
            }
            cursor = page.cursor
            if !page.hasMore { return ids }
        }
    }
}
