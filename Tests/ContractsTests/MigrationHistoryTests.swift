import ContractRuntime
import Contracts
import Foundation
import GRDB
import OutpostTestSupport
import Testing

/// The migrations derived from the released history, run for real: a database at every version
/// a device may still have, filled and brought to the current version.
@Suite("Migrations from the released history", .blockingWork)
struct MigrationHistoryTests {
    // MARK: Data survives every upgrade path

    @Test(
        "Rows written at every released version survive the migration to the current version",
        arguments: Side.allCases, AllContracts.names
    )
    func rowsSurviveFromEveryVersion(_ side: Side, _ name: String) throws {
        let history = try ContractHistory(side: side, contract: name)
        let fields = Dictionary(
            ContractSQL.fieldColumns(of: name, side: side).map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first }
        )
        for version in history.versions {
            let label = "\(history) from v\(version)"
            let database = try history.database(at: version)
            let (before, written) = try database.queue.write { db in
                let table = try history.onlyTable(db)
                return (try TableSnapshot.read(db, table: table), try SampleRows.insert(db, table: table))
            }
            try #require(!before.primaryKey.isEmpty, "\(label): no primary key")

            // What an updated app does: register every migration and migrate; the applied ones are skipped.
            try ContractSQL.migrator(history.steps).migrate(database.queue)

            let renames = history.renames(after: version)
            func current(_ column: String) -> String { renames[column] ?? column }
            let (after, rows) = try database.queue.read { db in
                let after = try TableSnapshot.read(db, table: history.table)
                return (after, try SampleRows.rowsByKey(db, table: history.table, key: before.primaryKey.map(current)))
            }
            #expect(after.primaryKey == before.primaryKey.map(current), "\(label): primary key \(before.primaryKey) became \(after.primaryKey)")

            // Same rows, by primary key.
            let keys = written.map { row in before.primaryKey.map { row[$0]! } }
            #expect(rows.count == written.count, "\(label): \(written.count) rows written, \(rows.count) read back")
            #expect(Set(rows.keys) == Set(keys), "\(label): primary keys changed: \(keys) → \(Array(rows.keys))")

            let beforeNames = Set(before.columnList.map(\.name).map(current))
            let added = after.columnList.filter { !beforeNames.contains($0.name) }
            for old in before.columnList where after.columns[current(old.name)] == nil {
                // A column may go away only when the contract dropped the field.
                #expect(fields[current(old.name)] == nil, "\(label): column \(old.name) of field \(current(old.name)) was lost")
            }
            for (key, values) in zip(keys, written) {
                guard let row = rows[key] else {
                    Issue.record("\(label): row \(key) is gone")
                    continue
                }
                for old in before.columnList {
                    let name = current(old.name)
                    guard after.columns[name] != nil else { continue }
                    let stored: DatabaseValue = row[name]
                    let expected = values[old.name]!.converted(toAffinityOf: after.columns[name]!.type)
                    #expect(
                        stored == expected && TableSnapshot.describe(stored) == TableSnapshot.describe(expected),
                        "\(label): row \(key) \(old.name)\(name == old.name ? "" : " → \(name)"): wrote \(values[old.name]!), read \(stored)"
                    )
                }
                for column in added {
                    let stored: DatabaseValue = row[column.name]
                    let columnLabel = "\(label): row \(key) new column \(column.name)"
                    #expect(
                        TableSnapshot.describe(stored) == (column.defaultValue ?? "NULL"),
                        "\(columnLabel): read \(stored), expected its default \(column.defaultSQL ?? "NULL")"
                    )
                    if let field = fields[column.name] {
                        if let defaultValue = field.defaultValue, !(side == .client && field.isEncrypted) {
                            #expect(
                                ContractSQL.storedValue(stored, matchesDefault: defaultValue, kind: field.kind),
                                "\(columnLabel): read \(stored) for the contract default \(defaultValue)"
                            )
                        } else {
                            #expect(stored.isNull, "\(columnLabel): a field without a default must read NULL, read \(stored)")
                        }
                    }
                }
            }
        }
    }

    @Test(
        "The table at each version has the columns a device at that version knows",
        arguments: Side.allCases, AllContracts.names
    )
    func eachVersionHasItsFields(_ side: Side, _ name: String) throws {
        let history = try ContractHistory(side: side, contract: name)
        let isEvent = ContractRegistry.event(named: name) != nil
        let envelope = Set(isEvent ? ContractSQL.envelopeColumns.map(\.name) : [])
        let local = side == .client ? ContractRegistry.entity(named: name)?.localFields ?? [] : []
        // Server-only fields are in the server's table from the version that added them, never on a device.
        let serverOnly = side == .client ? [] : ContractRegistry.entity(named: name)?.serverOnlyFields ?? []
        let wire = AllContracts.wireFields(of: name) ?? []
        let known =
            ContractRegistry.entity(named: name)?.knownFields(forSchemaVersion:)
            ?? ContractRegistry.event(named: name)?.knownFields(forSchemaVersion:)
        for version in history.versions {
            let database = try history.database(at: version)
            let columns = try database.queue.read { try TableSnapshot.read($0, table: try history.onlyTable($0)) }.columnList.map(\.name)
            let contractColumns = Set(columns.filter { !$0.hasPrefix("_") && !envelope.contains($0) })
            let localNames = Set(local.compactMap { $0.wireName(forSchemaVersion: version) })
                .union(serverOnly.compactMap { $0.wireName(forSchemaVersion: version) })
            let label = "\(history) v\(version)"
            if let knownFields = known?(version) {
                // A supported version: exactly the fields the descriptor says that device knows.
                #expect(
                    contractColumns.subtracting(localNames) == Set(knownFields.map(\.wireName)),
                    "\(label): columns \(contractColumns.sorted()), known fields \(knownFields.map(\.wireName).sorted())"
                )
            } else {
                // Older than supported: at least every current field that existed then, under its name then.
                let expected = Set(wire.compactMap { $0.wireName(forSchemaVersion: version) })
                #expect(expected.isSubset(of: contractColumns), "\(label): missing \(expected.subtracting(contractColumns).sorted())")
            }
            #expect(localNames.isSubset(of: contractColumns), "\(label): missing local \(localNames.subtracting(contractColumns).sorted())")
        }
    }

    // MARK: Migrated equals fresh

    @Test("A database migrated from the first version has the schema of one created at the current version", arguments: Side.allCases)
    func migratedSchemaEqualsFreshSchema(_ side: Side) throws {
        let histories = try AllContracts.names.map { try ContractHistory(side: side, contract: $0) }
        // Every migration, from the first version of every contract on.
        let migrated = try TemporaryDatabase.migrated(side)
        let fresh = try TemporaryDatabase("\(side)-fresh")

        var freshStatements: [String: [String]] = [:]
        for history in histories {
            // The table as the create step makes it, at the contract's first released version.
            let first = try history.database(at: history.firstVersion)
            let created = try first.queue.read { try TableSnapshot.read($0, table: try history.onlyTable($0)) }
            let statements = try FreshSchema.createStatements(contract: history.contract, side: side, createdTable: created)
            freshStatements[history.table] = statements
            try fresh.queue.write { db in
                for statement in statements { try db.execute(sql: statement) }
            }
        }

        let migratedTables = try migrated.queue.read { try TableSnapshot.tables($0) }
        let freshTables = try fresh.queue.read { try TableSnapshot.tables($0) }
        #expect(migratedTables == freshTables, "\(side): tables \(migratedTables.sorted()) vs fresh \(freshTables.sorted())")
        for history in histories {
            let actual = try migrated.queue.read { try TableSnapshot.read($0, table: history.table) }
            let expected = try fresh.queue.read { try TableSnapshot.read($0, table: history.table) }
            let differences = actual.differences(from: expected)
            let report = differences.joined(separator: "\n  ")
            let freshDDL = freshStatements[history.table, default: []].joined(separator: ";\n")
            #expect(
                differences.isEmpty,
                "\(history) (steps \(history.steps.map(\.identifier))): migrated schema differs from fresh:\n  \(report)\nfresh DDL:\n\(freshDDL)"
            )
        }
    }

    @Test("Each contract has one create step, then one step per version that changed the table", arguments: Side.allCases)
    func historyBoundaries(_ side: Side) throws {
        for name in AllContracts.names {
            let history = try ContractHistory(side: side, contract: name)
            let current = try #require(ContractSQL.currentVersion(of: name))
            // Steps that make a unique index per scope come after the version steps, one per index.
            // So do the indexes subscriptions need (`_subscription_index`), on the server.
            func isIndexStep(_ identifier: String) -> Bool { identifier.hasSuffix("_per_scope") || identifier.hasSuffix("_subscription_index") }
            let indexSteps = history.steps.filter { isIndexStep($0.identifier) }
            let versionSteps = history.steps.filter { !isIndexStep($0.identifier) }
            for step in indexSteps {
                #expect(step.identifier.hasPrefix("\(history.table).v\(step.version)."), "\(history): index step \(step.identifier)")
            }
            // `<table>.v<version>.create` first, then `<table>.v<version>.migrate`; the table is the
            // current one, or a name a later step renames away from.
            for (index, step) in versionSteps.enumerated() {
                let parts = step.identifier.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
                let kind = index == 0 ? "create" : "migrate"
                #expect(
                    parts.count == 3 && history.tableNames.contains(parts[0]) && parts[1] == "v\(step.version)" && parts[2] == kind,
                    "\(history): step \(index) is \(step.identifier), expected <\(history.tableNames.sorted().joined(separator: "|"))>.v\(step.version).\(kind)"
                )
            }
            #expect(history.steps.last?.identifier.hasPrefix("\(history.table).") == true, "\(history): the last step names the current table")
            #expect(
                Set(history.versions) == Set(versionSteps.map(\.version)) && versionSteps.count == Set(versionSteps.map(\.version)).count,
                "\(history): two steps for one version: \(versionSteps.map(\.identifier))")
            #expect(
                history.versions == history.versions.sorted() && history.versions.allSatisfy { $0 <= current },
                "\(history): versions \(history.versions)")
            // Every field added after the first version needs a step at the version that added it.
            for field in ContractSQL.fieldColumns(of: name, side: side) where field.since > history.firstVersion {
                #expect(history.versions.contains(field.since), "\(history): no step at v\(field.since), which added \(field.name)")
            }
            for field in ContractSQL.fieldColumns(of: name, side: side) {
                guard let renamedIn = field.renamedInVersion, renamedIn > history.firstVersion else { continue }
                #expect(history.versions.contains(renamedIn), "\(history): no step at v\(renamedIn), which renamed \(field.name)")
            }
        }
    }

    // MARK: Idempotence and identifiers

    @Test("Migrating again after an upgrade from any version changes neither schema nor rows", arguments: Side.allCases, AllContracts.names)
    func migratingAgainIsANoOp(_ side: Side, _ name: String) throws {
        let history = try ContractHistory(side: side, contract: name)
        let migrator = ContractSQL.migrator(history.steps)
        func dump(_ queue: DatabaseQueue) throws -> [String] {
            try queue.read { db in
                let schema = try String.fetchAll(
                    db, sql: "SELECT type || ' ' || name || ' ' || ifnull(sql, '') FROM sqlite_master ORDER BY type, name"
                )
                let rows = try Row.fetchAll(db, sql: "SELECT * FROM \(ContractSQL.quoted(history.table)) ORDER BY rowid")
                let applied = try migrator.appliedMigrations(db)
                return schema + rows.map(\.description) + applied
            }
        }
        for version in history.versions {
            let label = "\(history) from v\(version)"
            let database = try history.database(at: version)
            _ = try database.queue.write { try SampleRows.insert($0, table: try history.onlyTable($0)) }
            try migrator.migrate(database.queue)
            let once = try dump(database.queue)
            #expect(try database.queue.read { try migrator.appliedIdentifiers($0) } == Set(history.steps.map(\.identifier)), "\(label)")
            #expect(try database.queue.read { try migrator.hasCompletedMigrations($0) }, "\(label)")

            try migrator.migrate(database.queue)
            #expect(try dump(database.queue) == once, "\(label): a second migrate changed the database")

            let reopened = try DatabaseQueue(path: database.path)
            try migrator.migrate(reopened)
            #expect(try dump(reopened) == once, "\(label): migrating the reopened database changed it")
            try reopened.close()
        }
    }

    @Test("Migration identifiers never repeat, and an identifier means the same step on both sides")
    func identifiersNeverRepeat() throws {
        var byIdentifier: [String: (contract: String, version: Int)] = [:]
        for side in Side.allCases {
            let identifiers = side.migrations.map(\.identifier)
            let repeated = Dictionary(grouping: identifiers, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted()
            #expect(repeated.isEmpty, "\(side): repeated identifiers \(repeated)")
            for migration in side.migrations {
                if let other = byIdentifier[migration.identifier] {
                    #expect(
                        other.contract == migration.contract && other.version == migration.version,
                        "\(migration.identifier): \(other) on one side, \(migration.contract) v\(migration.version) on the other"
                    )
                }
                byIdentifier[migration.identifier] = (migration.contract, migration.version)
            }
            // Every contract's steps are contiguous in the list.
            var finished = Set<String>()
            var currentContract: String?
            for migration in side.migrations where migration.contract != currentContract {
                #expect(!finished.contains(migration.contract), "\(side): steps of \(migration.contract) are split in the list")
                if let currentContract { finished.insert(currentContract) }
                currentContract = migration.contract
            }
        }
        // A version that changes only server-only fields has a server step and none on devices.
        #expect(
            Set(Side.client.migrations.map(\.identifier)).isSubset(of: Set(Side.server.migrations.map(\.identifier))),
            "client and server walk different histories"
        )
    }

    @Test("Unit walks v1 → v2 (description added) → v3 (position renamed to sort_index)", arguments: Side.allCases)
    func unitHistory(_ side: Side) throws {
        let history = try ContractHistory(side: side, contract: "Unit")
        #expect(history.steps.map(\.identifier) == ["units.v1.create", "units.v2.migrate", "units.v3.migrate"])
        let create = try #require(history.steps.first)
        #expect(create.statements.contains { $0.contains(#""position" INTEGER NOT NULL DEFAULT 0"#) }, "v1 creates position")
        #expect(create.statements.contains { $0.contains(#"CREATE INDEX "units_position_idx""#) }, "v1 indexes position")
        #expect(!create.statements.contains { $0.contains("sort_index") || $0.contains("description") }, "v1 is the released v1")

        let v2 = try #require(history.steps.first { $0.identifier == "units.v2.migrate" })
        #expect(v2.statements.contains { $0.contains("ADD COLUMN") && $0.contains(#""description""#) }, "v2 adds description: \(v2.statements)")

        let v3 = try #require(history.steps.first { $0.identifier == "units.v3.migrate" })
        #expect(v3.statements.contains { $0.contains(#"RENAME COLUMN "position" TO "sort_index""#) }, "v3 renames: \(v3.statements)")
        #expect(v3.statements.contains { $0.contains("ADD COLUMN") && $0.contains(#""estimated_minutes""#) }, "v3 adds estimated_minutes")
        #expect(!v3.statements.contains { $0.contains("DROP TABLE") }, "a rename needs no table rebuild: \(v3.statements)")

        // On a real file: a unit placed at position 7 under v2 is at sort_index 7 under v3.
        let database = try history.database(at: 2)
        try database.queue.write { db in
            _ = try ContractSQL.insertMinimalRow(db, contract: "Unit", side: side, overrides: ["position": 7.databaseValue])
        }
        try ContractSQL.migrator(history.steps).migrate(database.queue)
        try database.queue.read { db in
            let row = try #require(try Row.fetchOne(db, sql: #"SELECT * FROM "units""#))
            #expect(row["sort_index"] as Int64? == 7)
            #expect(row.hasColumn("position") == false)
            let estimated: DatabaseValue = row["estimated_minutes"]
            #expect(estimated.isNull)
            let indexes = try TableSnapshot.read(db, table: "units").indexes.map(\.name)
            #expect(indexes.contains("units_sort_index_idx") && !indexes.contains("units_position_idx"), "indexes \(indexes)")
        }
    }

    @Test("Lesson v2 renames length_seconds to duration_seconds", arguments: Side.allCases)
    func lessonHistory(_ side: Side) throws {
        let history = try ContractHistory(side: side, contract: "Lesson")
        // Lesson's unique place in its unit is made per scope on the server, right after v1 created it.
        let expected =
            side == .server
            ? ["lessons.v1.create", "lessons.v1.lessons_unit_id_sort_index_key_per_scope", "lessons.v2.migrate"]
            : ["lessons.v1.create", "lessons.v2.migrate"]
        #expect(history.steps.map(\.identifier) == expected)
        #expect(history.steps.last?.statements.contains { $0.contains(#"RENAME COLUMN "length_seconds" TO "duration_seconds""#) } == true)
    }

    // MARK: The lock

    @Test("Every released migration in contracts.lock is generated with its locked checksum", arguments: Side.allCases)
    func releasedMigrationsMatchTheLock(_ side: Side) throws {
        try Self.expectLocked(side.rawValue, side.migrations)
    }

    @Test("Every released PostgreSQL migration in contracts.lock is generated with its locked checksum")
    func releasedPostgresMigrationsMatchTheLock() throws {
        try Self.expectLocked("server_postgres", ContractRegistry.serverPostgresMigrations)
    }

    private static func expectLocked(_ side: String, _ migrations: [ContractMigration]) throws {
        let locked = try LockedMigrations.read()[side] ?? [:]
        try #require(!locked.isEmpty, "contracts.lock lists no \(side) migrations")
        let generated = Dictionary(migrations.map { ($0.identifier, $0.checksum) }, uniquingKeysWith: { first, _ in first })
        for (identifier, checksum) in locked.sorted(by: { $0.key < $1.key }) {
            guard let actual = generated[identifier] else {
                Issue.record("\(side): released migration \(identifier) is no longer generated")
                continue
            }
            #expect(actual == checksum, "\(side) \(identifier): checksum \(actual), locked \(checksum): a released migration changed")
        }
    }
}

