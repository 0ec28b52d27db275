import Foundation

// Placeholder until the audit-details branch lands (removed when it merges).
extension AuditChain {
    static func readableDetail(of entry: AuditEntry, in reader: any StorageReader, key: AuditKey) async throws -> String? { entry.detail }
}
