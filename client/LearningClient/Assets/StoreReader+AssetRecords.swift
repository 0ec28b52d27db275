import ContractRuntime
import Foundation
import GRDB
public import SyncClient

extension StoreReader {
    /// The record of one asset file.
    public func assetRecord(id: String) throws(OfflineStoreError) -> AssetRecord? {
        try withDatabase { db in
            try Row.fetchOne(db, sql: #"SELECT * FROM "assets" WHERE "asset_id" = ?"#, arguments: [id]).map(AssetRecord.init(row:))
        }
    }

    /// The records of asset files, all or those of one unit, by id.
    public func assetRecords(unitId: String? = nil) throws(OfflineStoreError) -> [AssetRecord] {
        try withDatabase { db in
            if let unitId {
                return try Row.fetchAll(db, sql: #"SELECT * FROM "assets" WHERE "unit_id" = ? ORDER BY "asset_id""#, arguments: [unitId])
                    .map(AssetRecord.init(row:))
            }
            return try Row.fetchAll(db, sql: #"SELECT * FROM "assets" ORDER BY "asset_id""#).map(AssetRecord.init(row:))
        }
    }

    func assetRecords(ids: [String]) throws(OfflineStoreError) -> [String: AssetRecord] {
        guard !ids.isEmpty else { return [:] }
        let placeholders = Array(repeating: "?", count: ids.count).joined(separator: ", ")
        let records = try withDatabase { db in
            try Row.fetchAll(
                db, sql: #"SELECT * FROM "assets" WHERE "asset_id" IN ("# + placeholders + ")", arguments: StatementArguments(ids)
            ).map(AssetRecord.init(row:))
        }
        return Dictionary(records.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
    }
}
