import Foundation
import OutpostTestSupport
import Testing

@testable import ContractCompiler

/// `contracts.lock`: what `lock` writes, what it refuses, and how `check` catches edits.
@Suite("contracts.lock", .blockingWork)
struct LockTests {
    private static let v1 = ContractText(version: 1, fields: ["a: int", "b: { type: string, max_length: 40 }"], mode: "full")
    private static let v2 = ContractText(
        version: 2, fields: ["a: int", "b: { type: string, max_length: 40 }", "c: { type: int?, since: 2 }"], mode: "full"
    )

    private func released(_ versions: ContractText...) throws -> CompatWorkspace {
        let workspace = try CompatWorkspace()
        for version in versions {
            try workspace.write(version)
            try workspace.lock()
        }
        return workspace
    }

    private func rules(_ result: ContractCompiler.CheckResult) -> [RuleID] {
        result.diagnostics.sorted.map(\.rule)
    }

    // MARK: Writing

    @Test("lock writes a lock that check accepts")
    func lockThenCheck() throws {
        let workspace = try CompatWorkspace()
        defer { workspace.remove() }
        try workspace.write(Self.v1)
        #expect(workspace.lockText() == nil)
        let before = try workspace.check()
        #expect(before.diagnostics.diagnostics.isEmpty && before.releasedContracts == 0, "no lock: nothing released yet")
        let summary = try workspace.lock()
        #expect(summary.newVersions == ["Item v1"])
        #expect(summary.wrote)
        let text = try #require(workspace.lockText())
        #expect(text.contains("format: 1\ncontracts:\n  Item:\n    - version: 1\n      checksum: "))
        #expect(text.contains("\nmigrations:\n  client:\n    - { id: \"items.v1.create\", checksum: "))
        #expect(text.contains("\n  server:\n    - { id: \"items.v1.create\", checksum: "))
        let result = try workspace.check()
        #expect(result.diagnostics.diagnostics.isEmpty, "\(workspace.readable(result.diagnostics))")
        #expect(result.releasedContracts == 1)
        // The lock holds the normalized contract, read back to the same snapshot.
        var diagnostics = DiagnosticCollector()
        let lock = try #require(LockFile.read(path: workspace.lockPath, diagnostics: &diagnostics))
        #expect(diagnostics.diagnostics.isEmpty)
        let entry = try #require(lock.contracts["Item"]?.first)
        let current = try #require(try workspace.loadValid().contract(named: "Item"))
        #expect(ContractSnapshot.text(entry.contract) == ContractSnapshot.text(current))
        #expect(entry.checksum == ContractSnapshot.checksum(current))
    }

    @Test("locking twice is a no-op")
    func lockTwice() throws {
        let workspace = try released(Self.v1)
        defer { workspace.remove() }
        let first = try #require(workspace.lockText())
        let again = try workspace.lock()
        #expect(again.newVersions.isEmpty)
        #expect(!again.wrote)
        #expect(workspace.lockText() == first)
    }

    @Test("lock adds a new version and leaves the released ones byte-identical")
    func lockNewVersion() throws {
        let workspace = try released(Self.v1)
        defer { workspace.remove() }
        let first = try #require(workspace.lockText())
        try workspace.write(Self.v2)
        let summary = try workspace.lock()
        #expect(summary.newVersions == ["Item v2"])
        let second = try #require(workspace.lockText())
        let releasedBlock = try #require(first.components(separatedBy: "\nmigrations:").first)
        #expect(second.hasPrefix(releasedBlock + "\n    - version: 2\n"), "version 1's entry must not change:\n\(second)")
        #expect(second.contains("\"items.v2.migrate\""))
        #expect(try workspace.check().diagnostics.diagnostics.isEmpty)
    }

