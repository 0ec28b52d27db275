import ContractRuntime
import Foundation
import GRDB
public import SyncProtocol

/// What a write appended to the outbox.
public struct QueuedWrite: Hashable, Sendable {
    /// The outbox entry's local order.
    public var seq: Int64
    /// The ULID the server deduplicates the write on.
    public var clientMutationId: String
    /// The contract name.
    public var entity: String
    /// What the write does.
    public var op: MutationOperation
    /// The row's primary key, or the event's id.
    public var rowId: String
}
