import Dispatch
package import Hummingbird
import Logging

/// Counts, times and logs the final status of every request. Registered before the error
/// middleware, so it sees the response of every route, errors included.
///
/// The log line (`info`, through the request's logger, so it carries Hummingbird's
/// `hb.request.id`) names the method, the route template, the status and the milliseconds taken.
package struct RequestMetricsMiddleware: RouterMiddleware {
    package typealias Context = SyncRequestContext

    let metrics: ServerMetrics

    package init(metrics: ServerMetrics) {
        self.metrics = metrics
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = DispatchTime.now().uptimeNanoseconds
        var status = 500
        defer {
            // The route template, never the raw path: ids must not become label values.
            let route = context.endpointPath.flatMap { $0 == "NotFound" ? nil : $0 } ?? "unmatched"
            let elapsed = DispatchTime.now().uptimeNanoseconds - start
            metrics.recordRequest(route: route, status: status, nanoseconds: elapsed)
            context.logger.info(
                "answered",
                metadata: [
                    "http.method": .string(request.method.rawValue), "http.route": .string(route),
                    "http.status": .stringConvertible(status), "duration_ms": .stringConvertible(Double(elapsed / 10_000) / 100),
                ]
            )
        }
        let response = try await next(request, context)
        status = response.status.code
        return response
    }
}
