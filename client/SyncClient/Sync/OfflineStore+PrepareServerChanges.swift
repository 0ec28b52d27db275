import ContractRuntime
import Foundation
import GRDB
import SyncProtocol

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
        if let entity = contracts.entity(named: name) {
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
        if let event = contracts.event(named: name) {
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
        let slots = entity.fields.map { wire[$0.name] } + [shaped[Self.serverVersionKey], shaped[Self.baseVersionKey]]
        return try prepareServerRow(
            entity, slots: slots, layout: layout, schemaVersion: schemaVersion,
            serverVersion: serverVersion ?? Self.serverVersion(of: shaped, entity: entity)
        )
    }
}

extension OfflineStore {
    /// A row read into its ``RowSlots`` (in the shape of the entity's current version) as the
    /// column values of its table, stored as `schemaVersion`; the server version is
    /// `serverVersion`, else the row's own (`_server_version`, or an `int` version field).
    /// A row with `_base_version` carries only its changed fields (``PreparedServerRow/changes``):
    /// only those are checked and turned into column values; it must be of the current version
    /// and name its server version.
    func prepareServerRow(
        _ entity: EntityDescriptor, slots: [JSONValue?], layout: RowSlots, schemaVersion: Int, serverVersion: Int64? = nil
    ) throws -> PreparedServerRow {
        guard layout.primaryKey >= 0, let key = slots[layout.primaryKey],
            let id = codec.columns.keyText(key, kind: entity.fields[layout.primaryKey].kind)
        else {
            throw OfflineStoreError.invalidValue(contract: entity.name, field: entity.primaryKey, reason: "is missing")
        }
        var changes: PreparedServerRow.Changes?
        if let base = slots[layout.baseVersion] {
            guard case .int(let baseVersion) = base, baseVersion >= 0 else {
                throw OfflineStoreError.invalidValue(contract: entity.name, field: Self.baseVersionKey, reason: "must be a whole number")
            }
            guard schemaVersion == entity.currentVersion else {
                throw OfflineStoreError.invalidValue(
                    contract: entity.name, field: Self.baseVersionKey, reason: "changed fields only come in the current version's shape")
            }
            guard case .int? = slots[layout.serverVersion] else {
                throw OfflineStoreError.invalidValue(contract: entity.name, field: Self.serverVersionKey, reason: "is missing")
            }
            changes = PreparedServerRow.Changes(baseVersion: baseVersion, present: entity.fields.indices.map { slots[$0] != nil })
        }
        var values: [DatabaseValue] = []
        values.reserveCapacity(entity.fields.count + 2)
        for (index, field) in entity.fields.enumerated() {
            if changes != nil, slots[index] == nil {
                // Not sent: the device's own value goes here when the row is stored.
                values.append(.null)
                continue
            }
            let value = slots[index] ?? field.defaultValue ?? .null
            values.append(try codec.columnValue(value, for: field, contract: entity.name, table: entity.table, id: id, mode: .read))
        }
        values.append(schemaVersion.databaseValue)
        var version = serverVersion
        if version == nil, case .int(let stamped)? = slots[layout.serverVersion] {
            version = stamped
        } else if version == nil, let field = layout.intVersionField, case .int(let stamped)? = slots[field] {
            version = stamped
        }
        values.append(version?.databaseValue ?? .null)
        return PreparedServerRow(id: id, values: values, changes: changes)
    }
}
