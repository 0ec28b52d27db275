import ContractRuntime
public import Contracts
import SyncClient

/// A unit with its lessons, their content assets and the device's records of those files.
public struct UnitDetail: Hashable, Sendable {
    public var unit: Unit
    /// Download status and access times.
    public var local: Unit.LocalState
    /// In `sort_index` order.
    public var lessons: [LessonDetail]

    /// Every asset of every lesson.
    public var assets: [Asset] { lessons.flatMap(\.assets) }
    /// Bytes of every asset of the unit.
    public var totalBytes: Int64 { assets.reduce(0) { $0 + $1.sizeBytes } }
    /// Bytes of the assets on the device.
    public var downloadedBytes: Int64 {
        lessons.reduce(0) { total, lesson in
            total + lesson.downloads.values.filter { $0.status == .downloaded }.reduce(0) { $0 + $1.sizeBytes }
        }
    }

    public init(unit: Unit, local: Unit.LocalState, lessons: [LessonDetail]) {
        self.unit = unit
        self.local = local
        self.lessons = lessons
    }
}

/// A lesson with its content assets.
public struct LessonDetail: Hashable, Sendable {
    public var lesson: Lesson
    /// The `Asset` contract rows of the lesson, by id.
    public var assets: [Asset]
    /// The device's records of those files (``AssetRecord``), by asset id; missing for an asset
    /// the device has no record of yet.
    public var downloads: [String: AssetRecord]

    public init(lesson: Lesson, assets: [Asset], downloads: [String: AssetRecord]) {
        self.lesson = lesson
        self.assets = assets
        self.downloads = downloads
    }
}
