package import Hummingbird

/// Headers every response carries, errors included: `X-Content-Type-Options: nosniff`, so a
/// browser never runs an uploaded asset or a JSON body as something else.
package struct SecurityHeadersMiddleware: RouterMiddleware {
    package typealias Context = SyncRequestContext

    package init() {}

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        response.headers[.xContentTypeOptions] = "nosniff"
        return response
    }
}