    @Test("lock refuses to overwrite a released version whose content changed")
    func lockRefusesChangedVersion() throws {
        let workspace = try released(Self.v1)
        defer { workspace.remove() }
        let before = try #require(workspace.lockText())
        var changed = Self.v1
        changed.fields = ["a: int", "b: { type: string, max_length: 80 }"]
        try workspace.write(changed)
        let (summary, diagnostics) = ContractCompiler.lock(try workspace.loadValid(), lockPath: workspace.lockPath)
        #expect(summary == nil)
        #expect(diagnostics.sorted.map(\.rule) == [.versionNotBumped], "\(workspace.readable(diagnostics))")
        let finding = try #require(diagnostics.diagnostics.first)
        #expect(finding.location.line == lineNumber(of: "version: 1", in: changed.yaml))
        #expect(finding.help?.contains("version: 2") == true, "\(finding.help ?? "")")
        #expect(workspace.lockText() == before, "the lock must not change")
    }

    @Test("lock refuses an incompatible new version")
    func lockRefusesIncompatible() throws {
        let workspace = try released(Self.v1)
        defer { workspace.remove() }
        let before = try #require(workspace.lockText())
        try workspace.write(ContractText(version: 2, fields: ["a: string", "b: { type: string, max_length: 40 }"], mode: "full"))
        let (summary, diagnostics) = ContractCompiler.lock(try workspace.loadValid(), lockPath: workspace.lockPath)
        #expect(summary == nil)
        #expect(diagnostics.sorted.map(\.rule) == [.fieldTypeChanged])
        #expect(workspace.lockText() == before)
    }

    // MARK: Edits of the lock

    private func editLock(_ workspace: CompatWorkspace, _ edit: (String) -> String) throws -> String {
        let text = try #require(workspace.lockText())
        let edited = edit(text)
        #expect(edited != text, "the edit must change the lock")
        try Data(edited.utf8).write(to: URL(fileURLWithPath: workspace.lockPath))
        return edited
    }

