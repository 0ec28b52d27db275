public import ContractRuntime
import Contracts
public import Foundation
public import LearningAPI
import SyncProtocol
public import SyncServer

/// The learning app's content routes: the units sync route (units with their lessons and asset
/// metadata, for a device that downloads units for offline use), and asset files (download,
/// upload), on the engine's storage, file store and content writes.
public struct LearningContentService: Sendable {
    let storage: any ServerStorage
    let assets: AssetStore
    let content: ContentService

    /// Units per page of the units sync route when the request names no limit.
    public static let defaultUnitLimit = 100
    /// The most units a page of the units sync route holds; larger limits are clamped.
    public static let maximumUnitLimit = 500

    public init(storage: any ServerStorage, assets: AssetStore, content: ContentService) {
        self.storage = storage
        self.assets = assets
        self.content = content
    }

    // MARK: - Units sync

    /// The contracts of the route.
    private static let unitContract = Unit.descriptor
    private static let lessonContract = Lesson.descriptor
    private static let assetContract = Asset.descriptor

    /// `GET /api/v1/content/units/sync`: the units that changed after `since` (themselves, a
    /// lesson or a lesson's asset), whole, with their live lessons by `sort_index` and each
    /// lesson's asset metadata; units deleted since, as tombstones, when `includeDeleted`.
    ///
    /// - Parameters:
    ///   - since: the `next_since` of the previous page (an opaque cursor of the content scope);
    ///     `nil` for everything.
    ///   - limit: units per page (default ``defaultUnitLimit``, clamped to ``maximumUnitLimit``).
    ///   - schema: the device's schema versions; units and lessons are shaped for them.
    ///   - assetBaseURL: the server's public base URL; download URLs are `<base>/assets/<id>`.
    /// - Throws: ``ServiceError``: 400 for a malformed cursor or a limit below 1, 403 when the
    ///   token cannot read content, 410 `cursor_expired` for a cursor below the content scope's
    ///   compacted tombstones (``ServerHousekeeping``), 426 for a schema version below the oldest supported.
    public func unitsSync(
        since: String?, limit: Int?, includeDeleted: Bool, schema: [String: Int], identity: DeviceIdentity,
        assetBaseURL: String
    ) async throws(ServiceError) -> UnitsSyncResponse {
        let deviceSchema = try DeviceSchema(schema, contracts: storage.contracts)
        let (scope, key) = try contentScope(identity: identity)
        guard ScopeAccess.canRead(key, in: scope, identity: identity) else {
            throw .forbidden("this token does not grant the scope '\(key)'")
        }
        let position = try SyncCursor.requested(since, scopeKey: key)
        let after = position?.sequence ?? 0
        let pageSize: Int
        if let limit {
            guard limit >= 1 else { throw .malformed("limit must be at least 1") }
            pageSize = min(limit, Self.maximumUnitLimit)
        } else {
            pageSize = Self.defaultUnitLimit
        }
        let tenant = identity.tenant
        let (page, compacted) = try await ServiceError.catchingStorageFailures {
            try await storage.snapshot { snapshot in
                // As a pull does: a cursor below the compacted tombstones may have missed deletes.
                let compacted = try await snapshot.compactedSequence(tenant: tenant, scopeKey: key)
                try position?.requireWithinHorizon(compacted: compacted)
                return (try await Self.unitsPage(snapshot, tenant: tenant, scopeKey: key, after: after, pageSize: pageSize), compacted)
            }
        }

        let unitShape = deviceSchema.shape(of: Self.unitContract)
        let lessonShape = deviceSchema.shape(of: Self.lessonContract)
        let base = assetBaseURL.hasSuffix("/") ? String(assetBaseURL.dropLast()) : assetBaseURL
        var units: [SyncedUnit] = []
        var tombstones: [ContentTombstone] = []
        for unit in page.units {
            if unit.row.integer("_deleted") == 1 {
                guard includeDeleted, let id = unit.row.text(Self.unitContract.primaryKey) else { continue }
                tombstones.append(ContentTombstone(id: id, deletedAt: Timestamp(millisecondsSince1970: unit.row.integer("_updated_at") ?? 0)))
                continue
            }
            let lessons = unit.lessons.map { lesson in
                SyncedLesson(
                    fields: lessonShape.wireFields(of: lesson.row),
                    schemaVersion: lessonShape.version,
                    assets: lesson.assets.map { Self.metadata($0, base: base) }
                )
            }
            units.append(
                SyncedUnit(
                    fields: unitShape.wireFields(of: unit.row),
                    schemaVersion: unitShape.version, lessons: lessons
                ))
        }
        return UnitsSyncResponse(
            units: units, tombstones: tombstones, nextSince: SyncCursor(scopeKey: key, sequence: page.sequence, horizon: compacted).encoded,
            hasMore: page.hasMore
        )
    }

