import Foundation
import SyncProtocol
import Contracts

/// Settings of a ``SyncEngine``.
public struct SyncEngineConfiguration: Sendable {
    /// The scopes pulled on every sync (`user`, `content`, `team`, or full keys like `ops:team:team-1`).
    public var scopes: [String]
    public var pushBatchSize: Int
    /// Rows per pull page (`nil`: the server's default).
    public var pullPageSize: Int?
    public var retry: RetryPolicy
    /// Whether a retryable failure schedules the next attempt by itself.
    public var retriesAutomatically: Bool

    public init(
        scopes: [String], pushBatchSize: Int = 100, pullPageSize: Int? = nil, retry: RetryPolicy = RetryPolicy(),
        retriesAutomatically: Bool = true
    ) {
        self.scopes = scopes
        self.pushBatchSize = pushBatchSize
        self.pullPageSize = pullPageSize
        self.retry = retry
        self.retriesAutomatically = retriesAutomatically
    }
}

/// Pushes the outbox and pulls the subscribed scopes, one sync at a time.
///
/// `syncNow()` pushes oldest first in batches, then pulls every scope page by page (each page
/// and its cursor in one transaction), then purges rows below the oldest supported schema and
/// records the success. A trigger while a sync runs coalesces into one more sync after it.
public actor SyncEngine {
    public let store: OfflineStore
    private let transport: any SyncTransport
    private let configuration: SyncEngineConfiguration

    private var current: Task<SyncResult, Never>?
    private var queued: Task<SyncResult, Never>?
    private var retryTask: Task<Void, Never>?
    private var failures = 0
    private var snapshot = SyncStatus()
    private var continuations: [UUID: AsyncStream<SyncStatus>.Continuation] = [:]

    public init(store: OfflineStore, transport: any SyncTransport, configuration: SyncEngineConfiguration) {
        self.store = store
        self.transport = transport
        self.configuration = configuration
    }

    // MARK: Status

    /// The current status, then every change.
    public var status: AsyncStream<SyncStatus> {
        let (stream, continuation) = AsyncStream.makeStream(of: SyncStatus.self, bufferingPolicy: .bufferingNewest(16))
        let id = UUID()
        continuations[id] = continuation
        continuation.onTermination = { [weak self] _ in
            Task { await self?.removeContinuation(id) }
        }
        refreshCounts()
        continuation.yield(snapshot)
        return stream
    }

    /// The latest status.
    public var currentStatus: SyncStatus {
        refreshCounts()
        return snapshot
    }

    private func removeContinuation(_ id: UUID) { continuations[id] = nil }

    private func publish() {
        for continuation in continuations.values { continuation.yield(snapshot) }
    }

    private func refreshCounts() {
        if let counts = try? store.outboxCounts() {
            snapshot.pending = counts.unsent
            snapshot.failed = counts[.failed]
        }
        if let conflicts = try? store.conflicts() { snapshot.conflicts = conflicts.count }
        if let retention = try? store.retentionState() { snapshot.retention = retention }
        if let last = try? store.lastSyncSuccess() { snapshot.lastSuccess = last }
        if let states = try? store.syncStates() {
            let byKey = Dictionary(states.map { ($0.scopeKey, $0.lastPullAt) }, uniquingKeysWith: { a, _ in a })
            for scope in configuration.scopes { snapshot.freshness[scope] = byKey[scope] ?? nil }
        }
    }

    // MARK: Triggers

    /// Syncs now; when a sync is running, one more runs after it (all triggers meanwhile share it).
    @discardableResult
    public func syncNow() async -> SyncResult {
        if let queued { return await queued.value }
        if let current {
            let task = Task { [current] in
                _ = await current.value
                return await self.runQueued()
            }
            queued = task
            return await task.value
        }
        let task = Task { await self.run() }
        current = task
        return await task.value
    }

    /// The app came to the foreground.
    public func appDidBecomeActive() async { await syncNow() }

    /// Connectivity changed (from a ``ConnectivityMonitor``); going online syncs.
    public func connectivityChanged(online: Bool) async {
        let was = snapshot.connectivity
        snapshot.connectivity = online ? .online : .offline
        publish()
        if online, was != .online { await syncNow() }
    }

    private func runQueued() async -> SyncResult {
        current = queued
        queued = nil
        return await run()
    }

    private func run() async -> SyncResult {
        retryTask?.cancel()
        retryTask = nil
        let result = await performSync()
        if queued == nil { current = nil }
        return result
    }

    // MARK: One sync

    private func performSync() async -> SyncResult {
        do {
            let pushed = try await pushAll()
            let pulled = try await pullAll()
            snapshot.phase = .reconciling
            publish()
            try store.purgeUnsupportedRows()
            try store.recordSyncSuccess()
            failures = 0
            snapshot.phase = .idle
            snapshot.connectivity = .online
            snapshot.lastError = nil
            snapshot.progress = SyncProgress()
            refreshCounts()
            publish()
            return .succeeded(pushed: pushed, pulled: pulled)
        } catch let failure as EngineFailure {
            switch failure {
            case .transport(let error):
                return fail(error)
            case .store(let error):
                snapshot.phase = .idle
                snapshot.lastError = ErrorDetail(code: ErrorCode("store"), message: String(describing: error))
                refreshCounts()
                publish()
                return .storeFailed(String(describing: error))
            }
        } catch {
            return .storeFailed(String(describing: error))
        }
    }

    private func fail(_ error: TransportError) -> SyncResult {
        let detail = error.detail
        try? store.recordSyncFailure(detail)
        snapshot.lastError = detail
        if case .network = error { snapshot.connectivity = .offline } else { snapshot.connectivity = .online }
        if case .updateRequired(let entity, let oldest, let current) = error {
            snapshot.updateRequired = UpdateRequired(entity: entity, oldestSupported: oldest, current: current)
        }
        var retryAt: Date?
        if let delay = configuration.retry.delay(attempt: failures, after: error) {
            failures += 1
            retryAt = store.now().date.addingTimeInterval(delay)
            if configuration.retriesAutomatically { scheduleRetry(after: delay) }
        }
        snapshot.phase = retryAt.map { .waitingToRetry(until: $0) } ?? .idle
        snapshot.progress = SyncProgress()
        refreshCounts()
        publish()
        return .failed(error, retryAt: retryAt)
    }

    private func scheduleRetry(after delay: TimeInterval) {
        retryTask?.cancel()
        retryTask = Task { [weak self] in
            try? await Task.sleep(nanoseconds: UInt64(max(0, delay) * 1_000_000_000))
            guard !Task.isCancelled else { return }
            await self?.syncNow()
        }
    }

    // MARK: Push

    private func pushAll() async throws(EngineFailure) -> Int {
        snapshot.phase = .pushing
        let total = (try? store.outboxCounts().unsent) ?? 0
        snapshot.progress = SyncProgress(done: 0, total: total)
        publish()
        var pushed = 0
        var gapRetries = 0
        while true {
            let request: PushRequest
            do {
                guard let next = try store.nextPushRequest(limit: configuration.pushBatchSize) else { break }
                request = next
            } catch {
                throw .store(error)
            }
            snapshot.progress.currentEntity = request.mutations.first?.entity
            publish()
            do {
                let response = try await transport.push(request)
                do { try store.applyPushResponse(response) } catch { throw EngineFailure.store(error) }
                pushed += request.mutations.count
                snapshot.progress.done = min(snapshot.progress.total, snapshot.progress.done + request.mutations.count)
                refreshCounts()
                publish()
            } catch let error as TransportError {
                if case .http(409, let body?, _) = error, body.error.code == .sequenceGap, gapRetries < 3,
                    case .object(let details)? = body.error.details, case .int(let lastSeq)? = details["last_seq"]
                {
                    gapRetries += 1
                    do { try store.resetPushSequence(serverLastSeq: lastSeq) } catch { throw .store(error) }
                    continue
                }
                // Not delivered: the batch waits (due now, so a manual trigger sends it at once;
                // the engine's retry schedule spaces automatic attempts).
                do {
                    try store.deferMutations(request.mutations.map(\.clientMutationId), until: store.now().date, error: error.detail)
                } catch {
                    throw .store(error)
                }
                throw .transport(error)
            } catch let error as EngineFailure {
                throw error
            } catch {
                throw .transport(.network(String(describing: error)))
            }
        }
        return pushed
    }

    // MARK: Pull

    private func pullAll() async throws(EngineFailure) -> Int {
        var pulled = 0
        let clientID = store.identity.clientId
        for scope in configuration.scopes {
            snapshot.phase = .pulling(scope: scope)
            snapshot.progress = SyncProgress(done: 0, total: 0, currentEntity: nil)
            publish()
            var cursor: String?
            do { cursor = try store.cursor(forScope: scope) } catch { throw .store(error) }
            while true {
                let page: PullResponse
                do {
                    page = try await transport.pull(
                        scope: scope, cursor: cursor, limit: configuration.pullPageSize, schema: OfflineStore.schemaVersions,
                        clientID: clientID
                    )
                } catch {
                    try? store.recordScopeSync(scope, error: error.detail)
                    throw .transport(error)
                }
                do {
                    try store.applyServerChanges(ServerChanges(pull: page, scopeKey: scope))
                } catch {
                    throw .store(error)
                }
                let rows = page.upserts.values.reduce(0) { $0 + $1.count } + page.deletes.values.reduce(0) { $0 + $1.count }
                pulled += rows
                snapshot.progress.done += rows
                snapshot.progress.total = snapshot.progress.done
                publish()
                cursor = page.cursor
                if !page.hasMore { break }
            }
            do { try store.recordScopeSync(scope) } catch { throw .store(error) }
        }
        return pulled
    }
}

enum EngineFailure: Error {
    case transport(TransportError)
    case store(OfflineStoreError)
}
