import ContractRuntime
public import Foundation
import GRDB
public import SyncProtocol

/// A scope's sync bookkeeping (a row of `sync_state`).
public struct ScopeSyncState: Hashable, Sendable {
    public var scopeKey: String
    /// The opaque cursor of the last page applied.
    public var cursor: String?
    public var lastPullAt: Date?
    public var lastPushAt: Date?
    public var lastSuccessAt: Date?
    public var lastError: ErrorDetail?
    public var lastErrorAt: Date?
}
