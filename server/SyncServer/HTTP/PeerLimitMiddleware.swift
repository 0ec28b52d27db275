public import Hummingbird

/// Limits what a peer address may ask without a valid token: requests to the open routes
/// (`/health`, `/metrics`) and requests refused with 401. Authenticated requests are limited
/// per device instead (``RateLimitMiddleware``), so a busy gateway whose devices all share one
/// address is not throttled as one; a peer guessing tokens, or hammering the open routes, is.
///
/// The peer is the connection's remote address: behind a reverse proxy, every request comes
/// from the proxy, which should then apply its own limit per client (docs/security.md).
public struct PeerLimitMiddleware: RouterMiddleware {
    public typealias Context = SyncRequestContext

    let limiter: RateLimiter
    /// Paths served without a token.
    let openPaths: Set<String>

    public init(limiter: RateLimiter, openPaths: Set<String> = ["/health", "/metrics"]) {
        self.limiter = limiter
        self.openPaths = openPaths
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let peer = context.peerAddress ?? "unknown"
        let isOpen = openPaths.contains(request.uri.path)
        if isOpen {
            if let wait = limiter.acquire(peer) { return refusal(wait) }
        } else if let wait = limiter.waitWithoutTaking(peer) {
            return refusal(wait)
        }
        let response = try await next(request, context)
        if !isOpen, response.status == .unauthorized { _ = limiter.acquire(peer) }
        return response
    }

    private func refusal(_ wait: Int) -> Response {
        ErrorMiddleware.render(
            ServiceError(
                status: 429, .rateLimited,
                "too many requests without a valid token from this address; retry after \(wait) s", retryAfter: wait
            )
        )
    }
}
