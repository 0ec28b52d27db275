import Foundation
import SyncClient
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The randomness and the size of a crash test: seeded, so a failure repeats with its seed, and
/// bounded, so `make test` stays within CI's time.
///
/// - `OUTPOST_CRASH_SEED`: the seed (default below); each test mixes in its own name.
/// - `OUTPOST_SOAK_ITERATIONS`: kills per crash point, instead of each test's standard count
///   (`make soak` sets it).
struct CrashPlan {
    static let standardSeed: UInt64 = 20_260_301

    let name: String
    let seed: UInt64
    let iterations: Int
    var random: SeededRandom

    init(_ name: String, iterations standard: Int, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.name = name
        let base = environment["OUTPOST_CRASH_SEED"].flatMap(UInt64.init) ?? Self.standardSeed
        // FNV-1a of the name: a stable mix, unlike `hashValue`.
        let mixed = name.utf8.reduce(UInt64(0xcbf2_9ce4_8422_2325)) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
        seed = base ^ mixed
        iterations = environment["OUTPOST_SOAK_ITERATIONS"].flatMap(Int.init).map { max(1, $0) } ?? standard
        random = SeededRandom(seed: seed)
    }

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
    mutating func chance(_ probability: Double) -> Bool { Double.random(in: 0..<1, using: &random) < probability }
    mutating func seconds(_ range: ClosedRange<Double>) -> Double { Double.random(in: range, using: &random) }
    mutating func pick<T>(_ items: [T]) -> T { items[int(0...(items.count - 1))] }
}

/// The library's SplitMix64 source as a `RandomNumberGenerator`.
struct SeededRandom: RandomNumberGenerator {
    private let source: SeededRandomSource

    init(seed: UInt64) {
        source = SeededRandomSource(seed: seed)
    }

    mutating func next() -> UInt64 { source.next() }
}

/// Where the kills of a crash test landed, counted, and printed at the end of the test (the
/// figures the suite reports: which points were actually hit, and how often).
struct KillTally {
    let plan: String
    let seed: UInt64
    private(set) var counts: [String: Int] = [:]
    private(set) var kills = 0

    init(_ plan: CrashPlan) {
        self.plan = plan.name
        seed = plan.seed
    }

    mutating func record(_ landing: String) {
        kills += 1
        counts[landing, default: 0] += 1
    }

    subscript(landing: String) -> Int { counts[landing] ?? 0 }

    var summary: String {
        "crash suite: \(plan) (seed \(seed)): \(kills) kills: "
            + counts.keys.sorted().map { "\(counts[$0]!) \($0)" }.joined(separator: ", ")
    }

    /// Prints the summary (it is part of the suite's report).
    func report() {
        print(summary)
    }
}

/// Times of a run, to place random kills within it.
enum Stopwatch {
    static func seconds(_ body: () throws -> Void) rethrows -> Double {
        let start = Date()
        try body()
        return Date().timeIntervalSince(start)
    }

    static func sleep(_ seconds: Double) {
        usleep(useconds_t(max(0, seconds) * 1_000_000))
    }
}
