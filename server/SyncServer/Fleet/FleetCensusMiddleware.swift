import Dispatch
package import Hummingbird
import SyncProtocol

/// Notes every authenticated device request in the fleet census (``FleetCensus/observe(_:)``):
/// who, when, `X-Outpost-App`, `X-Outpost-Schema`, and for a sync its outcome; the device's
/// `X-Outpost-Telemetry` only when the request was accepted (a device sends a refused request's
/// counts again with its next one). Admin and integration tokens are not devices and are not counted.
///
/// It runs after authentication and the per-device rate limit (``buildRouter(configuration:environment:)``):
/// a request refused for its token or its rate is not noted, so a device cannot make the census
/// work faster than its rate allows.
///
/// A malformed `X-Outpost-App`, `X-Outpost-Telemetry` or `X-Outpost-Schema` (the routes' own
/// bounds: ``RequestInput/schema(_:)``) is refused with 400 before the route runs: an app that
/// sends one hears so at once rather than lose its figures.
package struct FleetCensusMiddleware: RouterMiddleware {
    package typealias Context = SyncRequestContext

    let census: FleetCensus
    let clock: any ServerClock

    package init(census: FleetCensus, clock: any ServerClock) {
        self.census = census
        self.clock = clock
    }

    /// The sync routes, by the name the census gives them.
    static let syncRoutes = ["/sync/v1/push": "push", "/sync/v1/pull": "pull", "/sync/v1/live": "live"]

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let identity = context.identity, !identity.isAdmin, !identity.isIntegration else { return try await next(request, context) }
        let app = request.headers[.outpostApp]
        if let app, !AppVersionHeader.isValid(app) {
            throw ServiceError.malformed(
                "\(ProtocolHeaders.appVersion) must be 1 to \(AppVersionHeader.maximumLength) printable ASCII characters (an app and its version, like `fieldops-ios/1.4.2`)"
            )
        }
        var telemetry: [DeviceTelemetry: Int64] = [:]
        if let text = request.headers[.outpostTelemetry] {
            guard let values = TelemetryHeader.decode(text) else {
                throw ServiceError.malformed(
                    "\(ProtocolHeaders.telemetry) must be `name=count` pairs separated by commas, each count from 0 to \(TelemetryHeader.maximumValue), at most \(TelemetryHeader.maximumLength) bytes"
                )
            }
            telemetry = values
        }
        // Bounded and checked as the routes read it; the census keeps only the contracts its
        // catalog knows, up to its cap per device (``FleetCensus/observe(_:)``).
        let schema = try RequestInput.schema(request)
        let route = context.endpointPath.flatMap { Self.syncRoutes[$0] }
        let start = DispatchTime.now().uptimeNanoseconds
        func observe(status: Int, outcome: String) {
            census.observe(
                FleetCensus.Observation(
                    tenant: identity.tenant, userID: identity.userID, deviceID: identity.deviceID, at: clock.now().millisecondsSince1970 / 1000,
                    appVersion: app, schema: schema, route: route, status: status, outcome: outcome,
                    milliseconds: Int((DispatchTime.now().uptimeNanoseconds - start) / 1_000_000),
                    telemetry: (200..<300).contains(status) ? telemetry : [:]))
        }
        do {
            let response = try await next(request, context)
            let status = response.status.code
            observe(status: status, outcome: status < 400 ? "ok" : "http_\(status)")
            return response
        } catch {
            let (status, code) = Self.outcome(of: error)
            observe(status: status, outcome: code)
            throw error
        }
    }

    /// The status and error code `error` is answered with (``ErrorMiddleware``).
    static func outcome(of error: any Error) -> (status: Int, code: String) {
        switch error {
        case let error as ServiceError: (error.status, error.detail.code.rawValue)
        case let error as ResponseError: (error.error.status, error.error.detail.code.rawValue)
        case is DecodingError: (400, ErrorCode.malformedRequest.rawValue)
        case let error as any HTTPResponseError: (error.status.code, "http_\(error.status.code)")
        default: (500, ErrorCode.internalError.rawValue)
        }
    }
}
