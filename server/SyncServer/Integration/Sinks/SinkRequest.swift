package import AsyncHTTPClient
import Crypto
package import Foundation
import NIOCore
import NIOHTTP1

/// One POST of a batch to a sink's receiver, and what its answer means for the batch.
package struct SinkRequest: Sendable {
    package var url: String
    package var body: [UInt8]
    package var headers: [(String, String)]

    /// What became of a POST.
    package enum Outcome: Sendable, Equatable {
        /// 2xx: the receiver has the batch.
        case delivered(status: Int)
        /// 408, 425, 429, 5xx, a timeout or a connection error: send it again later, no sooner
        /// than `retryAfter` seconds when the receiver said so.
        case retry(reason: String, retryAfter: Int?)
        /// Any other answer (4xx, a redirect, which is not followed): the batch is parked.
        case refused(status: Int, response: String)
    }

    /// The header carrying the signature: `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>`,
    /// as Stripe signs its webhooks: the receiver recomputes it, compares in constant time and
    /// refuses a timestamp too far from its clock (a replayed request).
    package static let signatureHeader = "Outpost-Signature"

    /// The signature of `body` at `timestamp` (seconds since 1970) under `secret`.
    package static func signature(body: some DataProtocol, timestamp: Int64, secret: String) -> String {
        var mac = HMAC<SHA256>(key: SymmetricKey(data: Data(secret.utf8)))
        mac.update(data: Data("\(timestamp).".utf8))
        mac.update(data: body)
        return "t=\(timestamp),v1=" + Hex.string(mac.finalize())
    }

    /// Sends the request, signed now, and reads the answer (at most `responseLimit` bytes of it).
    package func send(using client: HTTPClient, secret: String, timeout: Duration, now: Int64, responseLimit: Int = 4096) async -> Outcome {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.headers.replaceOrAdd(name: Self.signatureHeader, value: Self.signature(body: body, timestamp: now / 1000, secret: secret))
        request.body = .bytes(ByteBuffer(bytes: body))
        do {
            let response = try await client.execute(request, timeout: .nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000))
            let status = Int(response.status.code)
            let answer = (try? await response.body.collect(upTo: responseLimit)).map { String(buffer: $0) } ?? ""
            switch status {
            case 200..<300:
                return .delivered(status: status)
            case 408, 425, 429, 500..<600:
                return .retry(reason: "HTTP \(status)", retryAfter: Self.retryAfter(response.headers.first(name: "retry-after"), now: now))
            default:
                return .refused(status: status, response: answer)
            }
        } catch {
            return .retry(reason: Self.describe(error), retryAfter: nil)
        }
    }

    /// `Retry-After` in seconds: a number of seconds, or an HTTP date.
    static func retryAfter(_ value: String?, now: Int64) -> Int? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if let seconds = Int(value) { return max(0, seconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: value) else { return nil }
        return max(0, Int((date.timeIntervalSince1970 * 1000 - Double(now)) / 1000))
    }

    private static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPClientError {
            if error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout { return "timed out" }
            return "HTTP client error: \(error)"
        }
        return "connection failed: \(error)"
    }
}
