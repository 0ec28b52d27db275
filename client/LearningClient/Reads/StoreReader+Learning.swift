import ContractRuntime
public import Contracts
public import SyncClient

/// The learning app's queries: its units and attempts. Tables and relations come from the
/// contract registry; filters use the generated `Change` types, so a renamed field fails to
/// compile.
extension StoreReader {
    /// Every cached unit, in catalogue order (`sort_index`, then title).
    public func units() throws(OfflineStoreError) -> [Unit] {
        try all(Unit.self, orderBy: [.ascending("sort_index"), .ascending("title")])
    }

    /// Every cached unit with its local state and number of cached lessons, in catalogue order.
    public func unitSummaries() throws(OfflineStoreError) -> [UnitSummary] {
        let units = try units()
        let lessons = try children(Lesson.self, of: units)
        let counts = Dictionary(grouping: lessons, by: \.unitId).mapValues(\.count)
        var summaries: [UnitSummary] = []
        for unit in units {
            let local = try localState(Unit.self, id: unit.id) ?? Unit.LocalState()
            summaries.append(UnitSummary(unit: unit, local: local, lessonCount: counts[unit.id] ?? 0))
        }
        return summaries
    }

    /// A unit with its lessons (in `sort_index` order), their assets and the device's records
    /// of the asset files; `nil` when the unit is not cached.
    public func unitDetail(id: String) throws(OfflineStoreError) -> UnitDetail? {
        guard let unit = try fetch(Unit.self, id: id) else { return nil }
        let local = try localState(Unit.self, id: id) ?? Unit.LocalState()
        let lessons = try children(Lesson.self, of: unit, orderBy: [.ascending("sort_index")])
        let assets = try children(Asset.self, of: lessons)
        let records = try assetRecords(ids: assets.map(\.id))
        let assetsByLesson = Dictionary(grouping: assets, by: \.lessonId)
        return UnitDetail(
            unit: unit, local: local,
            lessons: lessons.map { lesson in
                let assets = assetsByLesson[lesson.id] ?? []
                var downloads: [String: AssetRecord] = [:]
                for asset in assets { downloads[asset.id] = records[asset.id] }
                return LessonDetail(lesson: lesson, assets: assets, downloads: downloads)
            }
        )
    }

    /// The signed-in learner's attempts (the `user` scope holds only theirs), newest first,
    /// optionally of one assessment.
    public func attempts(assessmentId: String? = nil) throws(OfflineStoreError) -> [Attempt] {
        try all(
            Attempt.self, where: assessmentId.map { RowFilter.equals(.assessmentId($0)) },
            orderBy: [.descending("started_at")]
        )
    }
}
