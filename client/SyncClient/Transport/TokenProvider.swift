/// Where a device's token comes from: the app's sign-in (its identity provider, or the sync
/// server's own `token` endpoint of the app's backend).
///
/// Tokens are short-lived (an hour by default on the reference server). The transport asks for
/// one before each request; when the server answers 401 (expired, revoked, a retired key), it
/// asks again with `refresh: true` and retries the request once, so a device back from two weeks
/// offline gets a fresh token from the app instead of failing. A second 401 surfaces as
/// ``TransportError/http(status:body:retryAfter:)``.
///
/// ```swift
/// struct AppTokens: TokenProvider {
///     let session: AppSession
///     func token(refresh: Bool) async throws -> String {
///         refresh ? try await session.renewSyncToken() : try await session.currentSyncToken()
///     }
/// }
/// let transport = URLSessionTransport(baseURL: serverURL, tokenProvider: AppTokens(session: session))
/// ```
public protocol TokenProvider: Sendable {
    /// The token to send; with `refresh`, the server refused the last one: return a new one, or
    /// throw to give up (the request fails as a network error and is retried later).
    func token(refresh: Bool) async throws -> String
}

/// A token read from a closure on every request (and again on a refusal), for apps that keep
/// the current token themselves.
public struct ClosureTokenProvider: TokenProvider {
    let read: @Sendable () -> String

    /// A provider reading the token from `read`.
    public init(_ read: @escaping @Sendable () -> String) {
        self.read = read
    }

    /// The closure's token, the same whether `refresh` or not.
    public func token(refresh: Bool) async throws -> String { read() }
}
