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

    /// A unit with its lessons (in `sort_index` order) and their assets; `nil` when the unit is
    /// not cached. (``OfflineStore/unitDetail(id:)`` adds the local URLs of their files.)
    public func unitDetail(id: String) throws(OfflineStoreError) -> UnitDetail? {
        guard let unit = try fetch(Unit.self, id: id) else { return nil }
        let local = try localState(Unit.self, id: id) ?? Unit.LocalState()
        let lessons = try children(Lesson.self, of: unit, orderBy: [.ascending("sort_index")])
        let assets = try children(Asset.self, of: lessons)
        let assetsByLesson = Dictionary(grouping: assets, by: \.lessonId)
        return UnitDetail(
            unit: unit, local: local,
            lessons: lessons.map { lesson in
                LessonDetail(lesson: lesson, assets: assetsByLesson[lesson.id] ?? [])
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
