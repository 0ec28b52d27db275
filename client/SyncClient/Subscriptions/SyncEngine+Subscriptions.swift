public import ContractRuntime
import Foundation
import SyncProtocol

extension SyncEngine {
    /// Subscribes to just the rows `request` selects (a subscription the contracts declare,
    /// `Subscriptions.incident(id:)`), synced with the scopes from now on, by its priority tier,
    /// and kept across restarts; a started engine syncs it at once (as after a live poke), a
    /// stopped one with its next sync. Subscribing again to the same name, parameters and scope
    /// returns the same subscription (active again if it was ended and its rows are still here,
    /// asked again if the server refused it).
    ///
    /// ```swift
    /// let incident = try await engine.subscribe(Subscriptions.incident(id: "inc-1"))
    /// try await incident.waitForFirstSync()
    /// let row = try engine.store.fetch(Incident.self, id: "inc-1")
    /// try await incident.unsubscribe()      // the rows stay until its TTL passes
    /// ```
    ///
    /// - Parameters:
    ///   - request: what to sync: a subscription the contracts declare, with its parameters.
    ///   - ttl: how long its rows stay after ``SubscriptionHandle/unsubscribe(keepingFor:)``; the
    ///     contract's `ttl` when `nil`.
    ///   - priority: its tier; the contract's `priority` when `nil`.
    /// - Throws: ``SubscriptionError`` for a subscription the contracts do not declare or
    ///   parameters it does not take, before anything is stored.
    public func subscribe(_ request: SubscriptionRequest, ttl: Duration? = nil, priority: SyncPriority? = nil) throws(SubscriptionError)
        -> SubscriptionHandle
    {
        let status = try store.subscribe(request, ttl: ttl, priority: priority)
        subscriptionActivity.forget(status.id)
        subscriptionsChanged()
        // A started engine syncs it soon, as a poke would; a stopped one leaves it to the next sync.
        if isStarted { schedulePokedSync() }
        return SubscriptionHandle(id: status.id, request: status.request, engine: self)
    }

    /// Every subscription the store holds (active, refused, or ended and not yet expired), oldest first.
    public nonisolated func subscriptions() throws(OfflineStoreError) -> [SubscriptionHandle] {
        try store.subscriptions().map { SubscriptionHandle(id: $0.id, request: $0.request, engine: self) }
    }

    /// The subscription with this id, or `nil` when the store holds none (never, refused and
    /// read, or expired).
    public nonisolated func subscription(id: String) throws(OfflineStoreError) -> SubscriptionHandle? {
        try store.subscriptionStatus(id: id).map { SubscriptionHandle(id: $0.id, request: $0.request, engine: self) }
    }

    /// The status's subscription counts after a change outside a sync.
    func subscriptionsChanged() {
        refreshCounts()
        publish()
    }

    /// Pulls the subscriptions of the tiers still `left` down to `tier` (a tier's before the
    /// scopes of that tier), and takes those tiers out of `left`.
    func pullSubscriptions(
        through tier: SyncPriority, left: inout Set<SyncPriority>, traffic: TrafficCounter?
    ) async throws(EngineFailure) -> Int {
        let tiers = left.filter { $0 <= tier }
        guard !tiers.isEmpty else { return 0 }
        left.subtract(tiers)
        return try await pullSubscriptions(tiers: tiers, traffic: traffic)
    }

