import Foundation
package import Hummingbird

/// Refuses a request whose `Transfer-Encoding` is anything but exactly `chunked` with 400,
/// before its body is read.
///
/// The HTTP/1.1 parser reads `identity, chunked` (or `gzip, chunked`) as chunked, since chunked
/// comes last; a proxy in front may read the same header another way (as `identity`, or by
/// `Content-Length`) and the two would then disagree on where the request ends: request
/// smuggling. The server applies no transfer coding but chunked, so nothing else is taken.
package struct TransferCodingMiddleware: RouterMiddleware {
    package typealias Context = SyncRequestContext

    package init() {}

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let codings = request.headers[values: .transferEncoding].flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        guard codings.isEmpty || codings == ["chunked"] else {
            return ErrorMiddleware.render(
                .malformed("Transfer-Encoding `\(codings.joined(separator: ", "))` is refused: the server takes `chunked` alone")
            )
        }
        return try await next(request, context)
    }
}
