import Foundation
import OutpostTestSupport
import Testing

@testable import ContractCompiler

/// A temporary contracts folder whose contracts are released one version after another with
/// `ContractCompiler.lock`, then checked with `ContractCompiler.check`.
struct CompatWorkspace {
    let folder: ContractFolder

    init(manifest: String = ContractFolder.defaultManifest) throws {
        folder = try ContractFolder(files: [:], manifest: manifest)
    }

    var contractsPath: String { folder.contracts.path }
    var lockPath: String { folder.contracts.appendingPathComponent("contracts.lock").path }

    func path(_ relative: String) -> String { folder.contracts.appendingPathComponent(relative).path }

    func write(_ text: ContractText) throws {
        try write(text.yaml, to: text.fileName)
    }

    func write(_ yaml: String, to relative: String) throws {
        let url = folder.contracts.appendingPathComponent(relative)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(yaml.utf8).write(to: url)
    }

    func delete(_ relative: String) throws {
        try FileManager.default.removeItem(at: folder.contracts.appendingPathComponent(relative))
    }

    func load(today: String? = nil) -> ContractCompiler.LoadResult {
        ContractCompiler.load(directory: contractsPath, today: today)
    }

    /// The contracts, failing the test when they do not validate.
    func loadValid(today: String? = nil, sourceLocation: Testing.SourceLocation = #_sourceLocation) throws -> ContractSet {
        let result = load(today: today)
        #expect(!result.diagnostics.hasErrors, "the contracts must validate:\n\(readable(result.diagnostics))", sourceLocation: sourceLocation)
        return try #require(result.contracts, sourceLocation: sourceLocation)
    }

    /// Releases the current contracts; fails the test when `lock` refuses.
    @discardableResult
    func lock(sourceLocation: Testing.SourceLocation = #_sourceLocation) throws -> ContractCompiler.LockSummary {
        let set = try loadValid(sourceLocation: sourceLocation)
        let (summary, diagnostics) = ContractCompiler.lock(set, lockPath: lockPath)
        #expect(!diagnostics.hasErrors, "lock refused:\n\(readable(diagnostics))", sourceLocation: sourceLocation)
        return try #require(summary, sourceLocation: sourceLocation)
    }

    func check(sourceLocation: Testing.SourceLocation = #_sourceLocation) throws -> ContractCompiler.CheckResult {
        ContractCompiler.check(try loadValid(sourceLocation: sourceLocation), lockPath: lockPath)
    }

    func lockText() -> String? {
        FileManager.default.contents(atPath: lockPath).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Diagnostics as a schema author reads them, without the temporary folder's prefix.
    func readable(_ diagnostics: DiagnosticCollector) -> String {
        diagnostics.renderedReport().replacingOccurrences(of: folder.root.path + "/", with: "")
    }

    func remove() { folder.remove() }
}

/// The 1-based line of the first line of `text` containing `needle`.
func lineNumber(of needle: String, in text: String) -> Int? {
    text.components(separatedBy: "\n").firstIndex { $0.contains(needle) }.map { $0 + 1 }
}

@Suite("Compatibility checks", .blockingWork)
struct CompatibilityTests {
    @Test("the table has enough cases, each with a unique name")
    func tableSize() {
        let cases = CompatibilityCaseTable.all
        #expect(cases.count >= 60)
        let names = cases.map(\.testDescription)
        #expect(
            Set(names).count == names.count, "duplicate case names: \(Dictionary(grouping: names, by: { $0 }).filter { $1.count > 1 }.keys.sorted())")
    }