    /// Pulls the active subscriptions of `tiers`, each to its last page, in requests of at most
    /// 64 (fewer after a server's 400 `too_many_subscriptions`); returns the rows stored. Each
    /// page is stored with its cursor in one transaction. A subscription the server refuses
    /// lets go of what it held; one whose cursor expired is synced again from scratch (at most
    /// three times in one sync). A transport or server that cannot pull subscriptions leaves
    /// them as they are (``SubscriptionStatus/lastFailure``) and the sync goes on. An automatic
    /// sync counts the requests and answers in its data (`traffic`), as their JSON weighs. In a
    /// background window each request waits for ``WindowBudget/admit()``.
    private func pullSubscriptions(tiers: Set<SyncPriority>, traffic: TrafficCounter?) async throws(EngineFailure) -> Int {
        var pending: Set<String>
        do { pending = Set(try store.activeSubscriptions().filter { tiers.contains($0.priority) }.map(\.id)) } catch { throw .store(error) }
        guard !pending.isEmpty else { return 0 }
        defer {
            // Those not done now (the sync failed, or they wait for the next) have no pages coming.
            subscriptionActivity.settle(pending)
            subscriptionsChanged()
        }
        snapshot.progress = SyncProgress()
        var expiries: [String: Int] = [:]
        var holds = 0
        var pulled = 0
        while !pending.isEmpty {
            let batch: [OfflineStore.PulledSubscription]
            let schema: [String: Int]
            do {
                batch = Array(try store.activeSubscriptions().filter { pending.contains($0.id) }.prefix(subscriptionActivity.perRequest))
                schema = try store.requestSchemaVersions()
            } catch {
                throw .store(error)
            }
            // Ended or refused meanwhile: nothing left to ask.
            guard let first = batch.first else { break }
            showPulling(first)
            let request = SubscriptionPullRequest(
                subscriptions: batch.map {
                    .init(id: $0.id, name: $0.request.name, parameters: $0.request.parameters, scope: $0.request.scope, cursor: $0.cursor)
                }, limit: configuration.pullPageSize)
            let response: SubscriptionPullResponse
            if let traffic { traffic.add((try? JSONEncoder().encode(request).count) ?? 0) }
            // In a background window the request starts only when it fits before the deadline;
            // cut off, the pages stored so far keep their cursors and the rest waits
            // (`EngineFailure.deadline` ends the sync).
            let clientID = store.identity.clientId
            let asked = try await WindowBudget.perform(in: window) { [transport] () async throws(TransportError) in
                try await transport.pullSubscriptions(request, schema: schema, clientID: clientID)
            }
            do {
                response = try asked.get()
                // The transport answers decoded: its body weighed about what it encodes to again.
                if let traffic { traffic.add((try? JSONEncoder().encode(response).count) ?? 0) }
            } catch {
                if let smaller = Self.smallerBatch(after: error, sent: batch.count) {
                    subscriptionActivity.perRequest = smaller
                    continue
                }
                // A contract the server no longer supports in this build's version: held, the rest asked again.
                if holds < schema.count, try holdIfUpdateRequired(error, sentSchema: schema) {
                    holds += 1
                    continue
                }
                let unsupported = Self.cannotPullSubscriptions(error)
                subscriptionActivity.fail(unsupported ? Array(pending) : batch.map(\.id), error.detail, unsupported: unsupported)
                // No subscriptions here: the scopes sync all the same.
                if unsupported { return pulled }
                throw .transport(error)
            }
            let sent = Dictionary(batch.map { ($0.id, $0.cursor) }, uniquingKeysWith: { first, _ in first })
            var progressed = false
            for page in response.subscriptions where pending.contains(page.id) {
                guard let cursor = sent[page.id] else { continue }
                do {
                    if let error = page.error {
                        progressed = true
                        if error.code == .cursorExpired {
                            expiries[page.id, default: 0] += 1
                            if expiries[page.id, default: 0] <= 3 {
                                // Again from scratch in this sync; what it then does not deliver goes.
                                try store.restartSubscription(id: page.id)
                                subscriptionActivity.restart(page.id)
                            } else {
                                pending.remove(page.id)
                                subscriptionActivity.fail([page.id], error, unsupported: false)
                            }
                            continue
                        }
                        try store.refuseSubscription(id: page.id, error)
                        window?.noteSubscriptionDone(page.id)
                        pending.remove(page.id)
                        subscriptionActivity.forget(page.id)
                        continue
                    }
                    // The answer's byte budget ran out before it: asked again with the same cursor.
                    if page.rowCount == 0, page.hasMore, page.cursor == nil || page.cursor == cursor { continue }
                    progressed = true
                    try store.applySubscriptionPage(page)
                } catch {
                    throw .store(error)
                }
                pulled += page.rowCount
                window?.note(pulled: page.rowCount)
                subscriptionActivity.stored(page.rowCount, for: page.id, done: !page.hasMore)
                snapshot.progress.done += page.rowCount
                snapshot.progress.total = snapshot.progress.done
                publish()
                if !page.hasMore {
                    pending.remove(page.id)
                    window?.noteSubscriptionDone(page.id)
                }
            }
            // Entries the answer left out wait for the next sync; so do all when a round brought nothing.
            let answered = Set(response.subscriptions.map(\.id))
            pending.subtract(batch.map(\.id).filter { !answered.contains($0) })
            if !progressed { break }
        }
        return pulled
    }

