import ContractRuntime
import Foundation
import GRDB
import SyncProtocol

/// Counts of outbox entries by status.
public struct OutboxCounts: Hashable, Sendable {
    /// The number of entries in each status; a status with none may be missing.
    public var byStatus: [OutboxStatus: Int]

    /// The number of entries in `status`, 0 when there are none.
    public subscript(_ status: OutboxStatus) -> Int { byStatus[status] ?? 0 }

    /// Entries still to send (`pending`, `sending`, `waiting`).
    public var unsent: Int { OutboxStatus.unsent.reduce(0) { $0 + self[$1] } }
    /// Entries that need the user (`failed`, `conflicted`, `quarantined`).
    public var needingAttention: Int { self[.failed] + self[.conflicted] + self[.quarantined] }
}
