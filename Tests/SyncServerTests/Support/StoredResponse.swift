import ContractRuntime
import Contracts
import Foundation

@testable import SyncServer

/// `AssessmentResponse` rows as storage holds them, sync metadata included (tenant `t`), for
/// tests that write straight through a storage transaction.
enum StoredResponse {
    static let contract = ContractRegistry.entity(named: "AssessmentResponse")!

    static func row(id: String, attempt: String, question: String, seq: Int64, scopeKey: String = "progress:user:u") throws -> StoredRow {
        var row = StoredRow()
        let wire: [String: JSONValue] = [
            "id": .string(id), "assessment_id": .string("as-1"), "attempt_id": .string(attempt), "question_id": .string(question),
            "answer": .int(1), "time_spent_ms": .int(0), "flagged_for_review": .bool(false), "updated_at": .string("2026-01-31T08:00:00.000Z"),
        ]
        for field in contract.fields { row[field.name] = try RowCodec.columnValue(wire[field.name] ?? .null, for: field) }
        for (name, value) in [
            ("_tenant_id", ColumnValue.text("t")), ("_scope_key", .text(scopeKey)), ("_seq", .integer(seq)), ("_version", .integer(1)),
            ("_schema_version", .integer(1)), ("_hlc", .null), ("_field_clocks", .null), ("_deleted", .integer(0)),
            ("_updated_at", .integer(1)), ("_updated_by", .text("d")),
        ] { row[name] = value }
        return row
    }
}
