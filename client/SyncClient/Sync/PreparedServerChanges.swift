import ContractRuntime
import Contracts
import GRDB

/// A server entity row turned into its table's column values, ready to be upserted with
/// ``OfflineStore/serverUpsertSQL(_:)`` (its `_synced_at` is added by the transaction that
/// stores it).
struct PreparedServerRow: Sendable {
    var id: String
    /// The contract fields in the entity's order, then `_schema_version` and `_server_version`.
    var values: [DatabaseValue]
}

/// ``ServerChanges`` with their entity rows already turned into column values: the work that
/// needs no database (reshaping older versions, checking each value against its contract,
/// sealing encrypted fields) done before the write transaction, off the one connection that
/// writes. The pull pipeline prepares a page while the previous pages are stored.
struct PreparedServerChanges: Sendable {
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

    /// Upserts and deletes.
    var rowCount: Int {
        upserts.reduce(0) { $0 + $1.rows.count } + deletes.values.reduce(0) { $0 + $1.count }
    }
}

extension OfflineStore {
    /// `changes` with every entity row turned into column values (see ``PreparedServerChanges``).
    func prepare(_ changes: ServerChanges) -> PreparedServerChanges {
        let upserts = changes.upserts.keys.sorted().map { name in
            (name: name, rows: prepareRows(name, changes.upserts[name] ?? [], schemaVersion: changes.schemaVersions[name]))
        }
        return PreparedServerChanges(upserts: upserts, deletes: changes.deletes, scopeKey: changes.scopeKey, cursor: changes.cursor)
    }

    /// One contract's rows (wire form of `schemaVersion`, the current one when `nil`) prepared.
    func prepareRows(_ name: String, _ rows: [JSONValue], schemaVersion: Int?) -> PreparedServerChanges.Rows {
        if let entity = ContractRegistry.entity(named: name) {
            let version = schemaVersion ?? entity.currentVersion
            do {
                var prepared: [PreparedServerRow] = []
                prepared.reserveCapacity(rows.count)
                for row in rows {
                    guard case .object(let wire) = row else {
                        throw OfflineStoreError.invalidValue(contract: name, field: "*", reason: "a row must be a JSON object")
                    }
                    prepared.append(try prepareServerRow(entity, wire: wire, schemaVersion: version, serverVersion: nil))
                }
                return .entity(entity, prepared)
            } catch {
                return .invalid(Self.map(error), count: rows.count)
            }
        }
        if let event = ContractRegistry.event(named: name) {
            var envelopes: [[String: JSONValue]] = []
            envelopes.reserveCapacity(rows.count)
            for row in rows {
                guard case .object(let envelope) = row else {
                    return .invalid(.invalidValue(contract: name, field: "*", reason: "an event must be a JSON object"), count: rows.count)
                }
                envelopes.append(envelope)
            }
            return .events(event, envelopes)
        }
        return .unknown(count: rows.count)
    }

    /// A server row (wire form of `schemaVersion`) as the column values of its table: reshaped
    /// to the current version, put in its ``RowSlots`` and prepared as ``PullPageDecoder`` does.
    func prepareServerRow(
        _ entity: EntityDescriptor, wire shaped: [String: JSONValue], schemaVersion: Int, serverVersion: Int64?
    ) throws -> PreparedServerRow {
        let wire = Self.currentShape(shaped, entity: entity, version: schemaVersion)
        let layout = RowSlots.of(entity)
        let slots = entity.fields.map { wire[$0.name] } + [nil]
        return try prepareServerRow(
            entity, slots: slots, layout: layout, schemaVersion: schemaVersion,
            serverVersion: serverVersion ?? Self.serverVersion(of: shaped, entity: entity)
        )
    }
}
