package import Foundation

/// A fresh folder under the system's temporary directory, removed when the value is released.
/// Held by the harness or fixture that uses it, so the folder lives exactly as long as they do.
package final class TemporaryDirectory: Sendable {
    package let url: URL

    /// - Parameter prefix: the start of the folder's name, to tell which test left it behind
    ///   when a run is killed before the folder goes.
    package init(prefix: String = "outpost-test") throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }
}
