import Foundation
import OutpostTestSupport
import Testing

/// `contractc check`, `lock` and `explain`, run as the real binary from a folder whose contracts
/// were locked and then broken in several ways (Fixtures/compat/check-golden).
@Suite("contractc check, lock and explain", .blockingWork)
struct CheckCommandTests {
    static let fixture = Fixtures.root.appendingPathComponent("compat/check-golden")

    /// The rules the fixture's current contracts break.
    static let expectedRules: Set<String> = [
        "CONTRACT_DELETED", "VERSION_NOT_BUMPED", "TABLE_RENAMED", "CONFLICT_POLICY_CHANGED", "MAX_LENGTH_REDUCED",
        "FIELD_TYPE_CHANGED", "ENUM_VALUE_ADDED", "REQUIRED_FIELD_ADDED", "FIELD_REMOVED",
    ]

    /// A temporary folder holding `contracts/`: the fixture's `released` contracts, locked with
    /// `contractc lock`, then (unless `swap` is false) replaced by the fixture's current contracts.
    static func prepare(swap: Bool = true) throws -> URL {
        let files = FileManager.default
        let root = files.temporaryDirectory.appendingPathComponent("contractc-check-\(UUID().uuidString)")
        let contracts = root.appendingPathComponent("contracts")
        try files.createDirectory(at: root, withIntermediateDirectories: true)
        try files.copyItem(at: fixture.appendingPathComponent("released"), to: contracts)
        let lock = try CommandLineTests.run(["lock"], in: root)
        #expect(lock.status == 0, "\(lock.stderr)")
        #expect(lock.stdout == "Locked in contracts/contracts.lock: Gadget v1, Gizmo v1, Ping v1, Widget v1.\n")
        guard swap else { return root }
        let lockFile = contracts.appendingPathComponent("contracts.lock")
        let lockData = try Data(contentsOf: lockFile)
        try files.removeItem(at: contracts)
        try files.copyItem(at: fixture.appendingPathComponent("contracts"), to: contracts)
        try lockData.write(to: lockFile)
        return root
    }

