public import ContractRuntime
public import Foundation

/// What the device may hold of each contract, and the free space it keeps (docs/client.md,
/// "Storage guard"). Set by the app in ``OfflineStoreConfiguration/storageLimits``.
public struct StorageLimits: Hashable, Sendable {
    /// The app's limits, per contract name, overriding the contract's own (its sync block's
    /// `max_rows` and `max_row_bytes`) field by field: a field left `nil` is the contract's
    /// (``ContractStorageLimit/overriding(_:)``); ``ContractStorageLimit/unlimited`` lifts both.
    /// The limits in force are ``OfflineStore/contractStorageLimits``.
    public var contracts: [String: ContractStorageLimit]
    /// A download needs this many times its size free on the volume (2: the file and room to
    /// spare, as SQLite and the system need some too).
    public var downloadSpaceFactor: Double
    /// Below this many free bytes on the volume, housekeeping evicts downloaded units (in the
    /// eviction order) until it is reached again or nothing more may go.
    public var minimumFreeBytes: Int64
    /// The most bytes of rows the contracts' tables may hold (their fields as stored); above
    /// it, housekeeping evicts synced rows the server can send again, lowest `priority` first
    /// (`low`, `normal`, `high`, `critical`), within a contract completed rows first, then the
    /// least recently used. `nil` (the default): no budget. SQLite reuses the freed pages for
    /// later rows; the file itself shrinks only when it is vacuumed.
    public var databaseBudgetBytes: Int64?
    /// The most bytes of downloaded and uploaded files (`file` fields) the store keeps in its
    /// files folder: above it, the least recently used go first
    /// (``OfflineStore/enforceFileCacheBudget()``). Files waiting to upload and files named by
    /// rows with writes not yet on the server are never evicted, and count. 500 MB by default.
    public var fileCacheBytes: Int64

    /// Limits with the given settings; the defaults are those of ``StorageLimits/standard``.
    public init(
        contracts: [String: ContractStorageLimit] = [:], downloadSpaceFactor: Double = 2, minimumFreeBytes: Int64 = 100_000_000,
        databaseBudgetBytes: Int64? = nil, fileCacheBytes: Int64 = 500_000_000
    ) {
        self.contracts = contracts
        self.downloadSpaceFactor = downloadSpaceFactor
        self.minimumFreeBytes = minimumFreeBytes
        self.databaseBudgetBytes = databaseBudgetBytes
        self.fileCacheBytes = fileCacheBytes
    }

    /// The contracts' own limits; 100 MB kept free; downloads need twice their size; no
    /// database budget; 500 MB of files cached.
    public static let standard = StorageLimits()

    /// The limits the contracts of `contracts` set themselves (`max_rows`, `max_row_bytes` in
    /// their sync block): the defaults an app's limits override.
    public static func contractDefaults(_ contracts: ContractCatalog) -> [String: ContractStorageLimit] {
        var defaults: [String: ContractStorageLimit] = [:]
        for entity in contracts.entities where entity.maxRows != nil || entity.maxRowBytes != nil {
            defaults[entity.name] = ContractStorageLimit(maxRows: entity.maxRows, maxRowBytes: entity.maxRowBytes)
        }
        return defaults
    }

    /// The limits in force for `contracts`: each contract's own with the app's over them.
    public func inForce(for contracts: ContractCatalog) -> [String: ContractStorageLimit] {
        Self.contractDefaults(contracts).merging(self.contracts) { own, app in app.overriding(own) }
            .filter { $0.value.maxRows != nil || $0.value.maxRowBytes != nil }
    }
}

/// The most a device keeps of one contract.
public struct ContractStorageLimit: Hashable, Sendable {
    /// Rows kept at most: above it, housekeeping evicts completed rows first, then the least
    /// recently used (last opened, else last synced). Rows with a write waiting, an open
    /// conflict or a pin count but are never evicted.
    public var maxRows: Int?
    /// The largest row kept, in bytes as stored: a larger synced row is dropped after the sync
    /// that brought it, and listed as ``DropReason/tooLarge``.
    public var maxRowBytes: Int?

    /// No limit on either, whatever the contract says.
    public static let unlimited = ContractStorageLimit(maxRows: .max, maxRowBytes: .max)

    /// A limit on rows, row size or both; `nil` keeps the contract's own.
    public init(maxRows: Int? = nil, maxRowBytes: Int? = nil) {
        self.maxRows = maxRows
        self.maxRowBytes = maxRowBytes
    }

    /// These limits, with each field left `nil` taken from `defaults`.
    public func overriding(_ defaults: ContractStorageLimit) -> ContractStorageLimit {
        ContractStorageLimit(maxRows: maxRows ?? defaults.maxRows, maxRowBytes: maxRowBytes ?? defaults.maxRowBytes)
    }
}

/// Where the store learns the free space of its volume; injectable for tests.
public protocol FreeSpaceProvider: Sendable {
    /// Bytes an app may still write on the volume holding `url`, or `nil` when unknown.
    func availableBytes(at url: URL) -> Int64?
}

/// The volume's free space: `volumeAvailableCapacityForImportantUsage` on Apple platforms (what
/// the system would free for the user's own data), the file system's free size elsewhere.
public struct VolumeFreeSpace: FreeSpaceProvider {
    /// A provider asking the file system of the running platform.
    public init() {}

    /// The bytes free for the app's data on the volume holding `url`; `nil` when it cannot tell.
    public func availableBytes(at url: URL) -> Int64? {
        #if os(iOS) || os(macOS) || os(tvOS) || os(watchOS) || os(visionOS)
            if let values = try? url.resourceValues(forKeys: [.volumeAvailableCapacityForImportantUsageKey]),
                let capacity = values.volumeAvailableCapacityForImportantUsage
            {
                return capacity
            }
        #endif
        let attributes = try? FileManager.default.attributesOfFileSystem(forPath: url.path)
        return (attributes?[.systemFreeSize] as? NSNumber)?.int64Value
    }
}
