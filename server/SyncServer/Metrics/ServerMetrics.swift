import SyncProtocol

/// The server's metrics, served on `GET /metrics`.
///
/// - `outpost_http_requests_total{route,status}`: requests answered, by route template
///   (`/assets/{id}`; `unmatched` for unknown paths) and status code.
/// - `outpost_push_mutations_total{status}`: pushed mutations by outcome (`applied`,
///   `duplicate`, `conflicted`, `rejected`).
/// - `outpost_pull_rows_total`: upserts and deletes sent in pull pages.
/// - `outpost_request_duration_seconds{route}`: time to answer, until the body starts.
public struct ServerMetrics: Sendable {
    public let registry: MetricsRegistry
    let httpRequests: MetricsRegistry.Counter
    let pushMutations: MetricsRegistry.Counter
    let pullRows: MetricsRegistry.Counter
    let requestDuration: MetricsRegistry.Histogram

    public init(registry: MetricsRegistry = MetricsRegistry()) {
        self.registry = registry
        httpRequests = registry.counter(
            "outpost_http_requests_total", help: "HTTP requests answered, by route and status.", labels: ["route", "status"]
        )
        pushMutations = registry.counter(
            "outpost_push_mutations_total", help: "Pushed mutations, by outcome.", labels: ["status"]
        )
        pullRows = registry.counter("outpost_pull_rows_total", help: "Rows (upserts and deletes) sent in pull pages.")
        requestDuration = registry.histogram(
            "outpost_request_duration_seconds", help: "Time to answer a request, by route.", labels: ["route"]
        )
        for status in MutationStatus.allCases {
            pushMutations.increment(by: 0, status.rawValue)
        }
    }

    /// Counts the outcome of every mutation of a push response.
    func record(_ response: PushResponse) {
        for result in response.results {
            pushMutations.increment(result.status.rawValue)
        }
    }

    /// Counts the rows (upserts and deletes) of a pull page.
    func recordPull(rows: Int) {
        pullRows.increment(by: Double(rows))
    }
}
