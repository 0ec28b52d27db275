public import ContractRuntime
public import Foundation
import GRDB
public import SyncProtocol

/// A write the server answered `conflicted`, with both rows (stored sealed).
public struct ConflictRecord: Hashable, Sendable, Identifiable {
    /// The store's id of the conflict.
    public var id: Int64
    /// The outbox entry that conflicted.
    public var seq: Int64
    /// The conflicted write's `client_mutation_id`.
    public var clientMutationId: String
    /// The contract name.
    public var entity: String
    /// The row's primary key.
    public var rowId: String
    /// What the conflicted write did.
    public var op: MutationOperation
    /// The device's row when the answer came (`nil` when the device deleted it).
    public var localRow: [String: JSONValue]?
    /// The server's row (`nil` when the server deleted it).
    public var serverRow: [String: JSONValue]?
    /// The server's version of its row.
    public var serverVersion: Int64?
    /// How the server described the outcome (`lost`, `deleted`, or none).
    public var serverResolution: String?
    /// How it was resolved; `nil` while open.
    public var resolution: ConflictResolution?
    /// When the device stored the conflict.
    public var detectedAt: Date
    /// When it was resolved; `nil` while open.
    public var resolvedAt: Date?

    /// The device's row as its generated type.
    public func local<E: ContractEntity>(as type: E.Type) throws(OfflineStoreError) -> E? {
        try Self.decode(E.self, localRow, id: rowId)
    }

    /// The server's row as its generated type.
    public func server<E: ContractEntity>(as type: E.Type) throws(OfflineStoreError) -> E? {
        try Self.decode(E.self, serverRow, id: rowId)
    }

    private static func decode<E: ContractEntity>(_ type: E.Type, _ row: [String: JSONValue]?, id: String) throws(OfflineStoreError) -> E? {
        guard let row else { return nil }
        do {
            return try WireCoding.decode(E.self, from: row)
        } catch {
            throw .unreadableRow(contract: E.descriptor.name, id: id, reason: error.reason)
        }
    }
}

/// How a conflict was resolved.
public enum ConflictResolution: String, Hashable, Sendable {
    /// The device's row was submitted again, based on the server's version.
    case keepMine = "keep_mine"
    /// The server's row replaced the device's.
    case takeTheirs = "take_theirs"
    /// A merged row was written and submitted.
    case merged
    /// The device's change was given up without taking anything in its place: an app settling a
    /// conflict its own way (``StoreTransaction/settleConflict(_:as:)``), such as the answers of
    /// an attempt at an assessment the server deleted.
    case discarded
}

/// What to do with a conflict (see ``OfflineStore/resolveConflict(_:merged:)`` for a merge).
public enum ConflictChoice: Hashable, Sendable {
    /// Submit the device's row again, based on the server's version ("submit anyway").
    case keepMine
    /// Replace the device's row with the server's ("discard mine").
    case takeTheirs
}
