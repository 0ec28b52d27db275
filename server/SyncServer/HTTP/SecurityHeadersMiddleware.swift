package import Hummingbird

/// Headers every response carries, errors included: `X-Content-Type-Options: nosniff`, so a
/// browser never runs an uploaded asset or a JSON body as something else.
///
/// The console's pages (`/console…`) also get a content security policy that allows only the
/// server's own files (no inline script, no other site, no framing, forms posted only here), and
/// are never cached or sent with a referrer to another site.
package struct SecurityHeadersMiddleware: RouterMiddleware {
    package typealias Context = SyncRequestContext

    package static let consolePolicy = "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"

    package init() {}

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        response.headers[.xContentTypeOptions] = "nosniff"
        if request.uri.path == ConsoleRoutes.root || request.uri.path.hasPrefix(ConsoleRoutes.root + "/") {
            response.headers[.contentSecurityPolicy] = Self.consolePolicy
            response.headers[.xFrameOptions] = "DENY"
            response.headers[.referrerPolicy] = "same-origin"
            if response.headers[.cacheControl] == nil { response.headers[.cacheControl] = "no-store" }
        }
        return response
    }
}
