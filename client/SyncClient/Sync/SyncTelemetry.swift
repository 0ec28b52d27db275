public import CoreMetrics
import Foundation
public import SyncProtocol

/// What the device counts about its own syncing (seed of the fleet's health): sync rounds that
/// ended well or not, conflicts, writes queued and delivered (the offline completion rate), cache
/// hits, misses and evictions, and, as gauges, the writes waiting and the conflicts open.
///
/// Every count goes to swift-metrics (`outpost_client_*`, through the `MetricsSystem` the app
/// bootstrapped, or the factory given), so an app's own metrics backend sees them. Sending them
/// to the server is opt-in: give the same object to ``URLSessionTransport`` (`telemetry:`), and
/// each request carries the counts since the last request the server accepted in
/// `X-Outpost-Telemetry`: whole numbers under fixed names, never row data, at most 512 bytes.
/// A request that fails gives its counts back, to go with the next one.
///
/// The store keeps the counts not sent yet across runs of the app: it saves them after every
/// sync and as soon as a request carried them, and its writes are counted from the outbox's
/// sequence, so a write made by a run that ended before syncing is still counted. Reads counted
/// after a run's last sync are lost if the app ends before syncing again.
public final class SyncTelemetry: Sendable {
    private let factory: (any MetricsFactory)?
    private let state = Locked(State())

    private struct State {
        var total: [DeviceTelemetry: Int64] = [:]
        var unsent: [DeviceTelemetry: Int64] = [:]
        var whenSent: (@Sendable () -> Void)?
    }

    /// - Parameter metricsFactory: where the counts are recorded through swift-metrics; `nil`
    ///   uses the process's `MetricsSystem` (a no-op until the app bootstraps one).
    public init(metricsFactory: (any MetricsFactory)? = nil) {
        factory = metricsFactory
    }

    /// Everything counted since this object was made (gauges: their latest value).
    public var totals: [DeviceTelemetry: Int64] { state.withLock { $0.total } }

    /// Adds `count` to a counter (ignored for gauges and for counts below 1).
    public func count(_ name: DeviceTelemetry, by count: Int64 = 1) {
        guard !name.isGauge, count > 0 else { return }
        state.withLock { state in
            state.total[name, default: 0] += count
            state.unsent[name, default: 0] += count
        }
        let (label, dimensions) = Self.metric(name)
        if let factory {
            Counter(label: label, dimensions: dimensions, factory: factory).increment(by: count)
        } else {
            Counter(label: label, dimensions: dimensions).increment(by: count)
        }
    }

    /// Sets a gauge (`outboxPending`, `conflictsOpen`).
    public func set(_ name: DeviceTelemetry, to value: Int64) {
        guard name.isGauge else { return }
        let value = max(0, value)
        state.withLock { state in
            state.total[name] = value
            state.unsent[name] = value
        }
        let (label, dimensions) = Self.metric(name)
        if let factory {
            Gauge(label: label, dimensions: dimensions, factory: factory).record(value)
        } else {
            Gauge(label: label, dimensions: dimensions).record(value)
        }
    }

    /// The counts not sent yet, now counted as sent; ``giveBack(_:)`` them when the request failed.
    package func takeUnsent() -> [DeviceTelemetry: Int64] {
        state.withLock { state in
            defer { state.unsent = [:] }
            return state.unsent.mapValues { min($0, TelemetryHeader.maximumValue) }
        }
    }

    /// Called after a request carrying counts was accepted (the store saves what is left unsent).
    package func whenSent(_ action: @escaping @Sendable () -> Void) {
        state.withLock { $0.whenSent = action }
    }

    /// A request carrying counts was accepted.
    package func sent() {
        state.withLock { $0.whenSent }?()
    }

    /// The counts not sent yet, left unsent.
    package func peekUnsent() -> [DeviceTelemetry: Int64] {
        state.withLock { $0.unsent }
    }

    /// Counts a failed request took, back for the next one (gauges only when nothing newer was set).
    package func giveBack(_ sent: [DeviceTelemetry: Int64]) {
        state.withLock { state in
            for (name, value) in sent {
                if name.isGauge {
                    if state.unsent[name] == nil { state.unsent[name] = value }
                } else {
                    state.unsent[name, default: 0] += value
                }
            }
        }
    }

    private static func metric(_ name: DeviceTelemetry) -> (String, [(String, String)]) {
        switch name {
        case .syncsOK: ("outpost_client_syncs_total", [("outcome", "ok")])
        case .syncsFailed: ("outpost_client_syncs_total", [("outcome", "failed")])
        case .conflicts: ("outpost_client_conflicts_total", [])
        case .writesQueued: ("outpost_client_writes_total", [("state", "queued")])
        case .writesDelivered: ("outpost_client_writes_total", [("state", "delivered")])
        case .cacheHits: ("outpost_client_cache_reads_total", [("result", "hit")])
        case .cacheMisses: ("outpost_client_cache_reads_total", [("result", "miss")])
        case .cacheEvictions: ("outpost_client_cache_evictions_total", [])
        case .outboxPending: ("outpost_client_outbox_pending", [])
        case .conflictsOpen: ("outpost_client_conflicts_open", [])
        }
    }
}

extension OfflineStore {
    /// Counts the writes queued since the last count, from the outbox's `seq`, which every
    /// committed write moves (a write made by a run of the app that ended before it synced is
    /// counted too); saves the counts not sent yet in the same transaction.
    package func countQueuedWrites() throws(OfflineStoreError) {
        let unsent = telemetry.peekUnsent()
        let queued = try write { db -> Int64 in
            let next = try Metadata.integer(db, .nextSeq) ?? 1
            // A store made before telemetry starts counting from now.
            let counted = try Metadata.integer(db, .telemetryQueuedThrough) ?? (next - 1)
            let queued = max(0, next - 1 - counted)
            try Metadata.set(db, .telemetryQueuedThrough, String(next - 1))
            var saved = unsent
            if queued > 0 { saved[.writesQueued, default: 0] += queued }
            if saved.isEmpty {
                try Metadata.remove(db, .telemetryUnsent)
            } else {
                try Metadata.set(db, .telemetryUnsent, TelemetryHeader.encode(saved))
            }
            return queued
        }
        telemetry.count(.writesQueued, by: queued)
    }

    /// Keeps the telemetry not sent yet in the store, for the next run of the app when this one
    /// ends before its next request (the engine saves it after every sync).
    package func saveUnsentTelemetry() throws(OfflineStoreError) {
        let unsent = telemetry.peekUnsent()
        try write { db in
            if unsent.isEmpty {
                try Metadata.remove(db, .telemetryUnsent)
            } else {
                try Metadata.set(db, .telemetryUnsent, TelemetryHeader.encode(unsent))
            }
        }
    }
}
