package import Hummingbird

/// Limits what one client address may get wrong: requests refused with 401 (a peer guessing
/// tokens) and requests to `/metrics`. Authenticated requests are limited per device instead
/// (``RateLimitMiddleware``), so a busy gateway whose devices all share one address is not
/// throttled as one.
///
/// Never refused here: `/health` (a balancer's health check must see the server as it is), and
/// any request whose token is valid. A client over its limit has its bad tokens answered 429
/// instead of 401 (which tells it nothing more), while a valid device behind the same address
/// goes on. Behind a reverse proxy the address is the one ``TrustedProxies`` finds in
/// `X-Forwarded-For`, so one client's failures do not lock out every device behind the proxy.
package struct PeerLimitMiddleware: RouterMiddleware {
    package typealias Context = SyncRequestContext

    let limiter: RateLimiter
    let trustedProxies: TrustedProxies
    /// Paths served without a token and limited per address.
    let limitedOpenPaths: Set<String>
    /// Paths never limited.
    let exemptPaths: Set<String>

    package init(
        limiter: RateLimiter, trustedProxies: TrustedProxies = TrustedProxies(), limitedOpenPaths: Set<String> = ["/metrics"],
        exemptPaths: Set<String> = ["/health"]
    ) {
        self.limiter = limiter
        self.trustedProxies = trustedProxies
        self.limitedOpenPaths = limitedOpenPaths
        self.exemptPaths = exemptPaths
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let path = request.uri.path
        if exemptPaths.contains(path) { return try await next(request, context) }
        let client = trustedProxies.client(peer: context.peerAddress, forwardedFor: request.headers[values: .xForwardedFor]) ?? "unknown"
        if limitedOpenPaths.contains(path) {
            if let wait = limiter.acquire(client) { return refusal(wait) }
            return try await next(request, context)
        }
        // The token is checked first: a valid one is never refused for what others at the same
        // address did. Only a refusal counts, and past the limit it is answered 429.
        let response = try await next(request, context)
        guard response.status == .unauthorized else { return response }
        if let wait = limiter.acquire(client) { return refusal(wait, console: path.hasPrefix(ConsoleRoutes.root)) }
        return response
    }

    private func refusal(_ wait: Int, console: Bool = false) -> Response {
        if console {
            // The console's sign-in form answers a page, not the API's JSON.
            var response = ConsolePageMiddleware.page(
                status: .tooManyRequests, heading: "Too many attempts",
                message: "Too many tokens were refused from this address. Wait \(wait) seconds, then sign in again.")
            response.headers[.retryAfter] = String(wait)
            return response
        }
        return ErrorMiddleware.render(
            ServiceError(
                status: 429, .rateLimited,
                "too many requests without a valid token from this address; retry after \(wait) s", retryAfter: wait
            )
        )
    }
}