    /// The content scope and its key (the scope `Unit` is filed in).
    private func contentScope(identity: DeviceIdentity) throws(ServiceError) -> (ScopeDescriptor, String) {
        guard let scope = storage.contracts.scope(named: Self.unitContract.scope),
            let key = ScopeAccess.readableKeys(in: scope, identity: identity).first
        else { throw .forbidden("this token does not grant the '\(Self.unitContract.scope)' scope") }
        return (scope, key)
    }

    struct LessonRows: Sendable {
        var row: StoredRow
        var assets: [StoredRow]
    }

    struct UnitRows: Sendable {
        var row: StoredRow
        var lessons: [LessonRows]
    }

    struct UnitsPage: Sendable {
        var units: [UnitRows]
        /// The sequence of the last change the page covers.
        var sequence: Int64
        var hasMore: Bool
    }

    /// Walks the scope's changes of units, lessons and assets after `after`, collecting the
    /// units they belong to until `pageSize` units; the page covers every change up to the
    /// last one whose unit it holds, so the next page misses none.
    private static func unitsPage(
        _ snapshot: StorageSnapshot, tenant: String, scopeKey: String, after: Int64, pageSize: Int
    ) async throws -> UnitsPage {
        let batchSize = 500
        var unitIDs: [String] = []
        var seen: Set<String> = []
        var lessonUnits: [String: String] = [:]
        var sequence = after
        var hasMore = false

        func unitID(of lessonID: String) async throws -> String? {
            if let known = lessonUnits[lessonID] { return known }
            let unit = try await snapshot.row(of: lessonContract, tenant: tenant, id: lessonID)?.text("unit_id")
            lessonUnits[lessonID] = unit
            return unit
        }

        scan: while true {
            let batch = try await snapshot.changes(
                of: [unitContract, lessonContract, assetContract], tenant: tenant, scopeKey: scopeKey, after: sequence, limit: batchSize
            )
            for (entity, row) in batch {
                let owner: String?
                switch entity.name {
                case unitContract.name: owner = row.text(unitContract.primaryKey)
                case lessonContract.name:
                    owner = row.text("unit_id")
                    if let lessonID = row.text(lessonContract.primaryKey) { lessonUnits[lessonID] = owner }
                default: owner = if let lessonID = row.text("lesson_id") { try await unitID(of: lessonID) } else { nil }
                }
                if let owner, !seen.contains(owner) {
                    if unitIDs.count == pageSize {
                        hasMore = true
                        break scan
                    }
                    seen.insert(owner)
                    unitIDs.append(owner)
                }
                sequence = row.integer("_seq") ?? sequence
            }
            if batch.count < batchSize { break }
        }

        var units: [UnitRows] = []
        for id in unitIDs {
            guard let unit = try await snapshot.row(of: unitContract, tenant: tenant, id: id) else { continue }
            var lessons: [LessonRows] = []
            if unit.integer("_deleted") == 0 {
                let lessonRows = try await snapshot.rows(
                    of: lessonContract, tenant: tenant, where: ["unit_id": unit[unitContract.primaryKey], "_deleted": .integer(0)],
                    limit: Int(Int32.max)
                ).sorted { ($0.integer("sort_index") ?? 0, $0.text("id") ?? "") < ($1.integer("sort_index") ?? 0, $1.text("id") ?? "") }
                for lesson in lessonRows {
                    let assets = try await snapshot.rows(
                        of: assetContract, tenant: tenant,
                        where: ["lesson_id": lesson[lessonContract.primaryKey], "_deleted": .integer(0)], limit: Int(Int32.max)
                    )
                    lessons.append(LessonRows(row: lesson, assets: assets))
                }
            }
            units.append(UnitRows(row: unit, lessons: lessons))
        }
        return UnitsPage(units: units, sequence: sequence, hasMore: hasMore)
    }

