import Foundation

/// A small Prometheus registry: counters and histograms with labels, rendered in the text
/// exposition format (version 0.0.4). Safe to update from any number of concurrent requests.
///
/// ```swift
/// let registry = MetricsRegistry()
/// let requests = registry.counter("app_requests_total", help: "Requests.", labels: ["route"])
/// requests.increment("/health")
/// print(registry.exposition())
/// ```
public final class MetricsRegistry: Sendable {
    /// The content type of ``exposition()``.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    private let families = Locked<[String: Family]>([:])

    public init() {}

    /// A counter family; asking again for the same name returns the same counter.
    public func counter(_ name: String, help: String, labels: [String] = []) -> Counter {
        register(Family(name: name, help: help, kind: .counter, labelNames: labels, buckets: []))
        return Counter(registry: self, name: name, arity: labels.count)
    }

    /// A histogram family with cumulative `buckets` (upper bounds, seconds for durations).
    public func histogram(_ name: String, help: String, labels: [String] = [], buckets: [Double] = Histogram.defaultBuckets) -> Histogram {
        register(Family(name: name, help: help, kind: .histogram, labelNames: labels, buckets: buckets.sorted()))
        return Histogram(registry: self, name: name, arity: labels.count)
    }

    /// Every family in name order, each series in label order.
    public func exposition() -> String {
        let snapshot = families.withLock { $0 }
        var output = ""
        for name in snapshot.keys.sorted() {
            snapshot[name]!.render(into: &output)
        }
        return output
    }

    private func register(_ family: Family) {
        families.withLock { families in
            if families[family.name] == nil { families[family.name] = family }
        }
    }

    fileprivate func update(_ name: String, labelValues: [String], _ change: (inout Series, Family) -> Void) {
        families.withLock { families in
            guard var family = families[name] else { return }
            var series = family.series[labelValues] ?? Series(bucketCounts: Array(repeating: 0, count: family.buckets.count))
            change(&series, family)
            family.series[labelValues] = series
            families[name] = family
        }
    }

    fileprivate struct Series {
        var value: Double = 0
        var bucketCounts: [UInt64]
        var sum: Double = 0
        var count: UInt64 = 0
    }

    fileprivate struct Family {
        enum Kind: String { case counter, histogram }

        var name: String
        var help: String
        var kind: Kind
        var labelNames: [String]
        var buckets: [Double]
        var series: [[String]: Series] = [:]

        func render(into output: inout String) {
            output += "# HELP \(name) \(help.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n"))\n"
            output += "# TYPE \(name) \(kind.rawValue)\n"
            var keys = Array(series.keys)
            if labelNames.isEmpty, keys.isEmpty { keys = [[]] }
            keys.sort { $0.lexicographicallyPrecedes($1) }
            for labelValues in keys {
                let current = series[labelValues] ?? Series(bucketCounts: Array(repeating: 0, count: buckets.count))
                let pairs = zip(labelNames, labelValues).map { ($0, $1) }
                switch kind {
                case .counter:
                    output += "\(name)\(Self.labels(pairs)) \(Self.number(current.value))\n"
                case .histogram:
                    var cumulative: UInt64 = 0
                    for (bound, count) in zip(buckets, current.bucketCounts) {
                        cumulative += count
                        output += "\(name)_bucket\(Self.labels(pairs + [("le", Self.number(bound))])) \(cumulative)\n"
                    }
                    output += "\(name)_bucket\(Self.labels(pairs + [("le", "+Inf")])) \(current.count)\n"
                    output += "\(name)_sum\(Self.labels(pairs)) \(Self.number(current.sum))\n"
                    output += "\(name)_count\(Self.labels(pairs)) \(current.count)\n"
                }
            }
        }

        static func labels(_ pairs: [(String, String)]) -> String {
            guard !pairs.isEmpty else { return "" }
            let body = pairs.map { name, value in
                let escaped = value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
                    .replacingOccurrences(of: "\n", with: "\\n")
                return "\(name)=\"\(escaped)\""
            }
            return "{" + body.joined(separator: ",") + "}"
        }

        static func number(_ value: Double) -> String {
            if value == value.rounded(), abs(value) < 9.0e15 { return String(Int64(value)) }
            return value.description
        }
    }

    /// A counter: a total that only goes up.
    public struct Counter: Sendable {
        let registry: MetricsRegistry
        let name: String
        let arity: Int

        /// Adds `amount` (default 1) to the series with these label values, in the order the
        /// labels were declared.
        public func increment(by amount: Double = 1, _ labelValues: String...) {
            precondition(labelValues.count == arity, "\(name) takes \(arity) label values")
            guard amount >= 0 else { return }
            registry.update(name, labelValues: labelValues) { series, _ in series.value += amount }
        }
    }

    /// A histogram: counts of observations per bucket, their sum and their count.
    public struct Histogram: Sendable {
        /// Request latencies from 5 ms to 10 s.
        public static let defaultBuckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

        let registry: MetricsRegistry
        let name: String
        let arity: Int

        /// Records one observation in the series with these label values.
        public func observe(_ value: Double, _ labelValues: String...) {
            precondition(labelValues.count == arity, "\(name) takes \(arity) label values")
            registry.update(name, labelValues: labelValues) { series, family in
                if let index = family.buckets.firstIndex(where: { value <= $0 }) { series.bucketCounts[index] += 1 }
                series.sum += value
                series.count += 1
            }
        }
    }
}