    /// The phase while `subscription`'s pages come: pulling in its scope (the key it names, else
    /// its root entity's scope).
    private func showPulling(_ subscription: OfflineStore.PulledSubscription) {
        let root = store.contracts.subscription(named: subscription.request.name)?.entity
        let scope = subscription.request.scope ?? root.flatMap { store.contracts.entity(named: $0)?.scope } ?? subscription.request.name
        if snapshot.phase != .pulling(scope: scope) || snapshot.progress.currentEntity != root {
            snapshot.phase = .pulling(scope: scope)
            snapshot.progress.currentEntity = root
            publish()
        }
    }

    /// After the server's 400 `too_many_subscriptions`: the batch size to ask with (its `limit`
    /// when it says, else half), or `nil` for another error.
    static func smallerBatch(after error: TransportError, sent: Int) -> Int? {
        guard case .http(400, let body?, _) = error, body.error.code == .tooManySubscriptions, sent > 1 else { return nil }
        if case .object(let details)? = body.error.details, case .int(let limit)? = details["limit"], limit >= 1, limit < sent {
            return Int(limit)
        }
        return sent / 2
    }

    /// Whether `error` says the transport or the server has no subscription pulls at all
    /// (``TransportError/subscriptionsUnsupported``, a 404 or 501 for the route).
    static func cannotPullSubscriptions(_ error: TransportError) -> Bool {
        error == .subscriptionsUnsupported || error.status == 404 || error.status == 501
    }
}

/// One subscription of a ``SyncEngine``: its state, its first sync, its end.
public struct SubscriptionHandle: Sendable, Hashable {
    /// The store's id of the subscription.
    public let id: String
    /// What it selects.
    public let request: SubscriptionRequest
    let engine: SyncEngine

