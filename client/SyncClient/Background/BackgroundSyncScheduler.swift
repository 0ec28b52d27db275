// The Apple adapter of background windows: `BGTaskScheduler` exists on iOS, iPadOS, tvOS,
// visionOS and Mac Catalyst only, so this file is compiled there alone (never by this
// repository's Linux builds). The engine path it calls, `SyncEngine.syncInBackgroundWindow(until:)`,
// is the one the tests run.
#if canImport(BackgroundTasks) && (os(iOS) || os(tvOS) || os(visionOS))
    public import BackgroundTasks
    public import Foundation

    /// Registers a ``SyncEngine``'s background windows with `BGTaskScheduler` as a
    /// `BGAppRefreshTask`, schedules the next one from the sync interval, and runs each window
    /// with ``SyncEngine/syncInBackgroundWindow(until:)``.
    ///
    /// ```swift
    /// // In application(_:didFinishLaunchingWithOptions:), before it returns:
    /// let scheduler = BackgroundSyncScheduler(identifier: "com.example.app.sync", engine: engine)
    /// scheduler.register()
    /// // When the app goes to the background:
    /// try scheduler.schedule()
    /// ```
    ///
    /// The identifier must be listed under `BGTaskSchedulerPermittedIdentifiers` in the app's
    /// Info.plist, with the `fetch` background mode. The OS decides when a window comes (never
    /// before the earliest begin date, which is the preferences' interval from now, or the
    /// low-power one) and gives it about 30 seconds: the window asks for ``windowLength``, and
    /// the task's expiration handler ends it early if the OS wants the time back, keeping
    /// everything committed.
    @available(iOS 13.0, tvOS 13.0, visionOS 1.0, *)
    public final class BackgroundSyncScheduler: Sendable {
        /// The task identifier, as in the app's Info.plist.
        public let identifier: String
        /// The seconds a window gives the sync before it stops (25: `BGAppRefreshTask` grants about 30).
        public let windowLength: TimeInterval
        private let engine: SyncEngine

        /// A scheduler for the task `identifier` that gives `engine` windows of `windowLength` seconds.
        public init(identifier: String, engine: SyncEngine, windowLength: TimeInterval = 25) {
            self.identifier = identifier
            self.engine = engine
            self.windowLength = windowLength
        }

        /// Registers the task's launch handler. Call it once, before the app finishes launching.
        /// - Returns: whether `BGTaskScheduler` took it (`false` when the identifier is not permitted).
        @discardableResult
        public func register() -> Bool {
            BGTaskScheduler.shared.register(forTaskWithIdentifier: identifier, using: nil) { [self] task in
                guard let refresh = task as? BGAppRefreshTask else {
                    task.setTaskCompleted(success: false)
                    return
                }
                run(refresh)
            }
        }

        /// Asks for the next window, no sooner than the sync interval from now (the low-power
        /// one in low-power mode; 15 minutes when the preferences have no timer).
        public func schedule() async throws {
            let preferences = await engine.syncPreferences
            let lowPower = await engine.isLowPowerMode
            let interval = preferences.effectiveSyncInterval(lowPowerMode: lowPower) ?? SyncInterval.quarterHourly
            let request = BGAppRefreshTaskRequest(identifier: identifier)
            request.earliestBeginDate = Date(timeIntervalSinceNow: interval)
            try BGTaskScheduler.shared.submit(request)
        }

        /// One window: the next one is asked for first, then the sync runs until the window's end;
        /// the OS's expiration handler cancels it, which stops it at once with what was committed kept.
        private func run(_ task: BGAppRefreshTask) {
            nonisolated(unsafe) let task = task
            let engine = engine
            let deadline = Date(timeIntervalSinceNow: windowLength)
            let work = Task { [self] in
                try? await schedule()
                let report = await engine.syncInBackgroundWindow(until: deadline)
                task.setTaskCompleted(success: report.error == nil)
            }
            task.expirationHandler = { work.cancel() }
        }
    }
#endif
