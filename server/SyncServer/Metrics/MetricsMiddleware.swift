import Foundation
public import Hummingbird

/// Counts every answered request by route template and status, and times it.
/// Registered first, so it sees the final response of every route, errors included.
public struct MetricsMiddleware: RouterMiddleware {
    public typealias Context = SyncRequestContext

    let metrics: ServerMetrics

    public init(metrics: ServerMetrics) {
        self.metrics = metrics
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = DispatchTime.now().uptimeNanoseconds
        var status = 500
        defer {
            // The route template, never the raw path: ids must not become label values.
            let route = context.endpointPath.flatMap { $0 == "NotFound" ? nil : $0 } ?? "unmatched"
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1_000_000_000
            metrics.httpRequests.increment(route, String(status))
            metrics.requestDuration.observe(seconds, route)
        }
        let response = try await next(request, context)
        status = response.status.code
        return response
    }
}
