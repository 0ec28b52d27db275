import ContractRuntime
import Foundation

/// One entry of the append-only audit log.
package struct AuditEntry: Hashable, Sendable {
    package var id: Int64
    package var tenant: String
    /// Server clock, milliseconds since 1970.
    package var recordedAt: Int64
    package var userID: String
    package var deviceID: String
    package var entity: String
    package var rowID: String
    package var operation: AuditOperation
    package var outcome: AuditOutcome
    /// Canonical JSON with what happened (the mutation, the resolution).
    package var detail: String
    package var previousHash: String
    package var hash: String

    package init(
        id: Int64 = 0, tenant: String, recordedAt: Int64, userID: String, deviceID: String, entity: String, rowID: String,
        operation: AuditOperation, outcome: AuditOutcome, detail: String, previousHash: String = "", hash: String = ""
    ) {
        self.id = id
        self.tenant = tenant
        self.recordedAt = recordedAt
        self.userID = userID
        self.deviceID = deviceID
        self.entity = entity
        self.rowID = rowID
        self.operation = operation
        self.outcome = outcome
        self.detail = detail
        self.previousHash = previousHash
        self.hash = hash
    }
}
