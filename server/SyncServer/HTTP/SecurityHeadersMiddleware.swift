package import Hummingbird

/// Headers every response carries, errors included: `X-Content-Type-Options: nosniff`, so a
/// browser never runs an uploaded asset or a JSON body as something else.
///
/// The console's pages (`/console…`) also get a content security policy that allows only the
/// server's own files (no inline script, no other site, no framing, forms posted only here), and
/// are never cached or sent with a referrer to another site. Which answers are the console's is
/// decided as the router matches paths (``isConsolePath(_:)``), so a spelling the router still
/// takes to the console (`//console`, `/console/`, `//console//fleet`) gets them too, and so does
/// every answer under it that no route takes (404).
package struct SecurityHeadersMiddleware: RouterMiddleware {
    package typealias Context = SyncRequestContext

    package static let consolePolicy = "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"

    package init() {}

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as any HTTPResponseError {
            // An error no inner middleware answered still gets these headers.
            response = try error.response(from: request, context: context)
        }
        response.headers[.xContentTypeOptions] = "nosniff"
        if Self.isConsolePath(request.uri.path) {
            response.headers[.contentSecurityPolicy] = Self.consolePolicy
            response.headers[.xFrameOptions] = "DENY"
            response.headers[.referrerPolicy] = "same-origin"
            if response.headers[.cacheControl] == nil { response.headers[.cacheControl] = "no-store" }
        }
        return response
    }

    /// Whether the router takes `path` to the console, or to no route under it: its first
    /// non-empty segment is `console`, as the router splits a path (empty segments left out, the
    /// segment as sent). Compared without case, so that a router told to ignore case is covered.
    package static func isConsolePath(_ path: String) -> Bool {
        let root = ConsoleRoutes.root.dropFirst()
        guard let first = path.split(separator: "/", omittingEmptySubsequences: true).first else { return false }
        return first.lowercased() == root.lowercased()
    }
}
