import AsyncHTTPClient
public import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// When an identity provider's JWKS URL is fetched again.
package struct JWKSRefreshPolicy: Sendable {
    /// How long keys are kept when the answer says nothing of it (`Cache-Control: max-age`,
    /// `Expires`).
    package var defaultLifetime: Duration = .seconds(300)
    /// The bounds of what the answer may say: a few keys more often than every minute would
    /// only load the identity provider; longer than a day would delay the end of a dropped key.
    package var shortestLifetime: Duration = .seconds(60)
    package var longestLifetime: Duration = .seconds(86_400)
    /// How often a token naming a kid no key has may make the JWKS be fetched, and how soon a
    /// failed fetch is tried again: a flood of bogus kids, or an identity provider that is
    /// down, costs it one request per interval.
    package var retryInterval: Duration = .seconds(30)
    /// How long one fetch may take: connecting, the answer's head and its body, all within it.
    package var timeout: Duration = .seconds(10)
    /// The largest JWKS read.
    package var maximumBytes = 1 << 20
    /// Where a fetch may connect: never loopback, private or link-local addresses (or any other
    /// ``OutboundAddressPolicy`` refuses) unless its allow-list names them
    /// (``ServerConfiguration/outboundAllowList``, `serve --outbound-allow`).
    package var outbound = OutboundAddressPolicy()

    package init() {}

    /// The keys' lifetime an answer gives: `max-age` of `Cache-Control` (`no-cache` or
    /// `no-store`: the shortest), else `Expires` less `now`, else the default; within the bounds.
    package func lifetime(cacheControl: String?, expires: String?, now: Date) -> Duration {
        var lifetime = defaultLifetime
        let directives = (cacheControl ?? "").lowercased().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        if let maxAge = directives.first(where: { $0.hasPrefix("max-age=") }).flatMap({ Int($0.dropFirst("max-age=".count)) }) {
            lifetime = .seconds(maxAge)
        } else if directives.contains("no-cache") || directives.contains("no-store") {
            lifetime = .zero
        } else if let expires, let date = Self.httpDate(expires) {
            lifetime = .milliseconds(Int64(date.timeIntervalSince(now) * 1000))
        }
        return min(max(lifetime, shortestLifetime), longestLifetime)
    }

    /// An HTTP date (RFC 9110 §5.6.7, IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`).
    static func httpDate(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: text)
    }
}

/// An identity provider's JWKS URL: fetched with AsyncHTTPClient, at most one fetch at a time
/// (requests that need it meanwhile share it), its answer cached for the lifetime it gives.
final class JWKSEndpoint: Sendable {
    struct State: Sendable {
        /// When the keys fetched last are to be fetched again.
        var expiresAt: ContinuousClock.Instant
        var lastAttempt: ContinuousClock.Instant?
        var inFlight: Task<TokenKeyError?, Never>?
        var retryInterval: Duration

        var isExpired: Bool { inFlight == nil && ContinuousClock.now >= expiresAt }
        var mayLookForUnknownKey: Bool { lastAttempt.map { ContinuousClock.now - $0 >= retryInterval } ?? true }
    }

    let url: URL
    let policy: JWKSRefreshPolicy
    var name: String { url.absoluteString }
    private let state: NIOLockedValueBox<State>
    /// The keyrings each fetched document goes to (a signer's copies changed apart have their own).
    private let listeners = NIOLockedValueBox<[WeakKeyring]>([])

    private struct WeakKeyring: Sendable {
        weak var keyring: TokenKeyring?
    }

    init(url: URL, policy: JWKSRefreshPolicy) {
        self.url = url
        self.policy = policy
        state = NIOLockedValueBox(State(expiresAt: .now, retryInterval: policy.retryInterval))
    }

    /// Gives `keyring` each document fetched from now on.
    func addListener(_ keyring: TokenKeyring) {
        listeners.withLockedValue { $0 = $0.filter { $0.keyring != nil } + [WeakKeyring(keyring: keyring)] }
    }

    /// The fetch in flight, or a new one when `condition` holds; its value is the failure, if
    /// any (logged; the keys fetched before stay).
    func fetch(when condition: (State) -> Bool) -> Task<TokenKeyError?, Never>? {
        state.withLockedValue { state in
            if let inFlight = state.inFlight { return inFlight }
            guard condition(state) else { return nil }
            state.lastAttempt = .now
            let task = Task { await self.load() }
            state.inFlight = task
            return task
        }
    }

    private func load() async -> TokenKeyError? {
        let logger = Logger(label: "outpost.tokens")
        let outcome: Result<(JWKSDocument, Duration), TokenKeyError>
        do {
            outcome = .success(try await download())
        } catch {
            outcome = .failure(error)
        }
        switch outcome {
        case .success(let (document, lifetime)):
            for listener in listeners.withLockedValue({ $0 }) { listener.keyring?.setDocument(document, from: name) }
            state.withLockedValue { state in
                state.expiresAt = .now + lifetime
                state.inFlight = nil
            }
            logger.debug("JWKS \(name) fetched: \(document.algorithms.keys.sorted().joined(separator: ", ")), kept \(lifetime)")
            return nil
        case .failure(let error):
            state.withLockedValue { state in
                state.expiresAt = .now + policy.retryInterval
                state.inFlight = nil
            }
            logger.error("\(error.description) (the keys fetched before, if any, stay; tried again in \(policy.retryInterval))")
            return error
        }
    }

    private func download() async throws(TokenKeyError) -> (JWKSDocument, Duration) {
        var request = HTTPClientRequest(url: url.absoluteString)
        request.headers.add(name: "Accept", value: "application/json")
        let fail = { (reason: String) in TokenKeyError.jwksUnavailable(url: self.name, reason: reason) }
        let answer: OutboundHTTP.Answer
        do {
            answer = try await OutboundHTTP.exchange(request, policy: policy.outbound, timeout: policy.timeout, bodyLimit: policy.maximumBytes)
        } catch {
            throw fail("cannot be fetched: \(error)")
        }
        guard answer.status == 200 else { throw fail("answered \(answer.status), not 200") }
        guard !answer.truncated else { throw fail("is larger than \(policy.maximumBytes) bytes") }
        let (response, body) = (answer, answer.body)
        let document: JWKSDocument
        do {
            document = try JWKSDocument.lenient(String(buffer: body))
        } catch {
            guard case .unusableKey(_, let reason) = error else { throw error }
            throw fail("cannot be used: \(reason)")
        }
        let lifetime = policy.lifetime(
            cacheControl: response.headers.first(name: "Cache-Control"), expires: response.headers.first(name: "Expires"), now: Date())
        return (document, lifetime)
    }
}

extension TokenSigner {
    /// ``addJWKS(url:)`` for an identity provider at an address outbound requests refuse unless
    /// allowed (loopback, private, link-local…): `outboundAllowList` names the blocks it may be
    /// fetched from (``ServerConfiguration/outboundAllowList``, `serve --outbound-allow`).
    public mutating func addJWKS(url: URL, outboundAllowList: [CIDRBlock]) async throws(TokenKeyError) {
        var policy = JWKSRefreshPolicy()
        policy.outbound = OutboundAddressPolicy(allowList: outboundAllowList)
        try await addJWKS(url: url, policy: policy)
    }
}
