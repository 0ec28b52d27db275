import Foundation
package import Hummingbird
import NIOHTTP1
import SyncProtocol

/// Turns every error into a response, in one place: a ``ServiceError`` into its status and
/// `{"error": {"code", "message", "details"}}` (with `Retry-After` for 429 and
/// `WWW-Authenticate` for 401), a decoding failure into 400 `malformed_request`, Hummingbird's
/// own refusals (unknown route, body too large) into their status, and anything else into a 500
/// `internal_error` that says nothing about the cause (the cause goes to the log).
package struct ErrorMiddleware: RouterMiddleware {
    package typealias Context = SyncRequestContext

    package init() {}

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async -> Response {
        do {
            return try await next(request, context)
        } catch {
            let response = Self.response(for: error, request: request, context: context)
            // HEAD gets the headers of the error, never its body.
            return request.method == .head ? response.createHeadResponse() : response
        }
    }

    static func response(for error: any Error, request: Request, context: Context) -> Response {
        switch error {
        case let error as ResponseError:
            return render(error.error, headers: error.headers)
        case let error as ServiceError:
            return render(error)
        case let error as DecodingError:
            return render(.malformed(describe(error)))
        case let error as HTTPParserError:
            // The request's bytes are not HTTP/1.1 the parser takes (a Transfer-Encoding other
            // than chunked, a body cut short): the client's fault, never the server's.
            return render(.malformed("the request is not valid HTTP/1.1 (\(error)); nothing was read"))
        case let error as any HTTPResponseError:
            return render(translate(error, request: request), headers: (error as? HTTPError)?.headers ?? [:])
        default:
            context.logger.error("request failed: \(String(reflecting: error))")
            return render(ServiceError(status: 500, .internalError, "the server failed to answer this request; try again later"))
        }
    }

    /// The JSON error response; the only place error bodies are written.
    static func render(_ error: ServiceError, headers extra: HTTPFields = [:]) -> Response {
        var headers = extra
        headers[.contentType] = "application/json; charset=utf-8"
        if let retryAfter = error.retryAfter { headers[.retryAfter] = String(retryAfter) }
        if error.status == 401 { headers[.wwwAuthenticate] = "Bearer" }
        let body = (try? JSONCoding.encoder.encode(ErrorBody(error.detail))) ?? Data()
        return Response(
            status: HTTPResponse.Status(code: error.status), headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body))
        )
    }

    /// Hummingbird's refusals, with the protocol's codes.
    private static func translate(_ error: any HTTPResponseError, request: Request) -> ServiceError {
        let message = (error as? HTTPError)?.body
        switch error.status.code {
        case 404:
            return .notFound(message ?? "no route for \(request.method.rawValue) \(request.uri.path)")
        case 413:
            return ServiceError(status: 413, .payloadTooLarge, message ?? "the request body is larger than this route accepts")
        case 400..<500:
            return ServiceError(status: error.status.code, .malformedRequest, message ?? error.status.reasonPhrase)
        default:
            return ServiceError(status: 500, .internalError, "the server failed to answer this request; try again later")
        }
    }

    /// A decoding failure, named by the path of the field at fault.
    static func describe(_ error: DecodingError) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            keys.isEmpty ? "the body" : "`" + keys.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".") + "`"
        }
        switch error {
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty ? "the body is not valid JSON" : "\(path(context.codingPath)) is not valid: \(context.debugDescription)"
        case .keyNotFound(let key, let context):
            return "\(path(context.codingPath + [key])) is required"
        case .valueNotFound(_, let context):
            return "\(path(context.codingPath)) must not be null"
        case .typeMismatch(let type, let context):
            return "\(path(context.codingPath)) has the wrong type (expected \(type))"
        @unknown default:
            return "the body is not what this route takes"
        }
    }
}