    @Test("(old, new, mode, direction) → rule ids", arguments: CompatibilityCaseTable.all)
    func table(_ row: CompatCase) throws {
        let workspace = try CompatWorkspace()
        defer { workspace.remove() }
        for version in row.history {
            try workspace.write(row.resolved(version))
            try workspace.lock()
        }
        if let new = row.new {
            try workspace.write(row.resolved(new))
        } else {
            try workspace.delete(row.history.last!.fileName)
        }
        let set = try workspace.loadValid()
        let result = ContractCompiler.check(set, lockPath: workspace.lockPath)
        let found = Set(result.diagnostics.diagnostics.map(\.rule))
        let context = """
            old:
            \(row.history.map { row.resolved($0).yaml }.joined(separator: "---\n"))
            new:
            \(row.new.map { row.resolved($0).yaml } ?? "(deleted)\n")
            check said:
            \(workspace.readable(result.diagnostics))
            """
        verify(row, found, tolerating: row.lockOnly, context: context)

        // Every finding points into the contract or into the lock, and its rule is explained.
        for diagnostic in result.diagnostics.diagnostics {
            #expect(diagnostic.location.file.hasPrefix(workspace.contractsPath), "\(diagnostic.rendered)")
            #expect(diagnostic.location.line >= 1 && diagnostic.location.column >= 1, "\(diagnostic.rendered)")
            #expect(RuleCatalog.explanation(for: diagnostic.rule) != nil, "\(diagnostic.rule) has no explanation")
        }

        // With one released version, `check --against` (the previous contracts themselves) agrees.
        if row.history.count == 1 {
            let previous = try CompatWorkspace()
            defer { previous.remove() }
            try previous.write(row.resolved(row.history[0]))
            let against = ContractCompiler.check(set, against: try previous.loadValid())
            let foundAgainst = Set(against.diagnostics.diagnostics.map(\.rule))
            verify(row, foundAgainst, context: "(check against the previous contracts)\n" + context)
        }
    }

    /// `found` must be the expected rules, plus at most the tolerated ones.
    private func verify(_ row: CompatCase, _ found: Set<RuleID>, tolerating: Set<RuleID> = [], context: String) {
        let message = Comment(rawValue: "expected \(row.expected.sorted()), found \(found.sorted())\n\(context)")
        let matches = row.expected.isSubset(of: found) && found.isSubset(of: row.expected.union(tolerating))
        if let issue = row.knownIssue {
            withKnownIssue(Comment(rawValue: issue)) {
                #expect(matches, message)
            }
        } else {
            #expect(matches, message)
        }
    }

    // MARK: The issue's transitive case

