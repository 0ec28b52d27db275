import ContractRuntime
import Crypto
import Foundation
import SyncProtocol

/// Writes rows and audit entries inside a push's transaction, with the bookkeeping every write
/// gets: the next Lamport number of the row's scope in `_seq`, `_version` + 1, the writer's
/// `_schema_version`, `_updated_at` (server clock) and `_updated_by`, and the contract's version
/// field stamped (an int version field becomes the new `_version`, a timestamp one the server
/// clock).
struct PushWriter {
    let transaction: any StorageTransaction
    let identity: DeviceIdentity
    let contracts: ServerContracts
    let now: Timestamp
    /// How far a device's clock may be from the server's (``ServerConfiguration/maximumClockSkew``):
    /// the tolerance of every check of a device's time against the server's.
    var clockSkew: Duration = PushService.defaultMaximumClockSkew

    /// One row to store.
    struct RowWrite {
        var entity: EntityDescriptor
        var id: String
        /// Every contract column.
        var columns: [String: ColumnValue]
        var scopeKey: String
        var previous: StoredRow?
        var schemaVersion: Int
        var hlc: String?
        var fieldClocks: String?
        var deleted: Bool = false
        var updatedBy: String
    }

    /// The sync metadata columns every stored row has, after the contract's fields.
    static let metadataColumns = [
        "_tenant_id", "_scope_key", "_seq", "_version", "_schema_version", "_hlc", "_field_clocks", "_deleted", "_updated_at", "_updated_by",
        FieldSeqs.column,
    ]

    /// Stores the row and returns it as stored.
    @discardableResult
    func write(_ write: RowWrite) async throws -> StoredRow {
        let entity = write.entity
        let shape = contracts.rowShape(entity)
        let version = (write.previous?.integer("_version") ?? 0) + 1
        let sequence = try await transaction.nextScopeSequence(tenant: identity.tenant, scopeKey: write.scopeKey)
        var values: [ColumnValue] = []
        values.reserveCapacity(entity.fields.count + entity.serverOnlyFields.count + Self.metadataColumns.count)
        for field in entity.fields { values.append(write.columns[field.name] ?? .null) }
        // No device sends a server-only field and no reducer's value holds one: the row keeps
        // what the server stored (storage replaces the whole row), a new row takes the default.
        for (index, field) in entity.serverOnlyFields.enumerated() {
            values.append(write.columns[field.name] ?? write.previous.map { $0[field.name] } ?? shape.serverOnlyDefaults[index])
        }
        values.append(.text(identity.tenant))
        values.append(.text(write.scopeKey))
        values.append(.integer(sequence))
        values.append(.integer(version))
        values.append(.integer(Int64(write.schemaVersion)))
        values.append(write.hlc.map(ColumnValue.text) ?? .null)
        values.append(write.fieldClocks.map(ColumnValue.text) ?? .null)
        values.append(.integer(write.deleted ? 1 : 0))
        values.append(.integer(now.millisecondsSince1970))
        values.append(.text(write.updatedBy))
        values.append(.null)
        if let position = shape.primaryKey { values[position] = .text(write.id) }
        if let stamp = shape.versionStamp { values[stamp.position] = .integer(stamp.takesClock ? now.millisecondsSince1970 : version) }
        var row = StoredRow(layout: shape.layout, values: values)
        if shape.primaryKey == nil { row[entity.primaryKey] = .text(write.id) }
        // When each field last changed, for pulls of only the changed fields (``FieldSeqs``).
        row[FieldSeqs.column] = FieldSeqs.column(
            writing: row, previous: write.previous, fields: entity.fields, sequence: sequence, version: version, deleted: write.deleted
        )
        try await transaction.upsert(row, in: ContractTable(entity))
        return row
    }

    /// Refuses a row that would take a value another row of its scope already holds in a
    /// unique index (uniqueness holds per scope, so the answer only ever names a row the device
    /// may read). Checked before writing: the database would otherwise fail the whole push, or,
    /// with `INSERT OR REPLACE`, silently drop the other row.
    func uniquenessProblem(_ columns: [String: ColumnValue], id: String, entity: EntityDescriptor, scopeKey: String) async throws -> ErrorDetail? {
        for index in entity.indexes where index.isUnique {
            var conditions: [String: ColumnValue] = ["_scope_key": .text(scopeKey)]
            for field in index.fields { conditions[field] = columns[field] ?? .null }
            // NULLs never collide in a unique index.
            if conditions.values.contains(.null) { continue }
            let clashing = try await transaction.rows(in: ContractTable(entity), tenant: identity.tenant, where: conditions, limit: 2)
            if let other = clashing.first(where: { $0.text(entity.primaryKey) != id }) {
                let values = index.fields.map { field in
                    "\(field) = \(CanonicalJSON.text(RowCodec.wireValue(columns[field] ?? .null, for: entity.field(named: field)!)))"
                }
                return ErrorDetail(
                    code: .invalidPayload,
                    message:
                        "\(entity.name) '\(other.text(entity.primaryKey) ?? "?")' already has \(values.joined(separator: ", ")), which must be unique",
                    details: .object(["fields": .object(Dictionary(uniqueKeysWithValues: index.fields.map { ($0, .string("must be unique")) }))])
                )
            }
        }
        return nil
    }

    /// Appends an audit entry; `detail` is canonical JSON.
    func audit(entity: String, rowID: String, operation: AuditOperation, outcome: AuditOutcome, detail: String) async throws {
        try await transaction.appendAudit(
            AuditEntry(
                tenant: identity.tenant, recordedAt: now.millisecondsSince1970, userID: identity.userID,
                deviceID: identity.deviceID, entity: entity, rowID: rowID, operation: operation, outcome: outcome, detail: detail
            )
        )
    }

    /// Lowercase hex SHA-256 of a JSON value's canonical text: how events are hashed
    /// (``EventEnvelope/hash(of:)``), and how the audit log names a payload without copying it.
    static func sha256(_ value: JSONValue) -> String {
        Hex.string(SHA256.hash(data: CanonicalJSON.bytes(value)))
    }
}

/// Where an entity's stored row keeps each column, worked out once per entity: building a
/// row then fills an array in a shared layout instead of hashing column names.
struct RowShape: Sendable {
    let layout: StoredRow.Layout
    /// `nil` for a contract whose primary key is not among its fields (the compiler refuses
    /// one; the row then gains the column).
    let primaryKey: Int?
    /// The version field's position, and whether it takes the server clock (a timestamp)
    /// rather than the new `_version` (an int).
    let versionStamp: (position: Int, takesClock: Bool)?
    /// The column values of the server-only fields in a new row: their defaults, else null.
    let serverOnlyDefaults: [ColumnValue]

    init(_ entity: EntityDescriptor) {
        layout = StoredRow.Layout(entity.fields.map(\.name) + entity.serverOnlyFields.map(\.name) + PushWriter.metadataColumns)
        serverOnlyDefaults = entity.serverOnlyFields.map { field in
            field.defaultValue.flatMap { try? RowCodec.columnValue($0, for: field) } ?? .null
        }
        primaryKey = entity.fields.firstIndex { $0.name == entity.primaryKey }
        versionStamp = entity.fields.firstIndex { $0.name == entity.versionField }.flatMap { position in
            switch entity.fields[position].kind {
            case .int: (position, false)
            case .timestamp: (position, true)
            default: nil
            }
        }
    }
}
