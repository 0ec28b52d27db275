import Foundation
import GRDB
public import SyncClient

/// The cache budget (docs/client.md, "Cache management"): when asset files take more than the budget, whole units are
/// evicted (rows, records and files, like ``OfflineStore/deleteCachedUnit(id:)``) in this
/// order until they fit:
///
/// 1. expired units (their expiry passed, or the server deleted them);
/// 2. completed units not opened for ``CacheBudget/completedUnopenedAge`` (7 days);
/// 3. units never opened, downloaded more than ``CacheBudget/neverOpenedAge`` ago (3 days);
/// 4. the rest, least recently used first (last opened, else downloaded).
///
/// Within each group the least recently used go first. A unit that writes not yet on the
/// server involve is never evicted (``CachedUnit/hasUnsyncedWrites``); "synced" in the order
/// above holds for every unit that is evicted.
extension OfflineStore {
    /// Evicts units until asset files take at most `budget.maxBytes`; returns the evicted
    /// units' ids in eviction order. The clock is the store's (``OfflineStoreConfiguration/clock``).
    ///
    /// - Parameters:
    ///   - budget: the most bytes of asset files to keep.
    ///   - kept: units not to evict now (one being downloaded, or just downloaded).
    @discardableResult
    public func enforceCacheBudget(_ budget: CacheBudget = .standard, keeping kept: Set<String> = []) throws(OfflineStoreError) -> [String] {
        let now = now()
        let (units, total) = try readTables(withReader: { reader, db in
            (
                try cachedUnits(reader, db, now: now),
                try Int64.fetchOne(db, sql: "SELECT COALESCE(SUM(\(Self.bytesOnDiskSQL)), 0) FROM \"assets\"") ?? 0
            )
        })
        var remaining = total
        var evicted: [String] = []
        for unit in Self.evictionOrder(units, budget: budget, now: now.date) where !kept.contains(unit.id) {
            guard remaining > budget.maxBytes else { break }
            // Checked again in the deleting transaction: a write may have been queued since.
            guard try deleteUnitContent(unit.id, unlessUnsynced: true) == .deleted else { continue }
            remaining -= unit.bytesOnDisk
            evicted.append(unit.id)
        }
        return evicted
    }

    /// The emergency clean-up: evicts downloaded units in the eviction order (never one a
    /// waiting write leads to, nor those in `kept`) until the volume has `bytes` free, or
    /// nothing more may go. Returns the evicted units' ids. The store's housekeeping runs it
    /// (``LearningStore/reclaimSpace(_:in:)``); a download makes room with it first.
    @discardableResult
    public func reclaimUnitSpace(toFree wanted: Int64, keeping kept: Set<String> = []) throws(OfflineStoreError) -> [String] {
        guard let free = freeBytes(), free < wanted else { return [] }
        return try evictUnits(freeing: wanted - free, keeping: kept)
    }

    /// Bytes of files ``reclaimUnitSpace(toFree:keeping:)`` could free: units without a waiting
    /// write that leads to them, other than `kept`.
    public func reclaimableBytes(keeping kept: Set<String> = []) throws(OfflineStoreError) -> Int64 {
        try cachedUnits().filter { !$0.hasUnsyncedWrites && !kept.contains($0.id) }.reduce(0) { $0 + $1.bytesOnDisk }
    }

    /// Evicts units until `bytes` more are free on the volume.
    func evictUnits(freeing bytes: Int64, keeping kept: Set<String>) throws(OfflineStoreError) -> [String] {
        let files = try cacheTotals().bytesOnDisk
        let budget = CacheBudget(maxBytes: max(0, files - bytes))
        return try enforceCacheBudget(budget, keeping: kept)
    }

    /// Why a unit is evicted when it is, in the order groups are evicted.
    enum EvictionGroup: Int, Comparable {
        case expired
        case completedUnopened
        case neverOpened
        case leastRecentlyUsed

        static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// The units that may be evicted (files on the device, no unsynced writes), in eviction order.
    static func evictionOrder(_ units: [CachedUnit], budget: CacheBudget, now: Date) -> [CachedUnit] {
        let distantPast = Date(timeIntervalSince1970: 0)
        func lastUsed(_ unit: CachedUnit) -> Date { unit.lastOpenedAt ?? unit.downloadedAt ?? unit.addedAt ?? distantPast }
        func group(_ unit: CachedUnit) -> EvictionGroup {
            if unit.status == .expired { return .expired }
            if unit.isCompleted, lastUsed(unit) <= now.addingTimeInterval(-budget.completedUnopenedAge) { return .completedUnopened }
            if unit.lastOpenedAt == nil, (unit.downloadedAt ?? unit.addedAt ?? distantPast) <= now.addingTimeInterval(-budget.neverOpenedAge) {
                return .neverOpened
            }
            return .leastRecentlyUsed
        }
        return units.filter { $0.bytesOnDisk > 0 && !$0.hasUnsyncedWrites }
            .map { (unit: $0, group: group($0), lastUsed: lastUsed($0)) }
            .sorted { ($0.group, $0.lastUsed, $0.unit.id) < ($1.group, $1.lastUsed, $1.unit.id) }
            .map(\.unit)
    }
}