    private static func metadata(_ row: StoredRow, base: String) -> ContentAssetMetadata {
        let id = row.text(assetContract.primaryKey) ?? ""
        return ContentAssetMetadata(
            id: id, lessonId: row.text("lesson_id") ?? "", type: row.text("asset_kind") ?? "document",
            contentType: row.text("content_type") ?? "application/octet-stream", sizeBytes: row.integer("size_bytes") ?? 0,
            checksum: row.text("checksum") ?? "", durationMs: row.integer("duration_ms"),
            updatedAt: Timestamp(millisecondsSince1970: row.integer("updated_at") ?? 0),
            downloadURL: base + "/assets/" + Self.percentEncoded(id)
        )
    }

    private static func percentEncoded(_ id: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return id.addingPercentEncoding(withAllowedCharacters: allowed) ?? id
    }

    // MARK: - Asset files

    /// The file of a live asset. 404 when the asset is unknown, deleted, or its file was never
    /// uploaded; 403 when the token cannot read the asset's scope.
    public func asset(id: String, identity: DeviceIdentity) async throws(ServiceError) -> AssetFile {
        let tenant = identity.tenant
        let stored = try await ServiceError.catchingStorageFailures {
            try await storage.snapshot { snapshot in try await snapshot.row(of: Self.assetContract, tenant: tenant, id: id) }
        }
        guard let row = stored, row.integer("_deleted") == 0 else { throw .notFound("no asset '\(id)'") }
        guard let scope = storage.contracts.scope(named: Self.assetContract.scope), let key = row.text("_scope_key"),
            ScopeAccess.canRead(key, in: scope, identity: identity)
        else { throw .forbidden("this token does not grant the scope of asset '\(id)'") }
        guard let checksum = row.text("checksum"), let url = assets.fileURL(checksum: checksum) else {
            throw .notFound("the file of asset '\(id)' has not been uploaded")
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.int64Value
        return AssetFile(
            id: id, fileURL: url, size: size ?? row.integer("size_bytes") ?? 0, checksum: checksum,
            contentType: row.text("content_type") ?? "application/octet-stream"
        )
    }

    /// Stores an asset file and refreshes its `Asset` row (`size_bytes`, `checksum`,
    /// `storage_key`, `content_type`, `updated_at`) so devices download the new file. The row
    /// must have been published first (it names the lesson and the kind); 404 otherwise.
    public func uploadAsset(id: String, data: Data, contentType: String, identity: DeviceIdentity) async throws(ServiceError) -> JSONValue {
        guard identity.isAdmin else { throw .forbidden("publishing content needs an admin token") }
        let file: (checksum: String, size: Int64)
        do {
            file = try assets.write(data)
        } catch {
            throw ServiceError(status: 500, .internalError, "the server could not store the file")
        }
        do {
            return try await content.update(entity: Self.assetContract.name, id: id, identity: identity, operation: .upload) {
                wire throws(ServiceError) in
                wire["size_bytes"] = .int(file.size)
                wire["checksum"] = .string(file.checksum)
                wire["storage_key"] = .string(file.checksum)
                wire["content_type"] = .string(contentType)
            }
        } catch  where error.status == 404 {
            throw .notFound("no asset '\(id)': publish its Asset row (lesson_id, asset_kind) first")
        }
    }
}

extension AuditOperation {
    /// The learning app's own operation: an asset's file stored (its row's size, checksum and
    /// storage key updated to match).
    static let upload = AuditOperation("upload")
}
