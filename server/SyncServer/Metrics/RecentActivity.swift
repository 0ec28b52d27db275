import Foundation
import NIOConcurrencyHelpers

/// The last hour of this process's sync traffic, a minute at a time, for the console's charts:
/// push and pull requests, their p99 answer time, and the live channels open.
///
/// A ring of 60 one-minute buckets in memory, fed where requests are already timed
/// (``RequestMetricsMiddleware``) and where the live channel count is recorded. Each process
/// keeps its own (Prometheus, scraping every process, is the fleet-wide view); a restart starts
/// it empty.
package final class RecentActivity: Sendable {
    /// How many minutes the ring keeps.
    package static let minutes = 60
    /// The routes counted as pushes and pulls.
    static let pushRoute = "/sync/v1/push"
    static let pullRoute = "/sync/v1/pull"

    /// Upper bounds of the answer-time buckets, in milliseconds; a p99 is read as the bound of
    /// the bucket it falls in. The last bucket holds everything slower than 10 s.
    static let latencyBounds: [Double] = [
        1, 2, 3, 5, 7.5, 10, 15, 20, 30, 50, 75, 100, 150, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000, 7500, 10_000, .infinity,
    ]

    /// One minute of the ring.
    private struct Bucket {
        var minute: Int64
        var pushes = 0
        var pulls = 0
        var pushLatencies = [Int](repeating: 0, count: RecentActivity.latencyBounds.count)
        var pullLatencies = [Int](repeating: 0, count: RecentActivity.latencyBounds.count)
        /// Live channels open when the minute's first event came, and the most during it.
        var liveAtStart: Int
        var liveMost: Int
    }

    private struct State {
        var buckets: [Bucket?] = Array(repeating: nil, count: RecentActivity.minutes)
        var live = 0

        /// The bucket of `minute`, emptied first when it still holds the same slot an hour ago.
        mutating func touch(_ minute: Int64, _ change: (inout Bucket) -> Void) {
            let slot = Int(minute % Int64(RecentActivity.minutes))
            if buckets[slot]?.minute != minute { buckets[slot] = Bucket(minute: minute, liveAtStart: live, liveMost: live) }
            change(&buckets[slot]!)
        }
    }

    private let state = NIOLockedValueBox(State())

    package init() {}

    /// Counts a push or pull request and how long it took (other routes are not charted).
    func recordRequest(route: String, nanoseconds: UInt64, at seconds: Int64 = RecentActivity.now()) {
        let isPush = route == Self.pushRoute
        guard isPush || route == Self.pullRoute else { return }
        let bucket = Self.latencyBucket(milliseconds: Double(nanoseconds) / 1_000_000)
        state.withLockedValue { state in
            state.touch(seconds / 60) { minute in
                if isPush {
                    minute.pushes += 1
                    minute.pushLatencies[bucket] += 1
                } else {
                    minute.pulls += 1
                    minute.pullLatencies[bucket] += 1
                }
            }
        }
    }

    /// Records how many live channels are open now.
    func recordLiveConnections(_ count: Int, at seconds: Int64 = RecentActivity.now()) {
        state.withLockedValue { state in
            // The minute's bucket starts from the count before this change.
            state.touch(seconds / 60) { $0.liveMost = max($0.liveMost, count) }
            state.live = count
        }
    }

    /// What one minute of the last hour held.
    package struct Minute: Hashable, Sendable {
        /// When the minute started, seconds since 1970.
        package var start: Int64
        package var pushes: Int
        package var pulls: Int
        /// The 99th percentile of push and pull answer times, as the upper bound of the bucket it
        /// falls in (milliseconds; infinity past 10 s); `nil` for a minute without requests.
        package var pushP99Milliseconds: Double?
        package var pullP99Milliseconds: Double?
        /// The most live channels open during the minute.
        package var liveConnections: Int
    }

    /// The 60 minutes up to and including the one of `seconds`, oldest first.
    package func lastHour(at seconds: Int64 = RecentActivity.now()) -> [Minute] {
        let (buckets, live) = state.withLockedValue { ($0.buckets, $0.live) }
        let current = seconds / 60
        var minutes: [Minute] = []
        // Newest first: a minute without events had as many channels open as the next minute
        // with one started with (the count changes only where it is recorded, which fills a bucket).
        var carried = live
        for minute in stride(from: current, to: current - Int64(Self.minutes), by: -1) {
            let bucket = buckets[Int(minute % Int64(Self.minutes))].flatMap { $0.minute == minute ? $0 : nil }
            let liveConnections = bucket?.liveMost ?? carried
            if let bucket { carried = bucket.liveAtStart }
            minutes.append(
                Minute(
                    start: minute * 60, pushes: bucket?.pushes ?? 0, pulls: bucket?.pulls ?? 0,
                    pushP99Milliseconds: bucket.flatMap { Self.p99($0.pushLatencies) },
                    pullP99Milliseconds: bucket.flatMap { Self.p99($0.pullLatencies) }, liveConnections: liveConnections))
        }
        return minutes.reversed()
    }

    static func now() -> Int64 { Int64(Date().timeIntervalSince1970) }

    static func latencyBucket(milliseconds: Double) -> Int {
        latencyBounds.firstIndex { milliseconds <= $0 } ?? latencyBounds.count - 1
    }

    /// The bound of the bucket holding the 99th percentile; `nil` without requests.
    static func p99(_ counts: [Int]) -> Double? {
        let total = counts.reduce(0, +)
        guard total > 0 else { return nil }
        let rank = (total * 99 + 99) / 100  // ceil(0.99 × total)
        var seen = 0
        for (index, count) in counts.enumerated() {
            seen += count
            if seen >= rank { return latencyBounds[index] }
        }
        return latencyBounds.last
    }
}
