import CoreMetrics
public import Prometheus
import SyncProtocol

/// The server's metrics: recorded through swift-metrics, exported by swift-prometheus on
/// `GET /metrics`.
///
/// - `outpost_http_requests_total{route,status}`: requests answered, by route template
///   (`/assets/{id}`; `unmatched` for unknown paths) and status code.
/// - `outpost_push_mutations_total{status}`: pushed mutations by outcome (`applied`,
///   `duplicate`, `conflicted`, `rejected`).
/// - `outpost_pull_rows_total`: upserts and deletes sent in pull pages.
/// - `outpost_pull_pages_total{source}`: pull pages answered, by where their body came from:
///   `read_ahead` (written while the device received the page before) or
///   `request` (written for the request itself).
/// - `outpost_request_duration_seconds{route}`: time to answer, until the body starts.
/// - `outpost_live_connections`: live channels open on this process.
/// - `outpost_live_pokes_total`: pokes handed to live channels (before coalescing).
/// - `outpost_housekeeping_deleted_total{kind}`: what ``ServerHousekeeping`` deleted past the
///   data horizons (`push_result`, `tombstone`).
/// - `outpost_sink_attempts_total{tenant,sink,outcome}`: batches POSTed to a sink's receiver, by
///   outcome (`delivered`, `retried`: 5xx, 408, 429, timeout or connection error, `refused`:
///   another 4xx, parked as a dead letter).
/// - `outpost_sink_request_duration_seconds{tenant,sink}`: time a receiver took to answer.
/// - `outpost_sink_changes_delivered_total{tenant,sink}`: changes a receiver acknowledged.
/// - `outpost_sink_lag_seconds{tenant,sink}`: from a change's commit to its receiver's acknowledgement.
/// - `outpost_sink_dead_letters_total{tenant,sink}`: batches parked as dead letters.
///
/// Each server has its own registry, handed to swift-metrics as an explicit factory rather than
/// through the process-wide `MetricsSystem`, so that several servers in one process (tests, an
/// app embedding one) count apart. `sync-server serve` also bootstraps `MetricsSystem` with the
/// same registry, so the metrics of the libraries it runs are served beside these.
public struct ServerMetrics: Sendable {
    /// The registry `/metrics` renders; add an app's own metrics to it, or serve it elsewhere.
    public let registry: PrometheusCollectorRegistry
    /// A swift-metrics factory that records into ``registry``.
    public let factory: PrometheusMetricsFactory

    /// The last hour of pushes, pulls and live channels, a minute at a time, for the console's charts.
    package let recentActivity = RecentActivity()

    /// The content type of the exposition `/metrics` answers with.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// Metrics recorded in `registry`, a new one by default.
    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        factory = PrometheusMetricsFactory(registry: registry)
        // Every outcome is shown from the start, at 0, so a rate over it is defined at once.
        for status in MutationStatus.allCases {
            pushMutations(status).increment(by: 0)
        }
        pullRows.increment(by: 0)
        for source in ["read_ahead", "request"] { pullPages(source).increment(by: 0) }
        liveConnections(0)
        livePokes(0)
        for kind in ["push_result", "tombstone"] { housekeepingDeleted(kind).increment(by: 0) }
    }

    /// Records how many live channels are open.
    func liveConnections(_ count: Int) {
        CoreMetrics.Gauge(label: "outpost_live_connections", factory: factory).record(count)
        recentActivity.recordLiveConnections(count)
    }

    /// Counts pokes handed to live channels.
    func livePokes(_ count: Int) {
        CoreMetrics.Counter(label: "outpost_live_pokes_total", factory: factory).increment(by: count)
    }

    /// Counts what a housekeeping run deleted.
    func recordHousekeeping(_ counts: ServerHousekeeping.Counts) {
        housekeepingDeleted("push_result").increment(by: counts.pushResults)
        housekeepingDeleted("tombstone").increment(by: counts.tombstones)
    }

    private func housekeepingDeleted(_ kind: String) -> CoreMetrics.Counter {
        CoreMetrics.Counter(label: "outpost_housekeeping_deleted_total", dimensions: [("kind", kind)], factory: factory)
    }

    /// Counts one POST to a sink's receiver and the time it took.
    func recordSinkAttempt(tenant: String, sink: String, outcome: SinkRequest.Outcome, seconds: Double) {
        let name =
            switch outcome {
            case .delivered: "delivered"
            case .retry: "retried"
            case .refused: "refused"
            }
        CoreMetrics.Counter(
            label: "outpost_sink_attempts_total", dimensions: [("tenant", tenant), ("sink", sink), ("outcome", name)], factory: factory
        ).increment()
        CoreMetrics.Timer(label: "outpost_sink_request_duration_seconds", dimensions: [("tenant", tenant), ("sink", sink)], factory: factory)
            .recordNanoseconds(Int64(seconds * 1e9))
    }

    /// Counts the changes of an acknowledged batch and how long each took from its commit.
    func recordSinkDelivery(tenant: String, sink: String, lags: [Double]) {
        CoreMetrics.Counter(label: "outpost_sink_changes_delivered_total", dimensions: [("tenant", tenant), ("sink", sink)], factory: factory)
            .increment(by: lags.count)
        let timer = CoreMetrics.Timer(label: "outpost_sink_lag_seconds", dimensions: [("tenant", tenant), ("sink", sink)], factory: factory)
        for lag in lags { timer.recordNanoseconds(Int64(max(0, lag) * 1e9)) }
    }

    /// Counts a batch parked as a dead letter.
    func recordDeadLetter(tenant: String, sink: String) {
        CoreMetrics.Counter(label: "outpost_sink_dead_letters_total", dimensions: [("tenant", tenant), ("sink", sink)], factory: factory).increment()
    }

    /// The exposition of every metric of ``registry``.
    public func exposition() -> [UInt8] {
        registry.emitToBuffer()
    }

    /// Counts one answered request and its duration, by route template and status.
    func recordRequest(route: String, status: Int, nanoseconds: UInt64) {
        CoreMetrics.Counter(label: "outpost_http_requests_total", dimensions: [("route", route), ("status", String(status))], factory: factory)
            .increment()
        CoreMetrics.Timer(label: "outpost_request_duration_seconds", dimensions: [("route", route)], factory: factory)
            .recordNanoseconds(Int64(clamping: nanoseconds))
        recentActivity.recordRequest(route: route, nanoseconds: nanoseconds)
    }

    /// Counts the outcome of every mutation of a push response.
    func record(_ response: PushResponse) {
        var counts: [MutationStatus: Int] = [:]
        for result in response.results {
            counts[result.status, default: 0] += 1
        }
        for (status, count) in counts {
            pushMutations(status).increment(by: count)
        }
    }

    /// Counts a pull page and its rows (upserts and deletes); `readAhead` when its body was
    /// written ahead of its request.
    func recordPull(rows: Int, readAhead: Bool = false) {
        pullRows.increment(by: rows)
        pullPages(readAhead ? "read_ahead" : "request").increment()
    }

    private func pullPages(_ source: String) -> CoreMetrics.Counter {
        CoreMetrics.Counter(label: "outpost_pull_pages_total", dimensions: [("source", source)], factory: factory)
    }

    private func pushMutations(_ status: MutationStatus) -> CoreMetrics.Counter {
        CoreMetrics.Counter(label: "outpost_push_mutations_total", dimensions: [("status", status.rawValue)], factory: factory)
    }

    private var pullRows: CoreMetrics.Counter {
        CoreMetrics.Counter(label: "outpost_pull_rows_total", factory: factory)
    }
}
