import Foundation
import SyncProtocol
import ContractRuntime
import Contracts

/// Pushes the outbox and pulls the subscribed scopes, one sync at a time.
///
/// `syncNow()` pushes oldest first in batches, then pulls every scope page by page (pages
/// committed with their cursor, up to ``SyncEngineConfiguration/pullCommitRows`` rows per
/// transaction, while the next ones are fetched), then purges rows below the oldest supported
/// schema and records the success. A trigger while a sync runs coalesces into one more sync after it.
///
/// Triggers: ``syncNow()``, ``appDidBecomeActive()``, and after ``start(connectivity:)`` the
/// connectivity coming back and a timer every ``SyncEngineConfiguration/periodicInterval``
/// while online. A 426 for one contract holds that contract (``OfflineStore/holdForUpdate(_:serverLastSeq:)``)
/// and the sync goes on with the others.
public actor SyncEngine {
    public let store: OfflineStore
    private let transport: any SyncTransport
    private let configuration: SyncEngineConfiguration

    private var current: Task<SyncResult, Never>?
    private var queued: Task<SyncResult, Never>?
    private var retryTask: Task<Void, Never>?
    private var monitorTask: Task<Void, Never>?
    private var timerTask: Task<Void, Never>?
    private var failures = 0
    /// Triggers waiting for the one sync queued behind the running one (observable by tests).
    package private(set) var coalescedTriggers = 0
    /// What the connectivity monitor said last (`nil`: no monitor). A sync that succeeds while
    /// it says offline (a request that slipped through as the network went) leaves it offline.
    private var monitorSaysOnline: Bool?
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
        if let held = try? store.updateRequirements() { snapshot.updateRequired = held }
        if let states = try? store.syncStates() {
            let byKey = Dictionary(states.map { ($0.scopeKey, $0.lastPullAt) }, uniquingKeysWith: { a, _ in a })
            for scope in configuration.scopes { snapshot.freshness[scope] = byKey[scope] ?? nil }
        }
    }

    // MARK: Triggers

    /// Syncs now; when a sync is running, one more runs after it (all triggers meanwhile share it).
    @discardableResult
    public func syncNow() async -> SyncResult {
        if let queued {
            coalescedTriggers += 1
            return await queued.value
        }
        if let current {
            coalescedTriggers += 1
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

    /// Starts following `monitor` (a sync each time the server becomes reachable) and the
    /// periodic timer (a sync every ``SyncEngineConfiguration/periodicInterval`` while online).
    /// Calling it again replaces the monitor.
    public func start(connectivity monitor: any ConnectivityMonitor) {
        stop()
        monitorTask = Task { [weak self] in
            for await online in monitor.connectivityUpdates() {
                guard let self else { return }
                await self.connectivityChanged(online: online)
            }
        }
        let sleeper = configuration.sleeper
        let interval = configuration.periodicInterval
        timerTask = Task { [weak self] in
            while true {
                do { try await sleeper.sleep(for: interval) } catch { return }
                guard let self else { return }
                await self.periodicTick()
            }
        }
    }

    /// Stops the monitor, the timer and any scheduled retry. A sync already running finishes.
    public func stop() {
        monitorTask?.cancel()
        monitorTask = nil
        monitorSaysOnline = nil
        timerTask?.cancel()
        timerTask = nil
        retryTask?.cancel()
        retryTask = nil
    }

    private func periodicTick() async {
        if snapshot.connectivity == .online { await syncNow() }
    }

    /// Connectivity changed (from a ``ConnectivityMonitor``); going online syncs.
    public func connectivityChanged(online: Bool) async {
        monitorSaysOnline = online
        let was = snapshot.connectivity
        snapshot.connectivity = online ? .online : .offline
        publish()
        if online, was != .online { await syncNow() }
    }

    private func runQueued() async -> SyncResult {
        current = queued
        queued = nil
        coalescedTriggers = 0
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
            if monitorSaysOnline != false { snapshot.connectivity = .online }
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
        if case .network = error {
            snapshot.connectivity = .offline
        } else if monitorSaysOnline != false {
            snapshot.connectivity = .online
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
        let sleeper = configuration.sleeper
        retryTask = Task { [weak self] in
            do { try await sleeper.sleep(for: delay) } catch { return }
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
        var holds = 0
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
                // Hold that contract and push the others; its entries wait for the app update.
                if holds < request.schema.count, try holdIfUpdateRequired(error, sentSchema: request.schema) {
                    holds += 1
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

    /// After a 426 naming a contract the request carried: holds it (see
    /// ``OfflineStore/holdForUpdate(_:serverLastSeq:)``) and says the request may be made again.
    private func holdIfUpdateRequired(_ error: TransportError, sentSchema: [String: Int]) throws(EngineFailure) -> Bool {
        guard case .updateRequired(let requirement, let lastSeq) = error, let entity = requirement.entity, sentSchema[entity] != nil
        else { return false }
        do { try store.holdForUpdate(requirement, serverLastSeq: lastSeq) } catch { throw .store(error) }
        refreshCounts()
        publish()
        return true
    }

    // MARK: Pull

    /// Pulls every scope page by page, in order. A ``PullPipeline`` fetches the pages ahead
    /// while the engine stores those already here, so the server's work, the network and the
    /// device's work overlap; pages are committed together with the last one's cursor, up to
    /// ``SyncEngineConfiguration/pullCommitRows`` rows per transaction.
    private func pullAll() async throws(EngineFailure) -> Int {
        var pulled = 0
        for scope in configuration.scopes {
            snapshot.phase = .pulling(scope: scope)
            snapshot.progress = SyncProgress(done: 0, total: 0, currentEntity: nil)
            publish()
            var cursor: String?
            do { cursor = try store.cursor(forScope: scope) } catch { throw .store(error) }
            var holds = 0
            scope: while true {
                let pipeline = PullPipeline(
                    after: cursor, aheadRows: configuration.pullCommitRows,
                    fetch: { [store, transport, limit = configuration.pullPageSize] cursor in
                        await Self.fetchPage(store: store, transport: transport, scope: scope, cursor: cursor, limit: limit)
                    },
                    prepare: { [store] fetched in Self.prepare(fetched, scope: scope, store: store) }
                )
                defer { pipeline.close() }
                var batch: [PullPipeline.Page] = []
                var batchRows = 0
                while true {
                    let item = await pipeline.next()
                    var failure: EngineFailure?
                    switch item {
                    case .page(let page):
                        batch.append(page)
                        batchRows += page.rowCount
                        if batchRows < configuration.pullCommitRows && page.hasMore { continue }
                    case .failure(let error):
                        failure = error
                    case .closed:
                        failure = .transport(.network("the pull stopped before its last page"))
                    }
                    // The pages received before a failure are good: stored first.
                    if !batch.isEmpty {
                        try storePulled(batch, scope: scope)
                        pulled += batchRows
                        cursor = batch[batch.count - 1].cursor
                        let finished = !batch[batch.count - 1].hasMore
                        batch.removeAll(keepingCapacity: true)
                        batchRows = 0
                        if finished { break scope }
                    }
                    guard let failure else { continue }
                    if case .transport(let error) = failure {
                        if holds < OfflineStore.schemaVersions.count, try holdIfUpdateRequired(error, sentSchema: OfflineStore.schemaVersions) {
                            // Asked again from the last cursor stored, without the held contract.
                            holds += 1
                            continue scope
                        }
                        try? store.recordScopeSync(scope, error: error.detail)
                    }
                    throw failure
                }
            }
            do { try store.recordScopeSync(scope) } catch { throw .store(error) }
        }
        return pulled
    }

    /// Stores pulled pages of a scope in one transaction and counts them in the progress. When
    /// the store refuses them, they are stored one page at a time, up to the page it refuses
    /// (whose error is thrown): that page must not cost the good ones before it.
    private func storePulled(_ pages: [PullPipeline.Page], scope: String) throws(EngineFailure) {
        do {
            _ = try store.applyServerChanges(pages: pages.map(\.changes))
        } catch {
            guard pages.count > 1 else { throw .store(error) }
            for page in pages {
                try storePulled([page], scope: scope)
            }
            return
        }
        let rows = pages.reduce(0) { $0 + $1.rowCount }
        snapshot.progress.done += rows
        snapshot.progress.total = snapshot.progress.done
        publish()
    }

    /// One page of a scope after `cursor`, asked for with the schema versions this build sends
    /// (contracts held for an update left out): its body, read later by ``PullPageDecoder``.
    private static func fetchPage(
        store: OfflineStore, transport: any SyncTransport, scope: String, cursor: String?, limit: Int?
    ) async -> Result<PullPipeline.Fetched, EngineFailure> {
        let schema: [String: Int]
        do { schema = try store.requestSchemaVersions() } catch { return .failure(.store(error)) }
        let clientID = store.identity.clientId
        do {
            let body = try await transport.pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID)
            guard let (next, hasMore) = PullPageDecoder.peek(body) else {
                return .failure(.transport(.decoding("a pull page: the body is not a pull page")))
            }
            return .success(PullPipeline.Fetched(body: body, cursor: next, hasMore: hasMore))
        } catch {
            return .failure(.transport(error))
        }
    }

    /// A fetched page read and prepared for storing (``PreparedServerChanges``).
    private static func prepare(_ fetched: PullPipeline.Fetched, scope: String, store: OfflineStore) -> Result<PullPipeline.Page, EngineFailure> {
        do {
            let page = try PullPageDecoder.decode(fetched.body, scopeKey: scope, store: store)
            return .success(PullPipeline.Page(cursor: page.cursor, hasMore: page.hasMore, changes: page.changes))
        } catch {
            return .failure(.transport(.decoding("a pull page: \(error)")))
        }
    }
}

enum EngineFailure: Error {
    case transport(TransportError)
    case store(OfflineStoreError)
}
