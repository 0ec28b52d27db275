public import ContractRuntime
import Contracts
public import Foundation
public import LearningAPI
import SyncProtocol
public import SyncServer

/// The learning app's content routes: the units sync route (units with their lessons and asset
/// metadata, for a device that downloads units for offline use), and asset files (download,
/// upload), on the engine's storage, files (``FileService``) and content writes.
///
/// An asset's file is a file of the engine's like any other: stored once per tenant by its
/// SHA-256 in the tenant's blob store and named by the `Asset` row's `file` field (version 2),
/// which makes it readable by every identity that may read the content scope. The version 1
/// fields (`checksum`, `size_bytes`, `content_type`, `storage_key`) are kept beside it for the
/// devices that still download by `/assets/{id}`.
public struct LearningContentService: Sendable {
    let storage: any ServerStorage
    let files: FileService
    let content: ContentService

    /// Units per page of the units sync route when the request names no limit.
    public static let defaultUnitLimit = 100
    /// The most units a page of the units sync route holds; larger limits are clamped.
    public static let maximumUnitLimit = 500

    /// - Parameters:
    ///   - fileLimits: the server's file limits (``ServerConfiguration/files``); an asset's file
    ///     counts in its tenant's files.
    public init(storage: any ServerStorage, fileLimits: FileLimits = FileLimits(), clock: any ServerClock, content: ContentService) {
        self.storage = storage
        self.files = FileService(storage: storage.engine, blobs: storage.engine.defaultBlobStore, limits: fileLimits, clock: clock)
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

    /// A live asset's published file, as `/assets/{id}` serves it.
    public struct PublishedAsset: Sendable, Hashable {
        public var id: String
        /// The file, in the tenant's files (the row's `file`).
        public var file: FileReference
        /// The asset's own MIME type (its `content_type`), which `/assets/{id}` answers with; the
        /// file's is `application/octet-stream` when the contract's `file` field does not take it.
        public var contentType: String
    }

    /// The file of a live asset. 404 when the asset is unknown, deleted, or its file was never
    /// uploaded; 403 when the token cannot read the asset's scope.
    public func asset(id: String, identity: DeviceIdentity) async throws(ServiceError) -> PublishedAsset {
        let tenant = identity.tenant
        let stored = try await ServiceError.catchingStorageFailures {
            try await storage.snapshot { snapshot in try await snapshot.row(of: Self.assetContract, tenant: tenant, id: id) }
        }
        guard let row = stored, row.integer("_deleted") == 0 else { throw .notFound("no asset '\(id)'") }
        guard let scope = storage.contracts.scope(named: Self.assetContract.scope), let key = row.text("_scope_key"),
            ScopeAccess.canRead(key, in: scope, identity: identity)
        else { throw .forbidden("this token does not grant the scope of asset '\(id)'") }
        guard let file = Self.fileReference(of: row) else { throw .notFound("the file of asset '\(id)' has not been uploaded") }
        return PublishedAsset(id: id, file: file, contentType: row.text("content_type") ?? file.contentType)
    }

    /// The row's `file`, when it names one.
    static func fileReference(of row: StoredRow) -> FileReference? {
        guard let field = assetContract.fields.first(where: { $0.name == fileField }) else { return nil }
        return try? FileReference(json: RowCodec.wireValue(row[fileField], for: field))
    }

    /// The `Asset` field that names the file (version 2).
    static let fileField = "file"

    /// The content type an asset's file is stored with: the asset's own when the contract's
    /// `file` field takes it (`audio/*`, `image/*`, ...), else `application/octet-stream` (a
    /// Markdown document's `text/markdown` stays in the row's `content_type`).
    static func fileContentType(_ contentType: String) -> String {
        let allowed = assetContract.fields.first { $0.name == fileField }?.contentTypes ?? []
        let normalized = contentType.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        return !normalized.isEmpty && FileReference.contentType(normalized, isIn: allowed) ? normalized : "application/octet-stream"
    }

    /// The fields of an `Asset` row for its file: `file` (version 2) and the version 1 fields
    /// (`size_bytes`, `checksum`, `storage_key`, `content_type`) devices of version 1 read.
    public static func fileFields(_ file: FileReference, contentType: String) -> [String: JSONValue] {
        [
            fileField: file.json, "size_bytes": .int(file.byteCount), "checksum": .string(file.sha256), "storage_key": .string(file.sha256),
            "content_type": .string(contentType),
        ]
    }

    /// Stores `data` as a file of the tenant (``FileService``: hash checked, counted, audited)
    /// for an `Asset` row not yet written (the sample's seed): the row's fields for it.
    public func publishFile(_ data: Data, assetID: String, contentType: String, identity: DeviceIdentity) async throws(ServiceError) -> [String:
        JSONValue]
    {
        guard identity.isAdmin else { throw .forbidden("publishing content needs an admin token") }
        let file = try await files.publish(data, contentType: Self.fileContentType(contentType), name: assetID, identity: identity)
        return Self.fileFields(file, contentType: contentType)
    }

    /// Stores an asset file as a file of the tenant and refreshes its `Asset` row (`file`, and
    /// `size_bytes`, `checksum`, `storage_key`, `content_type`, `updated_at`) so devices download
    /// the new file. The row must have been published first (it names the lesson and the kind);
    /// 404 otherwise.
    public func uploadAsset(id: String, data: Data, contentType: String, identity: DeviceIdentity) async throws(ServiceError) -> JSONValue {
        guard identity.isAdmin else { throw .forbidden("publishing content needs an admin token") }
        let exists = try await ServiceError.catchingStorageFailures {
            try await storage.snapshot { snapshot in
                try await snapshot.row(of: Self.assetContract, tenant: identity.tenant, id: id).map { $0.integer("_deleted") == 0 } ?? false
            }
        }
        guard exists else { throw .notFound("no asset '\(id)': publish its Asset row (lesson_id, asset_kind) first") }
        let fields = try await publishFile(data, assetID: id, contentType: contentType, identity: identity)
        do {
            return try await content.update(entity: Self.assetContract.name, id: id, identity: identity, operation: .upload) {
                wire throws(ServiceError) in
                for (name, value) in fields { wire[name] = value }
            }
        } catch  where error.status == 404 {
            throw .notFound("no asset '\(id)': publish its Asset row (lesson_id, asset_kind) first")
        }
    }

    // MARK: - Asset files of an older server

    /// What ``upgradeStoredAssets(from:)`` did.
    public struct AssetUpgrade: Sendable, Hashable {
        /// `Asset` rows whose file now is a file of their tenant.
        public var upgraded = 0
        /// Rows whose file the old folder does not hold (or holds damaged): left as they were.
        public var missing = 0
    }

    /// Moves the asset files an older server kept in its own folder (`<data>/assets`, each file
    /// named by its SHA-256 in a folder of its first two hex digits) into the tenants' files:
    /// each live `Asset` row without a `file` whose `checksum` the folder holds gets the file
    /// stored (checked against that checksum) and its `file` filled, as
    /// ``uploadAsset(id:data:contentType:identity:)`` does; a file every row of which was
    /// upgraded is then deleted from the folder, and the folder when it is empty. Idempotent: a
    /// second run finds nothing to do. The serve command runs it as it starts.
    public func upgradeStoredAssets(from folder: URL) async throws -> AssetUpgrade {
        var result = AssetUpgrade()
        guard FileManager.default.fileExists(atPath: folder.path) else { return result }
        let table = Self.assetContract.table
        let rows = try await storage.engine.read { reader in
            try await reader.serverTableQuery(
                "SELECT \"_tenant_id\", \"id\", \"checksum\", \"content_type\" FROM \"\(table)\" WHERE \"file\" IS NULL AND NOT \"_deleted\" ORDER BY \"_tenant_id\", \"id\"",
                [])
        }
        var kept: Set<String> = []
        var moved: Set<String> = []
        for row in rows {
            guard let tenant = row.text("_tenant_id"), let id = row.text("id"), let checksum = row.text("checksum") else { continue }
            let url = folder.appendingPathComponent(String(checksum.prefix(2)), isDirectory: true).appendingPathComponent(checksum)
            guard FileReference.isSHA256(checksum), FileManager.default.fileExists(atPath: url.path) else {
                result.missing += 1
                continue
            }
            let identity = DeviceIdentity(tenant: tenant, userID: "sync-server", deviceID: "asset-upgrade", teams: [], isAdmin: true, expiresAt: 0)
            let contentType = row.text("content_type") ?? "application/octet-stream"
            do {
                let file = try await files.publish(
                    contentsOf: url, contentType: Self.fileContentType(contentType), name: id, identity: identity)
                guard file.sha256 == checksum else { throw ServiceError(status: 422, .hashMismatch, "the file is not the one the row names") }
                let fields = Self.fileFields(file, contentType: contentType)
                _ = try await content.update(entity: Self.assetContract.name, id: id, identity: identity, operation: .upload) {
                    wire throws(ServiceError) in
                    for (name, value) in fields { wire[name] = value }
                }
                moved.insert(url.path)
                result.upgraded += 1
            } catch let error as ServiceError {
                if error.status >= 500 { throw error }
                kept.insert(url.path)
                result.missing += 1
            }
        }
        for path in moved.subtracting(kept) {
            try? FileManager.default.removeItem(atPath: path)
            let shard = URL(fileURLWithPath: path).deletingLastPathComponent()
            if (try? FileManager.default.contentsOfDirectory(atPath: shard.path))?.isEmpty == true { try? FileManager.default.removeItem(at: shard) }
        }
        if (try? FileManager.default.contentsOfDirectory(atPath: folder.path))?.isEmpty == true { try? FileManager.default.removeItem(at: folder) }
        return result
    }
}

extension AuditOperation {
    /// The learning app's own operation: an asset's file stored (its row's size, checksum and
    /// storage key updated to match).
    static let upload = AuditOperation("upload")
}
