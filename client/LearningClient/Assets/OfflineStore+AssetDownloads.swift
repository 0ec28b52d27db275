import ContractRuntime
import Contracts
import Foundation
import GRDB
import SyncClient
import SyncProtocol

/// The bookkeeping ``AssetDownloader`` keeps in the store, one transaction per step: the
/// records of the files, the progress of a partial download (so that it resumes after a crash
/// or a lost connection), and a unit's download state.
extension OfflineStore {
    /// The record of an asset, or else one made (and stored) from its `Asset` row; `nil` when
    /// the device knows neither.
    func recordToDownload(assetId id: String) throws(OfflineStoreError) -> AssetRecord? {
        let now = now()
        return try writeTables { db in
            if let row = try Row.fetchOne(db, sql: #"SELECT * FROM "assets" WHERE "asset_id" = ?"#, arguments: [id]) {
                return AssetRecord(row: row)
            }
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT a."lesson_id", a."content_type", a."size_bytes", a."checksum", l."unit_id"
                        FROM \(UnitContent.assetTable) a LEFT JOIN \(UnitContent.lessonTable) l ON l."id" = a."lesson_id"
                        WHERE a."id" = ?
                        """,
                    arguments: [id]
                )
            else { return nil }
            let record = AssetRecord(
                id: id, unitId: row["unit_id"], lessonId: row["lesson_id"], contentType: row["content_type"],
                sizeBytes: row["size_bytes"], checksum: row["checksum"], updatedAt: now
            )
            try record.save(db)
            return record
        }
    }

    /// The records of a unit's files, made or updated from the `Asset` rows of its lessons on
    /// the device (its subscription brought them), in lesson order; records of files the unit
    /// no longer has are deleted with their files. A record keeps its partial download (resumed
    /// later under `If-Range`); a record whose checksum changed is no longer `downloaded`. The
    /// unit is marked `downloading`.
    func recordsForUnitDownload(unitId: String) throws(OfflineStoreError) -> [AssetRecord] {
        let now = now().millisecondsSince1970
        let directory = assetsDirectory
        let (records, staleFiles) = try writeTables { db in
            let assets = try Row.fetchAll(
                db,
                sql: """
                    SELECT a."id", a."lesson_id", a."content_type", a."size_bytes", a."checksum" FROM \(UnitContent.assetTable) a
                    JOIN \(UnitContent.lessonTable) l ON l."id" = a."lesson_id" WHERE l."unit_id" = ?
                    ORDER BY l."sort_index", l."id", a."id"
                    """,
                arguments: [unitId])
            let current = Set(assets.map { $0["id"] as String })
            let stale = try String.fetchAll(db, sql: #"SELECT "asset_id" FROM "assets" WHERE "unit_id" = ?"#, arguments: [unitId])
                .filter { !current.contains($0) }
            let staleFiles = try UnitContent.deleteRecords(db, ids: stale, directory: directory)
            var records: [AssetRecord] = []
            for asset in assets {
                let id: String = asset["id"]
                try db.execute(
                    sql: """
                        INSERT INTO "assets" ("asset_id", "unit_id", "lesson_id", "content_type", "size_bytes",
                            "checksum", "status", "downloaded_bytes", "updated_at")
                        VALUES (?, ?, ?, ?, ?, ?, 'remote', 0, ?)
                        ON CONFLICT ("asset_id") DO UPDATE SET "unit_id" = excluded."unit_id", "lesson_id" = excluded."lesson_id",
                            "content_type" = excluded."content_type", "size_bytes" = excluded."size_bytes", "checksum" = excluded."checksum",
                            "status" = CASE WHEN "checksum" != excluded."checksum" AND "status" = 'downloaded' THEN 'remote' ELSE "status" END,
                            "updated_at" = excluded."updated_at"
                        """,
                    arguments: [id, unitId, asset["lesson_id"], asset["content_type"], asset["size_bytes"], asset["checksum"], now]
                )
                if let row = try Row.fetchOne(db, sql: #"SELECT * FROM "assets" WHERE "asset_id" = ?"#, arguments: [id]) {
                    records.append(AssetRecord(row: row))
                }
            }
            try Self.noteUnitDownload(db, unitId: unitId, status: .downloading, now: now)
            return (records, staleFiles)
        }
        for file in staleFiles { try Self.removeFile(file) }
        return records
    }

    /// Records the bytes of a partial download; `false` when the record is gone (its unit was
    /// deleted meanwhile).
    func recordPartialDownload(assetId: String, bytes: Int64, etag: String?, error: String? = nil) throws(OfflineStoreError) -> Bool {
        let now = now().millisecondsSince1970
        return try writeTables { db in
            try db.execute(
                sql: """
                    UPDATE "assets" SET "status" = ?, "downloaded_bytes" = ?, "etag" = ?, "local_path" = NULL,
                        "last_error" = ?, "updated_at" = ?
                    WHERE "asset_id" = ?
                    """,
                arguments: [bytes > 0 ? AssetStatus.downloading.rawValue : AssetStatus.remote.rawValue, bytes, etag, error, now, assetId]
            )
            return db.changesCount > 0
        }
    }

    /// Records a failed download whose bytes were deleted.
    func recordFailedDownload(assetId: String, error: String) throws(OfflineStoreError) {
        let now = now().millisecondsSince1970
        try writeTables { db in
            try db.execute(
                sql: """
                    UPDATE "assets" SET "status" = 'failed', "downloaded_bytes" = 0, "etag" = NULL, "local_path" = NULL,
                        "last_error" = ?, "updated_at" = ?
                    WHERE "asset_id" = ?
                    """,
                arguments: [error, now, assetId]
            )
        }
    }

    /// Records a verified file; `false` when the record is gone (its unit was deleted meanwhile).
    func recordDownloadedFile(assetId: String, fileName: String, bytes: Int64, etag: String?) throws(OfflineStoreError) -> Bool {
        let now = now().millisecondsSince1970
        return try writeTables { db in
            try db.execute(
                sql: """
                    UPDATE "assets" SET "status" = 'downloaded', "local_path" = ?, "downloaded_bytes" = ?,
                        "etag" = COALESCE(?, "etag"), "last_error" = NULL, "downloaded_at" = COALESCE("downloaded_at", ?), "updated_at" = ?
                    WHERE "asset_id" = ?
                    """,
                arguments: [fileName, bytes, etag, now, now, assetId]
            )
            return db.changesCount > 0
        }
    }

    /// Marks a unit's download finished (`downloaded`, `downloaded_at`) or failed.
    func finishUnitDownload(unitId: String, succeeded: Bool) throws(OfflineStoreError) {
        let now = now().millisecondsSince1970
        try writeTables { db in try Self.noteUnitDownload(db, unitId: unitId, status: succeeded ? .downloaded : .failed, now: now) }
    }

    /// Marks `failed` every unit still `queued` or `downloading` when the store opens: its
    /// download was cut off with the process that ran it (killed, crashed, quit), and would
    /// otherwise show as running forever. Failed is what an interrupted download is: its files
    /// and partial files are kept, and the next ``AssetDownloader/downloadUnit(id:progress:)``
    /// resumes them. (A second process opening the store while a first one downloads sees that
    /// download as failed until it finishes.)
    static func markInterruptedDownloads(_ db: Database) throws {
        let unit = Contracts.Unit.DownloadStatus.self
        try db.execute(
            sql: "UPDATE \(UnitContent.unitTable) SET \"download_status\" = ? WHERE \"download_status\" IN (?, ?)",
            arguments: [unit.failed.rawValue, unit.queued.rawValue, unit.downloading.rawValue]
        )
    }

    // MARK: - Internals

    /// Writes a unit's download state to the unit's local columns (``Contracts/Unit/LocalState``,
    /// which lists show); a finished download sets `downloaded_at`.
    private static func noteUnitDownload(_ db: Database, unitId: String, status: Contracts.Unit.DownloadStatus, now: Int64) throws {
        let finished: Int64? = status == .downloaded ? now : nil
        try db.execute(
            sql: "UPDATE \(UnitContent.unitTable) SET \"download_status\" = ?, \"downloaded_at\" = COALESCE(?, \"downloaded_at\") WHERE \"id\" = ?",
            arguments: [status.rawValue, finished, unitId]
        )
    }

    static func removeFile(_ url: URL) throws(OfflineStoreError) {
        do {
            try AssetFiles.removeIfPresent(url)
        } catch {
            throw .fileSystem(path: url.path, reason: error.localizedDescription)
        }
    }
}
