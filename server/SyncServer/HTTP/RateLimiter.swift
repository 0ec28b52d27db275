import Foundation
package import Hummingbird
import NIOConcurrencyHelpers

/// Token buckets, one per device: a device may send `burst` requests at once and then
/// `requestsPerSecond` on average. A request over the rate gets 429 with `Retry-After`.
public final class RateLimiter: Sendable {
    /// The rate and burst every device gets.
    public let limit: ServerConfiguration.RateLimit
    private let now: @Sendable () -> Double
    private let state = NIOLockedValueBox(State())
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

    /// - Parameters:
    ///   - limit: the rate and burst each key is allowed.
    ///   - now: seconds on a monotonic clock; tests pass their own.
    public init(_ limit: ServerConfiguration.RateLimit, now: @escaping @Sendable () -> Double = RateLimiter.monotonicSeconds) {
        self.limit = limit
        self.now = now
    }

    /// Takes a token for `key`; returns `nil` when allowed, or the seconds to wait.
    public func acquire(_ key: String) -> Int? {
        let time = now()
        let capacity = Double(max(limit.burst, 1))
        let rate = max(limit.requestsPerSecond, 0.001)
        return state.withLockedValue { state in
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

    /// The seconds to wait before `key` has a token again, or `nil` when it has one; takes nothing.
    public func waitWithoutTaking(_ key: String) -> Int? {
        let time = now()
        let capacity = Double(max(limit.burst, 1))
        let rate = max(limit.requestsPerSecond, 0.001)
        return state.withLockedValue { state in
            guard let bucket = state.buckets[key] else { return nil }
            let tokens = min(capacity, bucket.tokens + max(0, time - bucket.updated) * rate)
            return tokens >= 1 ? nil : max(1, Int(((1 - tokens) / rate).rounded(.up)))
        }
    }

    /// Seconds on a monotonic clock, for measuring intervals.
    public static func monotonicSeconds() -> Double {
        Double(DispatchTime.now().uptimeNanoseconds) / 1_000_000_000
    }
}

/// Applies a rate limit per authenticated device (tenant, user and device id).
package struct RateLimitMiddleware: RouterMiddleware {
    package typealias Context = SyncRequestContext

    /// Where the counts live.
    package enum Limiter: Sendable {
        /// In this process's memory: token buckets.
        case local(RateLimiter)
        /// In the storage every process shares (PostgreSQL): fixed windows.
        case shared(SharedRateLimiter)

        var limit: ServerConfiguration.RateLimit {
            switch self {
            case .local(let limiter): limiter.limit
            case .shared(let limiter): limiter.limit
            }
        }
    }

    let limiter: Limiter

    package init(limiter: RateLimiter) {
        self.limiter = .local(limiter)
    }

    package init(limiter: Limiter) {
        self.limiter = limiter
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let identity = try context.requireIdentity()
        let key = Self.key(of: identity)
        let wait: Int?
        switch limiter {
        case .local(let local): wait = local.acquire(key)
        case .shared(let shared): wait = await shared.acquire(key)
        }
        if let wait { throw Self.refusal(identity: identity, limit: limiter.limit, wait: wait) }
        return try await next(request, context)
    }

    /// The bucket or window a device's requests count in. The user too: a device id names a
    /// device within its user's devices, and two users whose devices happen to share an id
    /// must not share (or drain) one bucket.
    static func key(of identity: DeviceIdentity) -> String {
        identity.tenant + "\u{1F}" + identity.userID + "\u{1F}" + identity.deviceID
    }

    /// `429 rate_limited` with `Retry-After`.
    static func refusal(identity: DeviceIdentity, limit: ServerConfiguration.RateLimit, wait: Int) -> ServiceError {
        ServiceError(
            status: 429, .rateLimited,
            "device \(identity.deviceID) is over \(limit.requestsPerSecond) requests per second; retry after \(wait) s",
            retryAfter: wait
        )
    }
}
