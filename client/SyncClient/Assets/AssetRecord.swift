public import ContractRuntime
import Contracts
public import Foundation
import GRDB

/// The device's record of one downloadable file (a row of the `assets` table): where it comes
/// from, what it must hash to, and where it is on disk once downloaded.
///
/// The sync engine's downloader keeps these up to date (``OfflineStore/saveAssetRecord(_:)``);
/// reads such as ``OfflineStore/unitDetail(id:)`` report them next to the `Asset` contract rows.
public struct AssetRecord: Hashable, Sendable, Identifiable {
    /// The asset's id (the `Asset` contract row's id).
    public var id: String
    public var unitId: String?
    public var lessonId: String?
    /// Where to download it from.
    public var remoteURL: String?
    public var contentType: String?
    public var sizeBytes: Int64
    /// Lowercase hex SHA-256 the file must have.
    public var checksum: String
    /// The file's path relative to ``OfflineStore/assetsDirectory``, once it is there.
    public var localPath: String?
    public var status: AssetStatus
    /// Bytes on disk so far (a partial download resumes from here with `Range`).
    public var downloadedBytes: Int64
    /// The `ETag` the partial download was made against (to resume only the same file).
    public var etag: String?
    public var lastError: String?
    public var downloadedAt: Timestamp?
    public var lastAccessedAt: Timestamp?
    public var updatedAt: Timestamp

    public init(
        id: String, unitId: String? = nil, lessonId: String? = nil, remoteURL: String? = nil, contentType: String? = nil,
        sizeBytes: Int64, checksum: String, localPath: String? = nil, status: AssetStatus = .remote,
        downloadedBytes: Int64 = 0, etag: String? = nil, lastError: String? = nil, downloadedAt: Timestamp? = nil,
        lastAccessedAt: Timestamp? = nil, updatedAt: Timestamp
    ) {
        self.id = id
        self.unitId = unitId
        self.lessonId = lessonId
        self.remoteURL = remoteURL
        self.contentType = contentType
        self.sizeBytes = sizeBytes
        self.checksum = checksum
        self.localPath = localPath
        self.status = status
        self.downloadedBytes = downloadedBytes
        self.etag = etag
        self.lastError = lastError
        self.downloadedAt = downloadedAt
        self.lastAccessedAt = lastAccessedAt
        self.updatedAt = updatedAt
    }

    init(row: Row) {
        id = row["asset_id"]
        unitId = row["unit_id"]
        lessonId = row["lesson_id"]
        remoteURL = row["remote_url"]
        contentType = row["content_type"]
        sizeBytes = row["size_bytes"]
        checksum = row["checksum"]
        localPath = row["local_path"]
        status = AssetStatus(rawValue: row["status"]) ?? .remote
        downloadedBytes = row["downloaded_bytes"]
        etag = row["etag"]
        lastError = row["last_error"]
        downloadedAt = (row["downloaded_at"] as Int64?).map { Timestamp(millisecondsSince1970: $0) }
        lastAccessedAt = (row["last_accessed_at"] as Int64?).map { Timestamp(millisecondsSince1970: $0) }
        updatedAt = Timestamp(millisecondsSince1970: row["updated_at"])
    }

    /// Inserts or replaces the record.
    func save(_ db: Database) throws {
        try db.execute(
            sql: """
                INSERT OR REPLACE INTO "assets" ("asset_id", "unit_id", "lesson_id", "remote_url", "content_type",
                    "size_bytes", "checksum", "local_path", "status", "downloaded_bytes", "etag", "last_error",
                    "downloaded_at", "last_accessed_at", "updated_at")
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: arguments
        )
    }

    var arguments: StatementArguments {
        [
            id, unitId, lessonId, remoteURL, contentType, sizeBytes, checksum, localPath, status.rawValue, downloadedBytes, etag,
            lastError, downloadedAt?.millisecondsSince1970, lastAccessedAt?.millisecondsSince1970,
            updatedAt.millisecondsSince1970,
        ]
    }
}

/// Where an asset file is.
public enum AssetStatus: String, Hashable, Sendable, CaseIterable {
    /// Known, not on the device.
    case remote
    /// Waiting to be downloaded.
    case queued
    /// Partly on the device (see ``AssetRecord/downloadedBytes``).
    case downloading
    /// On the device, checksum verified.
    case downloaded
    /// The last download failed (see ``AssetRecord/lastError``).
    case failed
}

extension StoreReader {
    /// The record of one asset file.
    public func assetRecord(id: String) throws(OfflineStoreError) -> AssetRecord? {
        try run {
            try Row.fetchOne(db, sql: #"SELECT * FROM "assets" WHERE "asset_id" = ?"#, arguments: [id]).map(AssetRecord.init(row:))
        }
    }

    /// The records of asset files, all or those of one unit, by id.
    public func assetRecords(unitId: String? = nil) throws(OfflineStoreError) -> [AssetRecord] {
        try run {
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
        let records = try run {
            try Row.fetchAll(
                db, sql: #"SELECT * FROM "assets" WHERE "asset_id" IN ("# + placeholders + ")", arguments: StatementArguments(ids)
            ).map(AssetRecord.init(row:))
        }
        return Dictionary(records.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
    }
}

extension OfflineStore {
    /// The record of one asset file.
    public func assetRecord(id: String) throws(OfflineStoreError) -> AssetRecord? {
        try read { db in try StoreReader(db, codec: codec).assetRecord(id: id) }
    }

    /// The records of asset files, all or those of one unit.
    public func assetRecords(unitId: String? = nil) throws(OfflineStoreError) -> [AssetRecord] {
        try read { db in try StoreReader(db, codec: codec).assetRecords(unitId: unitId) }
    }

    /// Inserts or replaces the record of an asset file.
    public func saveAssetRecord(_ record: AssetRecord) throws(OfflineStoreError) {
        try write { db in try record.save(db) }
    }

    /// Forgets the record of an asset file (the file itself is the caller's to delete).
    public func removeAssetRecord(id: String) throws(OfflineStoreError) {
        try write { db in try db.execute(sql: #"DELETE FROM "assets" WHERE "asset_id" = ?"#, arguments: [id]) }
    }

    /// Notes that an asset was opened now (for least-recently-used eviction).
    public func touchAsset(id: String) throws(OfflineStoreError) {
        let now = now().millisecondsSince1970
        try write { db in
            try db.execute(sql: #"UPDATE "assets" SET "last_accessed_at" = ? WHERE "asset_id" = ?"#, arguments: [now, id])
        }
    }

    /// The file URL of a record's local path.
    public func fileURL(of record: AssetRecord) -> URL? {
        record.localPath.map { assetsDirectory.appendingPathComponent($0) }
    }
}
