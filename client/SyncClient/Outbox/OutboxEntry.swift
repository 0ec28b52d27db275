import ContractRuntime
public import Foundation
import GRDB
public import SyncProtocol

/// Where an outbox entry is in its life (docs/client.md): `pending → sending → done`, or
/// `→ waiting` (retry at ``OutboxEntry/nextAttemptAt``), `→ conflicted` (kept for the app to
/// resolve), `→ failed` (refused for good: kept, visible, retryable or discardable), or
/// `quarantined` (its HMAC or seal did not verify: never sent).
public enum OutboxStatus: String, Hashable, Sendable, CaseIterable {
    case pending
    case sending
    case done
    case waiting
    case conflicted
    case failed
    case quarantined

    /// Not yet answered by the server: what the push loop still has to send.
    public static let unsent: [OutboxStatus] = [.pending, .sending, .waiting]
    /// Writes that are not (or not successfully) on the server: what sign-out protects.
    public static let unsynced: [OutboxStatus] = [.pending, .sending, .waiting, .failed, .conflicted, .quarantined]
    /// Writes the device still holds for their row (sent or not, refused or in conflict): a
    /// pulled row, a re-pull's sweep and eviction leave the row alone.
    static let keepingTheirRow: [OutboxStatus] = [.pending, .sending, .waiting, .conflicted, .failed]
    /// Writes whose push sequence is handed out again when the server did not take it.
    static let renumberable: [OutboxStatus] = [.pending, .sending, .waiting, .quarantined]

    /// The status as a SQL literal: `'pending'`.
    var sql: String { "'\(rawValue)'" }

    /// Statuses as a SQL list: `('pending', 'sending', 'waiting')`.
    static func sql(_ statuses: [OutboxStatus]) -> String {
        "(" + statuses.map(\.sql).joined(separator: ", ") + ")"
    }
}

/// A queued write as the app and the sync engine see it (its payload stays sealed; see
/// the engine's `pendingMutations(limit:)` for the unsealed form).
public struct OutboxEntry: Hashable, Sendable, Identifiable {
    /// Local order of the write, per client: 1, 2, 3, …
    public var seq: Int64
    /// The ULID the server deduplicates on.
    public var clientMutationId: String
    /// The contract name.
    public var entity: String
    /// What the write does: create, update, patch or delete a row, or record an event.
    public var op: MutationOperation
    /// The row's primary key, or the event's id.
    public var rowId: String
    /// Where the entry stands: pending, sending, done, waiting, conflicted, failed or quarantined.
    public var status: OutboxStatus
    /// The `seq` it travels under on the wire, once handed to the sender (equal to ``seq``
    /// unless a quarantined entry was skipped).
    public var pushSeq: Int64?
    /// How many times it was handed to the sender.
    public var attempts: Int
    /// For `waiting`: not before this.
    public var nextAttemptAt: Date?
    /// Why it is `failed`, `waiting`, `conflicted` or `quarantined`.
    public var lastError: ErrorDetail?
    /// The server version the write was based on (its `base_version`), if any.
    public var baseVersion: Int64?
    /// The hybrid logical clock reading of the write, if it has one.
    public var hlc: String?
    /// The contract version the write was made with.
    public var schemaVersion: Int
    /// When the write was queued.
    public var createdAt: Date
    /// When the entry last changed.
    public var updatedAt: Date

    /// The entry's identity: its `seq`.
    public var id: Int64 { seq }
}
