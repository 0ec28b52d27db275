import CoreMetrics
import SyncProtocol

/// The devices' telemetry, summed per tenant (``FleetCensus``):
///
/// - `outpost_device_syncs_total{tenant,outcome}`: sync rounds the devices report, `ok` or `failed`;
/// - `outpost_device_conflicts_total{tenant}`: writes answered `conflicted` or `rejected`, as the devices saw them;
/// - `outpost_device_writes_total{tenant,state}`: writes `queued` into outboxes and `delivered` to the server;
/// - `outpost_device_cache_reads_total{tenant,result}`: reads through the cache, `hit` or `miss`;
/// - `outpost_device_cache_evictions_total{tenant}`: rows evicted from devices' stores.
///
/// Gauges (a device's outbox, its open conflicts) are the census's, per device, not summed here.
/// `tenant` is the label ``FleetCensus`` chose: the tenant's name, or `_other` past its limit.
extension ServerMetrics {
    func recordDeviceTelemetry(tenantLabel label: String, _ values: [DeviceTelemetry: Int64]) {
        for (name, value) in values where !name.isGauge && value > 0 {
            let metric: String
            let dimension: (String, String)?
            switch name {
            case .syncsOK: (metric, dimension) = ("outpost_device_syncs_total", ("outcome", "ok"))
            case .syncsFailed: (metric, dimension) = ("outpost_device_syncs_total", ("outcome", "failed"))
            case .conflicts: (metric, dimension) = ("outpost_device_conflicts_total", nil)
            case .writesQueued: (metric, dimension) = ("outpost_device_writes_total", ("state", "queued"))
            case .writesDelivered: (metric, dimension) = ("outpost_device_writes_total", ("state", "delivered"))
            case .cacheHits: (metric, dimension) = ("outpost_device_cache_reads_total", ("result", "hit"))
            case .cacheMisses: (metric, dimension) = ("outpost_device_cache_reads_total", ("result", "miss"))
            case .cacheEvictions: (metric, dimension) = ("outpost_device_cache_evictions_total", nil)
            case .outboxPending, .conflictsOpen: continue
            }
            Counter(label: metric, dimensions: [("tenant", label)] + (dimension.map { [$0] } ?? []), factory: factory).increment(by: value)
        }
    }
}
