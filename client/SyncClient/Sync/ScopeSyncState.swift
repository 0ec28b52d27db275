import ContractRuntime
public import Foundation
import GRDB
public import SyncProtocol

/// A scope's sync bookkeeping (a row of `sync_state`).
public struct ScopeSyncState: Hashable, Sendable {
    /// The scope's key (`ops:team:team-1`).
    public var scopeKey: String
    /// The opaque cursor of the last page applied.
    public var cursor: String?
    /// When a page of the scope was last applied.
    public var lastPullAt: Date?
    /// When a push of a write in the scope last succeeded.
    public var lastPushAt: Date?
    /// When a sync of the scope last succeeded.
    public var lastSuccessAt: Date?
    /// The last sync's error, if it failed.
    public var lastError: ErrorDetail?
    /// When that error happened.
    public var lastErrorAt: Date?
}
