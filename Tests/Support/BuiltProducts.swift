package import Foundation

/// The executables of this package (`sync-server`, `sync-device`, `contractc`): next to the test
/// bundle, where `swift build --build-tests` (which `make test` runs first) puts them, or in
/// `$OUTPOST_BIN_DIR`.
package enum BuiltProducts {
    package struct Missing: Error, CustomStringConvertible {
        package var name: String
        package var searched: [String]
        package var description: String {
            "\(name) is not built (looked in \(searched.joined(separator: ", "))); run `swift build --build-tests` first"
        }
    }

    package static func executable(_ name: String) throws -> URL {
        var folders: [URL] = []
        if let override = ProcessInfo.processInfo.environment["OUTPOST_BIN_DIR"] { folders.append(URL(fileURLWithPath: override)) }
        // The bundle sits in the products folder on Linux, a few levels inside it on macOS.
        var folder = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        for _ in 0..<4 {
            folders.append(folder)
            folder = folder.deletingLastPathComponent()
        }
        for folder in folders {
            let candidate = folder.appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        throw Missing(name: name, searched: folders.map(\.path))
    }
}
