import Foundation
import OutpostTestSupport
import Testing

@testable import ContractCompiler

/// The JSON Schema editors use (`contracts/contract.schema.json`), checked with a real JSON Schema
/// validator (Python's `jsonschema`, installed by `.ci/run`) against every fixture: it must take
/// every valid one and refuse the invalid ones a schema can see.
@Suite("Contract JSON Schema", .blockingWork)
struct ContractJSONSchemaTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let fixtures = repository.appendingPathComponent("Tests/ContractCompilerTests/Fixtures")

    /// The invalid fixtures the schema refuses, and the YAML it cannot read (left to the parser:
    /// an editor shows those itself). Every other invalid fixture breaks a rule only the compiler
    /// can check (references, defaults against types, scopes, duplicates).
    static let refusedBySchema: Set<String> = [
        "invalid/every-rule/contracts/contracts.yaml",
        "invalid/every-rule/contracts/entities/gadget.yaml",
        "invalid/every-rule/contracts/entities/gizmo.yaml",
        "invalid/every-rule/contracts/entities/widget.yaml",
        "invalid/every-rule/contracts/events/duplicate.yaml",
        "invalid/every-rule/contracts/events/gadget_moved.yaml",
        "invalid/file-fields/contracts/entities/receipt.yaml",
        "invalid/yaml-problems/contracts/both.yaml",
        "invalid/yaml-problems/contracts/list.yaml",
        "invalid/yaml-problems/contracts/neither.yaml",
        "invalid/yaml-problems/contracts/scalar.yaml",
    ]

    @Test("the committed schema is the one the compiler writes")
    func committedSchemaIsCurrent() throws {
        let committed = try String(contentsOf: Self.repository.appendingPathComponent("contracts/\(ContractJSONSchema.fileName)"), encoding: .utf8)
        #expect(committed == ContractJSONSchema.render(), "run `make codegen`")
    }

    @Test("every contract file names the schema on its first line")
    func everyFileNamesTheSchema() throws {
        let folder = Self.repository.appendingPathComponent("contracts")
        for file in Self.yamlFiles(in: folder) {
            let relative = file.path.dropFirst(folder.path.count + 1)
            let depth = relative.split(separator: "/").count - 1
            let expected = ContractJSONSchema.modeline(relativePath: String(repeating: "../", count: depth) + ContractJSONSchema.fileName)
            let firstLine = try String(contentsOf: file, encoding: .utf8).prefix { $0 != "\n" }
            #expect(firstLine == expected, "\(relative)")
        }
    }

    @Test("a real JSON Schema validator takes every valid contract and refuses the invalid ones it can")
    func validatorAgreesWithTheCompiler() throws {
        var instances: [(name: String, json: String)] = []
        var unreadable: [String] = []
        let valid = [Self.repository.appendingPathComponent("contracts")] + ["valid", "compat"].map { Self.fixtures.appendingPathComponent($0) }
        for folder in valid + [Self.fixtures.appendingPathComponent("invalid")] {
            for file in Self.yamlFiles(in: folder) {
                let name =
                    file.path.hasPrefix(Self.fixtures.path)
                    ? String(file.path.dropFirst(Self.fixtures.path.count + 1)) : "contracts/" + file.lastPathComponent
                var diagnostics = DiagnosticCollector()
                guard let node = YAMLParser().parse(Array(try Data(contentsOf: file)), file: file.path, diagnostics: &diagnostics) else {
                    unreadable.append(name)
                    continue
                }
                instances.append((name, DefaultParser.canonicalJSON(node)))
            }
        }
        #expect(instances.count > 30)
        let verdicts = try Self.validate(instances)
        for (name, _) in instances {
            let errors = verdicts[name] ?? ["no verdict"]
            if name.hasPrefix("invalid/") {
                if Self.refusedBySchema.contains(name) {
                    #expect(!errors.isEmpty, "the schema takes \(name)")
                } else {
                    #expect(errors.isEmpty, "the schema refuses \(name), which only the compiler should: \(errors)")
                }
            } else {
                #expect(errors.isEmpty, "the schema refuses the valid \(name): \(errors)")
            }
        }
        // What the parser refuses is never listed as the schema's.
        #expect(Self.refusedBySchema.isDisjoint(with: unreadable))
    }

    /// Runs Draft7Validator over every instance in one Python process; the errors per instance.
    static func validate(_ instances: [(name: String, json: String)]) throws -> [String: [String]] {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("contract-schema-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        var manifest: [String: String] = [:]
        for (index, instance) in instances.enumerated() {
            let path = folder.appendingPathComponent("\(index).json")
            try Data(instance.json.utf8).write(to: path)
            manifest[instance.name] = path.path
        }
        let manifestURL = folder.appendingPathComponent("instances.json")
        try JSONEncoder().encode(manifest).write(to: manifestURL)
        let script = """
            import json, sys
            from jsonschema import Draft7Validator
            schema = json.load(open(sys.argv[1]))
            Draft7Validator.check_schema(schema)
            validator = Draft7Validator(schema)
            verdicts = {}
            for name, path in json.load(open(sys.argv[2])).items():
                verdicts[name] = [e.message for e in validator.iter_errors(json.load(open(path)))]
            json.dump(verdicts, sys.stdout)
            """
        let schema = repository.appendingPathComponent("contracts/\(ContractJSONSchema.fileName)")
        let run = try ChildProcess.run(tool: "python3", ["-c", script, schema.path, manifestURL.path], timeout: 300)
        guard run.status == 0 else {
            throw ValidatorFailure("python3 jsonschema failed (install it with `python3 -m pip install jsonschema`): \(run.stderr)")
        }
        return try JSONDecoder().decode([String: [String]].self, from: Data(run.stdout.utf8))
    }

    static func yamlFiles(in folder: URL) -> [URL] {
        guard let walker = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil) else { return [] }
        return walker.compactMap { $0 as? URL }.filter { ["yaml", "yml"].contains($0.pathExtension) }.sorted { $0.path < $1.path }
    }

    struct ValidatorFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
