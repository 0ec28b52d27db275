import Foundation
import OutpostTestSupport
import Testing

/// Breaking the repository's own sample contracts in each listed way makes `contractc check`
/// (what `make compat` runs) fail with the rule id at the line of the change.
@Suite("Sample contracts: breaking changes are caught", .blockingWork)
struct SampleBreakageTests {
    /// The repository's `contracts/` folder.
    static let samples = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("contracts")

    struct Mutation: Sendable, CustomTestStringConvertible {
        var name: String
        var file = "entities/unit.yaml"
        /// Text replacements; each `from` must occur exactly once in the file.
        var edits: [(from: String, to: String)]
        /// The version bump that goes with the change (`nil`: none, the change itself is the mistake).
        var bump: (from: String, to: String)? = ("\nversion: 3\n", "\nversion: 4\n")
        var rule: String
        /// Text on the line the diagnostic must point at, in the mutated file.
        var line: String

        var testDescription: String { name }
    }

    static let mutations: [Mutation] = [
        Mutation(
            name: "remove a field", edits: [("  title: { type: string, max_length: 200 }\n", "")],
            rule: "FIELD_REMOVED", line: "entity: Unit"),
        Mutation(
            name: "change a field's type", edits: [("estimated_minutes: { type: int?", "estimated_minutes: { type: string?")],
            rule: "FIELD_TYPE_CHANGED", line: "estimated_minutes:"),
        Mutation(
            name: "make an optional field required", edits: [("description: { type: string?,", "description: { type: string,")],
            rule: "OPTIONAL_MADE_REQUIRED", line: "description:"),
        Mutation(
            name: "add a required field without default",
            edits: [
                (
                    "  estimated_minutes: { type: int?, since: 3 }\n",
                    "  estimated_minutes: { type: int?, since: 3 }\n  rating: { type: int, since: 4 }\n"
                )
            ],
            rule: "REQUIRED_FIELD_ADDED", line: "rating:"),
        Mutation(name: "change a default", edits: [("    default: false\n", "    default: true\n")], rule: "DEFAULT_CHANGED", line: "default: true"),
        Mutation(
            name: "remove an enum value", edits: [("values: [beginner, intermediate, advanced]", "values: [beginner, intermediate]")],
            rule: "ENUM_VALUE_REMOVED", line: "learner_level:"),
        Mutation(
            name: "add an enum value to an enum without fallback",
            edits: [("values: [beginner, intermediate, advanced]", "values: [beginner, intermediate, advanced, expert]")],
            rule: "ENUM_VALUE_ADDED", line: "learner_level:"),
        Mutation(
            // Not Unit: a subscription selects units by their `id` key, and the validator refuses that first.
            name: "change the primary key", file: "entities/assessment.yaml",
            edits: [("id: { type: id, primary_key: true }", "id: { type: uuid, primary_key: true }")], bump: ("\nversion: 4\n", "\nversion: 5\n"),
            rule: "PRIMARY_KEY_CHANGED", line: "primary_key: true"),
        Mutation(name: "rename the table", edits: [("table: units\n", "table: unit_rows\n")], rule: "TABLE_RENAMED", line: "table: unit_rows"),
        Mutation(
            name: "change the scope", file: "entities/assessment.yaml", edits: [("scope: content\n", "scope: user\n")],
            bump: ("\nversion: 4\n", "\nversion: 5\n"), rule: "SCOPE_CHANGED",
            line: "scope: user"),
        Mutation(
            name: "change the direction", file: "entities/assessment_response.yaml",
            edits: [("direction: both, conflict: last_writer_wins", "direction: up, conflict: last_writer_wins")],
            bump: ("\nversion: 1\n", "\nversion: 2\n"), rule: "DIRECTION_CHANGED", line: "sync:"),
        Mutation(
            name: "change the conflict policy", file: "entities/assessment_response.yaml",
            edits: [("direction: both, conflict: last_writer_wins", "direction: both, conflict: version_check")],
            bump: ("\nversion: 1\n", "\nversion: 2\n"), rule: "CONFLICT_POLICY_CHANGED", line: "sync:"),
        Mutation(
            name: "lower oldest_supported", edits: [("oldest_supported: 2", "oldest_supported: 1")],
            rule: "OLDEST_SUPPORTED_DECREASED", line: "oldest_supported: 1"),
        Mutation(
            name: "rewrite a since", edits: [("description: { type: string?, since: 2,", "description: { type: string?, since: 1,")],
            rule: "SINCE_REWRITTEN", line: "description:"),
        Mutation(
            name: "renamed_from naming a field that never existed",
            edits: [("renamed_from: { name: position, version: 3 }", "renamed_from: { name: positon, version: 3 }")],
            rule: "RENAMED_FROM_UNKNOWN", line: "renamed_from:"),
        Mutation(
            name: "change a field without bumping the version", edits: [("max_length: 200", "max_length: 300")], bump: nil,
            rule: "VERSION_NOT_BUMPED", line: "version: 3"),
        Mutation(name: "reduce max_length", edits: [("max_length: 200", "max_length: 100")], rule: "MAX_LENGTH_REDUCED", line: "title:"),
        Mutation(
            name: "delete a contract", file: "events/answer_recorded.yaml", edits: [], bump: nil,
            rule: "CONTRACT_DELETED", line: "(lock)"),
    ]

    private static func copySamples() throws -> URL {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("contractc-samples-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: samples, to: root.appendingPathComponent("contracts"))
        return root
    }

    @Test("the sample contracts pass check as they are")
    func samplesPass() throws {
        let root = try Self.copySamples()
        defer { try? FileManager.default.removeItem(at: root) }
        let run = try CommandLineTests.run(["check"], in: root)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.isEmpty)
    }

    @Test("a breaking change fails check with the rule at the line of the change", arguments: mutations)
    func breakage(_ mutation: Mutation) throws {
        let root = try Self.copySamples()
        defer { try? FileManager.default.removeItem(at: root) }
        let relative = "contracts/" + mutation.file
        let url = root.appendingPathComponent(relative)
        if mutation.edits.isEmpty {
            try FileManager.default.removeItem(at: url)
        } else {
            var text = try String(contentsOf: url, encoding: .utf8)
            for edit in mutation.edits + (mutation.bump.map { [$0] } ?? []) {
                let count = text.components(separatedBy: edit.from).count - 1
                try #require(count == 1, "'\(edit.from)' occurs \(count) times in \(relative); the sample changed, update the mutation")
                text = text.replacingOccurrences(of: edit.from, with: edit.to)
            }
            try Data(text.utf8).write(to: url)
        }
        let run = try CommandLineTests.run(["check"], in: root)
        #expect(run.status == 1, "check must fail:\n\(run.stderr)")

        let (file, line): (String, Int)
        if mutation.edits.isEmpty {
            file = "contracts/contracts.lock"
            let lock = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            let contract = String(mutation.file.split(separator: "/").last!.dropLast(".yaml".count))
            let name = contract.split(separator: "_").map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
            line = try #require(lineNumber(of: "  \(name):", in: lock)) + 1
        } else {
            file = relative
            let text = try String(contentsOf: url, encoding: .utf8)
            line = try #require(lineNumber(of: mutation.line, in: text), "no line with '\(mutation.line)'")
        }
        let located = run.stderr.components(separatedBy: "\n").filter {
            $0.hasPrefix("\(file):\(line):") && $0.contains(": error[\(mutation.rule)]: ")
        }
        #expect(located.count == 1, "expected \(file):\(line): error[\(mutation.rule)] in:\n\(run.stderr)")
    }
}