    private static let transitiveV1 = ContractText(version: 1, fields: ["a: { type: int, default: 1 }", "b: int"], mode: "backward")
    private static let transitiveV2 = ContractText(version: 2, fields: ["b: int", "c: { type: int, default: 0, since: 2 }"], mode: "backward")
    private static func transitiveV3(oldest: Int, aSince: Int? = nil) -> ContractText {
        let since = aSince.map { ", since: \($0)" } ?? ""
        return ContractText(
            version: 3, fields: [#"a: { type: string, default: ""\#(since) }"#, "b: int", "c: { type: int, default: 0, since: 2 }"],
            oldest: oldest, mode: "backward"
        )
    }

    private func releasedV1V2() throws -> CompatWorkspace {
        let workspace = try CompatWorkspace()
        try workspace.write(Self.transitiveV1)
        try workspace.lock()
        try workspace.write(Self.transitiveV2)
        let summary = try workspace.lock()
        #expect(summary.newVersions == ["Item v2"])
        return workspace
    }

    @Test("transitive (backward): v3 passes with oldest_supported 2")
    func transitivePasses() throws {
        let workspace = try releasedV1V2()
        defer { workspace.remove() }
        try workspace.write(Self.transitiveV3(oldest: 2))
        let result = try workspace.check()
        #expect(result.diagnostics.diagnostics.isEmpty, "\(workspace.readable(result.diagnostics))")
    }

    @Test("transitive (backward): v3 fails with oldest_supported 1, on a's type, citing version 1 in the lock")
    func transitiveFails() throws {
        let workspace = try releasedV1V2()
        defer { workspace.remove() }
        let v3 = Self.transitiveV3(oldest: 1)
        try workspace.write(v3)
        let result = try workspace.check()
        let diagnostics = result.diagnostics.diagnostics
        let finding = try #require(diagnostics.first { $0.rule == .fieldTypeChanged }, "\(workspace.readable(result.diagnostics))")
        // Only `a` is incompatible (its default changes with its type, which may be reported too).
        #expect(Set(diagnostics.map(\.rule)).isSubset(of: [.fieldTypeChanged, .defaultChanged]), "\(workspace.readable(result.diagnostics))")
        #expect(diagnostics.allSatisfy { $0.message.contains("'a'") }, "\(workspace.readable(result.diagnostics))")
        #expect(finding.location.file == workspace.path("entities/item.yaml"))
        #expect(finding.location.line == lineNumber(of: "a: { type: string", in: v3.yaml))
        #expect(finding.message.contains("version 1"), "\(finding.message)")
        let note = try #require(finding.notes.first?.location)
        #expect(note.file == workspace.lockPath)
        let lockText = try #require(workspace.lockText())
        let lockLines = lockText.components(separatedBy: "\n")
        #expect(lockLines[note.line - 1].contains("a: { type: int, default: 1 }"), "note points at \(lockLines[note.line - 1])")

        // Against the latest version alone (what a non-transitive checker sees) a's type is fine.
        let latestOnly = try CompatWorkspace()
        defer { latestOnly.remove() }
        try latestOnly.write(Self.transitiveV2)
        let againstV2 = ContractCompiler.check(try workspace.loadValid(), against: try latestOnly.loadValid())
        #expect(!againstV2.diagnostics.diagnostics.contains { $0.rule == .fieldTypeChanged }, "\(workspace.readable(againstV2.diagnostics))")
    }

    /// `a` first appears in version 1, disappears in 2 and comes back in 3. Devices at version 2
    /// do not know it, so `since: 3` must be accepted, against the lock and against a revision
    /// that holds only version 2 (`check --against`).
    @Test("transitive: the re-added field may say since: 3")
    func transitiveSince() throws {
        let workspace = try releasedV1V2()
        defer { workspace.remove() }
        try workspace.write(Self.transitiveV3(oldest: 2, aSince: 3))
        let result = try workspace.check()
        #expect(result.diagnostics.diagnostics.isEmpty, "\(workspace.readable(result.diagnostics))")
        let latestOnly = try CompatWorkspace()
        defer { latestOnly.remove() }
        try latestOnly.write(Self.transitiveV2)
        let againstV2 = ContractCompiler.check(try workspace.loadValid(), against: try latestOnly.loadValid())
        #expect(againstV2.diagnostics.diagnostics.isEmpty, "\(workspace.readable(againstV2.diagnostics))")
    }

    @Test("the transitive check covers every supported version, not only the first and the last")
    func transitiveMiddleVersion() throws {
        // v1 {a: int?}, v2 {a: int = 0} (fine backward), v3 {a: int} loses the default: breaks
        // against v2 (DEFAULT_CHANGED); against v1 it breaks too (optional made required).
        let workspace = try CompatWorkspace()
        defer { workspace.remove() }
        try workspace.write(ContractText(version: 1, fields: ["a: int?"], mode: "backward"))
        try workspace.lock()
        try workspace.write(ContractText(version: 2, fields: ["a: { type: int, default: 0 }"], mode: "backward"))
        try workspace.lock()
        try workspace.write(ContractText(version: 3, fields: ["a: int"], oldest: 2, mode: "backward"))
        #expect(Set(try workspace.check().diagnostics.diagnostics.map(\.rule)) == [.defaultChanged])
        try workspace.write(ContractText(version: 3, fields: ["a: int"], oldest: 1, mode: "backward"))
        #expect(Set(try workspace.check().diagnostics.diagnostics.map(\.rule)) == [.defaultChanged, .optionalMadeRequired])
    }

    // MARK: Renames at a released version

    /// Version 2 was released with `a`. A rename "in version 2" contradicts the lock: devices at
    /// version 2 send `a`, which the new schema would read as `b` only from version 1 data, and the
    /// v2 → v3 migration drops column `a` and adds an empty `b`.
    @Test("renamed_from dated at a version that was released under the old name")
    func renameDatedAtReleasedVersion() throws {
        let workspace = try CompatWorkspace()
        defer { workspace.remove() }
        try workspace.write(ContractText(version: 1, fields: ["a: { type: int, default: 0 }"], mode: "backward"))
        try workspace.lock()
        try workspace.write(ContractText(version: 2, fields: ["a: { type: int, default: 0 }", "n: { type: string?, since: 2 }"], mode: "backward"))
        try workspace.lock()
        try workspace.write(
            ContractText(
                version: 3, fields: ["b: { type: int, default: 0, renamed_from: { name: a, version: 2 } }", "n: { type: string?, since: 2 }"],
                mode: "backward"
            ))
        let set = try workspace.loadValid()
        let result = ContractCompiler.check(set, lockPath: workspace.lockPath)
        var diagnostics = DiagnosticCollector()
        let history = ContractCompiler.history(lockPath: workspace.lockPath, diagnostics: &diagnostics)
        let migration = MigrationPlanner(set: set, history: history).migrations(side: .client).first { $0.identifier == "items.v3.migrate" }
        #expect(
            result.diagnostics.diagnostics.map(\.rule).contains(.renamedFromUnknown),
            "check accepted it; the v3 migration is \(migration?.statements ?? [])")
        // With the rename dated correctly (version 3), the column is renamed.
        try workspace.write(
            ContractText(
                version: 3, fields: ["b: { type: int, default: 0, renamed_from: { name: a, version: 3 } }", "n: { type: string?, since: 2 }"],
                mode: "backward"
            ))
        let fixed = try workspace.loadValid()
        #expect(ContractCompiler.check(fixed, lockPath: workspace.lockPath).diagnostics.diagnostics.isEmpty)
        let renamed = MigrationPlanner(set: fixed, history: history).migrations(side: .client).first { $0.identifier == "items.v3.migrate" }
        #expect(renamed?.statements == [#"ALTER TABLE "items" RENAME COLUMN "a" TO "b""#])
    }

