import ContractRuntime
import Foundation
import InspectionContracts
import SyncProtocol
import SyncServer

/// `/api/v1/inspections/{id}/review`, for admin tokens (the office): `PUT` sets an inspection's
/// reviewer notes from `{"reviewer_notes": "…"}` (`null` clears them), `GET` reads them; both
/// answer `{"id": …, "reviewer_notes": …}`, and 404 when the inspection is absent or deleted.
///
/// `reviewer_notes` is `server_only`: no device ever receives it. The engine's
/// `ContentService.setServerOnlyFields` writes it: checked against the contract, under the
/// scope's lock, audited, and without a new scope sequence or `_version` (a pull has nothing new
/// to send).
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
        let environment = routes.environment
        let content = ContentService(storage: environment.storage, clock: environment.clock, apps: environment.apps)
        routes.add(.put, path, access: .admin) { request in
            let id = try request.parameter("id")
            let review: Review
            do {
                review = try JSONDecoder().decode(Review.self, from: try await request.body(limit: maximumBodyBytes))
            } catch {
                throw ServiceError.malformed("the body must be {\"\(field)\": text or null}")
            }
            do {
                try await content.setServerOnlyFields(
                    entity: Inspection.descriptor.name, id: id, [field: review.reviewerNotes.map(JSONValue.string) ?? .null],
                    identity: try request.identity(), operation: .review
                )
            } catch let error as ServiceError where error.status == 404 {
                throw ServiceError.notFound("no inspection '\(id)'")
            }
            return try request.json(Review(id: id, reviewerNotes: review.reviewerNotes))
        }
        // The notes as the server holds them: read from one snapshot of the storage.
        routes.add(.get, path, access: .admin) { request in
            let id = try request.parameter("id")
            let tenant = try request.identity().tenant
            let row = try await environment.storage.snapshot { try await $0.row(of: Inspection.descriptor, tenant: tenant, id: id) }
            guard let row, !row.isDeleted else { throw ServiceError.notFound("no inspection '\(id)'") }
            return try request.json(Review(id: id, reviewerNotes: row.text(field)))
        }
    }
}

extension AuditOperation {
    /// The inspection app's own operation: the office's review notes written on an inspection.
    static let review = AuditOperation("review")
}
