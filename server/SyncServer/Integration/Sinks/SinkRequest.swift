import AsyncHTTPClient
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
    ///
    /// Nothing of what a receiver answers but its status is kept or shown: a sink's URL is an
    /// admin's to choose, and the server's own answers to it must not come back through the
    /// admin routes (``OutboundHTTP``).
    package enum Outcome: Sendable, Equatable {
        /// 2xx: the receiver has the batch.
        case delivered(status: Int)
        /// 408, 425, 429, 5xx, a timeout, a connection error or a refused address: send it again
        /// later, no sooner than `retryAfter` seconds when the receiver said so. `reason` is a
        /// fixed category (``category(status:)``, `timeout`, `connection_failed`,
        /// `refused_address`).
        case retry(reason: String, retryAfter: Int?)
        /// Any other answer (4xx, a redirect, which is not followed): the batch is parked.
        case refused(status: Int)
    }

    /// What the admin routes say of a receiver's answer: `receiver_status 404`.
    package static func category(status: Int) -> String { "receiver_status \(status)" }

    /// The bytes of a receiver's answer read at most (and dropped): enough to end a small body
    /// cleanly, never more.
    static let responseLimit = 4096

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

    /// Sends the request, signed now, to an address `policy` allows, the whole exchange
    /// (connecting, the answer's head and body) within `timeout`.
    package func send(policy: OutboundAddressPolicy, secret: String, timeout: Duration, now: Int64) async -> Outcome {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.headers.replaceOrAdd(name: Self.signatureHeader, value: Self.signature(body: body, timestamp: now / 1000, secret: secret))
        request.body = .bytes(ByteBuffer(bytes: body))
        do {
            let answer = try await OutboundHTTP.exchange(request, policy: policy, timeout: timeout, bodyLimit: Self.responseLimit)
            switch answer.status {
            case 200..<300:
                return .delivered(status: answer.status)
            case 408, 425, 429, 500..<600:
                return .retry(
                    reason: Self.category(status: answer.status), retryAfter: Self.retryAfter(answer.headers.first(name: "retry-after"), now: now))
            default:
                return .refused(status: answer.status)
            }
        } catch {
            return .retry(reason: error.category, retryAfter: nil)
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
}
