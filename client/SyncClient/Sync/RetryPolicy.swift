public import Foundation

/// When to try again after a failed sync: immediately, then 5 s, 30 s, 5 min, then every 30 min,
/// each (but the first) spread by ±`jitter` with an injectable random source, and never sooner
/// than the server's `Retry-After`. Network errors, 5xx, 429 and 408 (Request Timeout) are
/// retried; other 4xx are not.
public struct RetryPolicy: Sendable {
    /// Delays for the first failures, in seconds; the last repeats.
    public var schedule: [TimeInterval]
    /// Fraction of a delay added or removed at random (0.2 = ±20 %).
    public var jitter: Double
    /// Where the jitter comes from (a seeded source in tests).
    public var random: any RandomSource

    /// A policy with the given delays, jitter and random source.
    public init(schedule: [TimeInterval] = [0, 5, 30, 300, 1800], jitter: Double = 0.2, random: any RandomSource = SystemRandomSource()) {
        precondition(!schedule.isEmpty, "a retry schedule needs at least one delay")
        self.schedule = schedule
        self.jitter = jitter
        self.random = random
    }

    /// Whether an error is worth retrying at all.
    public static func isRetryable(_ error: TransportError) -> Bool {
        switch error {
        case .network: true
        case .http(let status, _, _): status == 429 || status == 408 || status >= 500
        case .decoding, .updateRequired, .publicKeyPinMismatch: false
        }
    }

    /// The base delay (no jitter) before retry number `attempt` (0 = the first retry).
    public func baseDelay(attempt: Int) -> TimeInterval {
        schedule[min(max(attempt, 0), schedule.count - 1)]
    }

    /// The delay before retry number `attempt` after `error`, or `nil` when it must not be retried.
    public func delay(attempt: Int, after error: TransportError) -> TimeInterval? {
        guard Self.isRetryable(error) else { return nil }
        var delay = baseDelay(attempt: attempt)
        if delay > 0, jitter > 0 {
            delay *= 1 + jitter * (2 * random.unitInterval() - 1)
        }
        if case .http(_, _, let retryAfter?) = error { delay = max(delay, retryAfter) }
        return delay
    }
}
