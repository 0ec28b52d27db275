package import ContractRuntime
import Foundation

/// One change the audit log records. A push is audited as one entry (operation ``AuditOperation/push``)
/// whose detail lists every mutation done in it, with how it went, and every row its reducers
/// wrote (operation ``AuditOperation/fold``); any other entry (a content change, an erasure)
/// records one change, itself.
package struct AuditedChange: Hashable, Sendable {
    package var entity: String
    package var rowID: String
    package var operation: AuditOperation
    package var outcome: AuditOutcome
    /// The rest of what the log says of the change: for a mutation, its client stream and seq,
    /// ids, clocks, the payload's field names and hash (never its values) and the resolution.
    package var detail: [String: JSONValue]

    package init(entity: String, rowID: String, operation: AuditOperation, outcome: AuditOutcome, detail: [String: JSONValue]) {
        self.entity = entity
        self.rowID = rowID
        self.operation = operation
        self.outcome = outcome
        self.detail = detail
    }

    /// The changes an entry records, from its detail in clear (``AuditChain/readableDetail(of:in:key:)``).
    package static func changes(of entry: AuditEntry, readableDetail: String) throws -> [AuditedChange] {
        guard case .object(let detail)? = JSONParser.parse(readableDetail) else {
            throw AuditedChangeError(entryID: entry.id, "its detail is not a JSON object")
        }
        guard entry.operation == .push else {
            return [AuditedChange(entity: entry.entity, rowID: entry.rowID, operation: entry.operation, outcome: entry.outcome, detail: detail)]
        }
        guard case .array(let listed)? = detail["changes"] else { throw AuditedChangeError(entryID: entry.id, "a push's detail lists no changes") }
        return try listed.map { item in
            guard case .object(let change) = item, case .object(var changeDetail)? = change["detail"],
                case .string(let entity)? = change["entity"], case .string(let rowID)? = change["id"],
                case .string(let operation)? = change["operation"], case .string(let outcome)? = change["outcome"]
            else { throw AuditedChangeError(entryID: entry.id, "a change lacks its detail, entity, id, operation or outcome") }
            changeDetail["client_id"] = detail["client_id"]
            return AuditedChange(
                entity: entity, rowID: rowID, operation: AuditOperation(rawValue: operation), outcome: AuditOutcome(rawValue: outcome),
                detail: changeDetail
            )
        }
    }
}

/// An entry's detail does not read as the changes it records.
package struct AuditedChangeError: Error, CustomStringConvertible {
    package var entryID: Int64
    package var reason: String

    init(entryID: Int64, _ reason: String) {
        self.entryID = entryID
        self.reason = reason
    }

    package var description: String { "audit entry \(entryID): \(reason)" }
}
