import ContractRuntime
import Foundation
import SyncProtocol

/// Server-side writes of whole rows (admin publishing, uploads, seeding): validation against
/// the contract, then, in one transaction, the row with a new scope sequence and `_version`,
/// and its audit entry. Devices never come through here; their writes go through push.
struct ContentWriter {
    let entity: EntityDescriptor
    let table: ContractTable
    /// The apps whose computed fields every written row gets.
    let apps: [any ServerApp]

    init(_ entity: EntityDescriptor, apps: [any ServerApp] = []) {
        self.entity = entity
        self.table = ContractTable(entity)
        self.apps = apps
    }

    /// Who writes, and when.
    struct Actor {
        var tenant: String
        var userID: String
        var deviceID: String
        var now: Timestamp
    }

    /// A validated row: the contract columns, and whether the server stamps the version field.
    struct Columns {
        var id: String
        var values: [String: ColumnValue]
        /// The row left the version field out: the server sets it (`updated_at` to now, an int
        /// version field to the new `_version`), and a write that changes nothing else is skipped.
        var stampsVersionField: Bool
    }

    /// Every field the server's table holds: what devices see, and the server-only ones (which
    /// an admin publishes and the server reads, but no device is ever sent).
    var storedFields: [FieldDescriptor] { entity.fields + entity.serverOnlyFields }

    /// The columns of a wire row in the contract's current version. Unknown fields are refused
    /// by name; an absent field takes its default, or null when optional.
    func columns(_ wire: [String: JSONValue]) throws(ServiceError) -> Columns {
        let known = Set(storedFields.map(\.name))
        if let unknown = wire.keys.sorted().first(where: { !known.contains($0) }) {
            throw Self.invalid("'\(unknown)' is not a field of \(entity.name) version \(entity.currentVersion)", field: unknown)
        }
        var values: [String: ColumnValue] = [:]
        var stamps = false
        for field in storedFields {
            var value = wire[field.name] ?? field.defaultValue
            if value == nil, field.isVersionField {
                stamps = true
                continue
            }
            if value == nil, field.isOptional { value = .null }
            guard let value else { throw Self.invalid("'\(field.name)' is required", field: field.name) }
            do {
                values[field.name] = try RowCodec.columnValue(value, for: field)
            } catch {
                throw Self.invalid(error.message, field: error.field)
            }
        }
        guard case .text(let id)? = values[entity.primaryKey], !id.isEmpty else {
            throw Self.invalid("'\(entity.primaryKey)' must be a non-empty text", field: entity.primaryKey)
        }
        return Columns(id: id, values: values, stampsVersionField: stamps)
    }

    static func invalid(_ message: String, field: String) -> ServiceError {
        ServiceError(status: 422, .invalidPayload, message, details: .object(["field": .string(field)]))
    }

    /// Writes the row unless it is already stored with the same content; returns the stored row
    /// and whether it was written. The apps compute their fields of it first
    /// (``ServerApp/computeFields(_:of:existing:now:)``).
    func put(
        _ columns: Columns, scopeKey: String, actor: Actor, operation: AuditOperation, in transaction: any StorageTransaction
    ) async throws -> (row: StoredRow, written: Bool) {
        try await transaction.lockScope(tenant: actor.tenant, scopeKey: scopeKey)
        let existing = try await transaction.row(in: table, tenant: actor.tenant, id: columns.id)
        var columns = columns
        for app in apps { app.computeFields(&columns.values, of: entity, existing: existing, now: actor.now) }
        if let existing, existing.integer("_deleted") == 0, existing["_scope_key"] == .text(scopeKey),
            storedFields.allSatisfy({ field in
                (columns.stampsVersionField && field.isVersionField) || existing[field.name] == columns.values[field.name]
            })
        {
            return (existing, false)
        }
        try await requireUniqueKeysFree(columns, tenant: actor.tenant, scopeKey: scopeKey, in: transaction)
        var row = StoredRow()
        for field in storedFields {
            row[field.name] = columns.values[field.name] ?? .null
        }
        let version = (existing?.integer("_version") ?? 0) + 1
        stamp(&row, version: version, now: actor.now, when: columns.stampsVersionField)
        return (
            try await store(
                row, previous: existing, scopeKey: scopeKey, version: version, deleted: false, actor: actor, operation: operation,
                outcome: .published, in: transaction), true
        )
    }

