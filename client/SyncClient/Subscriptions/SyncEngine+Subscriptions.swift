public import ContractRuntime
import Foundation
import SyncProtocol

extension SyncEngine {
    /// Subscribes to just the rows `request` selects (a subscription the contracts declare,
    /// `Subscriptions.incident(id:)`), synced with the scopes from now on, by its priority tier,
    /// and kept across restarts. Subscribing again to the same thing returns the same
    /// subscription (active again if it was ended and its rows are still here).
    ///
    /// ```swift
    /// let incident = try await engine.subscribe(Subscriptions.incident(id: "inc-1"))
    /// try await incident.waitForFirstSync()
    /// let row = try engine.store.row(Incident.self, id: "inc-1")
    /// try await incident.unsubscribe()      // the rows stay until its TTL passes
    /// ```
    ///
    /// - Parameters:
    ///   - ttl: how long its rows stay after ``SubscriptionHandle/unsubscribe()``; the
    ///     contract's `ttl` when `nil`.
    ///   - priority: its tier; the contract's `priority` when `nil`.
    /// - Throws: ``SubscriptionError`` for a subscription the contracts do not declare or
    ///   parameters it does not take, before anything is stored.
    public func subscribe(_ request: SubscriptionRequest, ttl: Duration? = nil, priority: SyncPriority? = nil) throws(SubscriptionError)
        -> SubscriptionHandle
    {
        let status = try store.subscribe(request, ttl: ttl, priority: priority)
        schedulePokedSync()
        return SubscriptionHandle(id: status.id, request: status.request, engine: self)
    }

    /// Every subscription the store holds, active or ended and not yet expired.
    public nonisolated func subscriptions() throws(OfflineStoreError) -> [SubscriptionHandle] {
        try store.subscriptions().map { SubscriptionHandle(id: $0.id, request: $0.request, engine: self) }
    }

    /// Pulls the active subscriptions whose priority `tier` takes, each to its last page, in
    /// requests of at most ``subscriptionsPerRequest``; returns the rows stored. A subscription
    /// the server refuses lets go of what it held; one whose cursor expired is synced again
    /// from scratch (at most three times in one sync).
    func pullSubscriptions(where tier: (SyncPriority) -> Bool) async throws(EngineFailure) -> Int {
        let whole = store.wholeScopeNames(configuration.scopes)
        var pending: Set<String>
        do { pending = Set(try store.activeSubscriptions().filter { tier($0.priority) }.map(\.id)) } catch { throw .store(error) }
        var expiries: [String: Int] = [:]
        var pulled = 0
        var rounds = 0
        while !pending.isEmpty, rounds < 10_000 {
            rounds += 1
            let batch: [OfflineStore.PulledSubscription]
            let schema: [String: Int]
            do {
                batch = Array(try store.activeSubscriptions().filter { pending.contains($0.id) }.prefix(Self.subscriptionsPerRequest))
                schema = try store.requestSchemaVersions()
            } catch {
                throw .store(error)
            }
            guard !batch.isEmpty else { break }
            let request = SubscriptionPullRequest(
                subscriptions: batch.map {
                    .init(id: $0.id, name: $0.request.name, parameters: $0.request.parameters, scope: $0.request.scope, cursor: $0.cursor)
                }, limit: configuration.pullPageSize)
            let response: SubscriptionPullResponse
            do {
                response = try await transport.pullSubscriptions(request, schema: schema, clientID: store.identity.clientId)
            } catch {
                throw .transport(error)
            }
            for page in response.subscriptions where pending.contains(page.id) {
                do {
                    if let error = page.error {
                        let retry = error.code == .cursorExpired && expiries[page.id, default: 0] < 3
                        expiries[page.id, default: 0] += 1
                        let resyncing = try store.recordSubscriptionError(
                            id: page.id, retry ? error : ErrorDetail(code: error.code, message: error.message), wholeScopes: whole)
                        if !(resyncing && retry) { pending.remove(page.id) }
                        continue
                    }
                    _ = try store.applySubscriptionPage(page, wholeScopes: whole)
                } catch {
                    throw .store(error)
                }
                pulled += page.rowCount
                if !page.hasMore { pending.remove(page.id) }
            }
        }
        return pulled
    }

    /// Subscriptions in one request at most: the server's default per-device limit.
    static let subscriptionsPerRequest = 64
}

/// One subscription of a ``SyncEngine``: its state, its first sync, its end.
public struct SubscriptionHandle: Sendable, Hashable {
    /// The store's id of the subscription.
    public let id: String
    public let request: SubscriptionRequest
    let engine: SyncEngine

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.id == rhs.id && lhs.engine === rhs.engine }
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }

    /// Its state now; `nil` once the store no longer holds it (refused and read, or expired).
    public var status: SubscriptionStatus? {
        get throws(OfflineStoreError) { try engine.store.subscriptionStatus(id: id) }
    }

    /// Returns once a whole sync of the subscription (every page) is on the device, syncing
    /// (and retrying after a failed sync) until it is.
    ///
    /// - Throws: ``SubscriptionError/forbidden(message:)`` when the server refused it because
    ///   the device's identity may not read what it selects, ``SubscriptionError/refused(code:message:)``
    ///   for another refusal (nothing of it is kept either way, and the subscription is gone),
    ///   ``SubscriptionError/notFound(id:)`` when the store no longer holds it;
    ///   `CancellationError` when the task is cancelled.
    public func waitForFirstSync() async throws {
        while true {
            try Task.checkCancellation()
            guard let status = try engine.store.subscriptionStatus(id: id) else { throw SubscriptionError.notFound(id: id) }
            if let error = status.error {
                try engine.store.forgetSubscription(id: id)
                if error.code == .forbidden { throw SubscriptionError.forbidden(message: error.message) }
                throw SubscriptionError.refused(code: error.code, message: error.message)
            }
            if status.hasSynced { return }
            if case .succeeded = await engine.syncNow() { continue }
            try await Task.sleep(for: .milliseconds(500))
        }
    }

    /// Ends the subscription: it is pulled no more, and its rows stay readable until its TTL
    /// passes, then go unless something else holds them (another subscription, a scope synced
    /// whole, a write not yet on the server).
    public func unsubscribe() async throws(SubscriptionError) {
        try engine.store.unsubscribeSubscription(id: id)
    }
}
