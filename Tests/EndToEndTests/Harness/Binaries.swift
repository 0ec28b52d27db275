import Foundation

/// The built `sync-server` and `sync-device` executables: next to the test bundle, where
/// `swift build --build-tests` (which `make test` runs first) puts them, or in
/// `$OUTPOST_BIN_DIR`.
enum Binaries {
    struct Missing: Error, CustomStringConvertible {
        var name: String
        var searched: [String]
        var description: String {
            "\(name) is not built (looked in \(searched.joined(separator: ", "))); run `swift build --build-tests` first"
        }
    }

    static func url(of name: String) throws -> URL {
        var folders: [URL] = []
        if let override = ProcessInfo.processInfo.environment["OUTPOST_BIN_DIR"] { folders.append(URL(fileURLWithPath: override)) }
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