/// The `migrations:` section of `contracts/contracts.lock`: set (`client`, `server`,
/// `server_postgres`) → identifier → checksum.
enum LockedMigrations {
    static func read() throws -> [String: [String: String]] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("contracts/contracts.lock"), encoding: .utf8)
        var result: [String: [String: String]] = [:]
        var inMigrations = false
        var side: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if !line.hasPrefix(" ") && !trimmed.isEmpty && !trimmed.hasPrefix("#") {
                inMigrations = trimmed == "migrations:"
                side = nil
                continue
            }
            guard inMigrations else { continue }
            if !trimmed.hasPrefix("-"), trimmed.hasSuffix(":") {
                side = String(trimmed.dropLast())  // client, server, server_postgres
            } else if let side, trimmed.hasPrefix("- {"),
                let identifier = value(of: "id", in: trimmed), let checksum = value(of: "checksum", in: trimmed)
            {
                result[side, default: [:]][identifier] = checksum
            }
        }
        return result
    }

    /// The value of `key` in a one-line flow mapping such as `- { id: "a.v1.create", checksum: 0f… }`.
    private static func value(of key: String, in line: String) -> String? {
        guard let range = line.range(of: key + ": ") else { return nil }
        var rest = line[range.upperBound...]
        if rest.hasPrefix("\"") {
            rest = rest.dropFirst()
            return rest.firstIndex(of: "\"").map { String(rest[..<$0]) }
        }
        let end = rest.firstIndex { $0 == "," || $0 == "}" || $0 == " " } ?? rest.endIndex
        return String(rest[..<end])
    }
}
