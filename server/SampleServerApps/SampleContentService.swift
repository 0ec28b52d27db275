public import ContractRuntime
public import Foundation
public import LearningAPI
public import LearningServer
public import SyncServer

/// The content operations of the sample apps as one server runs them: the engine's admin
/// publishing (``ContentService``) with the apps' computed fields, and the learning app's
/// routes (``LearningContentService``), behind one value for tools, benchmarks and tests.
public struct SampleContentService: Sendable {
    /// The engine's publishing, with the sample apps' computed fields.
    public let content: ContentService
    /// The learning app's units sync and asset files.
    public let learning: LearningContentService

    public init(storage: any ServerStorage, fileLimits: FileLimits = FileLimits(), clock: any ServerClock = SystemClock()) {
        content = ContentService(storage: storage, clock: clock, apps: SampleServerApps.all)
        learning = LearningContentService(storage: storage, fileLimits: fileLimits, clock: clock, content: content)
    }

    /// ``ContentService/publish(entity:row:identity:urgent:)``.
    public func publish(entity name: String, row: JSONValue, identity: DeviceIdentity, urgent: Bool = false) async throws(ServiceError) -> JSONValue {
        try await content.publish(entity: name, row: row, identity: identity, urgent: urgent)
    }

    /// ``ContentService/delete(entity:id:identity:urgent:)``.
    public func delete(entity name: String, id: String, identity: DeviceIdentity, urgent: Bool = false) async throws(ServiceError) {
        try await content.delete(entity: name, id: id, identity: identity, urgent: urgent)
    }

    /// ``LearningContentService/unitsSync(since:limit:includeDeleted:schema:identity:assetBaseURL:)``.
    public func unitsSync(
        since: String?, limit: Int?, includeDeleted: Bool, schema: [String: Int], identity: DeviceIdentity, assetBaseURL: String
    ) async throws(ServiceError) -> UnitsSyncResponse {
        try await learning.unitsSync(
            since: since, limit: limit, includeDeleted: includeDeleted, schema: schema, identity: identity, assetBaseURL: assetBaseURL
        )
    }

    /// ``LearningContentService/asset(id:identity:)``.
    public func asset(id: String, identity: DeviceIdentity) async throws(ServiceError) -> LearningContentService.PublishedAsset {
        try await learning.asset(id: id, identity: identity)
    }

    /// ``LearningContentService/uploadAsset(id:data:contentType:identity:)``.
    public func uploadAsset(id: String, data: Data, contentType: String, identity: DeviceIdentity) async throws(ServiceError) -> JSONValue {
        try await learning.uploadAsset(id: id, data: data, contentType: contentType, identity: identity)
    }

    /// ``LearningContentService/upgradeStoredAssets(from:)``: the asset files an older server
    /// kept in `folder` moved into the tenants' files; how many rows were upgraded, and how many
    /// name a file the folder does not hold.
    public func upgradeStoredAssets(from folder: URL) async throws -> (upgraded: Int, missing: Int) {
        let result = try await learning.upgradeStoredAssets(from: folder)
        return (result.upgraded, result.missing)
    }
}
