public import Foundation
public import SyncProtocol

/// How a ``SyncEngine`` spends a background window (``SyncEngine/syncInBackgroundWindow(until:)``).
public struct BackgroundWindowSettings: Hashable, Sendable {
    /// Seconds kept free before the deadline: no request may still be running then (2 s).
    public var safetyMargin: TimeInterval
    /// The least a request is expected to take (3 s): a request starts only when this, or the
    /// longest one of the window so far if longer, fits before the deadline less the margin.
    public var minimumRequestEstimate: TimeInterval

    /// Settings with the given margin and least request time, in seconds.
    public init(safetyMargin: TimeInterval = 2, minimumRequestEstimate: TimeInterval = 3) {
        self.safetyMargin = safetyMargin
        self.minimumRequestEstimate = minimumRequestEstimate
    }
}

/// What one background window did and what it left (``SyncEngine/syncInBackgroundWindow(until:)``).
public struct BackgroundSyncReport: Hashable, Sendable {
    /// When the window's sync started and the deadline it was given (by the store's clock).
    public var started: Date
    /// The deadline the window's sync was given.
    public var deadline: Date
    /// When it stopped.
    public var ended: Date
    /// Writes the server answered during the window (applied, duplicate, conflicted or rejected).
    public var pushed: Int
    /// Rows stored from the server during the window (urgent changes and pages), each page
    /// committed with its cursor.
    public var pulled: Int
    /// Requests the window made to the server.
    public var requests: Int
    /// Whether it stopped before its end to keep the deadline: the next window goes on from the
    /// last page and write committed.
    public var stoppedForDeadline: Bool
    /// Outbox entries still to send when it ended (`pending`, `sending`, `waiting`).
    public var remainingWrites: Int
    /// Scopes not pulled to their end in this window, in the order the next sync pulls them.
    public var scopesLeftToPull: [String]
    /// Subscriptions (their ids, ``SubscriptionHandle/id``) not pulled to their last page in this
    /// window, in the order the next sync pulls them; each page stored kept its cursor.
    public var subscriptionsLeftToPull: [String]
    /// Files still waiting to upload when it ended (a file the server refused is not counted:
    /// it waits for ``OfflineStore/retryFailed(seq:)``).
    public var filesLeftToUpload: Int
    /// The bytes of those files the server has not acknowledged yet: an upload cut by the
    /// deadline goes on from its last acknowledged chunk.
    public var fileBytesLeftToUpload: Int64
    /// Why the window did nothing: the preferences hold automatic syncs (Wi-Fi only on an
    /// expensive path, the data budget used).
    public var skipped: AutomaticSyncPause?
    /// The error that ended it (the server unreachable, a refusal, a store error), if any.
    public var error: ErrorDetail?

    /// Whether the window ran the whole sync: uploaded the files, pushed the outbox, pulled
    /// every subscription and scope to its last page and ran the housekeeping.
    public var finished: Bool {
        !stoppedForDeadline && skipped == nil && error == nil && scopesLeftToPull.isEmpty && subscriptionsLeftToPull.isEmpty
    }

    /// A report from its parts.
    public init(
        started: Date, deadline: Date, ended: Date, pushed: Int = 0, pulled: Int = 0, requests: Int = 0, stoppedForDeadline: Bool = false,
        remainingWrites: Int = 0, scopesLeftToPull: [String] = [], subscriptionsLeftToPull: [String] = [], filesLeftToUpload: Int = 0,
        fileBytesLeftToUpload: Int64 = 0, skipped: AutomaticSyncPause? = nil, error: ErrorDetail? = nil
    ) {
        self.started = started
        self.deadline = deadline
        self.ended = ended
        self.pushed = pushed
        self.pulled = pulled
        self.requests = requests
        self.stoppedForDeadline = stoppedForDeadline
        self.remainingWrites = remainingWrites
        self.scopesLeftToPull = scopesLeftToPull
        self.subscriptionsLeftToPull = subscriptionsLeftToPull
        self.filesLeftToUpload = filesLeftToUpload
        self.fileBytesLeftToUpload = fileBytesLeftToUpload
        self.skipped = skipped
        self.error = error
    }
}

/// The time a background window has left, checked before every request of its sync: pushes,
/// pages, subscription pulls and each step of a file upload (declaration, offset, chunk).
///
/// A request starts only when its estimate (the settings' minimum, or the longest request of
/// the window so far) and the safety margin fit before the deadline; once started, it is
/// cancelled if it runs into the margin, or when the window is cut short (``expire()``, the
/// OS's expiration handler). Either way the engine stops with ``EngineFailure/deadline``,
/// after storing the pages already received: everything committed so far stays.
final class WindowBudget: Sendable {
    let deadline: Date
    let settings: BackgroundWindowSettings
    private let now: @Sendable () -> Date
    private let sleeper: any Sleeper
    private let state = Locked(State())

