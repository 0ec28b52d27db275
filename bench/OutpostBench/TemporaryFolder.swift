import Foundation

/// A private temporary folder for one server benchmark: a database, asset files. Removed by
/// ``remove()`` unless `OUTPOST_BENCH_KEEP` is set.
struct TemporaryFolder: Sendable {
    let url: URL

    /// `TMPDIR/outpost-bench-<name>-<pid>`, empty.
    init(_ name: String) throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("outpost-bench-\(name)-\(ProcessInfo.processInfo.processIdentifier)", isDirectory: true)
        try? FileManager.default.removeItem(at: url)
        do {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        } catch {
            throw BenchmarkError("cannot create the temporary folder \(url.path): \(error)")
        }
    }

    /// A new, empty sub-folder (`run-3`).
    func folder(_ name: String) throws -> URL {
        let folder = url.appendingPathComponent(name, isDirectory: true)
        try? FileManager.default.removeItem(at: folder)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    func remove(_ folder: URL) {
        if Self.keep { return }
        try? FileManager.default.removeItem(at: folder)
    }

    func remove() {
        if Self.keep {
            Console.error("note: OUTPOST_BENCH_KEEP is set; kept \(url.path)")
            return
        }
        try? FileManager.default.removeItem(at: url)
    }

    private static var keep: Bool {
        guard let value = ProcessInfo.processInfo.environment["OUTPOST_BENCH_KEEP"] else { return false }
        return !value.isEmpty && value != "0"
    }
}
