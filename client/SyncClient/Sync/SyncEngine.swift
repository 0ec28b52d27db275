import ContractRuntime
public import Foundation
import SyncProtocol

/// Pushes the outbox and pulls the subscribed scopes, one sync at a time.
///
/// `syncNow()` pushes oldest first in batches, then pulls every scope page by page (pages
/// committed with their cursor, up to ``SyncEngineConfiguration/pullCommitRows`` rows per
/// transaction, while the next ones are fetched), then runs the store's housekeeping
/// (``OfflineStore/runHousekeeping()``) and records the success. A trigger while a sync runs
/// coalesces into one more sync after it.
///
/// Triggers: ``syncNow()`` (the user asking: always runs), and, once ``start(connectivity:)``
/// ran, automatic ones: ``appDidBecomeActive()``, the connectivity coming back, a timer every
/// ``SyncPreferences/syncInterval`` while online, a local write while online (a push after
/// ``SyncEngineConfiguration/pushDebounce``, coalescing the writes made meanwhile), and the
/// server's live channel while online: it stays open (reopened on the retry schedule when
/// lost) and each poke saying a scope changed starts a sync after
/// ``SyncEngineConfiguration/livePokeDebounce``; the timer goes on beside it, the fallback when
/// the channel cannot be had (``SyncStatus/live``). Automatic
/// syncs obey the ``SyncPreferences``: Wi-Fi only, the daily data budget. A 426 for one
/// contract holds that contract (``SyncStatus/updateRequired``) and the sync
/// goes on with the others.
public actor SyncEngine {
    /// The store the engine syncs.
    public nonisolated let store: OfflineStore
    let transport: any SyncTransport
    let configuration: SyncEngineConfiguration

    private var current: Task<SyncResult, Never>?
    private var queued: Task<SyncResult, Never>?
    /// What the queued sync does: a full sync when any of its triggers asked for one.
    private var queuedKind = SyncKind.pushOnly
    /// Whether every trigger of the queued sync was automatic (its data counts in the budget).
    private var queuedAutomatic = true
    private var retryTask: Task<Void, Never>?
    private var monitorTask: Task<Void, Never>?
    private var timerTask: Task<Void, Never>?
    private var outboxWatch: Task<Void, Never>?
    private var pushDebounce: Task<Void, Never>?
    private var liveTask: Task<Void, Never>?
    /// Tells the live loops apart: one that ends after another replaced it must not touch its state.
    private var liveGeneration = 0
    private var pokeDebounce: Task<Void, Never>?
    private var failures = 0
    /// The fingerprint of the device signing key the server confirmed during this engine's
    /// life: registered before the first push, and again after a `signature_invalid` (the server
    /// no longer holds it: a revocation and re-enrolment, a restored backup).
    private var registeredKeyFingerprint: String?
    /// Set once the server said the user's data was erased and the store was wiped.
    private var erasure: TransportError?
    /// The path last reported by the monitor: expensive paths may be closed to automatic syncs.
    private var pathIsExpensive = false
    private var preferences: SyncPreferences
    /// The priority tiers already downloaded of scopes being pulled for the first time.
    private var initialTiersDone: [String: Set<String>] = [:]
    /// Triggers waiting for the one sync queued behind the running one (observable by tests).
    package private(set) var coalescedTriggers = 0
    /// What the connectivity monitor said last (`nil`: no monitor). A sync that succeeds while
    /// it says offline (a request that slipped through as the network went) leaves it offline.
    private var monitorSaysOnline: Bool?
    var snapshot = SyncStatus()
    /// The subscriptions' pages in flight and their last failures (``SubscriptionStatus/progress``).
    let subscriptionActivity = SubscriptionActivity()
    private var continuations: [UUID: AsyncStream<SyncStatus>.Continuation] = [:]
    /// Downloads of files under way (``file(for:)``), by SHA-256: concurrent asks share one.
    var fileDownloads: [String: Task<Result<URL, FileDownloadError>, Never>] = [:]
    /// The background window the running sync spends, if it runs in one.
    private(set) var window: WindowBudget?
    /// What the platform says of its low-power mode (Apple's `isLowPowerModeEnabled`).
    private var systemLowPowerMode = false
    private var powerTask: Task<Void, Never>?
    /// When the timer syncs next (`nil`: no timer).
    private var nextTimerSync: Date?
    /// Whether the store already remembers the server's refusal of compressed pushes.
    private var pushCompressionRefusalStored = false
    /// The sync started on leaving low-power mode, for what it held (``settle()`` waits for it).
    private var lowPowerRelease: Task<Void, Never>?

    /// An engine syncing `store` through `transport`, as `configuration` says.
    public init(store: OfflineStore, transport: any SyncTransport, configuration: SyncEngineConfiguration) {
        self.store = store
        self.transport = transport
        self.configuration = configuration
        preferences = (try? store.storedSyncPreferences()) ?? SyncPreferences(syncInterval: configuration.periodicInterval)
        // The scopes synced whole keep their rows when a subscription lets go of them (housekeeping too).
        try? store.recordWholeScopes(configuration.scopes)
        // A server that refused a compressed push in an earlier launch is not sent one again.
        if (try? store.pushCompressionRefused()) == true {
            pushCompressionRefusalStored = true
            transport.rememberPushCompressionRefused()
        }
    }

    // MARK: Preferences

    /// The preferences automatic syncs obey: the ones saved in the store, else
    /// ``SyncPreferences/standard`` with the configuration's ``SyncEngineConfiguration/periodicInterval``.
    public var syncPreferences: SyncPreferences { preferences }

    /// Saves `preferences` in the store and obeys them from now on (the timer restarts with the
    /// new interval).
    ///
    /// - Throws: ``OfflineStoreError/invalidPreference(_:)``, or a store error.
    public func setPreferences(_ preferences: SyncPreferences) throws(OfflineStoreError) {
        try store.saveSyncPreferences(preferences)
        let wasLowPower = isLowPowerMode
        self.preferences = preferences
        if timerTask != nil { startTimer() }
        snapshot.automaticSyncsPaused = automaticPause()
        lowPowerModeChanged(from: wasLowPower)
        publish()
    }

    /// Whether the engine saves power now: the platform's low-power mode (Apple's Low Power
    /// Mode, followed once ``start(connectivity:)`` ran) or the user's
    /// ``SyncPreferences/lowPowerMode``. Automatic syncs then wait for the timer, whose
    /// interval backs off to ``SyncPreferences/lowPowerSyncInterval``, except urgent changes.
    public var isLowPowerMode: Bool { preferences.lowPowerMode || systemLowPowerMode }

    /// The platform's low-power mode changed (Apple's `NSProcessInfoPowerStateDidChange`; a
    /// test stands for it elsewhere).
    package func setSystemLowPowerMode(_ enabled: Bool) {
        let was = isLowPowerMode
        systemLowPowerMode = enabled
        lowPowerModeChanged(from: was)
        publish()
    }

    /// Low-power mode went on or off: the timer takes its interval; leaving it, what low power
    /// held goes at once (as an automatic sync).
    private func lowPowerModeChanged(from was: Bool) {
        guard was != isLowPowerMode else { return }
        if timerTask != nil { startTimer() }
        if !isLowPowerMode, case .lowPowerMode = snapshot.deferred {
            snapshot.deferred = nil
            lowPowerRelease = Task { await self.automaticSync(.full, trigger: .reconnect) }
        }
    }

    /// Returns once no sync runs or waits to run, the one that leaving low-power mode started
    /// included (a deterministic simulation steps on only then).
    package func settle() async {
        while true {
            if let release = lowPowerRelease {
                lowPowerRelease = nil
                await release.value
            } else if let running = queued ?? current {
                _ = await running.value
            } else {
                return
            }
        }
    }

    /// Why automatic syncs may not run now, or `nil`.
    private func automaticPause() -> AutomaticSyncPause? {
        if pathIsExpensive, !preferences.allowsExpensiveNetwork { return .expensiveNetwork }
        if let budget = preferences.dailyAutomaticDataBudget, let used = try? store.automaticDataUsage().bytes, used >= budget {
            return .dataBudgetUsed(used: used, budget: budget)
        }
        return nil
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
        watchOutbox()
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

    func publish() {
        for continuation in continuations.values { continuation.yield(snapshot) }
    }

    func refreshCounts() {
        guard let reading = try? store.statusReading() else { return }
        snapshot.pending = reading.outbox.unsent
        snapshot.failed = reading.outbox[.failed]
        store.telemetry.set(.outboxPending, to: Int64(reading.outbox.unsent))
        snapshot.conflicts = reading.openConflicts
        store.telemetry.set(.conflictsOpen, to: Int64(reading.openConflicts))
        snapshot.retention = reading.retention
        snapshot.lastSuccess = reading.lastSuccess
        snapshot.updateRequired = reading.updateRequired
        snapshot.subscriptions = reading.subscriptions
        let byKey = Dictionary(reading.syncStates.map { ($0.scopeKey, $0) }, uniquingKeysWith: { a, _ in a })
        var available: Set<String> = []
        for scope in configuration.scopes {
            snapshot.freshness[scope] = byKey[scope]?.lastPullAt
            // A scope pulled to its end once has all its contracts; one being downloaded
            // for the first time has the tiers done so far.
            if byKey[scope]?.lastSuccessAt != nil {
                available.formUnion(store.priorities.tiers(of: scope).joined())
            } else {
                available.formUnion(initialTiersDone[scope] ?? [])
            }
        }
        snapshot.availableContracts = available
    }

    // MARK: Triggers

    /// Syncs now, whatever the preferences (the user asked); when a sync is running, one more
    /// runs after it (all triggers meanwhile share it).
    @discardableResult
    public func syncNow() async -> SyncResult {
        await sync(.full, automatic: false)
    }

    /// Syncs within a background window the OS gave the app (a `BGAppRefreshTask` on Apple
    /// platforms: see `BackgroundSyncScheduler`, compiled there only), stopping before `deadline`.
    ///
    /// The order is a sync's: the outbox first (the user's queued work), then the urgent
    /// changes, then the scopes by priority, each group of pages committed with its cursor. A
    /// request starts only when it fits before the deadline less the safety margin
    /// (``SyncEngineConfiguration/backgroundWindow``: its estimate is the longest request of the
    /// window so far, at least ``BackgroundWindowSettings/minimumRequestEstimate``), and one that
    /// runs into the margin is cancelled. A window that ends mid-pull keeps every page stored
    /// so far with its cursor, so the next window (or sync) goes on from there and redoes
    /// nothing committed. Cancelling the calling task (the OS's expiration handler) ends the
    /// window at once the same way.
    ///
    /// A sync already running is waited for first. The window is an automatic sync: it is
    /// skipped when the preferences hold automatic syncs (``BackgroundSyncReport/skipped``), and
    /// its bytes count in the daily data budget. Low-power mode does not hold it: the OS gave
    /// the time.
    ///
    /// - Returns: what it pushed and pulled and what is left; also in
    ///   ``SyncStatus/lastBackgroundWindow``.
    public func syncInBackgroundWindow(until deadline: Date) async -> BackgroundSyncReport {
        let started = store.now().date
        while let running = queued ?? current { _ = await running.value }
        if let pause = automaticPause() {
            snapshot.automaticSyncsPaused = pause
            let files = filesLeftToUpload()
            let report = BackgroundSyncReport(
                started: started, deadline: deadline, ended: store.now().date, remainingWrites: (try? store.outboxCounts().unsent) ?? 0,
                scopesLeftToPull: store.priorities.order(configuration.scopes), subscriptionsLeftToPull: activeSubscriptionIDs(),
                filesLeftToUpload: files.count, fileBytesLeftToUpload: files.bytes, skipped: pause
            )
            snapshot.lastBackgroundWindow = report
            publish()
            return report
        }
        let clock = store
        let budget = WindowBudget(deadline: deadline, settings: configuration.backgroundWindow, sleeper: configuration.sleeper) {
            clock.now().date
        }
        let task = Task { await self.runWindow(budget) }
        current = task
        let result = await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            budget.expire()
        }
        let files = filesLeftToUpload()
        var report = BackgroundSyncReport(
            started: started, deadline: deadline, ended: store.now().date, pushed: budget.pushed, pulled: budget.pulled,
            requests: budget.requests, stoppedForDeadline: budget.stopped, remainingWrites: (try? store.outboxCounts().unsent) ?? 0,
            filesLeftToUpload: files.count, fileBytesLeftToUpload: files.bytes
        )
        var incomplete = budget.stopped
        switch result {
        case .succeeded:
            break
        case .failed(let error, _):
            report.error = error.detail
            incomplete = true
        case .storeFailed(let message):
            report.error = ErrorDetail(code: ErrorCode("store"), message: message)
            incomplete = true
        }
        if incomplete {
            report.scopesLeftToPull = budget.scopesLeft ?? store.priorities.order(configuration.scopes)
            report.subscriptionsLeftToPull = budget.subscriptionsLeft ?? activeSubscriptionIDs()
        }
        snapshot.lastBackgroundWindow = report
        publish()
        return report
    }

    /// The files waiting to upload (not refused) and their bytes the server has not acknowledged.
    private func filesLeftToUpload() -> (count: Int, bytes: Int64) {
        let waiting = ((try? store.filesWaitingToUpload()) ?? []).filter { $0.lastError == nil }
        return (waiting.count, waiting.reduce(0) { $0 + max(0, $1.reference.byteCount - $1.acknowledgedOffset) })
    }

    /// The active subscriptions' ids, in the order a sync pulls them.
    private func activeSubscriptionIDs() -> [String] {
        ((try? store.activeSubscriptions()) ?? []).map(\.id)
    }

    private func runWindow(_ budget: WindowBudget) async -> SyncResult {
        window = budget
        defer { window = nil }
        return await run(.full, automatic: true)
    }

    /// The app came to the foreground: an automatic sync, when the preferences allow one.
    public func appDidBecomeActive() async { await automaticSync(.full, trigger: .foreground) }

    /// Starts following `monitor` (a sync each time the server becomes reachable, the path's
    /// cost for Wi-Fi only), the timer (a sync every ``SyncPreferences/syncInterval`` while
    /// online) and local writes (a push soon after each while online). Calling it again
    /// replaces the monitor.
    public func start(connectivity monitor: any ConnectivityMonitor) {
        stop()
        monitorTask = Task { [weak self] in
            for await path in monitor.pathUpdates() {
                guard let self else { return }
                await self.pathChanged(path)
            }
        }
        startTimer()
        watchOutbox()
        followSystemLowPowerMode()
    }

    /// On Apple platforms, follows Low Power Mode (`ProcessInfo.isLowPowerModeEnabled` and its
    /// change notification); elsewhere the user's ``SyncPreferences/lowPowerMode`` stands for it.
    private func followSystemLowPowerMode() {
        #if canImport(Darwin)
            powerTask?.cancel()
            powerTask = Task { [weak self] in
                await self?.setSystemLowPowerMode(ProcessInfo.processInfo.isLowPowerModeEnabled)
                for await _ in NotificationCenter.default.notifications(named: .NSProcessInfoPowerStateDidChange) {
                    guard let self else { return }
                    await self.setSystemLowPowerMode(ProcessInfo.processInfo.isLowPowerModeEnabled)
                }
            }
        #endif
    }

    /// Whether ``start(connectivity:)`` ran and ``stop()`` did not since: automatic syncs are on.
    var isStarted: Bool { monitorTask != nil }

    /// Stops the monitor, the timer, pushes after local writes and any scheduled retry. A sync
    /// already running finishes.
    public func stop() {
        monitorTask?.cancel()
        monitorTask = nil
        monitorSaysOnline = nil
        timerTask?.cancel()
        timerTask = nil
        retryTask?.cancel()
        retryTask = nil
        pushDebounce?.cancel()
        pushDebounce = nil
        powerTask?.cancel()
        powerTask = nil
        nextTimerSync = nil
        stopLive()
    }

    /// The timer: every ``SyncPreferences/syncInterval``, or in low-power mode the slower of
    /// it and ``SyncPreferences/lowPowerSyncInterval``.
    private func startTimer() {
        timerTask?.cancel()
        timerTask = nil
        nextTimerSync = nil
        guard let interval = preferences.effectiveSyncInterval(lowPowerMode: isLowPowerMode) else { return }
        let sleeper = configuration.sleeper
        nextTimerSync = store.now().date.addingTimeInterval(interval)
        timerTask = Task { [weak self] in
            while true {
                do { try await sleeper.sleep(for: interval) } catch { return }
                guard let self else { return }
                await self.periodicTick(interval: interval)
            }
        }
    }

    private func periodicTick(interval: TimeInterval) async {
        nextTimerSync = store.now().date.addingTimeInterval(interval)
        if snapshot.connectivity == .online { await automaticSync(.full, trigger: .timer) }
    }

    /// Connectivity changed (from a ``ConnectivityMonitor``); going online syncs.
    public func connectivityChanged(online: Bool) async {
        await pathChanged(NetworkPath(isOnline: online, isExpensive: pathIsExpensive))
    }

    /// The network path changed (from a ``ConnectivityMonitor``): going online, or leaving an
    /// expensive path that the preferences closed, syncs.
    public func pathChanged(_ path: NetworkPath) async {
        monitorSaysOnline = path.isOnline
        let was = snapshot.connectivity
        let wasPaused = snapshot.automaticSyncsPaused
        pathIsExpensive = path.isExpensive
        snapshot.connectivity = path.isOnline ? .online : .offline
        snapshot.automaticSyncsPaused = automaticPause()
        publish()
        guard path.isOnline else { return stopLive() }
        if monitorTask != nil { startLive() }
        if was != .online || (wasPaused == .expensiveNetwork && snapshot.automaticSyncsPaused == nil) {
            await automaticSync(.full, trigger: .reconnect)
        }
    }

    /// A sync the engine starts by itself: skipped (the status says why) when the preferences
    /// forbid it now. In low-power mode only the timer's syncs run; a poke asks for the urgent
    /// changes alone, and the other triggers wait for the timer (``SyncDeferral/lowPowerMode(nextSyncAt:)``).
    private func automaticSync(_ kind: SyncKind, trigger: AutomaticTrigger) async {
        let pause = automaticPause()
        if pause != snapshot.automaticSyncsPaused {
            snapshot.automaticSyncsPaused = pause
            publish()
        }
        guard pause == nil else { return }
        var kind = kind
        if isLowPowerMode, trigger != .timer {
            if trigger == .poke {
                kind = .urgentOnly
            } else {
                snapshot.deferred = .lowPowerMode(nextSyncAt: nextTimerSync)
                publish()
                return
            }
        }
        _ = await sync(kind, automatic: true)
    }

    private func sync(_ kind: SyncKind, automatic: Bool) async -> SyncResult {
        if let queued {
            coalescedTriggers += 1
            queuedKind = max(queuedKind, kind)
            queuedAutomatic = queuedAutomatic && automatic
            return await queued.value
        }
        if let current {
            coalescedTriggers += 1
            queuedKind = kind
            queuedAutomatic = automatic
            let task = Task { [current] in
                _ = await current.value
                return await self.runQueued()
            }
            queued = task
            return await task.value
        }
        let task = Task { await self.run(kind, automatic: automatic) }
        current = task
        return await task.value
    }

    private func runQueued() async -> SyncResult {
        current = queued
        queued = nil
        coalescedTriggers = 0
        let (kind, automatic) = (queuedKind, queuedAutomatic)
        (queuedKind, queuedAutomatic) = (.pushOnly, true)
        return await run(kind, automatic: automatic)
    }

    private func run(_ kind: SyncKind, automatic: Bool) async -> SyncResult {
        if let erasure {
            if queued == nil { current = nil }
            return .failed(erasure, retryAt: nil)
        }
        retryTask?.cancel()
        retryTask = nil
        if kind != .urgentOnly, snapshot.deferred != nil {
            // What waited runs now.
            snapshot.deferred = nil
            publish()
        }
        // Only automatic syncs count against the data budget: a manual one measures nothing.
        let traffic = automatic ? TrafficCounter() : nil
        try? store.countQueuedWrites()
        let result = await performSync(kind, traffic: traffic)
        if window?.stopped == true {
            // Cut by its window's deadline: neither a success nor a failure.
        } else if case .succeeded = result {
            store.telemetry.count(.syncsOK)
        } else {
            store.telemetry.count(.syncsFailed)
        }
        try? store.saveUnsentTelemetry()
        if let traffic { try? store.recordAutomaticData(bytes: traffic.bytes) }
        if queued == nil { current = nil }
        return result
    }

    // MARK: Live channel

    /// Opens the live channel and keeps it open: after a failure it waits the retry schedule's
    /// delay and opens it again; it gives up (``LiveChannelState/unavailable``) when the transport
    /// or server has none, or the error is not one to retry.
    private func startLive() {
        guard configuration.usesLiveChannel, liveTask == nil, erasure == nil else { return }
        let transport = transport
        let sleeper = configuration.sleeper
        liveGeneration += 1
        let generation = liveGeneration
        liveTask = Task { [weak self] in
            var attempt = 0
            while !Task.isCancelled {
                await self?.setLive(.connecting)
                var failure = TransportError.network("the server closed the live channel")
                let opened: Result<AsyncThrowingStream<LiveEvent, any Error>?, TransportError>
                do throws(TransportError) {
                    opened = .success(try await transport.liveEvents())
                } catch {
                    opened = .failure(error)
                }
                switch opened {
                case .failure(let error):
                    failure = error
                case .success(nil):
                    await self?.liveEnded(.unavailable, generation: generation)
                    return
                case .success(let events?):
                    do {
                        for try await event in events {
                            guard let self else { return }
                            if case .hello = event { attempt = 0 }
                            await self.liveEvent(event)
                        }
                    } catch let error as TransportError {
                        failure = error
                    } catch {
                        failure = .network(String(describing: error))
                    }
                }
                guard !Task.isCancelled, let self else { return }
                guard let delay = await self.liveReconnectDelay(attempt: attempt, after: failure, generation: generation) else { return }
                attempt += 1
                do { try await sleeper.sleep(for: delay) } catch { return }
            }
        }
    }

    private func stopLive() {
        liveGeneration += 1
        liveTask?.cancel()
        liveTask = nil
        pokeDebounce?.cancel()
        pokeDebounce = nil
        setLive(.off)
    }

    private func setLive(_ state: LiveChannelState) {
        guard snapshot.live != state else { return }
        snapshot.live = state
        publish()
    }

    /// The live loop of `generation` ended for good.
    private func liveEnded(_ state: LiveChannelState, generation: Int) {
        guard generation == liveGeneration else { return }
        liveTask = nil
        setLive(state)
    }

    /// How long to wait before opening the channel again, or `nil` to give up: the server
    /// erased the user (a sync then wipes the store), or the error is not one to retry.
    private func liveReconnectDelay(attempt: Int, after error: TransportError, generation: Int) async -> TimeInterval? {
        guard generation == liveGeneration else { return nil }
        if error.isUserErased {
            liveEnded(.off, generation: generation)
            await automaticSync(.full, trigger: .reconnect)
            return nil
        }
        guard let delay = configuration.retry.delay(attempt: attempt, after: error) else {
            liveEnded(.unavailable, generation: generation)
            return nil
        }
        setLive(.waitingToReconnect(until: store.now().date.addingTimeInterval(delay)))
        return delay
    }

    private func liveEvent(_ event: LiveEvent) {
        switch event {
        case .hello:
            setLive(.connected)
            // What changed while the channel was down was told to no one: catch up once.
            schedulePokedSync()
        case .change, .resync:
            schedulePokedSync()
        case .bye:
            break  // The stream ends next; the loop opens it again.
        }
    }

    /// A sync after the poke debounce; pokes meanwhile share it, and one arriving while a sync
    /// runs queues one more after it (``sync(_:automatic:)``).
    func schedulePokedSync() {
        guard pokeDebounce == nil else { return }
        let sleeper = configuration.sleeper
        let delay = configuration.livePokeDebounce
        if delay > 0, snapshot.deferred == nil {
            snapshot.deferred = .coalescingPokes(until: store.now().date.addingTimeInterval(delay))
            publish()
        }
        pokeDebounce = Task { [weak self] in
            if delay > 0 {
                do { try await sleeper.sleep(for: delay) } catch { return }
            }
            await self?.pokedSync()
        }
    }

    private func pokedSync() async {
        pokeDebounce = nil
        if case .coalescingPokes = snapshot.deferred {
            snapshot.deferred = nil
            publish()
        }
        guard snapshot.connectivity != .offline else { return }
        await automaticSync(.full, trigger: .poke)
    }

    // MARK: Local writes

    /// Follows the outbox and the conflicts (each committed change): the status's counts
    /// change with every local write, and a new write while online starts a push after
    /// ``SyncEngineConfiguration/pushDebounce``, once ``start(connectivity:)`` ran.
    private func watchOutbox() {
        guard outboxWatch == nil else { return }
        let activity = store.observeOutboxActivity()
        outboxWatch = Task { [weak self] in
            do {
                for try await change in activity {
                    guard let self else { return }
                    await self.outboxChanged(change)
                }
            } catch {
                // The store closed: nothing more to watch.
            }
        }
    }

    private func outboxChanged(_ activity: OutboxActivity) {
        let counts = (activity.unsent, activity.failed, activity.conflicts)
        if counts != (snapshot.pending, snapshot.failed, snapshot.conflicts) {
            (snapshot.pending, snapshot.failed, snapshot.conflicts) = counts
            publish()
        }
        guard activity.newWrites > 0, monitorTask != nil, pushDebounce == nil else { return }
        let sleeper = configuration.sleeper
        let delay = configuration.pushDebounce
        if delay > 0, snapshot.connectivity == .online, !isLowPowerMode {
            snapshot.deferred = .coalescingWrites(until: store.now().date.addingTimeInterval(delay))
            publish()
        }
        pushDebounce = Task { [weak self] in
            do { try await sleeper.sleep(for: delay) } catch { return }
            await self?.debouncedPush()
        }
    }

    private func debouncedPush() async {
        pushDebounce = nil
        if case .coalescingWrites = snapshot.deferred {
            snapshot.deferred = nil
            publish()
        }
        guard snapshot.connectivity == .online, ((try? store.outboxCounts()[.pending]) ?? 0) > 0 else { return }
        await automaticSync(.pushOnly, trigger: .write)
    }

    // MARK: One sync

    private func performSync(_ kind: SyncKind, traffic: TrafficCounter?) async -> SyncResult {
        do {
            if kind == .urgentOnly {
                // Low-power mode: the urgent changes alone, no cursor moved.
                let taken = try await takeUrgentChanges(traffic: traffic)
                if taken > 0 {
                    refreshCounts()
                    publish()
                }
                return .succeeded(pushed: 0, pulled: taken)
            }
            let pushed = try await pushAll(traffic: traffic)
            var pulled = 0
            if kind == .full {
                snapshot.repulledScopes = [:]
                pulled = try await pullAll(traffic: traffic)
                snapshot.phase = .reconciling
                publish()
                let housekeeping = try store.runHousekeeping()
                store.telemetry.count(.cacheEvictions, by: Int64(housekeeping.evictedRows.values.reduce(0, +)))
                try store.recordSyncSuccess()
                // The pulled rows' log is copied into the database after this sync (or a later
                // one, when this one stored few rows), not during it.
                if pulled > 0 { store.checkpointLater(rows: pulled) }
            }
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
            case .deadline:
                // The background window's time is up: what was committed stays, the rest waits.
                snapshot.phase = .idle
                snapshot.progress = SyncProgress()
                snapshot.deferred = .backgroundWindowEnded
                refreshCounts()
                publish()
                return .succeeded(pushed: window?.pushed ?? 0, pulled: window?.pulled ?? 0)
            case .transport(let error) where error.isUserErased:
                return wipeErasedAccount(error)
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

    /// The server erased this user's data: nothing of it may stay on the device. The store is
    /// wiped (database and assets; unsynced writes too, their author's data being erased; the
    /// tenant's key stays, other users of the tenant on this device may need it),
    /// the engine stops, and every later sync answers the same failure.
    private func wipeErasedAccount(_ error: TransportError) -> SyncResult {
        stop()
        snapshot.live = .off
        outboxWatch?.cancel()
        outboxWatch = nil
        erasure = error
        do {
            try store.signOut(force: true)
        } catch .signedOut {
            // Already wiped.
        } catch {
            snapshot.lastError = ErrorDetail(code: ErrorCode("store"), message: "the erased account's store could not be wiped: \(error)")
            snapshot.phase = .idle
            publish()
            return .storeFailed(String(describing: error))
        }
        snapshot = SyncStatus()
        snapshot.accountErased = true
        snapshot.lastError = error.detail
        publish()
        return .failed(error, retryAt: nil)
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
            await self?.automaticSync(.full, trigger: .retry)
        }
    }

    // MARK: Push

    private func pushAll(traffic: TrafficCounter?) async throws(EngineFailure) -> Int {
        snapshot.phase = .pushing
        let total = (try? store.outboxCounts().unsent) ?? 0
        snapshot.progress = SyncProgress(done: 0, total: total)
        publish()
        var pushed = 0
        var gapRetries = 0
        var holds = 0
        var signatureRetries = 0
        var fileRetries = 0
        // The files the writes name go first (an entry is never pushed before its files); an
        // automatic sync stops sending when its data budget is used.
        var budgetLeft: Int?
        if traffic != nil, let budget = preferences.dailyAutomaticDataBudget {
            budgetLeft = max(0, budget - ((try? store.automaticDataUsage().bytes) ?? 0))
        }
        if total > 0 { try window?.admit() }
        guard try await uploadWaitingFiles(traffic: traffic, budgetLeft: budgetLeft) else { return 0 }
        while true {
            if total > 0 { try window?.admit() }
            try await registerDeviceKeyIfNeeded()
            let request: PushRequest
            do {
                guard let next = try store.nextPushRequest(limit: configuration.pushBatchSize) else { break }
                request = next
            } catch {
                throw .store(error)
            }
            // Written while the files were uploading, or refused by the server: uploaded now, or
            // the writes naming a refused file fail and the batch is taken again, or it waits.
            if try await holdForFiles(request, traffic: traffic) { continue }
            snapshot.progress.currentEntity = request.mutations.first?.entity
            publish()
            // In a background window the push starts only when it fits before the deadline; cut
            // off, its entries stay `sending` and go again first in the next sync. The data
            // budget counts each body as it went on the wire (compressed when it was).
            let sent = try await WindowBudget.perform(in: window) { [transport] () async throws(TransportError) in
                try await transport.push(request) { bytes in traffic?.add(bytes) }
            }
            rememberPushCompressionRefusal()
            do {
                let response = try sent.get()
                do { try store.applyPushResponse(response) } catch { throw EngineFailure.store(error) }
                countDelivered(response)
                window?.note(pushed: request.mutations.count)
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
                // The server does not hold a file the batch names (lost, or this identity may not
                // name it): its files are declared again before the batch goes once more.
                if case .http(409, let body?, _) = error, body.error.code == .fileMissing, fileRetries < 1 {
                    fileRetries += 1
                    do { try store.declareFilesAgain(namedBy: request.mutations) } catch { throw .store(error) }
                    continue
                }
                // The server does not hold this device's key (any more): register it again, once.
                if case .http(403, let body?, _) = error, body.error.code == .signatureInvalid, signatureRetries < 1,
                    registeredKeyFingerprint != nil
                {
                    signatureRetries += 1
                    // The batch's entries stay `sending` with their seqs: the next request sends them again.
                    registeredKeyFingerprint = nil
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

    /// Keeps in the store that the server refused a compressed push, once the transport says so:
    /// the next launch's transport then sends pushes as they are from the first.
    private func rememberPushCompressionRefusal() {
        guard !pushCompressionRefusalStored, transport.pushCompressionRefused else { return }
        do {
            try store.recordPushCompressionRefused()
            pushCompressionRefusalStored = true
        } catch {
            // Not kept: the transport still remembers it for this launch, and the next push tries again.
        }
    }

    /// Registers the store's device signing key with the server (`PUT /sync/v1/device-key`,
    /// idempotent) unless this engine already did: before any push, so the server can verify
    /// the first signed write. A store without a key, or without a `signed: true` contract,
    /// registers nothing (a server without the route still takes its pushes). In a background
    /// window it is a request like the others: started only when it fits before the deadline.
    private func registerDeviceKeyIfNeeded() async throws(EngineFailure) {
        guard let key = store.configuration.deviceSigningKey, registeredKeyFingerprint != key.fingerprint,
            !store.contracts.signedContracts.isEmpty
        else { return }
        let registration = DeviceKeyRegistration(publicKey: key.publicKeyX963.base64EncodedString())
        let asked = try await WindowBudget.perform(in: window) { [transport] () async throws(TransportError) in
            try await transport.registerDeviceKey(registration)
        }
        let answer: DeviceKeyRegistered?
        do { answer = try asked.get() } catch { throw .transport(error) }
        guard let answer else { return }
        registeredKeyFingerprint = answer.fingerprint
    }

    /// The push's answers in the device's telemetry: writes the server took, and those it did not.
    private func countDelivered(_ response: PushResponse) {
        var delivered: Int64 = 0
        var conflicts: Int64 = 0
        for result in response.results {
            switch result.status {
            case .applied, .duplicate: delivered += 1
            case .conflicted, .rejected: conflicts += 1
            }
        }
        store.telemetry.count(.writesDelivered, by: delivered)
        store.telemetry.count(.conflicts, by: conflicts)
    }

    /// After a 426 naming a contract the request carried: holds it (see
    /// ``OfflineStore/holdForUpdate(_:serverLastSeq:)``) and says the request may be made again.
    func holdIfUpdateRequired(_ error: TransportError, sentSchema: [String: Int]) throws(EngineFailure) -> Bool {
        guard case .updateRequired(let requirement, let lastSeq) = error, let entity = requirement.entity, sentSchema[entity] != nil
        else { return false }
        do { try store.holdForUpdate(requirement, serverLastSeq: lastSeq) } catch { throw .store(error) }
        refreshCounts()
        publish()
        return true
    }

    // MARK: Pull

    /// Pulls every scope page by page, the scopes holding the highest priority contracts first
    /// (``PullPriorities``). A ``PullPipeline`` fetches the pages ahead while the engine stores
    /// those already here, so the server's work, the network and the device's work overlap;
    /// pages are committed together with the last one's cursor, up to
    /// ``SyncEngineConfiguration/pullCommitRows`` rows per transaction.
    ///
    /// A scope never pulled before whose contracts differ in priority is downloaded one
    /// priority tier at a time (critical first), each tier from the start to its end without
    /// storing a cursor; then the scope is pulled as usual from the end of the first tier,
    /// which brings what changed meanwhile. The app sees each tier's contracts become usable
    /// (``SyncStatus/availableContracts``) before the next tier starts. A crash part-way leaves
    /// no cursor, and the next sync starts the tiers again as a re-pull (below), so a row the
    /// server deleted and compacted meanwhile does not stay on the device.
    ///
    /// A scope whose cursor the server answers with 410 `cursor_expired` (it compacted deletes
    /// older than its data horizon) is pulled again from scratch, with the other keys of its
    /// contract scope: see ``OfflineStore/beginRepull(scopes:)``. Pending writes and open
    /// conflicts are kept; the synced rows the fresh pull does not deliver are deleted when it
    /// ends (``SyncStatus/repulledScopes``). A re-pull a crash interrupted resumes at the next sync.
    ///
    /// The subscriptions (``subscribe(_:ttl:priority:)``) are pulled in the same pass, by tier:
    /// the subscriptions of a tier before the first scope of that tier or a lower one, those left
    /// after the last scope. Those whose TTL passed since they ended are deleted first.
    private func pullAll(traffic: TrafficCounter?) async throws(EngineFailure) -> Int {
        var pulled = try await takeUrgentChanges(traffic: traffic)
        // Subscriptions whose TTL passed since they ended let go of their rows first. The active
        // ones are pulled by tier with the scopes: a tier's subscriptions before its scopes.
        do { try store.expireSubscriptions() } catch { throw .store(error) }
        if let window { window.note(subscriptionsLeft: activeSubscriptionIDs()) }
        var subscriptionTiers = Set(SyncPriority.allCases)
        var queue = store.priorities.order(configuration.scopes)
        var index = 0
        var expiries: [String: Int] = [:]
        while index < queue.count {
            let scope = queue[index]
            window?.note(scopesLeft: Array(queue[index...]))
            index += 1
            pulled += try await pullSubscriptions(through: store.priorities.topPriority(of: scope), left: &subscriptionTiers, traffic: traffic)
            do throws(EngineFailure) {
                let cursor: String?
                do { cursor = try store.cursor(forScope: scope) } catch { throw .store(error) }
                var firstDownload = false
                if cursor == nil {
                    let cutShort: Bool
                    let name = store.repullScopeName(scope)
                    let siblings = configuration.scopes.filter { store.repullScopeName($0) == name }
                    do { cutShort = try store.beginFirstDownload(scope: scope, siblings: siblings) } catch { throw .store(error) }
                    firstDownload = true
                    if cutShort {
                        // An earlier first download stored rows and no cursor: reconcile them like a re-pull.
                        try requeueAfterRepull(of: scope, queue: &queue, from: index)
                    }
                }
                pulled += try await pullScope(scope, from: cursor, traffic: traffic)
                if firstDownload {
                    do { try store.endFirstDownload(scope: scope) } catch { throw .store(error) }
                }
            } catch .transport(.http(410, let body?, _)) where body.error.code == .cursorExpired && expiries[scope, default: 0] < 3 {
                expiries[scope, default: 0] += 1
                // This scope again from scratch now, and its siblings already pulled in this sync after it.
                index -= 1
                try requeueAfterRepull(of: scope, queue: &queue, from: index)
            }
        }
        window?.note(scopesLeft: [])
        pulled += try await pullSubscriptions(through: .low, left: &subscriptionTiers, traffic: traffic)
        window?.note(subscriptionsLeft: [])
        return pulled
    }

    /// Begins a re-pull of `scope` and the other keys of its contract scope, and queues again
    /// the siblings this sync already pulled (those before `next` in `queue`).
    private func requeueAfterRepull(of scope: String, queue: inout [String], from next: Int) throws(EngineFailure) {
        let name = store.repullScopeName(scope)
        let siblings = configuration.scopes.filter { store.repullScopeName($0) == name }
        do { try store.beginRepull(scopes: siblings.isEmpty ? [scope] : siblings) } catch { throw .store(error) }
        let done = Set(queue[..<next]).subtracting([scope])
        for sibling in siblings where sibling != scope && done.contains(sibling) && !queue[next...].contains(sibling) {
            queue.append(sibling)
        }
    }

    /// Before any page: the changes the operator marked urgent (a withdrawn unit) in every scope
    /// this device has pulled before, stored without moving the scope's cursor (the pages bring
    /// them again, in order). A scope never pulled has nothing to withdraw yet.
    private func takeUrgentChanges(traffic: TrafficCounter?) async throws(EngineFailure) -> Int {
        var taken = 0
        let schema: [String: Int]
        do { schema = try store.requestSchemaVersions() } catch { throw .store(error) }
        for scope in configuration.scopes {
            let cursor: String?
            do { cursor = try store.cursor(forScope: scope) } catch { throw .store(error) }
            guard let cursor else { continue }
            let body: Data?
            let clientID = store.identity.clientId
            let asked = try await WindowBudget.perform(in: window) { [transport] () async throws(TransportError) in
                try await transport.urgentChanges(scope: scope, cursor: cursor, schema: schema, clientID: clientID)
            }
            do { body = try asked.get() } catch { throw .transport(error) }
            guard let body else { return taken }
            traffic?.add(body.count)
            guard case .success(var page) = Self.prepare(PullPipeline.Fetched(body: body, cursor: cursor, hasMore: false), scope: scope, store: store)
            else { throw .transport(.decoding("urgent changes: the body is not a pull page")) }
            guard page.rowCount > 0 else { continue }
            page.changes.cursor = nil
            try storePulled([page], scope: scope)
            taken += page.rowCount
        }
        return taken
    }

    /// Pulls one scope to its last page (by priority tiers when it has no cursor), then ends its
    /// re-pull when one is under way.
    private func pullScope(_ scope: String, from cursor: String?, traffic: TrafficCounter?) async throws(EngineFailure) -> Int {
        var pulled = 0
        snapshot.phase = .pulling(scope: scope)
        snapshot.progress = SyncProgress(done: 0, total: 0, currentEntity: nil)
        publish()
        let tiers = store.priorities.tiers(of: scope)
        if cursor == nil, tiers.count > 1, transport.filtersPullsByContract {
            // A fresh scope one priority tier at a time, then whole from the first tier's end.
            pulled += try await pullRuns(scope: scope, runs: tiers.map(Optional.some) + [nil], from: nil, traffic: traffic)
        } else {
            pulled += try await pullRuns(scope: scope, runs: [nil], from: cursor, traffic: traffic)
        }
        initialTiersDone[scope] = nil
        do {
            if let removed = try store.finishRepull(scope: scope) {
                snapshot.repulledScopes[scope] = removed
                refreshCounts()
                publish()
            }
        } catch {
            throw .store(error)
        }
        do { try store.recordScopeSync(scope) } catch { throw .store(error) }
        return pulled
    }

    /// Pulls a scope to its last page in `runs`, one after the other through one pipeline (the
    /// next run's first pages come while the last ones of the run before are stored): a run of
    /// `contracts` (a priority tier of a fresh scope, from its start) commits no cursor; the run
    /// of every contract (`nil`) commits each batch with its cursor, from `start`, or after
    /// tiers from the first tier's end, which is stored once the last tier is. Returns the rows
    /// stored.
    private func pullRuns(
        scope: String, runs: [[String]?], from start: String?, traffic: TrafficCounter?
    ) async throws(EngineFailure) -> Int {
        var pulled = 0
        var run = 0
        var cursor = start
        // The last cursor of each run stored so far.
        var ends: [String] = []
        var holds = 0
        // Rows the device holds may come with only their changed fields when it resumes from a
        // stored cursor; whole again when it cannot merge one (OfflineStoreError.partialRowNotHeld).
        var changedFields = start != nil && runs.count == 1 && runs[0] == nil
        let tiers = runs.count - 1
        // The run after `run` (`nil`: none), starting from nothing, or the final run from the first tier's end.
        let following: PullPipeline.Following = { run, ends in
            let next = run + 1
            guard next < runs.count else { return nil }
            return (next, next == tiers ? ends.first : nil)
        }
        scope: while true {
            let pipeline = PullPipeline(
                run: run, after: cursor, ends: ends, aheadRows: configuration.pullCommitRows,
                fetch: { [store, transport, changedFields, window, limit = configuration.pullPageSize] run, cursor in
                    let fetched = await Self.fetchPage(
                        store: store, transport: transport, changedFields: changedFields, window: window, scope: scope, cursor: cursor,
                        limit: limit, contracts: runs[run]
                    )
                    if case .success(let page) = fetched { traffic?.add(page.body.count) }
                    return fetched
                },
                prepare: { [store] run, fetched in
                    Self.prepare(fetched, scope: scope, store: store).map { page in
                        var page = page
                        // A tier's cursor skips the other tiers' rows: never stored.
                        if runs[run] != nil { page.changes.cursor = nil }
                        return page
                    }
                },
                following: following
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
                    // A batch ends with its run: a run's bookkeeping follows its last page.
                    // The first batches are smaller (one page, then as many rows as stored so
                    // far): the store starts while the next pages are on their way instead of
                    // waiting for a full batch, and tables still small make small commits cheap.
                    if batchRows < min(configuration.pullCommitRows, max(1, pulled)) && page.hasMore { continue }
                case .failure(let error):
                    failure = error
                case .closed:
                    failure = .transport(.network("the pull stopped before its last page"))
                }
                // The pages received before a failure are good: stored first.
                if let last = batch.last {
                    do throws(EngineFailure) {
                        try storePulled(batch, scope: scope)
                    } catch .store(.partialRowNotHeld) where changedFields {
                        // The same pages again from the last cursor stored, every row whole.
                        changedFields = false
                        continue scope
                    }
                    pulled += batchRows
                    (run, cursor) = (last.run, last.cursor)
                    batch.removeAll(keepingCapacity: true)
                    batchRows = 0
                    if !last.hasMore {
                        ends.append(last.cursor)
                        if run < tiers {
                            initialTiersDone[scope, default: []].formUnion(runs[run] ?? [])
                            refreshCounts()
                            publish()
                            if run == tiers - 1 {
                                do { try store.storeCursor(ends[0], forScope: scope) } catch { throw .store(error) }
                            }
                        }
                        guard let next = following(run, ends) else { break scope }
                        (run, cursor) = next
                    }
                }
                guard let failure else { continue }
                if case .transport(let error) = failure {
                    if holds < store.schemaVersions.count, try holdIfUpdateRequired(error, sentSchema: store.schemaVersions) {
                        // Asked again from the last cursor reached, without the held contract.
                        holds += 1
                        continue scope
                    }
                    try? store.recordScopeSync(scope, error: error.detail)
                }
                throw failure
            }
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
        window?.note(pulled: rows)
        snapshot.progress.done += rows
        snapshot.progress.total = snapshot.progress.done
        publish()
    }

    /// One page of a scope after `cursor`, asked for with the schema versions this build sends
    /// (contracts held for an update left out): its body, read later by ``PullPageDecoder``.
    private static func fetchPage(
        store: OfflineStore, transport: any SyncTransport, changedFields: Bool, window: WindowBudget?, scope: String, cursor: String?, limit: Int?,
        contracts: [String]?
    ) async -> Result<PullPipeline.Fetched, EngineFailure> {
        let schema: [String: Int]
        do { schema = try store.requestSchemaVersions() } catch { return .failure(.store(error)) }
        let clientID = store.identity.clientId
        let answered: Result<Data, TransportError>
        do throws(EngineFailure) {
            // In a background window, a page is asked for only when it fits before the deadline.
            answered = try await WindowBudget.perform(in: window) { () async throws(TransportError) in
                try await transport.pull(
                    scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: contracts,
                    changedFields: changedFields)
            }
        } catch {
            return .failure(error)
        }
        do {
            let body = try answered.get()
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

/// What a sync does: push the outbox only (after a local write), ask for the urgent changes
/// only (a poke in low-power mode), or push and pull.
enum SyncKind: Comparable {
    case pushOnly, urgentOnly, full
}

/// What started an automatic sync: low-power mode lets only the timer's run (and pokes, for
/// urgent changes).
enum AutomaticTrigger {
    case timer, foreground, reconnect, write, poke, retry
}

/// Bytes a sync moved (request and response bodies), for the automatic data budget.
final class TrafficCounter: Sendable {
    private let total = Locked(0)

    func add(_ bytes: Int) { total.withLock { $0 += bytes } }

    var bytes: Int { total.withLock { $0 } }
}

enum EngineFailure: Error {
    case transport(TransportError)
    case store(OfflineStoreError)
    /// A background window's time is up (``WindowBudget``).
    case deadline
}
