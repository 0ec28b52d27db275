import Foundation
import OutpostTestSupport
import Testing

/// Runs the real `contractc` binary, as CI and schema authors do.
@Suite("contractc command line", .blockingWork)
struct CommandLineTests {
    /// Runs `contractc ARGUMENTS` in `directory` to the end (the limit only stops a hang).
    static func run(_ arguments: [String], in directory: URL) throws -> CommandResult {
        try ChildProcess.run(BuiltProducts.executable("contractc"), arguments, in: directory, timeout: 300)
    }

    @Test("generate on broken contracts prints one located diagnostic per problem and exits 1", arguments: Fixtures.cases("invalid"))
    func brokenContracts(_ name: String) throws {
        let folder = Fixtures.root.appendingPathComponent("invalid/\(name)")
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("contractc-cli-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: output) }
        let run = try Self.run(["generate", "--output", output.path], in: folder)
        #expect(run.status == 1)
        let expected = try String(contentsOf: folder.appendingPathComponent("expected.stderr"), encoding: .utf8)
        #expect(run.stderr == expected)
        #expect(!FileManager.default.fileExists(atPath: output.path), "nothing may be written when the contracts have errors")
    }

    @Test("validate succeeds on valid contracts and writes nothing")
    func validate() throws {
        let folder = Fixtures.root.appendingPathComponent("valid/every-type")
        let run = try Self.run(["validate"], in: folder)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout == "3 contracts are valid.\n")
        #expect(run.stderr.isEmpty)
    }

    @Test("generate --check fails on an out-of-date folder and names the fix")
    func check() throws {
        let folder = Fixtures.root.appendingPathComponent("valid/every-type")
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("contractc-check-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: output) }
        let stale = try Self.run(["generate", "--check", "--output", output.path], in: folder)
        #expect(stale.status == 1)
        #expect(stale.stderr.contains("help: run `contractc generate --contracts "))
        let generate = try Self.run(["generate", "--output", output.path], in: folder)
        #expect(generate.status == 0)
        let again = try Self.run(["generate", "--output", output.path], in: folder)
        #expect(again.stdout.contains("is up to date"))
        let fresh = try Self.run(["generate", "--check", "--output", output.path], in: folder)
        #expect(fresh.status == 0)
    }

    @Test("machine formats: json and github annotations")
    func formats() throws {
        let folder = Fixtures.root.appendingPathComponent("invalid/missing-manifest")
        let json = try Self.run(["validate", "--format", "json"], in: folder)
        #expect(json.status == 1)
        let parsed = try JSONSerialization.jsonObject(with: Data(json.stderr.utf8)) as? [String: Any]
        #expect(parsed?["errors"] as? Int == 1)
        let github = try Self.run(["validate", "--format", "github"], in: folder)
        #expect(github.stderr.hasPrefix("::error file=contracts/contracts.yaml,line=1,col=1,title=MISSING_MANIFEST::"))
    }

    @Test("a missing contracts folder and a bad flag are clear errors")
    func misuse() throws {
        let missing = try Self.run(["validate", "--contracts", "no-such-folder"], in: FileManager.default.temporaryDirectory)
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("contracts folder 'no-such-folder' does not exist"))
        let badFlag = try Self.run(["validate", "--format", "xml"], in: FileManager.default.temporaryDirectory)
        #expect(badFlag.status != 0 && badFlag.status != 1 || badFlag.stderr.contains("format"))
    }

    @Test("init starts a contract set that checks, generates and names its schema at once, and refuses a folder in use")
    func initStartsAContractSet() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("contractc-init-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let started = try Self.run(["init", "contracts"], in: root)
        #expect(started.status == 0, "\(started)")
        #expect(started.stdout.contains("Note v1, NotePinned v1 released in contracts.lock"))
        for file in ["contracts.yaml", "entities/note.yaml", "events/note_pinned.yaml", "contracts.lock", "contract.schema.json", "README.md"] {
            #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent("contracts/\(file)").path), "missing \(file)")
        }
        let check = try Self.run(["check", "--contracts", "contracts"], in: root)
        #expect(check.status == 0, "\(check)")
        #expect(check.stdout.contains("2 contracts are compatible"))
        let schema = try Self.run(["schema", "--contracts", "contracts", "--check"], in: root)
        #expect(schema.status == 0, "\(schema)")
        let generate = try Self.run(["generate", "--contracts", "contracts", "--output", "Sources/Contracts"], in: root)
        #expect(generate.status == 0, "\(generate)")
        let registry = try String(contentsOf: root.appendingPathComponent("Sources/Contracts/ContractRegistry.swift"), encoding: .utf8)
        #expect(registry.contains("Note") && registry.contains("NotePinned"))
        // A folder in use is never written over.
        let again = try Self.run(["init", "contracts"], in: root)
        #expect(again.status == 64)
        #expect(again.stderr.contains("is not empty"))
    }
}
