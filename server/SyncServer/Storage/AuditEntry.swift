import ContractRuntime
import Foundation

/// One entry of the append-only audit log.
public struct AuditEntry: Hashable, Sendable {
    public var id: Int64
    public var tenant: String
    /// Server clock, milliseconds since 1970.
    public var recordedAt: Int64
    public var userID: String
    public var deviceID: String
    public var entity: String
    public var rowID: String
    public var operation: AuditOperation
    public var outcome: AuditOutcome
    /// Canonical JSON with what happened (the mutation, the resolution).
    public var detail: String
    public var previousHash: String
    public var hash: String

    public init(
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
