import Foundation
import OutpostTestSupport
import Testing

@testable import ContractCompiler

@Suite("Generation and the output folder", .blockingWork)
struct GenerationTests {
    private func sampleSet() throws -> ContractSet {
        let folder = Fixtures.root.appendingPathComponent("valid/every-type/contracts")
        return try #require(ContractCompiler.load(directory: folder.path).contracts)
    }

    private func temporaryFolder() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("contractc-out-\(UUID().uuidString)").path
    }

    @Test("the same contracts generate byte-identical output")
    func deterministic() throws {
        let first = ContractCompiler.generate(try sampleSet())
        let second = ContractCompiler.generate(try sampleSet())
        #expect(first == second)
        #expect(first.allSatisfy { $0.contents.hasPrefix(ContractCompiler.generatedHeaderPrefix) })
        #expect(first.allSatisfy { $0.contents.hasSuffix("\n") && !$0.contents.hasSuffix("\n\n") })
    }

    @Test("writing twice changes nothing the second time")
    func idempotentWrite() throws {
        let output = temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: output) }
        let files = ContractCompiler.generate(try sampleSet())
        let first = try ContractCompiler.write(files, to: output)
        #expect(first.written.count == files.count)
        let before = try FileManager.default.attributesOfItem(atPath: output + "/ContractRegistry.swift")[.modificationDate] as? Date
        let second = try ContractCompiler.write(files, to: output)
        #expect(second.written.isEmpty && second.removed.isEmpty && second.unchanged.count == files.count)
        let after = try FileManager.default.attributesOfItem(atPath: output + "/ContractRegistry.swift")[.modificationDate] as? Date
        #expect(before == after)
        #expect(ContractCompiler.differences(files, in: output).isEmpty)
    }

    @Test("stale generated files are removed; foreign files are refused, never deleted")
    func ownership() throws {
        let output = temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: output) }
        let files = ContractCompiler.generate(try sampleSet())
        _ = try ContractCompiler.write(files, to: output)
        let stale = output + "/Entities/Removed.swift"
        try Data((ContractCompiler.generatedHeaderPrefix + " from x.\n").utf8).write(to: URL(fileURLWithPath: stale))
        #expect(ContractCompiler.differences(files, in: output) == ["Entities/Removed.swift"])
        let summary = try ContractCompiler.write(files, to: output)
        #expect(summary.removed == ["Entities/Removed.swift"])
        #expect(!FileManager.default.fileExists(atPath: stale))

        let handWritten = output + "/Helpers.swift"
        try Data("// mine\n".utf8).write(to: URL(fileURLWithPath: handWritten))
        #expect(throws: ContractCompiler.WriteError.self) { try ContractCompiler.write(files, to: output) }
        #expect(FileManager.default.fileExists(atPath: handWritten))
    }

    @Test("an edited generated file is reported as different")
    func detectsEdits() throws {
        let output = temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: output) }
        let files = ContractCompiler.generate(try sampleSet())
        _ = try ContractCompiler.write(files, to: output)
        let path = output + "/SchemaVersions.swift"
        try (String(contentsOfFile: path, encoding: .utf8) + "// edit\n").write(toFile: path, atomically: true, encoding: .utf8)
        #expect(ContractCompiler.differences(files, in: output) == ["SchemaVersions.swift"])
    }

    @Test("migration identifiers are unique per side and name table and version")
    func migrationIdentifiers() throws {
        let set = try sampleSet()
        for side in StorageSide.allCases {
            let steps = MigrationPlanner(set: set).migrations(side: side)
            #expect(Set(steps.map(\.identifier)).count == steps.count)
            #expect(steps.map(\.identifier).contains("books.v3.create"))
            #expect(steps.allSatisfy { $0.checksum.count == 64 })
        }
    }
}
