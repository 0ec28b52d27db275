import ContractRuntime
import Crypto
import Foundation

/// One migration step: an identifier that never changes once released, and its SQL.
package struct MigrationStep: Hashable, Sendable {
    package var identifier: String
    package var contract: String
    package var version: Int
    package var statements: [String]

    /// SHA-256 of the statements, for the lock to catch any edit of a released migration.
    package var checksum: String {
        ContractSnapshot.sha256Hex(statements.joined(separator: ";\n"))
    }
}

/// Derives the migrations of every contract for one side, from its released history.
///
/// A contract's first known version creates its table (`<table>.v<N>.create`); each later version
/// migrates from the one before (`<table>.v<N>.migrate`) with `RENAME COLUMN`, `DROP COLUMN` and
/// `ADD COLUMN`, or SQLite's table rebuild when a column's type, nullability or default changes.
/// In PostgreSQL's dialect a changed column is altered in place (`ALTER COLUMN … TYPE … USING`,
/// `SET`/`DROP NOT NULL`, `SET`/`DROP DEFAULT`), and only a changed primary key rebuilds the table.
/// Each step must run in one transaction (GRDB's migrator and ``PostgresStorage`` do), so a
/// rebuild is all or nothing.
package struct MigrationPlanner {
    let builder: SchemaBuilder
    let set: ContractSet
    /// Released versions per contract, ascending (from the lock).
    let history: [String: [Contract]]

    package init(set: ContractSet, history: [String: [Contract]] = [:]) {
        self.set = set
        self.history = history
        self.builder = SchemaBuilder(set: set)
    }

    /// The versions a contract's migrations walk through: released ones, then the current one.
    package func chain(for contract: Contract) -> [Contract] {
        var versions = (history[contract.name] ?? []).filter { $0.version < contract.version }
        versions.append(contract)
        return versions
    }

    /// The ordered migrations of one side: per contract (by name), its create step and then each
    /// version step.
    package func migrations(side: StorageSide) -> [MigrationStep] {
        set.contracts.flatMap { contract -> [MigrationStep] in
            let versions = chain(for: contract)
            var steps: [MigrationStep] = []
            let first = versions[0]
            steps.append(
                MigrationStep(
                    identifier: "\(first.table).v\(first.version).create", contract: contract.name, version: first.version,
                    statements: builder.table(for: first, side: side).createStatements
                ))
            for (previous, next) in zip(versions, versions.dropFirst()) {
                let statements = Self.statements(
                    from: builder.table(for: previous, side: side), to: builder.table(for: next, side: side),
                    renames: renames(from: previous, to: next, side: side), dialect: side.dialect
                )
                guard !statements.isEmpty else { continue }
                steps.append(
                    MigrationStep(
                        identifier: "\(next.table).v\(next.version).migrate", contract: contract.name, version: next.version,
                        statements: statements
                    ))
            }
            // Each per-scope index step follows the step of the version that brought its index.
            for step in uniquenessPerScope(contract, side: side) {
                let position = steps.lastIndex { $0.version <= step.version }.map { $0 + 1 } ?? steps.count
                steps.insert(step, at: position)
            }
            // Then the server indexes the subscriptions need, named after the version whose
            // step last created the table: a rebuild drops the indexes it does not declare.
            let rebuilt = steps.last { step in step.statements.contains { $0.hasPrefix("CREATE TABLE \"\(Self.rebuildPrefix)") } }
            steps += SubscriptionGenerator(set: set).indexMigrations(of: contract, since: rebuilt?.version ?? first.version, side: side)
            return steps
        }
    }

    /// Unique indexes hold within a scope, not across a tenant: a value one scope holds says
    /// nothing to (and takes nothing from) another. The tables' create steps were released with
    /// tenant-wide unique indexes, so each unique index of the current version is replaced by
    /// one step of its own: on the server, unique over the tenant, the scope key and the fields;
    /// on a device that can hold several scopes of the contract at once (a team scope), a plain
    /// lookup index (the server keeps the uniqueness; two teams' rows may share a value).
    private func uniquenessPerScope(_ contract: Contract, side: StorageSide) -> [MigrationStep] {
        guard contract.kind == .entity else { return [] }
        let scope = set.manifest.scopes.first { $0.name == contract.scope }
        let severalOnADevice = !(scope.map { Set($0.placeholders).isSubset(of: ScopePlaceholder.filledByToken) } ?? true)
        if side == .client && !severalOnADevice { return [] }
        let versions = chain(for: contract)
        return contract.indexes.filter(\.isUnique).map { index in
            let name = TableSchema.indexName(table: contract.table, columns: index.fields, unique: true)
            // Named after the version that first had the index, so the step never changes.
            let since = versions.first { $0.indexes.contains { $0.isUnique && $0.fields == index.fields } }?.version ?? contract.version
            let table = TypeMapping.quoted(contract.table)
            let columns: [String]
            let create: String
            if side.isServer {
                columns = [EngineNames.Column.tenantID.rawValue, EngineNames.Column.scopeKey.rawValue] + index.fields
                create = "CREATE UNIQUE INDEX IF NOT EXISTS \(TypeMapping.quoted(name + "_per_scope")) ON \(table) ("
            } else {
                columns = index.fields
                create = "CREATE INDEX IF NOT EXISTS \(TypeMapping.quoted(name + "_lookup")) ON \(table) ("
            }
            return MigrationStep(
                identifier: "\(contract.table).v\(since).\(name)_per_scope", contract: contract.name, version: since,
                statements: [
                    "DROP INDEX IF EXISTS \(TypeMapping.quoted(name))", create + columns.map(TypeMapping.quoted).joined(separator: ", ") + ")",
                ]
            )
        }
    }

    /// The name a rebuilt table is created under before it replaces the old one.
    static let rebuildPrefix = "_outpost_new_"

    /// Column renames (old name → new name) that happen between two versions.
    private func renames(from previous: Contract, to next: Contract, side: StorageSide) -> [String: String] {
        var renames: [String: String] = [:]
        let previousNames = Set(previous.fields.map(\.name))
        for field in next.fields {
            guard let rename = field.renamedFrom, rename.version > previous.version, rename.version <= next.version,
                previousNames.contains(rename.name), !previousNames.contains(field.name)
            else { continue }
            renames[rename.name] = field.name
        }
        return renames
    }

    /// The SQL that turns table `old` into table `new`.
    package static func statements(
        from old: TableSchema, to new: TableSchema, renames: [String: String], dialect: SQLDialect = .sqlite
    ) -> [String] {
        var statements: [String] = []
        let quoted = TypeMapping.quoted
        if old.name != new.name {
            statements.append("ALTER TABLE \(quoted(old.name)) RENAME TO \(quoted(new.name))")
        }
        // The old columns under their new names.
        let renamedOld = old.columns.map { column -> TableSchema.Column in
            var column = column
            column.name = renames[column.name] ?? column.name
            return column
        }
        let oldByName = Dictionary(uniqueKeysWithValues: renamedOld.map { ($0.name, $0) })
        let newByName = Dictionary(uniqueKeysWithValues: new.columns.map { ($0.name, $0) })
        let added = new.columns.filter { oldByName[$0.name] == nil }
        let dropped = renamedOld.filter { newByName[$0.name] == nil }
        let changed = new.columns.filter { column in oldByName[column.name].map { $0 != column } ?? false }
        let renamedPrimaryKey = old.primaryKey.map { renames[$0] ?? $0 }
        let primaryKeyChanged = renamedPrimaryKey != new.primaryKey || dropped.contains { renamedPrimaryKey.contains($0.name) }
        let needsRebuild: Bool
        switch dialect {
        case .sqlite: needsRebuild = primaryKeyChanged || !changed.isEmpty || added.contains { $0.isNotNull && $0.defaultSQL == nil }
        case .postgres: needsRebuild = primaryKeyChanged
        }

        let oldIndexes = Dictionary(uniqueKeysWithValues: old.indexes.map { ($0.name, $0) })
        let newIndexes = Dictionary(uniqueKeysWithValues: new.indexes.map { ($0.name, $0) })

        if needsRebuild {
            let temporary = rebuildPrefix + new.name
            var staged = new
            staged.name = temporary
            staged.indexes = []
            statements += staged.createStatements
            var targets: [String] = []
            var sources: [String] = []
            let reverse = Dictionary(uniqueKeysWithValues: renames.map { ($1, $0) })
            for column in new.columns {
                if let previous = oldByName[column.name] {
                    let source = quoted(reverse[column.name] ?? column.name)
                    targets.append(quoted(column.name))
                    let converted =
                        dialect == .postgres && previous.sqlType != column.sqlType
                        ? conversion(source, from: previous.sqlType, to: column.sqlType) : source
                    if column.isNotNull && !previous.isNotNull {
                        sources.append("COALESCE(\(converted), \(column.defaultSQL ?? zeroValue(column.sqlType)))")
                    } else {
                        sources.append(converted)
                    }
                } else if column.isNotNull && column.defaultSQL == nil {
                    targets.append(quoted(column.name))
                    sources.append(zeroValue(column.sqlType))
                }
            }
            statements.append(
                "INSERT INTO \(quoted(temporary)) (\(targets.joined(separator: ", ")))\nSELECT \(sources.joined(separator: ", ")) FROM \(quoted(new.name))"
            )
            statements.append("DROP TABLE \(quoted(new.name))")
            statements.append("ALTER TABLE \(quoted(temporary)) RENAME TO \(quoted(new.name))")
            statements += new.indexes.map { $0.createStatement.replacingOccurrences(of: "{table}", with: quoted(new.name)) }
            return statements
        }

        for index in old.indexes where newIndexes[index.name] != index.renamed(renames) {
            statements.append("DROP INDEX \(quoted(index.name))")
        }
        for (from, to) in renames.sorted(by: { $0.key < $1.key }) {
            statements.append("ALTER TABLE \(quoted(new.name)) RENAME COLUMN \(quoted(from)) TO \(quoted(to))")
        }
        for column in dropped {
            statements.append("ALTER TABLE \(quoted(new.name)) DROP COLUMN \(quoted(column.name))")
        }
        for column in added {
            if column.isNotNull && column.defaultSQL == nil {
                // PostgreSQL only: fill existing rows, then require the value from now on.
                var filled = column
                filled.defaultSQL = zeroValue(column.sqlType)
                statements.append("ALTER TABLE \(quoted(new.name)) ADD COLUMN \(filled.definition)")
                statements.append("ALTER TABLE \(quoted(new.name)) ALTER COLUMN \(quoted(column.name)) DROP DEFAULT")
            } else {
                statements.append("ALTER TABLE \(quoted(new.name)) ADD COLUMN \(column.definition)")
            }
        }
        for column in changed {
            statements += alterations(of: oldByName[column.name]!, to: column, table: new.name)
        }
        for index in new.indexes where oldIndexes[index.name]?.renamed(renames) != index {
            statements.append(index.createStatement.replacingOccurrences(of: "{table}", with: quoted(new.name)))
        }
        return statements
    }

    /// PostgreSQL's in-place change of one column: its type (converting the stored values), its
    /// default, and whether it may be null (existing nulls take the default first).
    private static func alterations(of old: TableSchema.Column, to new: TableSchema.Column, table: String) -> [String] {
        let alter = "ALTER TABLE \(TypeMapping.quoted(table)) ALTER COLUMN \(TypeMapping.quoted(new.name))"
        var statements: [String] = []
        let typeChanged = old.sqlType != new.sqlType
        if typeChanged {
            if old.defaultSQL != nil { statements.append("\(alter) DROP DEFAULT") }
            statements.append("\(alter) TYPE \(new.sqlType) USING \(conversion(TypeMapping.quoted(new.name), from: old.sqlType, to: new.sqlType))")
        }
        if new.defaultSQL != old.defaultSQL || (typeChanged && new.defaultSQL != nil) {
            statements.append(new.defaultSQL.map { "\(alter) SET DEFAULT \($0)" } ?? "\(alter) DROP DEFAULT")
        }
        if new.isNotNull && !old.isNotNull {
            statements.append(
                "UPDATE \(TypeMapping.quoted(table)) SET \(TypeMapping.quoted(new.name)) = \(new.defaultSQL ?? zeroValue(new.sqlType)) "
                    + "WHERE \(TypeMapping.quoted(new.name)) IS NULL"
            )
            statements.append("\(alter) SET NOT NULL")
        } else if !new.isNotNull && old.isNotNull {
            statements.append("\(alter) DROP NOT NULL")
        }
        return statements
    }

    /// A PostgreSQL expression converting `source` from one column type to another: a cast where
    /// one exists, milliseconds for timestamps stored as numbers, and through text otherwise.
    /// SQLite stores any value in any column, so its rebuild copies values as they are.
    private static func conversion(_ source: String, from old: String, to new: String) -> String {
        switch (old, new) {
        case ("BIGINT", "TIMESTAMPTZ"), ("DOUBLE PRECISION", "TIMESTAMPTZ"): return "to_timestamp(\(source) / 1000.0)"
        case ("TIMESTAMPTZ", "BIGINT"): return "(extract(epoch FROM \(source)) * 1000)::BIGINT"
        case ("BOOLEAN", "BIGINT"): return "\(source)::INTEGER::BIGINT"
        case ("BIGINT", "BOOLEAN"): return "(\(source) <> 0)"
        case ("BIGINT", "DOUBLE PRECISION"), ("DOUBLE PRECISION", "BIGINT"), (_, "TEXT"): return "\(source)::\(new)"
        default: return "\(source)::TEXT::\(new)"
        }
    }

    /// A value of the column's type for rows written before a required column existed
    /// (only reachable when compatibility checks are off or allowed).
    private static func zeroValue(_ sqlType: String) -> String {
        switch sqlType {
        case "INTEGER", "REAL", "BIGINT", "DOUBLE PRECISION": return "0"
        case "BLOB": return "X''"
        case "BOOLEAN": return "false"
        case "BYTEA": return "'\\x'"
        case "JSONB": return "'null'"
        case "TIMESTAMPTZ", "DATE": return "'epoch'"
        case "UUID": return "'00000000-0000-0000-0000-000000000000'"
        default: return "''"
        }
    }
}
