import ContractRuntime
import Contracts
import Foundation
import GRDB
import SyncClient

/// The rows a unit owns on the device, in the tables the registry names: the unit, its lessons
/// (by `unit_id`) and their `Asset` rows (by `lesson_id`), which name its files.
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

    /// Every `Asset` row of a lesson on the device that names a file, with its lesson's unit.
    static func assetFiles(_ db: Database) throws -> [(unit: String, id: String, file: FileReference)] {
        try Row.fetchAll(
            db,
            sql: """
                SELECT l."unit_id", a."id", a."file" FROM \(assetTable) a
                JOIN \(lessonTable) l ON l."id" = a."lesson_id" WHERE a."file" IS NOT NULL
                """
        ).compactMap { row in fileReference(row["file"]).map { (row["unit_id"], row["id"], $0) } }
    }

    /// The file an `Asset` row's `file` column names (its reference as JSON text).
    static func fileReference(_ text: String?) -> FileReference? {
        guard let text, let json = JSONParser.parse(text) else { return nil }
        return try? FileReference(json: json)
    }

    static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }
}
