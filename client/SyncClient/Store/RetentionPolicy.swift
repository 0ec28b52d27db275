public import Foundation
import SyncProtocol

/// How long writes may wait for the server (docs/client.md).
public struct RetentionPolicy: Hashable, Sendable {
    /// Unsynced writes older than this raise ``RetentionState/syncNeeded(since:)``.
    public var syncNeededAfter: TimeInterval
    /// Unsynced writes older than this make the store refuse new writes
    /// (``OfflineStoreError/readOnlyUntilSync(since:)``) until a sync succeeds.
    public var readOnlyAfter: TimeInterval

    /// A policy with the given ages, in seconds.
    public init(syncNeededAfter: TimeInterval, readOnlyAfter: TimeInterval) {
        self.syncNeededAfter = syncNeededAfter
        self.readOnlyAfter = readOnlyAfter
    }

    /// 7 days, then read-only after 14 days.
    public static let standard = RetentionPolicy(syncNeededAfter: 7 * 86_400, readOnlyAfter: 14 * 86_400)
}

/// Whether unsynced writes have waited too long.
public enum RetentionState: Hashable, Sendable {
    /// Nothing waits longer than ``RetentionPolicy/syncNeededAfter``.
    case ok
    /// Writes have waited since `since`, longer than ``RetentionPolicy/syncNeededAfter``: ask the
    /// user to get online.
    case syncNeeded(since: Date)
    /// Writes have waited since `since`, longer than ``RetentionPolicy/readOnlyAfter``: new writes
    /// are refused until a sync succeeds.
    case readOnly(since: Date)
}
