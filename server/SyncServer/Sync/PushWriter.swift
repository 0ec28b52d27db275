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

    /// Stores the row and returns it as stored.
    @discardableResult
    func write(_ write: RowWrite) async throws -> StoredRow {
        let entity = write.entity
        var row = StoredRow()
        for field in entity.fields { row[field.name] = write.columns[field.name] ?? .null }
        row[entity.primaryKey] = .text(write.id)
        let version = (write.previous?.integer("_version") ?? 0) + 1
        if let versionField = entity.versionField, let field = entity.fields.first(where: { $0.name == versionField }) {
            switch field.kind {
            case .int: row[versionField] = .integer(version)
            case .timestamp: row[versionField] = .integer(now.millisecondsSince1970)
            default: break
            }
        }
        row["_tenant_id"] = .text(identity.tenant)
        row["_scope_key"] = .text(write.scopeKey)
        row["_seq"] = .integer(try await transaction.nextScopeSequence(tenant: identity.tenant, scopeKey: write.scopeKey))
        row["_version"] = .integer(version)
        row["_schema_version"] = .integer(Int64(write.schemaVersion))
        row["_hlc"] = write.hlc.map(ColumnValue.text) ?? .null
        row["_field_clocks"] = write.fieldClocks.map(ColumnValue.text) ?? .null
        row["_deleted"] = .integer(write.deleted ? 1 : 0)
        row["_updated_at"] = .integer(now.millisecondsSince1970)
        row["_updated_by"] = .text(write.updatedBy)
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
