import Foundation
import FuzzTargets
import Testing

/// Every committed input of every fuzz target, its seed corpus (`fuzz/corpus/<name>`) and the
/// inputs that once crashed it (`fuzz/regressions/<name>`), through the same function the
/// libFuzzer harness calls (`make fuzz`), so a fixed crash stays fixed without the fuzzer.
@Suite struct FuzzRegressionTests {
    static let fuzzFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("fuzz")

    /// The input files of `kind` (`corpus` or `regressions`) for `target`, sorted by name.
    static func inputs(_ kind: String, _ target: FuzzTarget) -> [URL] {
        let folder = fuzzFolder.appendingPathComponent(kind).appendingPathComponent(target.rawValue)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted().map { folder.appendingPathComponent($0) }
    }

    @Test("every seed and regression input holds the target's properties", arguments: FuzzTarget.allCases)
    func inputsHold(_ target: FuzzTarget) async throws {
        let seeds = Self.inputs("corpus", target)
        #expect(!seeds.isEmpty, "fuzz/corpus/\(target.rawValue) has no seed inputs")
        for file in seeds + Self.inputs("regressions", target) {
            let data = try Data(contentsOf: file)
            do {
                try await target.run(data)
            } catch {
                Issue.record("\(file.lastPathComponent): \(error)")
            }
        }
    }

    @Test("every corpus folder belongs to a target")
    func foldersMatchTargets() throws {
        for kind in ["corpus", "regressions"] {
            let folder = Self.fuzzFolder.appendingPathComponent(kind)
            let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
            for name in names where !name.hasPrefix(".") {
                #expect(FuzzTarget(rawValue: name) != nil, "fuzz/\(kind)/\(name) is not the name of a fuzz target")
            }
        }
    }
}
