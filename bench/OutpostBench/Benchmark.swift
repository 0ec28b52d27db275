import Foundation

/// One named benchmark of `outpost-bench`. Each quality bar of docs/PERFORMANCE.md becomes one of these;
/// add a new one to ``Benchmarks/all`` and it can be run alone with `outpost-bench NAME`.
struct Benchmark: Sendable {
    /// The name on the command line, lower case (`codegen`, later `sync`, `storage`, ...).
    let name: String
    /// One line for `outpost-bench --list` and the summary table.
    let summary: String
    /// Runs the benchmark. Throwing means the benchmark could not be measured at all (bad setup,
    /// invalid input); a measured figure that misses its bar is a failed ``BenchmarkResult/Check``.
    let run: @Sendable () throws -> BenchmarkResult
}

/// What a benchmark measured and whether its bars hold.
struct BenchmarkResult: Sendable {
    /// One row of the measurement table.
    struct Row: Sendable {
        var measurement: String
        var median: String
        var min: String
        var note: String

        init(_ measurement: String, median: String, min: String = "", note: String = "") {
            self.measurement = measurement
            self.median = median
            self.min = min
            self.note = note
        }
    }

    /// A bar or an invariant, with the figure it was judged on.
    struct Check: Sendable {
        var name: String
        var passed: Bool
        var detail: String
    }

    /// Facts about the input (counts, sizes), printed before the table.
    var facts: [(String, String)] = []
    var rows: [Row] = []
    /// The table's column names when its columns are not a median and a min (latency
    /// percentiles, counts).
    var columns = ["measurement", "median", "min", "note"]
    var checks: [Check] = []

    var passed: Bool { checks.allSatisfy(\.passed) }

    mutating func fact(_ label: String, _ value: String) { facts.append((label, value)) }

    mutating func check(_ name: String, _ passed: Bool, _ detail: String) {
        checks.append(Check(name: name, passed: passed, detail: detail))
    }
}

/// A benchmark that could not produce figures; the message says why and what to do.
struct BenchmarkError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// Every benchmark `outpost-bench` knows, in the order they run by default.
enum Benchmarks {
    static let all: [Benchmark] = [
        CodegenBenchmark.benchmark,
        PushIngestionBenchmark.benchmark,
        SignatureBenchmark.benchmark,
        PullCompressionBenchmark.benchmark,
        ChangedFieldsBenchmark.benchmark,
        PushCompressionBenchmark.benchmark,
        PostgresBenchmark.benchmark,
        PeerBenchmark.benchmark,
        ClientApplyBenchmark.benchmark,
        ClientReadBenchmark.benchmark,
        InitialSyncBenchmark.benchmark,
        IncrementalSyncCPUBenchmark.benchmark,
        GrowthBenchmark.benchmark,
        LoadBenchmark.benchmark,
        LiveBenchmark.benchmark,
        FeedBenchmark.benchmark,
        SinkBenchmark.benchmark,
        CensusBenchmark.benchmark,
        TokenBenchmark.benchmark,
        SubscriptionBenchmark.benchmark,
        FilesBenchmark.benchmark,
        RadioBenchmark.benchmark,
    ]
}

/// An executable built next to `outpost-bench` (the same `--show-bin-path` folder), so both come
/// from the same configuration.
func siblingExecutable(_ name: String) throws -> URL {
    let executable = (Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0])).resolvingSymlinksInPath()
    let candidate = executable.deletingLastPathComponent().appendingPathComponent(name)
    guard FileManager.default.isExecutableFile(atPath: candidate.path) else {
        throw BenchmarkError(
            "\(name) is not next to outpost-bench (looked for \(candidate.path)); "
                + "build it in the same configuration: `swift build -c release --product \(name)`"
        )
    }
    return candidate
}
