import Foundation
package import Hummingbird
import SyncProtocol

/// The one check of what a request names before any route sees it: every path segment, every
/// query parameter and the identifier headers pass ``Identifier`` (no U+0000 or other control
/// character, not over its length, Unicode NFC), percent-decoded once.
///
/// A route added later gets the same check without doing anything: it runs for every request,
/// console pages and app routes included, so `DELETE /admin/v1/users/u-nul%00x` can never reach
/// storage as `u-nul` (which cuts text at U+0000). Routes still check what their values mean
/// (`RequestInput.parameter` holds path parameters to the identifier rule again, harmlessly).
package struct RequestInputMiddleware: RouterMiddleware {
    package typealias Context = SyncRequestContext

    /// A path segment's length at most, decoded: the identifier bound.
    static let maximumSegmentBytes = Identifier.maximumBytes
    /// A query parameter's value at most, decoded (cursors and comma-separated contract lists
    /// are longer than one identifier).
    static let maximumQueryValueBytes = 4096
    /// Query parameters per request at most.
    static let maximumQueryParameters = 32
    /// `X-Outpost-Client` at most: a push's `client_id` bound.
    static let maximumClientIDBytes = 128

    package init() {}

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            try Self.check(request)
        } catch {
            return ErrorMiddleware.render(error)
        }
        return try await next(request, context)
    }

    /// Throws the refusal of the first value that breaks the rule.
    static func check(_ request: Request) throws(ServiceError) {
        for raw in request.uri.path.split(separator: "/", omittingEmptySubsequences: true) {
            guard let segment = raw.removingPercentEncoding else {
                throw .malformed("the path segment `\(raw)` is not valid percent-encoded UTF-8")
            }
            try Identifier.require(segment, as: "the path segment", maximumBytes: maximumSegmentBytes)
        }
        if let query = request.uri.query, !query.isEmpty {
            let pairs = query.split(separator: "&", omittingEmptySubsequences: true)
            guard pairs.count <= maximumQueryParameters else {
                throw .malformed("the query has \(pairs.count) parameters; at most \(maximumQueryParameters) are read")
            }
            for pair in pairs {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                // `+` is a space in a query (forms); decoded as the router's query parameters are.
                let decode = { (text: Substring) in text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding }
                guard let name = decode(parts[0]), let value = parts.count > 1 ? decode(parts[1]) : "" else {
                    throw .malformed("the query parameter `\(parts[0])` is not valid percent-encoded UTF-8")
                }
                try Identifier.require(name, as: "a query parameter's name", maximumBytes: 64)
                if !value.isEmpty {
                    try Identifier.require(value, as: "the query parameter `\(name)`", maximumBytes: maximumQueryValueBytes)
                }
            }
        }
        if let client = request.headers[.outpostClient] {
            try Identifier.require(client, as: ProtocolHeaders.clientID, maximumBytes: maximumClientIDBytes)
        }
    }
}
