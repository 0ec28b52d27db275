public import ContractRuntime
import Contracts
public import Foundation
public import SyncProtocol

/// The learning content: the units sync route for the learning app, asset files, and the admin
/// operations that publish and delete content (rows of read-only scopes such as `content`),
/// which devices then receive as changes and tombstones.
public struct ContentService: Sendable {
    let storage: any SyncStorage
    let assets: AssetStore
    let clock: any ServerClock

    /// Units per page of the units sync route when the request names no limit.
    public static let defaultUnitLimit = 100
    /// The most units a page of the units sync route holds; larger limits are clamped.
    public static let maximumUnitLimit = 500

    public init(storage: any SyncStorage, assets: AssetStore, clock: any ServerClock = SystemClock()) {
        self.storage = storage
        self.assets = assets
        self.clock = clock
    }

    // MARK: - Units sync

    /// The contracts of the route, from the registry.
    private static let unitContract = ContractRegistry.unit
    private static let lessonContract = ContractRegistry.lesson
    private static let assetContract = ContractRegistry.asset

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
        try RowShaping.requireSupported(schema, contracts: storage.contracts)
        let (scope, key) = try Self.contentScope(identity: identity)
        guard ScopeAccess.canRead(key, in: scope, identity: identity) else {
            throw .forbidden("this token does not grant the scope '\(key)'")
        }
        let position = try PullService.position(of: since, scopeKey: key)
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
            try await storage.read { reader in
                // As a pull does (PullService): a cursor below the compacted tombstones may have missed deletes.
                let compacted = try await reader.compactedSequence(tenant: tenant, scopeKey: key)
                if let position { try PullService.checkHorizon(position, compacted: compacted) }
                return (try await Self.unitsPage(reader, tenant: tenant, scopeKey: key, after: after, pageSize: pageSize), compacted)
            }
        }

        let unitVersion = RowShaping.schemaVersion(of: Self.unitContract.name, current: Self.unitContract.currentVersion, in: schema)
        let lessonVersion = RowShaping.schemaVersion(
            of: Self.lessonContract.name, current: Self.lessonContract.currentVersion, in: schema
        )
        let unitPlan = RowShaping.Plan(Self.unitContract, version: unitVersion)
        let lessonPlan = RowShaping.Plan(Self.lessonContract, version: lessonVersion)
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
                    fields: lessonPlan.shape(lesson.row),
                    schemaVersion: lessonVersion,
                    assets: lesson.assets.map { Self.metadata($0, base: base) }
                )
            }
            units.append(SyncedUnit(
                fields: unitPlan.shape(unit.row),
                schemaVersion: unitVersion, lessons: lessons
            ))
        }
        return UnitsSyncResponse(
            units: units, tombstones: tombstones, nextSince: SyncCursor(scopeKey: key, sequence: page.sequence, horizon: compacted).encoded,
            hasMore: page.hasMore
        )
    }

    /// The content scope and its key (the scope `Unit` is filed in).
    private static func contentScope(identity: DeviceIdentity) throws(ServiceError) -> (ScopeDescriptor, String) {
        guard let scope = ContractRegistry.scope(named: unitContract.scope),
            let key = ScopeAccess.readableKeys(in: scope, identity: identity).first
        else { throw .forbidden("this token does not grant the '\(unitContract.scope)' scope") }
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
        _ reader: any StorageReader, tenant: String, scopeKey: String, after: Int64, pageSize: Int
    ) async throws -> UnitsPage {
        let unitTable = ContractTable(unitContract), lessonTable = ContractTable(lessonContract)
        let assetTable = ContractTable(assetContract)
        let batchSize = 500
        var unitIDs: [String] = []
        var seen: Set<String> = []
        var lessonUnits: [String: String] = [:]
        var sequence = after
        var hasMore = false

        func unitID(of lessonID: String) async throws -> String? {
            if let known = lessonUnits[lessonID] { return known }
            let unit = try await reader.row(in: lessonTable, tenant: tenant, id: lessonID)?.text("unit_id")
            lessonUnits[lessonID] = unit
            return unit
        }

        scan: while true {
            let batch = try await reader.changes(
                in: [unitTable, lessonTable, assetTable], tenant: tenant, scopeKey: scopeKey, after: sequence, limit: batchSize,
                byteBudget: .max
            )
            for (table, row) in batch {
                let owner: String?
                switch table.name {
                case unitTable.name: owner = row.text(unitContract.primaryKey)
                case lessonTable.name:
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
            guard let unit = try await reader.row(in: unitTable, tenant: tenant, id: id) else { continue }
            var lessons: [LessonRows] = []
            if unit.integer("_deleted") == 0 {
                let lessonRows = try await reader.rows(
                    in: lessonTable, tenant: tenant, where: ["unit_id": unit[unitContract.primaryKey], "_deleted": .integer(0)],
                    limit: Int(Int32.max)
                ).sorted { ($0.integer("sort_index") ?? 0, $0.text("id") ?? "") < ($1.integer("sort_index") ?? 0, $1.text("id") ?? "") }
                for lesson in lessonRows {
                    let assets = try await reader.rows(
                        in: assetTable, tenant: tenant,
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
        let table = ContractTable(Self.assetContract)
        let tenant = identity.tenant
        let stored = try await ServiceError.catchingStorageFailures {
            try await storage.read { reader in try await reader.row(in: table, tenant: tenant, id: id) }
        }
        guard let row = stored, row.integer("_deleted") == 0 else { throw .notFound("no asset '\(id)'") }
        guard let scope = ContractRegistry.scope(named: Self.assetContract.scope), let key = row.text("_scope_key"),
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

    // MARK: - Admin

    /// The entity an admin operation names: a contract of a read-only scope.
    private static func publishable(_ name: String) throws(ServiceError) -> (EntityDescriptor, ScopeDescriptor) {
        guard let entity = ContractRegistry.entity(named: name) else {
            if ContractRegistry.event(named: name) != nil {
                throw ServiceError(status: 422, .notWritable, "\(name) is an event: devices record events, the server does not publish them")
            }
            throw .unknownEntity(name)
        }
        guard let scope = ContractRegistry.scope(named: entity.scope), scope.access == .read else {
            throw ServiceError(
                status: 422, .notWritable,
                "\(name) belongs to the scope '\(entity.scope)', which devices write through push; only read-only scopes are published"
            )
        }
        return (entity, scope)
    }

    private static func requireAdmin(_ identity: DeviceIdentity) throws(ServiceError) {
        guard identity.isAdmin else { throw .forbidden("publishing content needs an admin token") }
    }

    private func actor(_ identity: DeviceIdentity) -> ContentWriter.Actor {
        ContentWriter.Actor(tenant: identity.tenant, userID: identity.userID, deviceID: identity.deviceID, now: clock.now())
    }

    /// Creates or replaces a row of a contract in a read-only scope (`Unit`, `Lesson`, `Asset`,
    /// `Assessment`, …), in the contract's current wire form. The row gets the scope's next
    /// sequence number and `_version` + 1, and the write is audited (outcome `published`); a
    /// row left without its version field (`updated_at`) has it set to now, and republishing
    /// such a row unchanged writes nothing. Returns the stored row in wire form.
    ///
    /// - Throws: ``ServiceError``: 403 for a device token, 422 for an unknown contract, a
    ///   contract of a read-write scope, or a row the contract refuses (`details.field`).
    ///
    /// `urgent` marks the change for devices to take before any pull page on their next sync
    /// (a withdrawn licence's terms, a corrected unit), whatever the order of their scopes.
    public func publish(entity name: String, row: JSONValue, identity: DeviceIdentity, urgent: Bool = false) async throws(ServiceError) -> JSONValue {
        try Self.requireAdmin(identity)
        let (entity, scope) = try Self.publishable(name)
        guard case .object(let wire) = row else {
            throw ContentWriter.invalid("the row must be a JSON object of \(name)'s fields", field: entity.primaryKey)
        }
        let writer = ContentWriter(entity)
        let columns = try writer.columns(wire)
        guard let scopeKey = ScopeAccess.key(for: scope, row: wire, identity: identity) else {
            throw ContentWriter.invalid("the row does not name its scope '\(scope.keyTemplate)'", field: entity.primaryKey)
        }
        let actor = actor(identity)
        let stored = try await ServiceError.catchingStorageFailures {
            try await storage.write { transaction in
                let (row, written) = try await writer.put(columns, scopeKey: scopeKey, actor: actor, operation: "publish", in: transaction)
                if urgent, written { try await Self.markUrgent([(writer.table, row)], actor: actor, in: transaction) }
                return row
            }
        }
        return .object(RowShaping.currentWireRow(stored, entity: entity))
    }

    /// Deletes a row of a read-only scope: a tombstone devices receive, audited (outcome
    /// `deleted`). Deleting a row deletes its `has_many` rows in the same scope too (a unit's
    /// lessons, their assets). 404 when the row is absent or already deleted.
    /// `urgent` marks the deletion (a withdrawn unit) for devices to take before any pull page.
    public func delete(entity name: String, id: String, identity: DeviceIdentity, urgent: Bool = false) async throws(ServiceError) {
        try Self.requireAdmin(identity)
        let (entity, _) = try Self.publishable(name)
        let writer = ContentWriter(entity)
        let actor = actor(identity)
        let deleted = try await ServiceError.catchingStorageFailures {
            try await storage.write { transaction in
                guard let rows = try await writer.tombstone(id: id, actor: actor, in: transaction) else { return false }
                if urgent { try await Self.markUrgent(rows, actor: actor, in: transaction) }
                return true
            }
        }
        guard deleted else { throw .notFound("no \(name) '\(id)'") }
    }

    /// Records written rows as urgent changes of their scope, each at the sequence it was written with.
    private static func markUrgent(
        _ rows: [(table: ContractTable, row: StoredRow)], actor: ContentWriter.Actor, in transaction: any StorageTransaction
    ) async throws {
        for (table, row) in rows {
            guard case .text(let scopeKey) = row["_scope_key"], let sequence = row.integer("_seq"), let id = row.text(table.primaryKey) else { continue }
            try await transaction.markUrgent(
                UrgentChange(table: table.name, rowID: id, sequence: sequence), tenant: actor.tenant, scopeKey: scopeKey,
                at: actor.now.millisecondsSince1970
            )
        }
    }

    /// Stores an asset file and refreshes its `Asset` row (`size_bytes`, `checksum`,
    /// `storage_key`, `content_type`, `updated_at`) so devices download the new file. The row
    /// must have been published first (it names the lesson and the kind); 404 otherwise.
    public func uploadAsset(id: String, data: Data, contentType: String, identity: DeviceIdentity) async throws(ServiceError) -> JSONValue {
        try Self.requireAdmin(identity)
        let entity = Self.assetContract
        let (_, scope) = try Self.publishable(entity.name)
        let typeField = entity.field(named: "content_type")!
        do {
            _ = try RowCodec.columnValue(.string(contentType), for: typeField)
        } catch {
            throw ContentWriter.invalid(error.message, field: error.field)
        }
        let file: (checksum: String, size: Int64)
        do {
            file = try assets.write(data)
        } catch {
            throw ServiceError(status: 500, .internalError, "the server could not store the file")
        }
        let writer = ContentWriter(entity)
        let actor = actor(identity)
        let stored = try await ServiceError.catchingStorageFailures {
            try await storage.write { transaction -> StoredRow in
                guard let existing = try await writer.lockedRow(id: id, tenant: actor.tenant, in: transaction), existing.integer("_deleted") == 0
                else { throw ServiceError.notFound("no asset '\(id)': publish its Asset row (lesson_id, asset_kind) first") }
                var wire = RowShaping.currentWireRow(existing, entity: entity)
                wire["size_bytes"] = .int(file.size)
                wire["checksum"] = .string(file.checksum)
                wire["storage_key"] = .string(file.checksum)
                wire["content_type"] = .string(contentType)
                if let versionField = entity.versionField { wire[versionField] = nil }
                let columns = try writer.columns(wire)
                let key = existing.text("_scope_key") ?? scope.keyTemplate
                return try await writer.put(columns, scopeKey: key, actor: actor, operation: "upload", in: transaction).row
            }
        }
        return .object(RowShaping.currentWireRow(stored, entity: entity))
    }
}
