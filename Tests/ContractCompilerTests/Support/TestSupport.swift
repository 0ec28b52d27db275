import Foundation
import Testing

@testable import ContractCompiler

/// Where the fixture folders live in the source tree.
enum Fixtures {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures")

    static func cases(_ kind: String) -> [String] {
        let folder = root.appendingPathComponent(kind)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted()
    }
}

/// A throwaway contracts folder with a manifest, for snippet tests.
struct ContractFolder {
    let root: URL
    var contracts: URL { root.appendingPathComponent("contracts") }

    static let defaultManifest = """
        scopes:
          content: { key: "content:global", access: read }
          user: { key: "progress:user:{user_id}" }
          team: { key: "ops:team:{team_id}" }
        """

    init(files: [String: String], manifest: String? = ContractFolder.defaultManifest) throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("contractc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root.appendingPathComponent("contracts"), withIntermediateDirectories: true)
        if let manifest {
            try Data(manifest.utf8).write(to: root.appendingPathComponent("contracts/contracts.yaml"))
        }
        for (path, text) in files {
            let url = root.appendingPathComponent("contracts").appendingPathComponent(path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(text.utf8).write(to: url)
        }
    }

    func load() -> ContractCompiler.LoadResult {
        ContractCompiler.load(directory: contracts.path)
    }

    /// The diagnostics report with the temporary prefix removed, as a schema author would see it
    /// running `contractc` from the folder's parent.
    func report() -> String {
        load().diagnostics.renderedReport().replacingOccurrences(of: root.path + "/", with: "")
    }

    func remove() {
        try? FileManager.default.removeItem(at: root)
    }
}

/// Compiles one contract file (plus optional others) and returns the set, failing the test on errors.
func compileValid(_ files: [String: String], sourceLocation: Testing.SourceLocation = #_sourceLocation) throws -> ContractSet {
    let folder = try ContractFolder(files: files)
    defer { folder.remove() }
    let result = folder.load()
    #expect(!result.diagnostics.hasErrors, "unexpected diagnostics:\n\(folder.report())", sourceLocation: sourceLocation)
    return try #require(result.contracts, sourceLocation: sourceLocation)
}

/// Golden comparison with explicit re-recording: `OUTPOST_RECORD_GOLDENS=1 swift test` rewrites
/// the expected files and still fails, so a recording run never passes silently.
enum Golden {
    static var isRecording: Bool { ProcessInfo.processInfo.environment["OUTPOST_RECORD_GOLDENS"] == "1" }

    static func compare(
        actual: String, expectedFile: URL, sourceLocation: Testing.SourceLocation = #_sourceLocation
    ) {
        let expected = try? String(contentsOf: expectedFile, encoding: .utf8)
        if isRecording {
            if expected != actual {
                try? FileManager.default.createDirectory(
                    at: expectedFile.deletingLastPathComponent(), withIntermediateDirectories: true
                )
                try? Data(actual.utf8).write(to: expectedFile)
                Issue.record("Recorded new baseline for \(expectedFile.path); re-run without OUTPOST_RECORD_GOLDENS", sourceLocation: sourceLocation)
            }
            return
        }
        guard let expected else {
            Issue.record(
                "missing golden file \(expectedFile.path); record it with OUTPOST_RECORD_GOLDENS=1 swift test",
                sourceLocation: sourceLocation
            )
            return
        }
        if expected != actual {
            Issue.record(
                "\(expectedFile.lastPathComponent) differs from the golden file:\n\(lineDiff(expected: expected, actual: actual))",
                sourceLocation: sourceLocation
            )
        }
    }

    /// A small unified-style diff: the lines that differ, with line numbers.
    static func lineDiff(expected: String, actual: String) -> String {
        let old = expected.components(separatedBy: "\n"), new = actual.components(separatedBy: "\n")
        var output: [String] = []
        for index in 0..<max(old.count, new.count) {
            let left = index < old.count ? old[index] : nil
            let right = index < new.count ? new[index] : nil
            if left != right {
                if let left { output.append("\(index + 1) - \(left)") }
                if let right { output.append("\(index + 1) + \(right)") }
            }
            if output.count > 40 {
                output.append("…")
                break
            }
        }
        return output.joined(separator: "\n")
    }
}

/// The contract `Thing` compiled from `text` as `entities/thing.yaml`, which must be valid.
func compiledThing(_ text: String) throws -> Contract {
    try #require(try compileValid(["entities/thing.yaml": text]).contract(named: "Thing"))
}

/// What the compiler reports of a folder holding only `text` as `file`.
func folderReport(_ text: String, file: String = "entities/thing.yaml") throws -> String {
    let folder = try ContractFolder(files: [file: text])
    defer { folder.remove() }
    return folder.report()
}
