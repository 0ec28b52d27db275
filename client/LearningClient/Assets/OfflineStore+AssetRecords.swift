import ContractRuntime
public import Foundation
import GRDB
public import SyncClient

extension OfflineStore {
    /// The record of one asset file.
    public func assetRecord(id: String) throws(OfflineStoreError) -> AssetRecord? {
        try read { reader throws(OfflineStoreError) in try reader.assetRecord(id: id) }
    }

    /// The records of asset files, all or those of one unit.
    public func assetRecords(unitId: String? = nil) throws(OfflineStoreError) -> [AssetRecord] {
        try read { reader throws(OfflineStoreError) in try reader.assetRecords(unitId: unitId) }
    }

    /// Inserts or replaces the record of an asset file.
    package func saveAssetRecord(_ record: AssetRecord) throws(OfflineStoreError) {
        try writeTables { db in try record.save(db) }
    }

    /// Forgets the record of an asset file (the file itself is the caller's to delete).
    package func removeAssetRecord(id: String) throws(OfflineStoreError) {
        try writeTables { db in try db.execute(sql: #"DELETE FROM "assets" WHERE "asset_id" = ?"#, arguments: [id]) }
    }

    /// Notes that an asset was opened now (for least-recently-used eviction).
    package func touchAsset(id: String) throws(OfflineStoreError) {
        let now = now().millisecondsSince1970
        try writeTables { db in
            try db.execute(sql: #"UPDATE "assets" SET "last_accessed_at" = ? WHERE "asset_id" = ?"#, arguments: [now, id])
        }
    }

    /// The file URL of a record's local path.
    public func fileURL(of record: AssetRecord) -> URL? {
        record.localPath.map { assetsDirectory.appendingPathComponent($0) }
    }
}