    // MARK: Allowances

    private static let future = "2999-12-31"

    private func changed(
        _ newFields: [String], old oldFields: [String] = ["a: int", "b: int"], extra: [String] = [], today: String? = nil
    ) throws -> (CompatWorkspace, ContractCompiler.LoadResult) {
        let workspace = try CompatWorkspace()
        try workspace.write(ContractText(version: 1, fields: oldFields, mode: "full"))
        try workspace.lock()
        try workspace.write(ContractText(version: 2, fields: newFields, mode: "full", extra: extra))
        return (workspace, workspace.load(today: today))
    }

    @Test("an allowance on the exact field excuses the finding and is listed in force")
    func fieldAllowance() throws {
        let (workspace, loaded) = try changed([
            #"a: { type: string, allow: [{ rule: FIELD_TYPE_CHANGED, reason: "no device reads a yet", until: \#(Self.future) }] }"#, "b: int",
        ])
        defer { workspace.remove() }
        #expect(!loaded.diagnostics.hasErrors, "\(workspace.readable(loaded.diagnostics))")
        let result = ContractCompiler.check(try #require(loaded.contracts), lockPath: workspace.lockPath)
        #expect(result.diagnostics.diagnostics.isEmpty, "\(workspace.readable(result.diagnostics))")
        #expect(result.allowancesInForce.count == 1)
        let line = try #require(result.allowancesInForce.first)
        #expect(line.hasPrefix(workspace.path("entities/item.yaml") + ":"), "\(line)")
        #expect(line.hasSuffix("FIELD_TYPE_CHANGED allowed on Item.a until \(Self.future): no device reads a yet"), "\(line)")
    }

    @Test("a contract-level allowance with `field:` excuses a removed field")
    func removedFieldAllowance() throws {
        let (workspace, loaded) = try changed(
            ["a: int"], extra: [#"allow: [{ rule: FIELD_REMOVED, field: b, reason: "b was never shipped to devices", until: \#(Self.future) }]"#]
        )
        defer { workspace.remove() }
        #expect(!loaded.diagnostics.hasErrors, "\(workspace.readable(loaded.diagnostics))")
        let result = ContractCompiler.check(try #require(loaded.contracts), lockPath: workspace.lockPath)
        #expect(result.diagnostics.diagnostics.isEmpty, "\(workspace.readable(result.diagnostics))")
        #expect(result.allowancesInForce.count == 1)
        #expect(
            result.allowancesInForce.first?.hasSuffix("FIELD_REMOVED allowed on Item.b until \(Self.future): b was never shipped to devices") == true,
            "\(result.allowancesInForce)")
    }

    @Test("a contract-level allowance without `field:` excuses a contract-level finding")
    func contractAllowance() throws {
        let workspace = try CompatWorkspace()
        defer { workspace.remove() }
        try workspace.write(ContractText(version: 1, fields: ["a: int"], mode: "full"))
        try workspace.lock()
        try workspace.write(
            ContractText(
                version: 2, fields: ["a: int"], mode: "full", table: "things",
                extra: [#"allow: [{ rule: TABLE_RENAMED, reason: "the table was never created on devices", until: \#(Self.future) }]"#]
            ))
        let result = try workspace.check()
        #expect(result.diagnostics.diagnostics.isEmpty, "\(workspace.readable(result.diagnostics))")
        #expect(result.allowancesInForce.first?.contains("TABLE_RENAMED allowed on Item until") == true, "\(result.allowancesInForce)")
    }

    @Test("a contract-level FIELD_REMOVED allowance without `field:` does not excuse every removed field")
    func blanketRemovalAllowance() throws {
        let (workspace, loaded) = try changed(
            ["a: int"], old: ["a: int", "b: int", "c: string?"],
            extra: [#"allow: [{ rule: FIELD_REMOVED, reason: "one field was never shipped", until: 2999-12-31 }]"#]
        )
        defer { workspace.remove() }
        let result = ContractCompiler.check(try #require(loaded.contracts), lockPath: workspace.lockPath)
        #expect(loaded.diagnostics.hasErrors || result.diagnostics.hasErrors, "\(result.allowancesInForce)")
        #expect(result.allowancesInForce.isEmpty, "a contract-level allowance without `field:` must not excuse removed fields")
    }

    @Test(
        "an allowance elsewhere does not excuse a finding",
        arguments: [
            // On another field.
            ([#"a: string"#, #"b: { type: int, allow: [{ rule: FIELD_TYPE_CHANGED, reason: "r", until: 2999-12-31 }] }"#], [String]()),
            // For another rule on the right field.
            ([#"a: { type: string, allow: [{ rule: DEFAULT_CHANGED, reason: "r", until: 2999-12-31 }] }"#, "b: int"], []),
            // At contract level, for a field that still exists (allowances go on the exact field).
            (["a: string", "b: int"], [#"allow: [{ rule: FIELD_TYPE_CHANGED, field: a, reason: "r", until: 2999-12-31 }]"#]),
            // At contract level, for another removed field.
            (["a: string", "b: int"], [#"allow: [{ rule: FIELD_TYPE_CHANGED, field: b, reason: "r", until: 2999-12-31 }]"#]),
        ])
    func misplacedAllowance(_ fields: [String], _ extra: [String]) throws {
        let (workspace, loaded) = try changed(fields, extra: extra)
        defer { workspace.remove() }
        #expect(!loaded.diagnostics.hasErrors, "\(workspace.readable(loaded.diagnostics))")
        let result = ContractCompiler.check(try #require(loaded.contracts), lockPath: workspace.lockPath)
        #expect(result.diagnostics.diagnostics.map(\.rule) == [.fieldTypeChanged], "\(workspace.readable(result.diagnostics))")
        #expect(result.allowancesInForce.isEmpty)
    }

    @Test(
        "an allowance without a reason, for an unknown rule, or with a bad date is INVALID_ALLOWANCE",
        arguments: [
            #"{ rule: FIELD_TYPE_CHANGED, until: 2999-12-31 }"#,
            #"{ rule: FIELD_TYPE_CHANGED, reason: "", until: 2999-12-31 }"#,
            #"{ rule: FIELD_TYPE_CHANGED, reason: "  ", until: 2999-12-31 }"#,
            #"{ rule: FIELD_TYPE_CHANGD, reason: "typo in the rule", until: 2999-12-31 }"#,
            #"{ rule: NO_SUCH_RULE, reason: "unknown rule", until: 2999-12-31 }"#,
            #"{ rule: UNKNOWN_KEY, reason: "a validation rule cannot be allowed", until: 2999-12-31 }"#,
            #"{ rule: FIELD_TYPE_CHANGED, reason: "bad date", until: tomorrow }"#,
        ])
    func invalidAllowance(_ allowance: String) throws {
        let (workspace, loaded) = try changed(["a: { type: string, allow: [\(allowance)] }", "b: int"])
        defer { workspace.remove() }
        let rules = loaded.diagnostics.diagnostics.filter { $0.severity == .error }.map(\.rule)
        #expect(rules == [.invalidAllowance], "\(workspace.readable(loaded.diagnostics))")
        let text = try #require(try? String(contentsOfFile: workspace.path("entities/item.yaml"), encoding: .utf8))
        #expect(loaded.diagnostics.diagnostics.first?.location.line == lineNumber(of: "allow:", in: text))
        if allowance.contains("FIELD_TYPE_CHANGD") {
            #expect(loaded.diagnostics.diagnostics.first?.help?.contains("FIELD_TYPE_CHANGED") == true)
        }
    }

    @Test("an allowance past its `until` is ALLOWANCE_EXPIRED; on the day itself it still holds")
    func expiredAllowance() throws {
        let fields = [#"a: { type: string, allow: [{ rule: FIELD_TYPE_CHANGED, reason: "migration window", until: 2030-06-30 }] }"#, "b: int"]
        let (workspace, onTheDay) = try changed(fields, today: "2030-06-30")
        defer { workspace.remove() }
        #expect(!onTheDay.diagnostics.hasErrors, "\(workspace.readable(onTheDay.diagnostics))")
        let expired = workspace.load(today: "2030-07-01")
        let errors = expired.diagnostics.diagnostics.filter { $0.severity == .error }
        #expect(errors.map(\.rule) == [.allowanceExpired], "\(workspace.readable(expired.diagnostics))")
        #expect(errors.first?.message.contains("2030-06-30") == true)
        let later = workspace.load(today: "2031-01-01")
        #expect(later.diagnostics.diagnostics.contains { $0.rule == .allowanceExpired })
    }

    @Test("an expired contract-level allowance for a removed field is ALLOWANCE_EXPIRED")
    func expiredContractAllowance() throws {
        let (workspace, loaded) = try changed(
            ["a: int"], extra: [#"allow: [{ rule: FIELD_REMOVED, field: b, reason: "r", until: 2020-01-01 }]"#], today: "2024-05-01"
        )
        defer { workspace.remove() }
        #expect(loaded.diagnostics.diagnostics.map(\.rule) == [.allowanceExpired], "\(workspace.readable(loaded.diagnostics))")
    }

    // MARK: Catalog

    @Test("every compatibility rule has an explanation, and allowances may name exactly those")
    func catalog() {
        let compatibility: [RuleID] = [
            .contractDeleted, .versionNotBumped, .versionDecreased, .releasedVersionModified, .releasedMigrationModified,
            .lockUnreadable, .fieldRemoved, .fieldTypeChanged, .optionalMadeRequired, .requiredFieldAdded, .defaultChanged,
            .maxLengthReduced, .maxBytesReduced, .enumValueRemoved, .enumValueAdded, .primaryKeyChanged, .tableRenamed, .scopeChanged,
            .directionChanged, .conflictPolicyChanged, .oldestSupportedDecreased, .renamedFromUnknown, .sinceRewritten,
        ]
        for rule in compatibility {
            let explanation = RuleCatalog.explanation(for: rule)
            #expect(explanation != nil, "\(rule) has no explanation")
            #expect(explanation?.scope != .validation, "\(rule) is listed as a validation rule")
            #expect(RuleCatalog.allowableRules.contains(rule), "\(rule) cannot be allowed")
        }
        #expect(!RuleCatalog.allowableRules.contains(.unknownKey))
        #expect(RuleCatalog.explanation(for: .requiredFieldAdded)?.scope == .backward)
        #expect(RuleCatalog.explanation(for: .enumValueAdded)?.scope == .forward)
        #expect(RuleCatalog.explanation(for: .fieldRemoved)?.scope == .forward)
        #expect(RuleCatalog.explanation(for: .tableRenamed)?.scope == .always)
        #expect(RuleCatalog.explanation(for: .maxBytesReduced)?.scope == .backward)
        #expect(RuleCatalog.explanation(for: .maxBytesAboveRowLimit)?.scope == .validation)
        #expect(RuleCatalog.explanation(for: .maxBytesNotApplicable)?.scope == .validation)
    }
}
