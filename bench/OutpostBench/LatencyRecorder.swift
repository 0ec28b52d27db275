import Foundation
import Histogram

/// Latencies by name (a route, a phase), each in an HdrHistogram of microseconds with three
/// significant digits, so p99.9 of a million samples costs no sort and no array of them all.
/// Safe to record into from any thread.
final class LatencyRecorder: @unchecked Sendable {
    /// 1 µs to 120 s; a latency beyond is clamped to the top (and would show as such).
    static let highestMicroseconds: UInt64 = 120_000_000

    private let lock = NSLock()
    private var histograms: [String: Histogram<UInt64>] = [:]
    private var order: [String] = []

    func record(_ name: String, nanoseconds: UInt64) {
        let micros = min(max(nanoseconds / 1_000, 1), Self.highestMicroseconds)
        lock.withLock {
            if histograms[name] == nil {
                histograms[name] = Histogram(highestTrackableValue: Self.highestMicroseconds, numberOfSignificantValueDigits: .three)
                order.append(name)
            }
            _ = histograms[name]!.record(micros)
        }
    }

    func record(_ name: String, from start: UInt64, to end: UInt64 = monotonicNanoseconds()) {
        record(name, nanoseconds: end >= start ? end - start : 0)
    }

    /// The names in the order they were first recorded.
    var names: [String] { lock.withLock { order } }

    func summary(_ name: String) -> LatencySummary? {
        lock.withLock { histograms[name].map(LatencySummary.init) }
    }

    func reset() {
        lock.withLock {
            histograms = [:]
            order = []
        }
    }
}

/// What a table shows of one histogram, in seconds.
struct LatencySummary: Sendable {
    var count: UInt64
    var p50: Double
    var p99: Double
    var p999: Double
    var max: Double

    init(_ histogram: Histogram<UInt64>) {
        count = histogram.totalCount
        func seconds(_ micros: UInt64) -> Double { Double(micros) / 1e6 }
        p50 = seconds(histogram.valueAtPercentile(50))
        p99 = seconds(histogram.valueAtPercentile(99))
        p999 = seconds(histogram.valueAtPercentile(99.9))
        max = seconds(histogram.max)
    }

    /// `12.3 / 45.6 / 78.9 ms`: p50 / p99 / p99.9.
    var percentiles: String { "\(Format.duration(p50)) / \(Format.duration(p99)) / \(Format.duration(p999))" }
}
