public import Foundation
import SyncClient

/// Where a unit's offline copy stands.
public enum UnitCacheStatus: String, Hashable, Sendable, CaseIterable {
    /// Every file of the unit is on the device, verified.
    case downloaded
    /// Some files are on the device: an interrupted or failed download, files the engine's
    /// cache evicted since, or files added to the unit since it was downloaded.
    case partial
    /// No file of the unit is on the device.
    case notDownloaded = "not_downloaded"
    /// Its subscription expired (completed and not opened again), or the server deleted the
    /// unit, while the device still kept it.
    case expired
}

/// A unit as cache management lists it: its offline state, size and use.
public struct CachedUnit: Hashable, Sendable, Identifiable {
    public var id: String
    /// The unit's title; `nil` when its row is no longer on the device (deleted on the server)
    /// while its files still are.
    public var title: String?
    public var status: UnitCacheStatus
    /// Bytes of its asset files in the engine's file cache. Only the files count: the unit's
    /// rows in SQLite are a few kilobytes at most.
    public var bytesOnDisk: Int64
    /// Bytes of all its files once downloaded, from their metadata.
    public var bytesTotal: Int64
    /// Its asset files, and how many of them are on the device, verified.
    public var fileCount: Int
    public var downloadedFileCount: Int
    /// When the device began keeping it (its `unit` subscription was made: its first download or
    /// opening); `nil` for a unit only listed in the catalogue.
    public var addedAt: Date?
    /// When its last download finished.
    public var downloadedAt: Date?
    /// When the app last opened it (``OfflineStore/markUnitOpened(id:)``: its subscription's last use).
    public var lastOpenedAt: Date?
    /// Whether the learner completed it: marked by the app (``OfflineStore/markUnitCompleted(id:completed:keepingFor:)``,
    /// which ends its subscription), or a `CompletionRecord` of the whole unit (no lesson) is on the device.
    public var isCompleted: Bool
    /// When its offline copy expires, once its subscription ended (completed): it is then
    /// evicted unless opened again.
    public var expiresAt: Date?
    /// Writes not yet on the server involve it (its rows, or rows that refer to them such as
    /// progress events): it is never evicted.
    public var hasUnsyncedWrites: Bool
}

/// The storage the learning app's content uses, for a settings screen.
public struct CacheTotals: Hashable, Sendable {
    /// Units listed by ``OfflineStore/cachedUnits()``, and those of them fully downloaded.
    public var units: Int
    public var downloadedUnits: Int
    /// Bytes of the content's asset files in the engine's file cache (each file once).
    public var bytesOnDisk: Int64
    /// The content's asset files in the engine's file cache.
    public var files: Int
    /// Bytes of the SQLite database (with its `-wal` and `-shm` files).
    public var databaseBytes: Int64
}
