import Foundation
public import Hummingbird

/// Token buckets, one per device: a device may send `burst` requests at once and then
/// `requestsPerSecond` on average. A request over the rate gets 429 with `Retry-After`.
public final class RateLimiter: Sendable {
    public let limit: ServerConfiguration.RateLimit
    private let now: @Sendable () -> Double
    private let state = Locked(State())
    /// Above this many buckets, full ones (idle devices) are dropped, at most once a second.
    private let pruneThreshold = 10_000

    private struct State {
        var buckets: [String: Bucket] = [:]
        var lastPrune: Double = 0
    }

    private struct Bucket {
        var tokens: Double
        var updated: Double
    }

    /// - Parameter now: seconds on a monotonic clock; tests pass their own.
    public init(_ limit: ServerConfiguration.RateLimit, now: @escaping @Sendable () -> Double = RateLimiter.monotonicSeconds) {
        self.limit = limit
        self.now = now
    }

    /// Takes a token for `key`; returns `nil` when allowed, or the seconds to wait.
    public func acquire(_ key: String) -> Int? {
        let time = now()
        let capacity = Double(max(limit.burst, 1))
        let rate = max(limit.requestsPerSecond, 0.001)
        return state.withLock { state in
            if state.buckets.count > pruneThreshold, time - state.lastPrune >= 1 {
                state.buckets = state.buckets.filter { $0.value.tokens + (time - $0.value.updated) * rate < capacity }
                state.lastPrune = time
            }
            var bucket = state.buckets[key] ?? Bucket(tokens: capacity, updated: time)
            bucket.tokens = min(capacity, bucket.tokens + max(0, time - bucket.updated) * rate)
            bucket.updated = time
            defer { state.buckets[key] = bucket }
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                return nil
            }
            return max(1, Int(((1 - bucket.tokens) / rate).rounded(.up)))
        }
    }

    public static func monotonicSeconds() -> Double {
        Double(DispatchTime.now().uptimeNanoseconds) / 1_000_000_000
    }
}

/// Applies a ``RateLimiter`` per authenticated device (tenant and device id).
public struct RateLimitMiddleware: RouterMiddleware {
    public typealias Context = SyncRequestContext

    let limiter: RateLimiter

    public init(limiter: RateLimiter) {
        self.limiter = limiter
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let identity = try context.requireIdentity()
        if let wait = limiter.acquire(identity.tenant + "\u{1F}" + identity.deviceID) {
            throw ServiceError(
                status: 429, .rateLimited,
                "device \(identity.deviceID) is over \(limiter.limit.requestsPerSecond) requests per second; retry after \(wait) s",
                retryAfter: wait
            )
        }
        return try await next(request, context)
    }
}
