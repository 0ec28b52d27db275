import ContractRuntime
public import Contracts
public import Foundation
import SyncClient

/// A unit with its lessons, their content assets and where the device holds those files.
public struct UnitDetail: Hashable, Sendable {
    public var unit: Contracts.Unit
    /// Download status and access times.
    public var local: Contracts.Unit.LocalState
    /// In `sort_index` order.
    public var lessons: [LessonDetail]

    /// Every asset of every lesson.
    public var assets: [Asset] { lessons.flatMap(\.assets) }
    /// Bytes of every asset of the unit.
    public var totalBytes: Int64 { assets.reduce(0) { $0 + $1.sizeBytes } }
    /// Bytes of the assets whose files are on the device.
    public var downloadedBytes: Int64 {
        var total: Int64 = 0
        for lesson in lessons {
            for asset in lesson.assets where lesson.localFiles[asset.id] != nil { total += asset.sizeBytes }
        }
        return total
    }

    public init(unit: Contracts.Unit, local: Contracts.Unit.LocalState, lessons: [LessonDetail]) {
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
    /// The `file://` URL of each asset whose file (its row's `file`) the engine's file cache
    /// holds, by asset id; missing for a file not downloaded (ask
    /// ``SyncClient/SyncEngine/assetFile(id:)``). Filled by ``SyncClient/OfflineStore/unitDetail(id:)``;
    /// a ``SyncClient/StoreReader`` snapshot leaves it empty (the files folder is not in it).
    public var localFiles: [String: URL]

    public init(lesson: Lesson, assets: [Asset], localFiles: [String: URL] = [:]) {
        self.lesson = lesson
        self.assets = assets
        self.localFiles = localFiles
    }
}
