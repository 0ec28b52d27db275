import ContractRuntime
import Contracts
import Foundation
import GRDB
import SyncClient

/// The rows a unit owns on the device, in the tables the registry names: the unit, its lessons
/// (by `unit_id`), their `Asset` rows (by `lesson_id`), and the download records (`assets`) of
/// those files.
enum UnitContent {
    static let unitTable = Contracts.Unit.descriptor.table.quotedDatabaseIdentifier
    static let lessonTable = Lesson.descriptor.table.quotedDatabaseIdentifier
    static let assetTable = Asset.descriptor.table.quotedDatabaseIdentifier
    static let completionTable = CompletionRecord.descriptor.table.quotedDatabaseIdentifier

    /// Whether a store's contracts hold these tables. A store opened with another app's
    /// contracts has none of them, so it has no unit to download, list or evict.
    static func isHeld(by contracts: ContractCatalog) -> Bool {
        [Contracts.Unit.descriptor, Lesson.descriptor, Asset.descriptor, CompletionRecord.descriptor].allSatisfy { entity in
            contracts.entity(named: entity.name)?.table == entity.table
        }
    }

    /// The ids of the unit's download records: by `unit_id`, or by one of its `Asset` rows.
    static func recordIds(_ db: Database, unitId: String) throws -> [String] {
        try String.fetchAll(
            db,
            sql: """
                SELECT "asset_id" FROM "assets" WHERE "unit_id" = ? OR "asset_id" IN (
                    SELECT "id" FROM \(assetTable) WHERE "lesson_id" IN (SELECT "id" FROM \(lessonTable) WHERE "unit_id" = ?))
                ORDER BY "asset_id"
                """,
            arguments: [unitId, unitId]
        )
    }

    /// Deletes download records; returns their files (final and partial) in `directory`.
    static func deleteRecords(_ db: Database, ids: [String], directory: URL) throws -> [URL] {
        guard !ids.isEmpty else { return [] }
        try db.execute(
            sql: #"DELETE FROM "assets" WHERE "asset_id" IN ("# + placeholders(ids.count) + ")", arguments: StatementArguments(ids)
        )
        return ids.flatMap { id in
            let files = AssetFiles.urls(assetId: id, in: directory)
            return [files.final, files.partial]
        }
    }

    static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }
}