    @Test("the released contracts pass check")
    func releasedPasses() throws {
        let root = try Self.prepare(swap: false)
        defer { try? FileManager.default.removeItem(at: root) }
        let run = try CommandLineTests.run(["check"], in: root)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.isEmpty)
        #expect(run.stdout == "4 contracts are compatible with contracts/contracts.lock (4 with released versions).\n")
    }

    @Test("a new optional field with only the version bumped passes check, and lock records it as new in that version")
    func newOptionalFieldNeedsNoSince() throws {
        let root = try Self.prepare(swap: false)
        defer { try? FileManager.default.removeItem(at: root) }
        let widget = root.appendingPathComponent("contracts/entities/widget.yaml")
        var text = try String(contentsOf: widget, encoding: .utf8)
        text = text.replacingOccurrences(of: "version: 1\n", with: "version: 2\n")
        text += "  nickname: string?\n"
        try text.write(to: widget, atomically: true, encoding: .utf8)
        let check = try CommandLineTests.run(["check"], in: root)
        #expect(check.status == 0, "\(check.stderr)")
        #expect(check.stdout == "4 contracts are compatible with contracts/contracts.lock (4 with released versions).\n")
        let lock = try CommandLineTests.run(["lock"], in: root)
        #expect(lock.status == 0, "\(lock.stderr)")
        let lockText = try String(contentsOf: root.appendingPathComponent("contracts/contracts.lock"), encoding: .utf8)
        #expect(lockText.contains("nickname: { type: string?, since: 2 }"), "\(lockText)")
    }

    @Test("text output: one located diagnostic per breaking change, allowances on stdout, exit 1")
    func textGolden() throws {
        let root = try Self.prepare()
        defer { try? FileManager.default.removeItem(at: root) }
        let run = try CommandLineTests.run(["check"], in: root)
        #expect(run.status == 1)
        Golden.compare(actual: run.stderr, expectedFile: Self.fixture.appendingPathComponent("expected.check.txt"))
        let found = Set(
            run.stderr.components(separatedBy: "\n").compactMap { line -> String? in
                guard let open = line.range(of: ": error["), let close = line.range(of: "]:", range: open.upperBound..<line.endIndex) else {
                    return nil
                }
                return String(line[open.upperBound..<close.lowerBound])
            })
        #expect(found == Self.expectedRules)
        #expect(run.stderr.hasSuffix("\n9 errors, 0 warnings\n"))
        let widget = try String(contentsOf: Self.fixture.appendingPathComponent("contracts/entities/widget.yaml"), encoding: .utf8)
        let sizeLine = try #require(lineNumber(of: "size: string", in: widget))
        #expect(run.stderr.contains("contracts/entities/widget.yaml:\(sizeLine):9: error[FIELD_TYPE_CHANGED]"))
        let gizmo = try String(contentsOf: Self.fixture.appendingPathComponent("contracts/entities/gizmo.yaml"), encoding: .utf8)
        let allowLine = try #require(lineNumber(of: "allow:", in: gizmo))
        #expect(
            run.stdout
                == "allowed: contracts/entities/gizmo.yaml:\(allowLine):13: FIELD_TYPE_CHANGED allowed on Gizmo.code until 2999-12-31: no gizmo was ever synced\n"
        )
    }

    @Test("json output")
    func jsonGolden() throws {
        let root = try Self.prepare()
        defer { try? FileManager.default.removeItem(at: root) }
        let run = try CommandLineTests.run(["check", "--format", "json"], in: root)
        #expect(run.status == 1)
        #expect(run.stdout.isEmpty, "machine formats keep stdout clean")
        Golden.compare(actual: run.stderr, expectedFile: Self.fixture.appendingPathComponent("expected.check.json"))
        let document = try #require(try JSONSerialization.jsonObject(with: Data(run.stderr.utf8)) as? [String: Any])
        #expect(document["errors"] as? Int == 9)
        let diagnostics = try #require(document["diagnostics"] as? [[String: Any]])
        #expect(Set(diagnostics.compactMap { $0["rule"] as? String }) == Self.expectedRules)
        for diagnostic in diagnostics {
            let file = diagnostic["file"] as? String ?? ""
            #expect(file.hasPrefix("contracts/"), "paths are relative to the working directory: \(file)")
            #expect((diagnostic["line"] as? Int ?? 0) >= 1)
            #expect(diagnostic["help"] is String)
        }
        // The deleted contract is located in the lock, where it was released.
        let deleted = try #require(diagnostics.first { $0["rule"] as? String == "CONTRACT_DELETED" })
        #expect(deleted["file"] as? String == "contracts/contracts.lock")
    }

    @Test("github output: one annotation per diagnostic")
    func githubAnnotations() throws {
        let root = try Self.prepare()
        defer { try? FileManager.default.removeItem(at: root) }
        let run = try CommandLineTests.run(["check", "--format", "github"], in: root)
        #expect(run.status == 1)
        let lines = run.stderr.split(separator: "\n")
        #expect(lines.count == 9, "\(run.stderr)")
        for line in lines {
            #expect(line.hasPrefix("::error file=contracts/"), "\(line)")
        }
        #expect(lines.contains { $0.contains("title=FIELD_REMOVED::") })
    }

    @Test("an expired allowance fails check (hidden --today)")
    func expiredAllowance() throws {
        let root = try Self.prepare()
        defer { try? FileManager.default.removeItem(at: root) }
        let run = try CommandLineTests.run(["check", "--today", "3000-01-01"], in: root)
        #expect(run.status == 1)
        #expect(run.stderr.contains("contracts/entities/gizmo.yaml:"), "\(run.stderr)")
        #expect(run.stderr.contains("error[ALLOWANCE_EXPIRED]: the allowance for FIELD_TYPE_CHANGED expired on 2999-12-31"), "\(run.stderr)")
    }

    @Test("lock refuses the broken contracts and leaves the lock alone")
    func lockRefuses() throws {
        let root = try Self.prepare()
        defer { try? FileManager.default.removeItem(at: root) }
        let lockFile = root.appendingPathComponent("contracts/contracts.lock")
        let before = try Data(contentsOf: lockFile)
        let run = try CommandLineTests.run(["lock"], in: root)
        #expect(run.status == 1)
        #expect(run.stderr.contains("error[VERSION_NOT_BUMPED]"))
        #expect(try Data(contentsOf: lockFile) == before)
    }

    @Test("check --lock names another lock file")
    func lockOption() throws {
        let root = try Self.prepare(swap: false)
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.moveItem(
            at: root.appendingPathComponent("contracts/contracts.lock"), to: root.appendingPathComponent("released.lock")
        )
        let run = try CommandLineTests.run(["check", "--lock", "released.lock"], in: root)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("compatible with released.lock (4 with released versions)"))
    }

    /// A lock naming a contract the folder does not have, whose every entry is malformed.
    @Test("a lock whose only entries for a missing contract are malformed is LOCK_UNREADABLE, not a crash")
    func malformedEntriesOfMissingContract() throws {
        let root = try Self.prepare(swap: false)
        defer { try? FileManager.default.removeItem(at: root) }
        let lockFile = root.appendingPathComponent("contracts/contracts.lock")
        var text = try String(contentsOf: lockFile, encoding: .utf8)
        text = text.replacingOccurrences(of: "\ncontracts:\n", with: "\ncontracts:\n  Ghost:\n    - version: one\n")
        try Data(text.utf8).write(to: lockFile)
        let run = try CommandLineTests.run(["check"], in: root)
        #expect(run.status == 1, "status \(run.status), stderr: \(run.stderr)")
        #expect(run.stderr.contains("error[LOCK_UNREADABLE]"), "\(run.stderr)")
        #expect(!run.stderr.contains("CONTRACT_DELETED"), "an unreadable entry is not a deletion: \(run.stderr)")
    }

    // MARK: --against

    private static func git(_ arguments: [String], in directory: URL) throws {
        let result = try ChildProcess.run(
            tool: "git", ["-c", "user.name=Outpost Tests", "-c", "user.email=tests@outpost.invalid", "-c", "commit.gpgsign=false"] + arguments,
            in: directory
        )
        try #require(result.status == 0, "git \(arguments.joined(separator: " ")) failed: \(result)")
    }

    @Test("check --against a git revision reports the same breaking changes, located in the working tree")
    func againstGitRevision() throws {
        let root = try Self.prepare()
        defer { try? FileManager.default.removeItem(at: root) }
        let contracts = root.appendingPathComponent("contracts")
        // Commit the released contracts, then put the current ones back in the working tree.
        let current = root.appendingPathComponent("current")
        try FileManager.default.moveItem(at: contracts, to: current)
        try FileManager.default.copyItem(at: Self.fixture.appendingPathComponent("released"), to: contracts)
        try Self.git(["init", "-q"], in: root)
        try Self.git(["add", "contracts"], in: root)
        try Self.git(["commit", "-q", "-m", "release"], in: root)
        try FileManager.default.removeItem(at: contracts)
        try FileManager.default.moveItem(at: current, to: contracts)

        let run = try CommandLineTests.run(["check", "--against", "HEAD", "--format", "json"], in: root)
        #expect(run.status == 1, "\(run.stderr)")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(run.stderr.utf8)) as? [String: Any], "\(run.stderr)")
        let diagnostics = try #require(document["diagnostics"] as? [[String: Any]])
        #expect(Set(diagnostics.compactMap { $0["rule"] as? String }) == Self.expectedRules)
        let fromWorkingTree = diagnostics.filter { $0["rule"] as? String != "CONTRACT_DELETED" }
        for diagnostic in fromWorkingTree {
            #expect((diagnostic["file"] as? String)?.hasPrefix("contracts/") == true, "\(diagnostic)")
        }
        // What the revision held is named `REV:path`, as `git show` takes it.
        let revisionPaths = diagnostics.flatMap { diagnostic -> [String] in
            let notes = (diagnostic["notes"] as? [[String: Any]] ?? []).compactMap { $0["file"] as? String }
            return notes + (diagnostic["rule"] as? String == "CONTRACT_DELETED" ? [diagnostic["file"] as? String ?? ""] : [])
        }
        #expect(!revisionPaths.isEmpty)
        for path in revisionPaths {
            #expect(path.hasPrefix("HEAD:contracts/"), "\(path)")
        }
    }

    // MARK: explain

    @Test("explain a known rule, in any case")
    func explainKnown() throws {
        let run = try CommandLineTests.run(["explain", "FIELD_REMOVED"], in: FileManager.default.temporaryDirectory)
        #expect(run.status == 0)
        #expect(
            run.stdout.hasPrefix("FIELD_REMOVED: a field was removed\n\nApplies to: `contractc check` in modes forward and full"), "\(run.stdout)")
        #expect(run.stdout.contains("\n\nWhy: ") && run.stdout.contains("\n\nFix: "))
        let lower = try CommandLineTests.run(["explain", "field_removed"], in: FileManager.default.temporaryDirectory)
        #expect(lower.stdout == run.stdout)
        let always = try CommandLineTests.run(["explain", "TABLE_RENAMED"], in: FileManager.default.temporaryDirectory)
        #expect(always.stdout.contains("in every compatibility mode"))
    }

    @Test("explain an unknown rule: exit 1 with a suggestion")
    func explainUnknown() throws {
        let run = try CommandLineTests.run(["explain", "FIELD_REMOVD"], in: FileManager.default.temporaryDirectory)
        #expect(run.status == 1)
        #expect(run.stdout.isEmpty)
        #expect(run.stderr == "error: unknown rule 'FIELD_REMOVD'; did you mean FIELD_REMOVED?\nhelp: `contractc explain` lists every rule\n")
        let nonsense = try CommandLineTests.run(["explain", "BANANA_SPLIT_WITH_SPRINKLES"], in: FileManager.default.temporaryDirectory)
        #expect(nonsense.status == 1)
        #expect(nonsense.stderr.hasPrefix("error: unknown rule 'BANANA_SPLIT_WITH_SPRINKLES'"))
    }

    @Test("explain without a rule lists every compatibility rule")
    func explainList() throws {
        let run = try CommandLineTests.run(["explain"], in: FileManager.default.temporaryDirectory)
        #expect(run.status == 0)
        let ids = Set(run.stdout.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) })
        for rule in Self.expectedRules.union(["RELEASED_VERSION_MODIFIED", "LOCK_UNREADABLE", "SINCE_REWRITTEN", "RENAMED_FROM_UNKNOWN"]) {
            #expect(ids.contains(rule), "\(rule) missing from `contractc explain`")
        }
    }
}
