public import ContractRuntime
import Contracts
import Foundation
import Hummingbird
import LearningAPI
public import SyncServer

/// The learning app's server side: the reducer that folds a learner's answers, submissions and
/// progress into attempts and completion records, the server's revisions of an assessment, and
/// the content routes (`GET /api/v1/content/units/sync`, asset files).
public struct LearningServerApp: ServerApp {
    public init() {}

    public var reducers: [any Reducer] { [LearningReducer()] }

    /// `xapi`: statement rows to a learning record store (``XAPISinkKind``).
    public var sinkKinds: [any SinkKind] { [XAPISinkKind()] }

    /// An assessment's `revision` and `answer_key_history` are the server's (``AssessmentRevisions``).
    public func computeFields(_ values: inout [String: ColumnValue], of entity: EntityDescriptor, existing: StoredRow?, now: Timestamp) {
        guard entity.name == Assessment.descriptor.name else { return }
        AssessmentRevisions.stamp(&values, existing: existing, now: now)
    }

    public func addRoutes(to routes: AppRoutes) {
        let environment = routes.environment
        let content = LearningContentService(
            storage: environment.storage, fileLimits: routes.configuration.files, clock: environment.clock,
            content: ContentService(storage: environment.storage, clock: environment.clock, apps: environment.apps)
        )
        let maximumAssetBytes = routes.configuration.maximumAssetBytes
        routes.add(.get, "/api/v1/content/units/sync", access: .device) { request in
            let response = try await content.unitsSync(
                since: request.query("since").flatMap { $0.isEmpty ? nil : $0 }, limit: try request.limit(),
                includeDeleted: try request.flag("include_deleted"), schema: try request.schemaVersions(),
                identity: try request.identity(), assetBaseURL: request.baseURL
            )
            return try request.json(response, compressible: true)
        }
        let asset: @Sendable (AppRequest) async throws -> Response = { request in
            // The file from the tenant's blob store, as the files route serves it, with the asset's
            // own type; an id may name another file later, so it is revalidated every time.
            let asset = try await content.asset(id: try request.parameter("id"), identity: try request.identity())
            return try await request.storedFile(
                sha256: asset.file.sha256, contentType: asset.contentType, cacheControl: "private, max-age=0, must-revalidate")
        }
        routes.add(.get, "/assets/{id}", access: .device, use: asset)
        routes.add(.head, "/assets/{id}", access: .device, use: asset)
        routes.add(.put, "/admin/v1/assets/{id}", access: .admin) { request in
            let contentType = request.request.headers[.contentType].flatMap { $0.isEmpty ? nil : $0 } ?? "application/octet-stream"
            let metadata = try await content.uploadAsset(
                id: try request.parameter("id"), data: try await request.body(limit: maximumAssetBytes), contentType: contentType,
                identity: try request.identity()
            )
            return try request.json(metadata)
        }
    }
}
