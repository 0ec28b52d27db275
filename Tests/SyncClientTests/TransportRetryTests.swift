import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncClient

@Suite(.blockingWork) struct TransportRetryTests {
    @Test func scheduleWithoutJitter() {
        let policy = RetryPolicy(jitter: 0)
        let delays = (0..<7).map { policy.delay(attempt: $0, after: .network("offline")) }
        #expect(delays == [0, 5, 30, 300, 1800, 1800, 1800])
    }

    @Test func jitterIsDeterministicAndBounded() {
        let a = RetryPolicy(random: SeededRandomSource(seed: 42))
        let b = RetryPolicy(random: SeededRandomSource(seed: 42))
        for attempt in 0..<10 {
            let x = a.delay(attempt: attempt, after: .http(status: 503, body: nil, retryAfter: nil))!
            let y = b.delay(attempt: attempt, after: .http(status: 503, body: nil, retryAfter: nil))!
            #expect(x == y)
            let base = a.baseDelay(attempt: attempt)
            #expect(x >= base * 0.8 && x <= base * 1.2)
        }
        #expect(a.delay(attempt: 0, after: .network("x")) == 0)
    }

    @Test func retryAfterIsHonoured() {
        let policy = RetryPolicy(jitter: 0)
        #expect(policy.delay(attempt: 0, after: .http(status: 429, body: nil, retryAfter: 12)) == 12)
        #expect(policy.delay(attempt: 3, after: .http(status: 429, body: nil, retryAfter: 12)) == 300)
    }

    @Test func whatRetries() {
        let policy = RetryPolicy(jitter: 0)
        #expect(policy.delay(attempt: 1, after: .network("down")) != nil)
        #expect(policy.delay(attempt: 1, after: .http(status: 500, body: nil, retryAfter: nil)) != nil)
        #expect(policy.delay(attempt: 1, after: .http(status: 429, body: nil, retryAfter: nil)) != nil)
        // 408 Request Timeout: the server gave up waiting for the request; sending it again may pass.
        #expect(policy.delay(attempt: 1, after: .http(status: 408, body: nil, retryAfter: nil)) != nil)
        #expect(RetryPolicy.isRetryable(.http(status: 408, body: nil, retryAfter: nil)))
        for status in [400, 401, 403, 404, 409, 410, 413, 422, 426] {
            #expect(policy.delay(attempt: 1, after: .http(status: status, body: nil, retryAfter: nil)) == nil)
        }
        #expect(policy.delay(attempt: 1, after: .updateRequired(UpdateRequired(entity: "unit", oldestSupported: 2, current: 3), lastSeq: nil)) == nil)
        #expect(policy.delay(attempt: 1, after: .decoding("bad")) == nil)
    }

    @Test func errorMapping() {
        let body = Data(
            #"{"error":{"code":"schema_too_old","message":"old","details":{"entity":"unit","oldest_supported":2,"current":3,"last_seq":4}}}"#.utf8)
        #expect(
            URLSessionTransport.error(status: 426, data: body, retryAfter: nil)
                == .updateRequired(UpdateRequired(entity: "unit", oldestSupported: 2, current: 3), lastSeq: 4))
        guard
            case .http(429, let parsed?, 7) = URLSessionTransport.error(
                status: 429, data: Data(#"{"error":{"code":"rate_limited","message":"slow"}}"#.utf8), retryAfter: "7")
        else { Issue.record("429 not mapped"); return }
        #expect(parsed.error.code == .rateLimited)
        #expect(URLSessionTransport.parseRetryAfter("abc") == nil)
    }
}
