import Foundation
import OutpostTestSupport
import Testing

@testable import ContractCompiler

/// Fixture folders compared file by file: `Fixtures/valid/<case>/contracts` must generate exactly
/// `Fixtures/valid/<case>/expected/`, and `Fixtures/invalid/<case>/contracts` must print exactly
/// `Fixtures/invalid/<case>/expected.stderr`.
@Suite("Golden fixtures", .blockingWork)
struct GoldenFixtureTests {
    @Test("valid fixtures generate the expected files", arguments: Fixtures.cases("valid"))
    func validFixture(_ name: String) throws {
        let folder = Fixtures.root.appendingPathComponent("valid/\(name)")
        let result = ContractCompiler.load(directory: folder.appendingPathComponent("contracts").path)
        #expect(!result.diagnostics.hasErrors, "\(result.diagnostics.renderedReport())")
        let set = try #require(result.contracts)
        let files = ContractCompiler.generate(set)
        let expected = folder.appendingPathComponent("expected")
        for file in files {
            Golden.compare(actual: file.contents, expectedFile: expected.appendingPathComponent(file.path))
        }
        // No golden file may be left over from a file the generator no longer produces.
        let produced = Set(files.map(\.path))
        let enumerator = FileManager.default.enumerator(atPath: expected.path)
        while let relative = enumerator?.nextObject() as? String {
            guard relative.hasSuffix(".swift") else { continue }
            if !produced.contains(relative) {
                if Golden.isRecording {
                    try FileManager.default.removeItem(at: expected.appendingPathComponent(relative))
                    Issue.record("Removed stale golden file \(relative)")
                } else {
                    Issue.record("golden file \(relative) is no longer generated")
                }
            }
        }
    }

    @Test("invalid fixtures print the expected diagnostics", arguments: Fixtures.cases("invalid"))
    func invalidFixture(_ name: String) throws {
        let folder = Fixtures.root.appendingPathComponent("invalid/\(name)")
        let result = ContractCompiler.load(directory: folder.appendingPathComponent("contracts").path)
        #expect(result.diagnostics.hasErrors, "an invalid fixture must produce errors")
        let report = result.diagnostics.renderedReport().replacingOccurrences(of: folder.path + "/", with: "") + "\n"
        Golden.compare(actual: report, expectedFile: folder.appendingPathComponent("expected.stderr"))
    }

    @Test("the project's own contracts are valid and generate what is committed")
    func projectContracts() throws {
        let repository = Fixtures.root.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let result = ContractCompiler.load(directory: repository.appendingPathComponent("contracts").path)
        #expect(result.diagnostics.diagnostics.isEmpty, "\(result.diagnostics.renderedReport())")
        let set = try #require(result.contracts)
        var diagnostics = DiagnosticCollector()
        let history = ContractCompiler.history(
            lockPath: repository.appendingPathComponent("contracts/contracts.lock").path, diagnostics: &diagnostics
        )
        #expect(diagnostics.diagnostics.isEmpty, "\(diagnostics.renderedReport())")
        #expect(history["Unit"]?.map(\.version) == [1, 2, 3], "the sample history locks Unit at versions 1, 2 and 3")
        let stale = ContractCompiler.differences(
            ContractCompiler.generate(set, history: history), in: repository.appendingPathComponent("Sources/Contracts").path
        )
        #expect(stale.isEmpty, "Sources/Contracts is out of date: \(stale); run `make codegen`")
    }
}