    @Test("editing a released version's text in the lock is RELEASED_VERSION_MODIFIED at the lock's line")
    func editedVersionText() throws {
        let workspace = try released(Self.v1, Self.v2)
        defer { workspace.remove() }
        let edited = try editLock(workspace) {
            $0.replacingOccurrences(of: "max_length: 40 }\n    - version: 2", with: "max_length: 50 }\n    - version: 2")
        }
        let result = try workspace.check()
        let finding = try #require(
            result.diagnostics.diagnostics.first { $0.rule == .releasedVersionModified }, "\(workspace.readable(result.diagnostics))")
        #expect(rules(result) == [.releasedVersionModified], "\(workspace.readable(result.diagnostics))")
        #expect(finding.location.file == workspace.lockPath)
        let line = try #require(lineNumber(of: "- version: 1", in: edited))
        #expect(finding.location.line == line)
        let lineText = edited.components(separatedBy: "\n")[line - 1]
        #expect(finding.location.column == lineText.distance(from: lineText.startIndex, to: lineText.range(of: "version")!.lowerBound) + 1)
        #expect(finding.message.contains("version 1 of Item"))
        // lock refuses to write over the edited lock.
        let (summary, _) = ContractCompiler.lock(try workspace.loadValid(), lockPath: workspace.lockPath)
        #expect(summary == nil)
        #expect(workspace.lockText() == edited)
    }

    @Test("editing the latest released version in the lock is caught too (and differs from the contract)")
    func editedLatestVersion() throws {
        let workspace = try released(Self.v1)
        defer { workspace.remove() }
        _ = try editLock(workspace) { $0.replacingOccurrences(of: "a: { type: int }", with: "a: { type: string }") }
        let result = try workspace.check()
        #expect(Set(rules(result)) == [.releasedVersionModified, .versionNotBumped], "\(workspace.readable(result.diagnostics))")
    }

    @Test("editing a released version's checksum in the lock is RELEASED_VERSION_MODIFIED")
    func editedVersionChecksum() throws {
        let workspace = try released(Self.v1)
        defer { workspace.remove() }
        let checksum = ContractSnapshot.checksum(try #require(try workspace.loadValid().contract(named: "Item")))
        _ = try editLock(workspace) { $0.replacingOccurrences(of: "checksum: \(checksum)", with: "checksum: " + String(repeating: "0", count: 64)) }
        #expect(rules(try workspace.check()) == [.releasedVersionModified])
    }

    @Test("editing a released migration's checksum in the lock is RELEASED_MIGRATION_MODIFIED at its line")
    func editedMigrationChecksum() throws {
        let workspace = try released(Self.v1, Self.v2)
        defer { workspace.remove() }
        let original = try #require(workspace.lockText())
        let lines = original.components(separatedBy: "\n")
        let index = try #require(lines.firstIndex { $0.contains(#"id: "items.v2.migrate""#) }, "the client's v2 migration")
        var editedLines = lines
        editedLines[index] = String(lines[index].prefix { $0 != "c" }) + "checksum: " + String(repeating: "f", count: 64) + " }"
        #expect(editedLines[index].hasPrefix(#"    - { id: "items.v2.migrate", checksum: ffff"#), "\(editedLines[index])")
        let edited = try editLock(workspace) { _ in editedLines.joined(separator: "\n") }
        let result = try workspace.check()
        #expect(rules(result) == [.releasedMigrationModified], "\(workspace.readable(result.diagnostics))")
        let finding = try #require(result.diagnostics.diagnostics.first)
        #expect(finding.location.file == workspace.lockPath)
        #expect(finding.location.line == index + 1)
        #expect(finding.location.column == 7)
        #expect(finding.message.contains("client migration 'items.v2.migrate'"), "\(finding.message)")
        #expect(finding.help?.contains("contractc explain RELEASED_MIGRATION_MODIFIED") == true)
        #expect(workspace.lockText() == edited)
    }

    @Test("a contract change that would alter a released migration is RELEASED_MIGRATION_MODIFIED")
    func contractChangeAltersReleasedMigration() throws {
        // Item's table stores `owner_id` with the SQL type of Owner's key; changing that key's type
        // would rewrite the released `items.v1.create`.
        let owner = { (version: Int, key: String) in
            """
            entity: Owner
            summary: Owns items.
            version: \(version)
            table: owners
            scope: user
            compatibility: full
            sync: { direction: both, conflict: last_writer_wins }
            fields:
              id: { type: \(key), primary_key: true }
              name: string

            """
        }
        let workspace = try CompatWorkspace()
        defer { workspace.remove() }
        try workspace.write(owner(1, "id"), to: "entities/owner.yaml")
        try workspace.write(ContractText(version: 1, fields: ["owner_id: ref<Owner>"], mode: "full"))
        try workspace.lock()
        try workspace.write(owner(2, "int"), to: "entities/owner.yaml")
        let result = try workspace.check()
        let migrationFindings = result.diagnostics.diagnostics.filter { $0.rule == .releasedMigrationModified }
        #expect(
            Set(migrationFindings.map(\.message)) == [
                "released client migration 'items.v1.create' would change", "released server migration 'items.v1.create' would change",
                "released server_postgres migration 'items.v1.create' would change",
            ], "\(workspace.readable(result.diagnostics))")
        #expect(Set(rules(result)) == [.primaryKeyChanged, .fieldTypeChanged, .releasedMigrationModified])
    }

    @Test(
        "a garbled lock is LOCK_UNREADABLE, and lock does not overwrite it",
        arguments: [
            "format: [1\n",
            "- a list\n- not a mapping\n",
            "format: 2\ncontracts: {}\n",
            "contracts: {}\n",
            "format: 1\ncontracts:\n  Item:\n    - version: one\n",
            "format: 1\ncontracts:\n  Item:\n    - version: 1\n      checksum: abc\n      contract:\n        entity: Item\n",
            "format: 1\ncontracts:\n  Item:\n    - version: 1\n      checksum: abc\n      contract: { entity: Other, summary: x, version: 1, table: items, scope: user, sync: { direction: both, conflict: last_writer_wins }, fields: { id: { type: id, primary_key: true } } }\n",
            "format: 1\ncontracts: {}\nmigrations:\n  client:\n    - just a string\n",
        ])
    func garbledLock(_ text: String) throws {
        let workspace = try CompatWorkspace()
        defer { workspace.remove() }
        try workspace.write(Self.v1)
        try Data(text.utf8).write(to: URL(fileURLWithPath: workspace.lockPath))
        let result = try workspace.check()
        #expect(!result.diagnostics.diagnostics.isEmpty)
        #expect(Set(rules(result)) == [.lockUnreadable], "\(workspace.readable(result.diagnostics))")
        for finding in result.diagnostics.diagnostics {
            #expect(finding.location.file == workspace.lockPath)
            #expect(finding.message.hasPrefix("contracts.lock is not readable"), "\(finding.message)")
        }
        let (summary, _) = ContractCompiler.lock(try workspace.loadValid(), lockPath: workspace.lockPath)
        #expect(summary == nil)
        #expect(workspace.lockText() == text)
    }

    // MARK: Migrations from the locked history

    private func step(_ workspace: CompatWorkspace, _ identifier: String, side: StorageSide) throws -> MigrationStep {
        var diagnostics = DiagnosticCollector()
        let history = ContractCompiler.history(lockPath: workspace.lockPath, diagnostics: &diagnostics)
        #expect(diagnostics.diagnostics.isEmpty)
        let steps = MigrationPlanner(set: try workspace.loadValid(), history: history).migrations(side: side)
        return try #require(steps.first { $0.identifier == identifier }, "no \(identifier) among \(steps.map(\.identifier))")
    }

    @Test("an added column: ADD COLUMN in <table>.v2.migrate, recorded in the lock with its checksum")
    func addedColumnMigration() throws {
        let workspace = try released(Self.v1)
        defer { workspace.remove() }
        try workspace.write(
            ContractText(
                version: 2,
                fields: [
                    "a: int", "b: { type: string, max_length: 40 }", "c: { type: int?, since: 2 }", "d: { type: int, default: 3, since: 2 }",
                ], mode: "full"))
        // Unreleased: generated for development databases, not in the lock yet.
        let unreleased = try step(workspace, "items.v2.migrate", side: .client)
        #expect(!(workspace.lockText() ?? "").contains("items.v2.migrate"))
        try workspace.lock()
        let client = try step(workspace, "items.v2.migrate", side: .client)
        #expect(client == unreleased)
        #expect(
            client.statements == [
                #"ALTER TABLE "items" ADD COLUMN "c" INTEGER"#,
                #"ALTER TABLE "items" ADD COLUMN "d" INTEGER NOT NULL DEFAULT 3"#,
            ])
        let server = try step(workspace, "items.v2.migrate", side: .server)
        #expect(server.statements == client.statements)
        let postgres = try step(workspace, "items.v2.migrate", side: .serverPostgres)
        #expect(
            postgres.statements == [
                #"ALTER TABLE "items" ADD COLUMN "c" BIGINT"#,
                #"ALTER TABLE "items" ADD COLUMN "d" BIGINT NOT NULL DEFAULT 3"#,
            ])

        var diagnostics = DiagnosticCollector()
        let lock = try #require(LockFile.read(path: workspace.lockPath, diagnostics: &diagnostics))
        let steps: [StorageSide: MigrationStep] = [.client: client, .server: server, .serverPostgres: postgres]
        for side in StorageSide.allCases {
            let records = lock.migrations[side] ?? []
            #expect(records.map(\.identifier) == ["items.v1.create", "items.v2.migrate"])
            #expect(records.last?.checksum == steps[side]?.checksum)
        }
    }

    @Test("a type change: SQLite's table rebuild, indexes recreated")
    func rebuildMigration() throws {
        let indexes = ["indexes:", "  - [b]"]
        let workspace = try released(ContractText(version: 1, fields: ["a: int", "b: string"], mode: "full", extra: indexes))
        defer { workspace.remove() }
        // oldest_supported 2 ships the breaking change.
        try workspace.write(ContractText(version: 2, fields: ["a: string", "b: string"], oldest: 2, mode: "full", extra: indexes))
        try workspace.lock()
        let client = try step(workspace, "items.v2.migrate", side: .client).statements
        #expect(client.count == 5, "\(client)")
        #expect(client.first?.hasPrefix("CREATE TABLE \"_outpost_new_items\" (\n") == true, "\(client)")
        #expect(client.first?.contains(#""a" TEXT NOT NULL"#) == true)
        #expect(
            client.dropFirst(1).first == """
                INSERT INTO "_outpost_new_items" ("id", "a", "b", "_schema_version", "_server_version", "_synced_at")
                SELECT "id", "a", "b", "_schema_version", "_server_version", "_synced_at" FROM "items"
                """)
        #expect(
            Array(client.dropFirst(2)) == [
                #"DROP TABLE "items""#,
                #"ALTER TABLE "_outpost_new_items" RENAME TO "items""#,
                #"CREATE INDEX "items_b_idx" ON "items" ("b")"#,
            ])
        let server = try step(workspace, "items.v2.migrate", side: .server).statements
        #expect(server.first?.hasPrefix("CREATE TABLE \"_outpost_new_items\" (\n") == true)
        #expect(server.contains(#"DROP TABLE "items""#) && server.contains(#"ALTER TABLE "_outpost_new_items" RENAME TO "items""#))
        #expect(server.filter { $0.hasPrefix("CREATE INDEX") }.count == 2, "the scope index and the contract's index: \(server)")
    }

    @Test("a type change in PostgreSQL: the column is altered in place, its values converted, its index kept")
    func postgresTypeChange() throws {
        let indexes = ["indexes:", "  - [b]"]
        let workspace = try released(ContractText(version: 1, fields: ["a: int", "b: string", "c: int?"], mode: "full", extra: indexes))
        defer { workspace.remove() }
        try workspace.write(
            ContractText(
                version: 2, fields: ["a: string", "b: string", "c: { type: int, default: 5 }", "e: { type: bool, since: 2 }"], oldest: 2,
                mode: "full",
                extra: indexes
            ))
        try workspace.lock()
        #expect(
            try step(workspace, "items.v2.migrate", side: .serverPostgres).statements == [
                #"ALTER TABLE "items" ADD COLUMN "e" BOOLEAN NOT NULL DEFAULT false"#,
                #"ALTER TABLE "items" ALTER COLUMN "e" DROP DEFAULT"#,
                #"ALTER TABLE "items" ALTER COLUMN "a" TYPE TEXT USING "a"::TEXT"#,
                #"ALTER TABLE "items" ALTER COLUMN "c" SET DEFAULT 5"#,
                #"UPDATE "items" SET "c" = 5 WHERE "c" IS NULL"#,
                #"ALTER TABLE "items" ALTER COLUMN "c" SET NOT NULL"#,
            ])
    }

    @Test("a rename: RENAME COLUMN; a removal: DROP COLUMN")
    func renameAndDropMigrations() throws {
        let workspace = try released(ContractText(version: 1, fields: ["position: { type: int, default: 0 }", "memo: string?"], mode: "backward"))
        defer { workspace.remove() }
        try workspace.write(
            ContractText(
                version: 2, fields: ["sort_index: { type: int, default: 0, renamed_from: { name: position, version: 2 } }"], mode: "backward"
            ))
        try workspace.lock()
        for side in StorageSide.allCases {
            #expect(
                try step(workspace, "items.v2.migrate", side: side).statements == [
                    #"ALTER TABLE "items" RENAME COLUMN "position" TO "sort_index""#,
                    #"ALTER TABLE "items" DROP COLUMN "memo""#,
                ])
        }
    }
}