    /// Whether two handles are of the same subscription in the same engine.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.id == rhs.id && lhs.engine === rhs.engine }
    /// Hashes the subscription's id.
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }

    /// Its state now, with its progress while its pages come; `nil` once the store no longer
    /// holds it (refused and read, or expired).
    public var status: SubscriptionStatus? {
        get throws(OfflineStoreError) {
            guard var status = try engine.store.subscriptionStatus(id: id) else { return nil }
            let activity = engine.subscriptionActivity.state(of: id)
            status.progress = activity.progress
            status.lastFailure = activity.failure
            return status
        }
    }

    /// Returns once a whole sync of the subscription (every page, to `has_more: false`) is on
    /// the device, syncing until it is (``SyncEngine/syncNow()``), after a failed sync when the
    /// engine's ``RetryPolicy`` says.
    ///
    /// - Throws: ``SubscriptionError/forbidden(message:)`` when the server refused it because
    ///   the device's identity may not read what it selects, ``SubscriptionError/refused(code:message:)``
    ///   for another refusal (nothing of it is kept either way, and the subscription is gone);
    ///   ``SubscriptionError/unsupported(message:)`` when the transport or server cannot pull
    ///   subscriptions; ``SubscriptionError/notFound(id:)`` when the store no longer holds it,
    ///   ``SubscriptionError/ended(id:)`` when it was ended before its first sync; the
    ///   ``TransportError`` of a failed sync that is not retried (401, 403); `CancellationError`.
    public func waitForFirstSync() async throws {
        var attempt = 0
        while true {
            try Task.checkCancellation()
            guard let status = try engine.store.subscriptionStatus(id: id) else { throw SubscriptionError.notFound(id: id) }
            if let error = status.error {
                try engine.store.forgetSubscription(id: id)
                await engine.subscriptionsChanged()
                if error.code == .forbidden { throw SubscriptionError.forbidden(message: error.message) }
                throw SubscriptionError.refused(code: error.code, message: error.message)
            }
            if status.hasSynced { return }
            guard status.isActive else { throw SubscriptionError.ended(id: id) }
            let delay: TimeInterval
            switch await engine.syncNow() {
            case .succeeded:
                // Every active subscription was pulled to its end (checked above), unless it could
                // not be: no subscriptions here at all, or one that could not end now (its cursor
                // expired again and again), asked again on the retry schedule.
                let activity = engine.subscriptionActivity.state(of: id)
                if activity.unsupported { throw SubscriptionError.unsupported(message: activity.failure?.message ?? "") }
                delay = engine.configuration.retry.baseDelay(attempt: attempt)
            case .failed(let error, let retryAt):
                guard let retryAt else { throw error }
                delay = retryAt.timeIntervalSince(engine.store.now().date)
            case .storeFailed(let reason):
                throw SubscriptionError.store(reason)
            }
            attempt += 1
            if delay > 0 { try await engine.configuration.sleeper.sleep(for: delay) }
        }
    }

    /// Ends the subscription: it is pulled no more, and its rows stay readable until its TTL
    /// passes, then go unless something else holds them (another subscription, a scope synced
    /// whole, a write not yet on the server). Subscribing again before then makes it active again.
    ///
    /// - Parameter ttl: how long its rows stay from now on, instead of the TTL it was made with.
    /// - Throws: ``SubscriptionError/notFound(id:)`` when the store no longer holds it.
    public func unsubscribe(keepingFor ttl: Duration? = nil) async throws(SubscriptionError) {
        try engine.store.unsubscribeSubscription(id: id, keepingFor: ttl)
        engine.subscriptionActivity.forget(id)
        await engine.subscriptionsChanged()
    }

    /// Notes that the app used its rows now: least recently used subscriptions go first when
    /// space is short (``OfflineStore/subscriptionsInEvictionOrder(neverUsedAge:)``).
    ///
    /// - Throws: ``SubscriptionError/notFound(id:)`` when the store no longer holds it.
    public func markUsed() throws(SubscriptionError) {
        try engine.store.markSubscriptionUsed(id: id)
    }

    /// Deletes the subscription now, whatever its TTL, and its rows unless something else
    /// holds them (``OfflineStore/evictSubscription(id:)``). Returns the rows evicted, by contract.
    ///
    /// - Throws: ``SubscriptionError/notFound(id:)`` when the store no longer holds it.
    @discardableResult
    public func evict() async throws(SubscriptionError) -> [String: Int] {
        let evicted = try engine.store.evictSubscription(id: id)
        engine.subscriptionActivity.forget(id)
        await engine.subscriptionsChanged()
        return evicted
    }
}

/// What the engine knows of its subscriptions' pulls and the store does not keep: the pages of
/// each coming now, why its last pull failed, and how many subscriptions the server takes in one
/// request.
final class SubscriptionActivity: Sendable {
    struct State {
        var progress: SyncProgress?
        var failure: ErrorDetail?
        /// The failure says the transport or server has no subscription pulls.
        var unsupported = false
    }

    private let states = Locked<[String: State]>([:])
    private let batchSize = Locked(64)

    /// Subscriptions in one request at most: the server's default per-device limit, less after
    /// it said it takes fewer.
    var perRequest: Int {
        get { batchSize.withLock { $0 } }
        set { batchSize.withLock { $0 = max(1, newValue) } }
    }

    func state(of id: String) -> State { states.withLock { $0[id] ?? State() } }

    /// A page of `rows` was stored; `done` when it was the last.
    func stored(_ rows: Int, for id: String, done: Bool) {
        states.withLock { states in
            if done {
                states[id] = nil
            } else {
                var progress = states[id]?.progress ?? SyncProgress()
                progress.done += rows
                progress.total = progress.done
                states[id, default: State()].progress = progress
            }
        }
    }

    /// Its cursor expired: a fresh pass starts.
    func restart(_ id: String) { states.withLock { $0[id, default: State()].progress = SyncProgress() } }

    func fail(_ ids: [String], _ error: ErrorDetail, unsupported: Bool) {
        states.withLock { states in
            for id in ids { states[id] = State(progress: nil, failure: error, unsupported: unsupported) }
        }
    }

    /// No pages come for these any more in this sync.
    func settle(_ ids: Set<String>) {
        states.withLock { states in
            for id in ids { states[id]?.progress = nil }
        }
    }

    func forget(_ id: String) { states.withLock { $0[id] = nil } }
}
