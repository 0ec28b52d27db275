import ContractRuntime
import Foundation
import SyncProtocol

@testable import SyncServer

/// Rows written straight into the live server's storage, as a push would have written them.
extension LiveServer {
    /// Writes (or replaces) a row of `entity` in tenant `acme` under `scopeKey`: the next scope
    /// sequence, `_version` + 1; fields left out take their default.
    func storeRow(_ entity: EntityDescriptor, _ fields: [String: JSONValue], scopeKey: String) async throws {
        try await storage.write { transaction in
            var row = StoredRow()
            for field in entity.fields {
                row[field.name] = try RowCodec.columnValue(fields[field.name] ?? field.defaultValue ?? .null, for: field)
            }
            guard case .string(let id)? = fields[entity.primaryKey] else { return }
            let existing = try await transaction.row(in: ContractTable(entity), tenant: "acme", id: id)
            row["_tenant_id"] = .text("acme")
            row["_scope_key"] = .text(scopeKey)
            row["_seq"] = .integer(try await transaction.nextScopeSequence(tenant: "acme", scopeKey: scopeKey))
            row["_version"] = .integer((existing?.integer("_version") ?? 0) + 1)
            row["_schema_version"] = .integer(Int64(entity.currentVersion))
            row["_deleted"] = .integer(0)
            row["_updated_at"] = .integer(1_769_846_400_000)
            row["_updated_by"] = .text("test")
            try await transaction.upsert(row, in: ContractTable(entity))
        }
    }
}
