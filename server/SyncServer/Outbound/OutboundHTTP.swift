package import AsyncHTTPClient
import Foundation
import Logging
package import NIOCore
package import NIOHTTP1

/// One request to a URL an admin or an operator gave (a sink's receiver, an identity provider's
/// JWKS), sent only to an address its ``OutboundAddressPolicy`` allows, within one deadline.
///
/// The host is resolved and checked first; the request then goes through a client of its own
/// whose DNS override pins the host to the address checked (AsyncHTTPClient's `dnsOverride`: it
/// connects there, and still sends the host's name as `Host` and as the TLS server name, and
/// verifies the certificate against it), so a second DNS answer never reaches the connection.
/// Redirects are not followed. The deadline covers the whole exchange, the response body
/// included: a receiver that sends its head and then stalls, or trickles its body, is cut off.
package enum OutboundHTTP {
    /// What came back: the status, the headers, and at most the bytes asked of the body.
    package struct Answer: Sendable {
        package var status: Int
        package var headers: HTTPHeaders
        package var body: ByteBuffer
        /// Whether the body went on past what was read.
        package var truncated: Bool
    }

    /// Why an exchange ended without an answer. ``category`` is all that may be shown to
    /// whoever gave the URL: it never tells an open port from a closed or filtered one of an
    /// address that was refused, since a refused address is never connected to.
    package enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// The host is, or resolves only to, refused addresses (never connected to).
        case refused(OutboundRefusal)
        /// The deadline passed (connecting, waiting for the head, or reading the body).
        case timeout
        /// Anything else: no address, connection refused or reset, TLS failed. The detail is
        /// for the server's log only.
        case connectionFailed(String)

        /// `refused_address`, `timeout` or `connection_failed`.
        package var category: String {
            switch self {
            case .refused: "refused_address"
            case .timeout: "timeout"
            case .connectionFailed: "connection_failed"
            }
        }

        package var description: String {
            switch self {
            case .refused(let refusal): "refused_address: \(refusal)"
            case .timeout: "timeout"
            case .connectionFailed(let detail): "connection_failed: \(detail)"
            }
        }
    }

    /// Sends `request` under `policy`, and reads at most `bodyLimit` bytes of the answer's body,
    /// all within `timeout`.
    package static func exchange(
        _ request: HTTPClientRequest, policy: OutboundAddressPolicy, timeout: Duration, bodyLimit: Int
    ) async throws(Failure) -> Answer {
        guard let url = URL(string: request.url), let rawHost = url.host, !rawHost.isEmpty else {
            throw .connectionFailed("not a URL with a host: \(request.url)")
        }
        let host = rawHost.hasPrefix("[") && rawHost.hasSuffix("]") ? String(rawHost.dropFirst().dropLast()) : rawHost
        let checked: OutboundAddressPolicy.Checked
        do {
            checked = try await policy.check(host: host)
        } catch {
            if case .unresolvable = error { throw .connectionFailed(error.description) }
            throw .refused(error)
        }
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: HTTPClient.Configuration.Timeout(connect: TimeAmount(timeout), read: TimeAmount(timeout)))
        // The host as AsyncHTTPClient keys it: an IPv6 address in brackets, anything else as written.
        for key in Set([host, host.lowercased(), "[\(host)]", rawHost]) { configuration.dnsOverride[key] = checked.text }
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let result: Result<Answer, Failure>
        do {
            let answer = try await withDeadline(timeout) {
                let response = try await client.execute(request, deadline: .now() + TimeAmount(timeout))
                var body = ByteBuffer()
                var truncated = false
                for try await part in response.body {
                    let room = bodyLimit - body.readableBytes
                    if part.readableBytes > room {
                        body.writeImmutableBuffer(part.getSlice(at: part.readerIndex, length: max(0, room)) ?? ByteBuffer())
                        truncated = true
                        break
                    }
                    body.writeImmutableBuffer(part)
                }
                return Answer(status: Int(response.status.code), headers: response.headers, body: body, truncated: truncated)
            }
            result = .success(answer)
        } catch let failure as Failure {
            result = .failure(failure)
        } catch {
            result = .failure(Self.failure(error))
        }
        try? await client.shutdown()
        if case .failure(let failure) = result, case .refused = failure {
            // The operator's log has what the admin's answer does not: the address and its kind.
            Logger(label: "outpost.outbound").warning("outbound request to \(request.url) not sent: \(failure)")
        }
        return try result.get()
    }

    /// `operation`'s value, or ``Failure/timeout`` once `timeout` passed (`operation` is then
    /// cancelled, and awaited).
    static func withDeadline<Value: Sendable>(
        _ timeout: Duration, _ operation: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        try await withThrowingTaskGroup(of: Value?.self) { group in
            group.addTask { try await operation() }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else { throw Failure.timeout }
            return value
        }
    }

    private static func failure(_ error: any Error) -> Failure {
        if let error = error as? HTTPClientError,
            error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout || error == .cancelled
        {
            return .timeout
        }
        if error is CancellationError { return .timeout }
        return .connectionFailed(String(describing: error))
    }
}
