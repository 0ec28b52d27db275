import ContractRuntime
import Foundation
import InspectionContracts
import SyncProtocol
import SyncServer

/// `PUT /api/v1/inspections/{id}/review`, for admin tokens (the office): sets an inspection's
/// reviewer notes from `{"reviewer_notes": "…"}` (`null` clears them) and answers
/// `{"id": …, "reviewer_notes": …}`; 404 when the inspection is absent or deleted.
///
/// `reviewer_notes` is `server_only`: no device ever receives it, so writing it changes nothing
/// a device holds. The row therefore keeps its scope sequence and `_version` (a pull has nothing
/// new to send), and the write is audited. It is made under the scope's lock, on the row as
/// stored then, so a push to the same inspection is neither lost nor overwritten.
enum InspectionReview {
    static let path = "/api/v1/inspections/{id}/review"
    /// The server-only field this route writes.
    static let field = "reviewer_notes"
    /// The largest body taken: room for the notes' 4000 characters (up to four bytes each in
    /// UTF-8) and the JSON around them; the contract's limits are checked after.
    static let maximumBodyBytes = 20_000

    struct Review: Codable, Sendable {
        var id: String?
        var reviewerNotes: String?

        enum CodingKeys: String, CodingKey {
            case id
            case reviewerNotes = "reviewer_notes"
        }
    }

    static func addRoute(to routes: AppRoutes) {
        let storage = routes.environment.storage
        let clock = routes.environment.clock
        routes.add(.put, path, access: .admin) { request in
            let id = try request.parameter("id")
            let identity = try request.identity()
            let review: Review
            do {
                review = try JSONDecoder().decode(Review.self, from: try await request.body(limit: maximumBodyBytes))
            } catch {
                throw ServiceError.malformed("the body must be {\"\(field)\": text or null}")
            }
            let notes = try column(review.reviewerNotes)
            let now = clock.now().millisecondsSince1970
            let reviewed = try await ServiceError.catchingStorageFailures {
                try await storage.write { transaction in
                    try await write(notes, to: id, identity: identity, now: now, in: transaction)
                }
            }
            guard reviewed else { throw ServiceError.notFound("no inspection '\(id)'") }
            return try request.json(Review(id: id, reviewerNotes: review.reviewerNotes))
        }
    }

    /// The notes as the column holds them, checked against the contract (`max_length`).
    private static func column(_ notes: String?) throws(ServiceError) -> ColumnValue {
        guard let descriptor = Inspection.descriptor.serverOnlyFields.first(where: { $0.name == field }) else {
            throw ServiceError(status: 500, .internalError, "Inspection has no server-only field '\(field)'")
        }
        do {
            return try RowCodec.columnValue(notes.map(JSONValue.string) ?? .null, for: descriptor)
        } catch {
            throw ServiceError(
                status: 422, error.isTooLarge ? .valueTooLarge : .invalidPayload, "\(field) \(error.reason)",
                details: .object(["field": .string(field)])
            )
        }
    }

    /// Sets the column on the stored row; `false` when there is no live inspection `id`.
    private static func write(
        _ notes: ColumnValue, to id: String, identity: DeviceIdentity, now: Int64, in transaction: any StorageTransaction
    ) async throws -> Bool {
        let table = ContractTable(Inspection.descriptor)
        guard let scopeKey = try await transaction.row(in: table, tenant: identity.tenant, id: id)?.text("_scope_key") else { return false }
        // Read again under the lock: no push changes the row between this read and the write.
        try await transaction.lockScope(tenant: identity.tenant, scopeKey: scopeKey)
        guard var row = try await transaction.row(in: table, tenant: identity.tenant, id: id), !row.isDeleted else { return false }
        guard row[field] != notes else { return true }
        row[field] = notes
        try await transaction.upsert(row, in: table)
        try await transaction.appendAudit(
            AuditEntry(
                tenant: identity.tenant, recordedAt: now, userID: identity.userID, deviceID: identity.deviceID,
                entity: Inspection.descriptor.name, rowID: id, operation: .review, outcome: .published,
                detail: CanonicalJSON.text(.object(["scope_key": .string(scopeKey), "server_only_fields": .array([.string(field)])]))
            )
        )
        return true
    }
}

extension AuditOperation {
    /// The inspection app's own operation: the office's review notes written on an inspection.
    static let review = AuditOperation("review")
}
