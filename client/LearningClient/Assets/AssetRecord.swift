public import ContractRuntime
import Foundation
import GRDB
import SyncClient

/// The device's record of one downloadable file (a row of the `assets` table): where it comes
/// from, what it must hash to, and where it is on disk once downloaded.
///
/// The sync engine's downloader keeps these up to date (`saveAssetRecord(_:)`);
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
