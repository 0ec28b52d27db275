public import Foundation
public import SyncProtocol

/// Whether the server can be reached, as far as the engine knows.
public enum Connectivity: Hashable, Sendable {
    case unknown, online, offline
}

/// What the engine is doing.
public enum SyncPhase: Hashable, Sendable {
    case idle
    case pushing
    case pulling(scope: String)
    case reconciling
    /// The last sync failed with a retryable error; the next attempt is due at `until`.
    case waitingToRetry(until: Date)
}

/// Progress of the current phase: `done` of `total` items (mutations or pulled rows).
public struct SyncProgress: Hashable, Sendable {
    /// Items of the phase done so far.
    public var done: Int
    /// Items the phase has to do.
    public var total: Int
    /// The contract being pushed or pulled, if any.
    public var currentEntity: String?
    /// While files are uploaded before a push (``SyncPhase/pushing``): the bytes of files the
    /// server acknowledged so far in this sync, of ``fileBytesTotal``.
    public var fileBytesSent: Int64
    /// The bytes of the files this sync uploads before its push (0: none).
    public var fileBytesTotal: Int64

    /// Progress from its parts.
    public init(done: Int = 0, total: Int = 0, currentEntity: String? = nil, fileBytesSent: Int64 = 0, fileBytesTotal: Int64 = 0) {
        self.done = done
        self.total = total
        self.currentEntity = currentEntity
        self.fileBytesSent = fileBytesSent
        self.fileBytesTotal = fileBytesTotal
    }
}

/// The live channel: whether the server tells this device of changes as they happen.
public enum LiveChannelState: Hashable, Sendable {
    /// Not open: the engine is not started, is offline, or does not use the channel.
    case off
    case connecting
    /// Open: changes other devices make arrive within moments.
    case connected
    /// Lost; the engine opens it again at `until` (the retry schedule), syncing on its timer meanwhile.
    case waitingToReconnect(until: Date)
    /// The server or the transport has no live channel, or refused it for good: the engine syncs
    /// on its timer alone until it is started again.
    case unavailable
}

/// A snapshot of everything a sync UI shows.
public struct SyncStatus: Hashable, Sendable {
    /// Whether the server can be reached.
    public var connectivity: Connectivity = .unknown
    /// What the engine is doing.
    public var phase: SyncPhase = .idle
    /// How far the current phase is.
    public var progress = SyncProgress()
    /// Outbox entries still to send (`pending`, `sending`, `waiting`).
    public var pending = 0
    /// Outbox entries the server rejected (`failed`), retryable or discardable.
    public var failed = 0
    /// Unresolved conflicts.
    public var conflicts = 0
    /// When a sync last succeeded.
    public var lastSuccess: Date?
    /// The last sync's error, cleared by a success.
    public var lastError: ErrorDetail?
    /// Whether unsynced writes are getting old (``RetentionPolicy``).
    public var retention: RetentionState = .ok
    /// When each subscribed scope was last pulled ("cached 3 h ago"); `nil` never.
    public var freshness: [String: Date?] = [:]
    /// Contracts the server refused with a 426 (by name): the app must be updated for them.
    public var updateRequired: [UpdateRequired] = []
    /// Why automatic syncs are not running (Wi-Fi only on an expensive path, the day's data
    /// budget used), or `nil`. ``SyncEngine/syncNow()`` still runs.
    public var automaticSyncsPaused: AutomaticSyncPause?
    /// The contracts whose rows have all been downloaded at least once (every subscribed scope
    /// delivering them pulled to its end, or its priority tier done on a first download): a
    /// fresh device lists its critical contracts here before its low ones.
    public var availableContracts: Set<String> = []
    /// Scopes pulled again from scratch because the server no longer had the deletes after
    /// their cursor (410 `cursor_expired`), with the synced rows the fresh pull did not deliver
    /// and the device therefore deleted; pending writes and open conflicts are always kept.
    /// Filled as re-pulls end; cleared when a full sync starts.
    public var repulledScopes: [String: Int] = [:]
    /// The server erased this user's data (`410 user_erased`): the store was wiped and the
    /// engine stopped. The app signs the user out; a new sign-in starts afresh.
    public var accountErased = false
    /// The live channel's state.
    public var live: LiveChannelState = .off
    /// The device's subscriptions, counted (``SyncEngine/subscribe(_:ttl:priority:)``).
    public var subscriptions = SubscriptionCounts()
    /// Why an automatic sync the engine knows it owes has not run yet: writes or pokes being
    /// gathered into one request, low-power mode holding it for the timer, a background window
    /// that ended with work left; `nil` when none waits. Cleared when a sync runs.
    public var deferred: SyncDeferral?
    /// What the last background window did (``SyncEngine/syncInBackgroundWindow(until:)``), or
    /// `nil` when none ran in this engine's life.
    public var lastBackgroundWindow: BackgroundSyncReport?

    /// The status of an engine that has done nothing yet.
    public init() {}
}

/// Why an automatic sync waits (``SyncStatus/deferred``).
public enum SyncDeferral: Hashable, Sendable {
    /// Local writes are gathered for ``SyncEngineConfiguration/pushDebounce``: the push that
    /// carries them all goes at `until`.
    case coalescingWrites(until: Date)
    /// The live channel said scopes changed; pokes arriving together share the one pull that
    /// goes at `until` (``SyncEngineConfiguration/livePokeDebounce``).
    case coalescingPokes(until: Date)
    /// Low-power mode (Apple's Low Power Mode, or ``SyncPreferences/lowPowerMode``): a local
    /// write, a poke, the foreground or a reconnect waits for the timer's next sync at
    /// `nextSyncAt` (`nil`: no timer; ``SyncEngine/syncNow()`` still runs). Urgent changes are
    /// still fetched.
    case lowPowerMode(nextSyncAt: Date?)
    /// A background window ended before the sync did: what is left waits for the next
    /// window or sync (``SyncStatus/lastBackgroundWindow`` says what).
    case backgroundWindowEnded
}

/// What one `syncNow()` did.
public enum SyncResult: Hashable, Sendable {
    case succeeded(pushed: Int, pulled: Int)
    case failed(TransportError, retryAt: Date?)
    case storeFailed(String)
}
