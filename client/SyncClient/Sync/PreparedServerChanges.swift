import ContractRuntime
import GRDB

/// A server entity row turned into its table's column values, ready to be upserted with
/// ``OfflineStore/serverUpsertSQL(_:)`` (its `_synced_at` is added by the transaction that
/// stores it).
struct PreparedServerRow: Sendable {
    var id: String
    /// The contract fields in the entity's order, then `_schema_version` and `_server_version`.
    var values: [DatabaseValue]
    /// Set when the server sent only the fields that changed since the device's cursor
    /// (`fields=changed`): ``values`` holds those, the others are placeholders taken from the
    /// row the device holds when it is stored.
    var changes: Changes?

    /// What a row carrying only its changed fields needs to be merged.
    struct Changes: Sendable {
        /// The server version the changes apply to: the device must hold the row at it.
        var baseVersion: Int64
        /// For each contract field, whether the row carries it.
        var present: [Bool]
    }
}

/// ``ServerChanges`` with their entity rows already turned into column values: the work that
/// needs no database (reshaping older versions, checking each value against its contract,
/// sealing encrypted fields) done before the write transaction, off the one connection that
/// writes. The pull pipeline prepares a page while the previous pages are stored.
package struct PreparedServerChanges: Sendable {
    /// One contract's upserted rows.
    enum Rows: Sendable {
        case entity(EntityDescriptor, [PreparedServerRow])
        case events(EventDescriptor, [[String: JSONValue]])
        /// A contract this build does not know.
        case unknown(count: Int)
        /// A row does not fit its contract: storing the changes throws this, unless the
        /// contract is held for an update (its rows are skipped then).
        case invalid(OfflineStoreError, count: Int)

        var count: Int {
            switch self {
            case .entity(_, let rows): rows.count
            case .events(_, let rows): rows.count
            case .unknown(let count), .invalid(_, let count): count
            }
        }
    }

    /// By contract name, in name order.
    var upserts: [(name: String, rows: Rows)]
    var deletes: [String: [String]]
    var scopeKey: String?
    var cursor: String?
    /// The subscription whose page these are, if any (``OfflineStore/applySubscriptionPage(_:)``).
    var subscription: SubscriptionTarget?

    /// What a subscription page stores besides its rows.
    struct SubscriptionTarget: Sendable {
        var id: String
        var cursor: String?
        var hasMore: Bool
        var leaves: [String: [String]]
    }

    /// Upserts and deletes.
    var rowCount: Int {
        upserts.reduce(0) { $0 + $1.rows.count } + deletes.values.reduce(0) { $0 + $1.count }
    }
}
