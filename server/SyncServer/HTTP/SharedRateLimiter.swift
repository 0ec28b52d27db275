/// Counters several server processes share, for rate limits that hold however requests are
/// spread over the processes (``SharedRateLimiter``).
package protocol SharedRateWindows: Sendable {
    /// Adds one to `key`'s count in the window starting at `window` (seconds since 1970) and
    /// returns the new count; counts of earlier windows are dropped.
    func increment(_ key: String, window: Int64) async throws -> Int64
}

extension SyncStorage {
    /// The shared counters of a storage several processes use at once; `nil` for one process's own.
    package var sharedRateWindows: (any SharedRateWindows)? { self as? any SharedRateWindows }
}

/// A rate limit counted in shared storage: fixed windows of `burst / requestsPerSecond` seconds
/// (at least one), each allowing `burst` requests, so the average rate and the burst are those
/// of the per-process token bucket. A storage failure lets the request through (and is the
/// request's own problem to meet): a limit must not turn a database hiccup into an outage.
package struct SharedRateLimiter: Sendable {
    package let limit: ServerConfiguration.RateLimit
    let windows: any SharedRateWindows
    let clock: any ServerClock

    package init(limit: ServerConfiguration.RateLimit, windows: any SharedRateWindows, clock: any ServerClock = SystemClock()) {
        self.limit = limit
        self.windows = windows
        self.clock = clock
    }

    /// The window length in seconds.
    var windowSeconds: Int64 { max(1, Int64((Double(max(limit.burst, 1)) / max(limit.requestsPerSecond, 0.001)).rounded(.up))) }

    /// `nil` when allowed, or the seconds to wait.
    package func acquire(_ key: String) async -> Int? {
        let now = clock.now().millisecondsSince1970 / 1000
        let length = windowSeconds
        let window = now - now % length
        guard let count = try? await windows.increment(key, window: window) else { return nil }
        return count > Int64(max(limit.burst, 1)) ? Int(max(1, window + length - now)) : nil
    }
}
