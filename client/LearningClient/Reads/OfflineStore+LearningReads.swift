public import Contracts
import Foundation
public import SyncClient

/// The learning app's reads, each in its own snapshot (``StoreReader`` holds the same ones for
/// a snapshot of several reads).
extension OfflineStore {
    /// Every cached unit, in catalogue order.
    public func units() throws(OfflineStoreError) -> [Contracts.Unit] {
        try read { reader throws(OfflineStoreError) in try reader.units() }
    }

    /// Every cached unit with its local state and lesson count.
    public func unitSummaries() throws(OfflineStoreError) -> [UnitSummary] {
        try read { reader throws(OfflineStoreError) in try reader.unitSummaries() }
    }

    /// A unit with its lessons, their assets and the local URLs of the asset files the engine's
    /// cache holds (``LessonDetail/localFiles``); `nil` when not cached.
    public func unitDetail(id: String) throws(OfflineStoreError) -> UnitDetail? {
        try read { reader throws(OfflineStoreError) in try reader.unitDetail(id: id) }.map(withLocalFiles)
    }

    /// The learner's attempts, newest first.
    public func attempts(assessmentId: String? = nil) throws(OfflineStoreError) -> [Attempt] {
        try read { reader throws(OfflineStoreError) in try reader.attempts(assessmentId: assessmentId) }
    }

    /// A unit with its lessons and assets, from SQLite or else fetched once (the unit, its
    /// lessons and their assets in one request).
    public func unitDetail(id: String, from fetcher: any RemoteFetcher) async throws(OfflineStoreError) -> ReadResult<UnitDetail> {
        let result = try await fetch(Contracts.Unit.self, id: id, withChildrenDepth: 2, from: fetcher) { reader throws(OfflineStoreError) in
            try reader.unitDetail(id: id)
        }
        switch result {
        case .cached(let detail): return .cached(try withLocalFiles(detail))
        case .fetched(let detail): return .fetched(try withLocalFiles(detail))
        default: return result
        }
    }

    /// `detail` with the local URL of each asset file the engine's cache holds whole (not
    /// counted as a use: listing a unit is not opening its files).
    func withLocalFiles(_ detail: UnitDetail) throws(OfflineStoreError) -> UnitDetail {
        var detail = detail
        for index in detail.lessons.indices {
            for asset in detail.lessons[index].assets {
                guard let file = asset.file, let stored = try storedFile(sha256: file.sha256),
                    FileManager.default.fileExists(atPath: stored.url.path)
                else { continue }
                detail.lessons[index].localFiles[asset.id] = stored.url
            }
        }
        return detail
    }

    /// The unit list, from SQLite or else (when no unit is cached) fetched once.
    public func units(from fetcher: any RemoteFetcher) async throws(OfflineStoreError) -> ReadResult<[Contracts.Unit]> {
        try await readThrough(
            .all(Contracts.Unit.self), from: fetcher, read: { reader throws(OfflineStoreError) in try reader.units() },
            isCached: { !$0.isEmpty }
        )
    }
}