    /// Tombstones a live row, and the live rows of its `has_many` relations in the same scope
    /// (a unit's lessons, a lesson's assets) so devices drop them too. Returns the rows deleted,
    /// each with its table; `nil` when the row is absent or already deleted.
    func tombstone(
        id: String, actor: Actor, contracts: ContractCatalog, in transaction: any StorageTransaction
    ) async throws -> [(table: ContractTable, row: StoredRow)]? {
        guard let existing = try await lockedRow(id: id, tenant: actor.tenant, in: transaction), existing.integer("_deleted") == 0,
            case .text(let scopeKey) = existing["_scope_key"]
        else { return nil }
        var row = StoredRow()
        for field in storedFields {
            row[field.name] = existing[field.name]
        }
        let version = (existing.integer("_version") ?? 0) + 1
        stamp(&row, version: version, now: actor.now, when: true)
        var deleted = [
            (
                table,
                try await store(
                    row, previous: existing, scopeKey: scopeKey, version: version, deleted: true, actor: actor, operation: .delete,
                    outcome: .deleted, in: transaction)
            )
        ]
        for relation in entity.relations where relation.kind == .hasMany {
            guard let child = contracts.entity(named: relation.target), child.scope == entity.scope else { continue }
            let childWriter = ContentWriter(child, apps: apps)
            let children = try await transaction.rows(
                in: childWriter.table, tenant: actor.tenant,
                where: [relation.foreignKey: existing[entity.primaryKey], "_deleted": .integer(0)], limit: Int(Int32.max)
            )
            for childRow in children {
                guard let childID = childRow.text(child.primaryKey) else { continue }
                deleted += try await childWriter.tombstone(id: childID, actor: actor, contracts: contracts, in: transaction) ?? []
            }
        }
        return deleted
    }

    /// The stored row, read again once its scope is locked so no other transaction changes it
    /// meanwhile (a row never changes scope, so the key read before the lock stays right).
    func lockedRow(id: String, tenant: String, in transaction: any StorageTransaction) async throws -> StoredRow? {
        guard let key = try await transaction.row(in: table, tenant: tenant, id: id)?.text("_scope_key") else { return nil }
        try await transaction.lockScope(tenant: tenant, scopeKey: key)
        return try await transaction.row(in: table, tenant: tenant, id: id)
    }

    /// Sets the version field when the server owns it: now for a timestamp, the row's
    /// `_version` for an integer.
    private func stamp(_ row: inout StoredRow, version: Int64, now: Timestamp, when stamps: Bool) {
        guard stamps, let name = entity.versionField, let field = entity.field(named: name) else { return }
        switch field.kind {
        case .timestamp: row[name] = .integer(now.millisecondsSince1970)
        case .int: row[name] = .integer(version)
        default: break
        }
    }

    /// A write must not take a unique key (a lesson's place in its unit) held by another live
    /// row: storage replaces rows by primary key, and a unique collision would remove the other
    /// row without a tombstone.
    private func requireUniqueKeysFree(_ columns: Columns, tenant: String, scopeKey: String, in transaction: any StorageTransaction) async throws {
        for index in entity.indexes where index.isUnique {
            var conditions: [String: ColumnValue] = ["_deleted": .integer(0), "_scope_key": .text(scopeKey)]
            for name in index.fields {
                conditions[name] = columns.values[name] ?? .null
            }
            let holders = try await transaction.rows(in: table, tenant: tenant, where: conditions, limit: 2)
            if let holder = holders.first(where: { $0.text(entity.primaryKey) != columns.id }) {
                let values = index.fields.map { "\($0) \(RowShaping.currentWireRow(holder, entity: entity)[$0].map(CanonicalJSON.text) ?? "null")" }
                throw Self.invalid(
                    "\(entity.name) '\(holder.text(entity.primaryKey) ?? "")' already has \(values.joined(separator: ", "))",
                    field: index.fields[0]
                )
            }
        }
    }

    private func store(
        _ fields: StoredRow, previous: StoredRow?, scopeKey: String, version: Int64, deleted: Bool, actor: Actor, operation: AuditOperation,
        outcome: AuditOutcome,
        in transaction: any StorageTransaction
    ) async throws -> StoredRow {
        var row = fields
        let sequence = try await transaction.nextScopeSequence(tenant: actor.tenant, scopeKey: scopeKey)
        row["_tenant_id"] = .text(actor.tenant)
        row["_scope_key"] = .text(scopeKey)
        row["_seq"] = .integer(sequence)
        row["_version"] = .integer(version)
        row["_schema_version"] = .integer(Int64(entity.currentVersion))
        row["_hlc"] = .null
        row["_field_clocks"] = .null
        row["_deleted"] = .integer(deleted ? 1 : 0)
        row["_updated_at"] = .integer(actor.now.millisecondsSince1970)
        row["_updated_by"] = .text(actor.userID)
        row[FieldSeqs.column] = FieldSeqs.column(
            writing: row, previous: previous, fields: entity.fields, sequence: sequence, version: version, deleted: deleted
        )
        try await transaction.upsert(row, in: table)
        let detail: JSONValue = .object([
            "row": .object(RowShaping.currentWireRow(row, entity: entity)), "scope_key": .string(scopeKey),
            "seq": .int(sequence), "version": .int(version),
        ])
        try await transaction.appendAudit(
            AuditEntry(
                tenant: actor.tenant, recordedAt: actor.now.millisecondsSince1970, userID: actor.userID, deviceID: actor.deviceID,
                entity: entity.name, rowID: row.text(entity.primaryKey) ?? "", operation: operation, outcome: outcome,
                detail: CanonicalJSON.text(detail)
            ))
        return row
    }
}
