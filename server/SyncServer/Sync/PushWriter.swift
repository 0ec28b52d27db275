import ContractRuntime
import Contracts
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
    let now: Timestamp

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
    private static let metadataColumns = [
        "_tenant_id", "_scope_key", "_seq", "_version", "_schema_version", "_hlc", "_field_clocks", "_deleted", "_updated_at", "_updated_by",
    ]

    /// One column layout per entity, shared by the rows written: building a row then fills an
    /// array instead of hashing each column name into a layout of its own.
    private static let layouts: [String: StoredRow.Layout] = Dictionary(
        uniqueKeysWithValues: ContractRegistry.entities.map { ($0.name, StoredRow.Layout($0.fields.map(\.name) + metadataColumns)) }
    )

    /// Stores the row and returns it as stored.
    @discardableResult
    func write(_ write: RowWrite) async throws -> StoredRow {
        let entity = write.entity
        let version = (write.previous?.integer("_version") ?? 0) + 1
        var values = entity.fields.map { write.columns[$0.name] ?? .null }
        values += [
            .text(identity.tenant), .text(write.scopeKey),
            .integer(try await transaction.nextScopeSequence(tenant: identity.tenant, scopeKey: write.scopeKey)), .integer(version),
            .integer(Int64(write.schemaVersion)), write.hlc.map(ColumnValue.text) ?? .null, write.fieldClocks.map(ColumnValue.text) ?? .null,
            .integer(write.deleted ? 1 : 0), .integer(now.millisecondsSince1970), .text(write.updatedBy),
        ]
        let layout = Self.layouts[entity.name] ?? StoredRow.Layout(entity.fields.map(\.name) + Self.metadataColumns)
        var row = StoredRow(layout: layout, values: values)
        row[entity.primaryKey] = .text(write.id)
        if let versionField = entity.versionField, let field = entity.fields.first(where: { $0.name == versionField }) {
            switch field.kind {
            case .int: row[versionField] = .integer(version)
            case .timestamp: row[versionField] = .integer(now.millisecondsSince1970)
            default: break
            }
        }
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
                    message: "\(entity.name) '\(other.text(entity.primaryKey) ?? "?")' already has \(values.joined(separator: ", ")), which must be unique",
                    details: .object(["fields": .object(Dictionary(uniqueKeysWithValues: index.fields.map { ($0, .string("must be unique")) }))])
                )
            }
        }
        return nil
    }

    /// Appends an audit entry whose detail is the canonical JSON of `detail`.
    func audit(entity: String, rowID: String, operation: String, outcome: String, detail: [String: JSONValue]) async throws {
        try await transaction.appendAudit(
            AuditEntry(
                tenant: identity.tenant, recordedAt: now.millisecondsSince1970, userID: identity.userID,
                deviceID: identity.deviceID, entity: entity, rowID: rowID, operation: operation, outcome: outcome,
                detail: CanonicalJSON.text(.object(detail))
            )
        )
    }

    /// Lowercase hex SHA-256 of a JSON value's canonical text: how events are hashed
    /// (``EventEnvelope/hash(of:)``), and how the audit log names a payload without copying it.
    static func sha256(_ value: JSONValue) -> String {
        sha256(Data(CanonicalJSON.text(value).utf8))
    }

    static func sha256(_ data: Data) -> String {
        Hex.sha256(data)
    }
}
