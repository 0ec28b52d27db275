import ContractRuntime
public import Foundation
import SyncProtocol

/// Settings of a ``SyncEngine``.
public struct SyncEngineConfiguration: Sendable {
    /// The scopes pulled on every sync (`user`, `content`, `team`, or full keys like `ops:team:team-1`).
    public var scopes: [String]
    /// Outbox entries sent per push request at most.
    public var pushBatchSize: Int
    /// Rows per pull page (`nil`: the server's default).
    public var pullPageSize: Int?
    /// Pulled rows committed together: pages are stored in one transaction (with the last
    /// page's cursor) until they hold this many rows or the scope's last page came (the first
    /// batches of a pull smaller: one page, then as many rows as the pull stored so far). The same
    /// number of rows may wait, fetched ahead, while a commit runs. Fewer, larger commits
    /// write each database page once per commit instead of once per pulled page.
    public var pullCommitRows: Int
    /// When to try again after a failed sync.
    public var retry: RetryPolicy
    /// Whether a retryable failure schedules the next attempt by itself.
    public var retriesAutomatically: Bool
    /// Seconds between syncs while online, once ``SyncEngine/start(connectivity:)`` ran (15 min),
    /// unless the store holds saved ``SyncPreferences`` (whose interval then counts).
    public var periodicInterval: TimeInterval
    /// Seconds from a local write (while online, once ``SyncEngine/start(connectivity:)`` ran)
    /// to the push that sends it; writes made meanwhile go in the same push. 2 s by default.
    public var pushDebounce: TimeInterval
    /// How the engine waits for the periodic timer and retries (real time unless a test injects one).
    public var sleeper: any Sleeper
    /// Whether the engine keeps the server's live channel open while online, once
    /// ``SyncEngine/start(connectivity:)`` ran, and syncs when it says a scope changed (true).
    /// Without one (the transport or server has none) it syncs on its timer alone.
    public var usesLiveChannel: Bool
    /// Seconds from a live channel's poke to the sync it starts; pokes meanwhile share it (0.05 s).
    public var livePokeDebounce: TimeInterval
    /// The most bytes of a file sent in one upload request (`PATCH`), what an upload holds in
    /// memory and what a lost connection costs it at most; and a download's first range (4 MiB).
    public var fileChunkBytes: Int = 4 << 20
    /// The largest range a download asks for in one `GET` (64 MiB). A download's ranges start at
    /// ``fileChunkBytes`` and double up to this: a request costs as much again as a few MiB on
    /// the way. A range arrives into a file, never into memory; a lost connection costs the
    /// range on its way, and the next attempt starts again from ``fileChunkBytes``.
    public var fileRangeLimitBytes: Int = 64 << 20
    /// How a background window is spent: the safety margin before its deadline and the
    /// least a request is expected to take (``SyncEngine/syncInBackgroundWindow(until:)``).
    public var backgroundWindow = BackgroundWindowSettings()

    /// A configuration pulling `scopes`; every other setting has its default.
    public init(
        scopes: [String], pushBatchSize: Int = 100, pullPageSize: Int? = nil, pullCommitRows: Int = 5_000,
        retry: RetryPolicy = RetryPolicy(), retriesAutomatically: Bool = true, periodicInterval: TimeInterval = 15 * 60,
        pushDebounce: TimeInterval = 2, sleeper: any Sleeper = TaskSleeper(), usesLiveChannel: Bool = true,
        livePokeDebounce: TimeInterval = 0.05
    ) {
        self.scopes = scopes
        self.pushBatchSize = pushBatchSize
        self.pullPageSize = pullPageSize
        self.pullCommitRows = pullCommitRows
        self.retry = retry
        self.retriesAutomatically = retriesAutomatically
        self.periodicInterval = periodicInterval
        self.pushDebounce = pushDebounce
        self.sleeper = sleeper
        self.usesLiveChannel = usesLiveChannel
        self.livePokeDebounce = livePokeDebounce
    }
}
