import ContractRuntime
import Foundation
import GRDB
public import SyncProtocol

/// What a write appended to the outbox.
public struct QueuedWrite: Hashable, Sendable {
    public var seq: Int64
    public var clientMutationId: String
    public var entity: String
    public var op: MutationOperation
    public var rowId: String
}
