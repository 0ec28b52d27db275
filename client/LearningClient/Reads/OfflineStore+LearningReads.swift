public import Contracts
public import SyncClient

/// The learning app's reads, each in its own snapshot (``StoreReader`` holds the same ones for
/// a snapshot of several reads).
extension OfflineStore {
    /// Every cached unit, in catalogue order.
    public func units() throws(OfflineStoreError) -> [Unit] {
        try read { reader throws(OfflineStoreError) in try reader.units() }
    }

    /// Every cached unit with its local state and lesson count.
    public func unitSummaries() throws(OfflineStoreError) -> [UnitSummary] {
        try read { reader throws(OfflineStoreError) in try reader.unitSummaries() }
    }

    /// A unit with its lessons, assets and asset files; `nil` when not cached.
    public func unitDetail(id: String) throws(OfflineStoreError) -> UnitDetail? {
        try read { reader throws(OfflineStoreError) in try reader.unitDetail(id: id) }
    }

    /// The learner's attempts, newest first.
    public func attempts(assessmentId: String? = nil) throws(OfflineStoreError) -> [Attempt] {
        try read { reader throws(OfflineStoreError) in try reader.attempts(assessmentId: assessmentId) }
    }

    /// A unit with its lessons and assets, from SQLite or else fetched once (the unit, its
    /// lessons and their assets in one request).
    public func unitDetail(id: String, from fetcher: any RemoteFetcher) async throws(OfflineStoreError) -> ReadResult<UnitDetail> {
        try await fetch(Unit.self, id: id, withChildrenDepth: 2, from: fetcher) { reader throws(OfflineStoreError) in
            try reader.unitDetail(id: id)
        }
    }

    /// The unit list, from SQLite or else (when no unit is cached) fetched once.
    public func units(from fetcher: any RemoteFetcher) async throws(OfflineStoreError) -> ReadResult<[Unit]> {
        try await readThrough(
            .all(Unit.self), from: fetcher, read: { reader throws(OfflineStoreError) in try reader.units() },
            isCached: { !$0.isEmpty }
        )
    }
}