    private struct State {
        var longest: TimeInterval = 0
        var expired = false
        var stopped = false
        var requests = 0
        var pushed = 0
        var pulled = 0
        /// The scopes the pull had not finished when last told (`nil`: the pull did not start).
        var scopesLeft: [String]?
        /// The subscriptions the pull had not finished (`nil`: the pull did not start).
        var subscriptionsLeft: [String]?
        var waiters: [UUID: CheckedContinuation<Void, Never>] = [:]
        var cancelledWaiters: Set<UUID> = []
    }

    init(deadline: Date, settings: BackgroundWindowSettings, sleeper: any Sleeper, now: @escaping @Sendable () -> Date) {
        self.deadline = deadline
        self.settings = settings
        self.sleeper = sleeper
        self.now = now
    }

    /// Whether the window stopped its sync to keep the deadline (or was cut short).
    var stopped: Bool { state.withLock { $0.stopped } }
    var requests: Int { state.withLock { $0.requests } }
    var pushed: Int { state.withLock { $0.pushed } }
    var pulled: Int { state.withLock { $0.pulled } }
    var scopesLeft: [String]? { state.withLock { $0.scopesLeft } }

    func note(pushed: Int) { state.withLock { $0.pushed += pushed } }
    func note(pulled: Int) { state.withLock { $0.pulled += pulled } }
    func note(scopesLeft: [String]) { state.withLock { $0.scopesLeft = scopesLeft } }
    var subscriptionsLeft: [String]? { state.withLock { $0.subscriptionsLeft } }
    func note(subscriptionsLeft: [String]) { state.withLock { $0.subscriptionsLeft = subscriptionsLeft } }
    /// The subscription `id` needs nothing more of this window (its last page is stored, or it
    /// was refused).
    func noteSubscriptionDone(_ id: String) { state.withLock { $0.subscriptionsLeft?.removeAll { $0 == id } } }

    /// Throws ``EngineFailure/deadline`` unless one more request fits before the deadline.
    func admit() throws(EngineFailure) {
        let at = now()
        let fits = state.withLock { state in
            !state.expired && at.addingTimeInterval(max(settings.minimumRequestEstimate, state.longest) + settings.safetyMargin) <= deadline
        }
        guard fits else {
            state.withLock { $0.stopped = true }
            throw .deadline
        }
    }

    /// The window is cut short (the OS is about to suspend the app): no request starts any
    /// more, and the one under way is cancelled.
    func expire() {
        let waiters = state.withLock { state in
            state.expired = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Runs `request` when it fits (``admit()``), cancelled when it runs into the safety margin
    /// or the window is cut short (then ``EngineFailure/deadline`` is thrown). A transport
    /// error is returned, for the engine to handle as outside a window.
    func perform<T: Sendable>(_ request: @escaping @Sendable () async throws(TransportError) -> T) async throws(EngineFailure) -> Result<
        T, TransportError
    > {
        try admit()
        let started = now()
        state.withLock { $0.requests += 1 }
        let allowed = deadline.timeIntervalSince(started) - settings.safetyMargin
        let outcome = await withTaskGroup(of: Result<T, TransportError>??.self) { group -> Result<T, TransportError>? in
            group.addTask {
                do throws(TransportError) {
                    return .some(.success(try await request()))
                } catch {
                    return .some(.failure(error))
                }
            }
            group.addTask { [self] in
                await waitForExpiry(orAfter: allowed)
                // Cancelled: the request answered first. Otherwise the time is up.
                return Task.isCancelled ? nil : .some(nil)
            }
            while let next = await group.next() {
                guard let next else { continue }
                group.cancelAll()
                return next
            }
            return nil
        }
        let took = now().timeIntervalSince(started)
        state.withLock { $0.longest = max($0.longest, took) }
        guard let outcome else {
            state.withLock { $0.stopped = true }
            throw .deadline
        }
        return outcome
    }

    /// `request` in `window`'s time when there is one, else at once.
    static func perform<T: Sendable>(
        in window: WindowBudget?, _ request: @escaping @Sendable () async throws(TransportError) -> T
    ) async throws(EngineFailure) -> Result<T, TransportError> {
        guard let window else {
            do throws(TransportError) {
                return .success(try await request())
            } catch {
                return .failure(error)
            }
        }
        return try await window.perform(request)
    }

    /// Returns after `seconds` or when the window is cut short, whichever comes first.
    private func waitForExpiry(orAfter seconds: TimeInterval) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [sleeper] in try? await sleeper.sleep(for: seconds) }
            group.addTask { [self] in await expiry() }
            _ = await group.next()
            group.cancelAll()
        }
    }

    /// Returns when the window is cut short, or when the task is cancelled.
    private func expiry() async {
        let id = UUID()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.expired || state.cancelledWaiters.remove(id) != nil { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                if let waiter = state.waiters.removeValue(forKey: id) { return waiter }
                state.cancelledWaiters.insert(id)
                return nil
            }
            waiter?.resume()
        }
    }
}
