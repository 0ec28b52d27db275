import ContractRuntime
import Contracts
import Foundation
import GRDB
import Testing

/// One contract's generated migrations on one side: the create step at its first released
/// version, then one step per later version that changes the table.
struct ContractHistory: Sendable, CustomStringConvertible {
    let side: Side
    let contract: String
    let table: String
    /// The contract's migrations, in list order.
    let steps: [ContractMigration]

    init(side: Side, contract: String) throws {
        self.side = side
        self.contract = contract
        guard let table = ContractSQL.table(of: contract) else { throw SampleError("\(contract) has no table") }
        self.table = table
        steps = side.migrations.filter { $0.contract == contract }
        guard !steps.isEmpty else { throw SampleError("\(side): no migration for \(contract)") }
    }

    var description: String { "\(side) \(contract)" }

    /// The distinct versions the steps bring the table to (the create version first).
    var versions: [Int] {
        var seen = Set<Int>()
        return steps.map(\.version).filter { seen.insert($0).inserted }
    }

    var firstVersion: Int { steps[0].version }

    func steps(upTo version: Int) -> [ContractMigration] { steps.filter { $0.version <= version } }

    /// Column renames that happen after `version` (old name → current name), from the descriptor.
    func renames(after version: Int) -> [String: String] {
        var renames: [String: String] = [:]
        for field in ContractSQL.fieldColumns(of: contract, side: side) {
            guard let old = field.renamedFrom, let renamedIn = field.renamedInVersion, renamedIn > version else { continue }
            renames[old] = field.name
        }
        return renames
    }

    /// A fresh database with the steps up to `version` applied.
    func database(at version: Int) throws -> TemporaryDatabase {
        let database = try TemporaryDatabase("\(side)-\(table)-v\(version)")
        try ContractSQL.migrator(steps(upTo: version)).migrate(database.queue)
        return database
    }

    /// The contract's table in a database that holds only this contract's migrations (its name
    /// at that version, should a later step rename it).
    func onlyTable(_ db: Database) throws -> String {
        let tables = try TableSnapshot.tables(db)
        guard tables.count == 1, let table = tables.first else {
            throw SampleError("\(self): expected one table, found \(tables.sorted())")
        }
        return table
    }

    /// The table names the identifiers may carry: the current one, and any name a step renames
    /// away from (`ALTER TABLE "old" RENAME TO "new"`).
    var tableNames: Set<String> {
        var names: Set<String> = [table]
        for statement in steps.flatMap(\.statements) {
            let words = statement.split(whereSeparator: { $0 == " " || $0 == "\n" })
            guard words.count == 6, words[0] == "ALTER", words[1] == "TABLE", words[3] == "RENAME", words[4] == "TO" else { continue }
            names.insert(words[2].trimmingCharacters(in: CharacterSet(charactersIn: "\"")))
        }
        return names
    }
}

/// A table's structure as SQLite reports it (`PRAGMA table_info`, `index_list`, `index_info`),
/// in a form that compares regardless of column order and of how a default is spelled.
struct TableSnapshot: Equatable, Sendable {
    struct Column: Hashable, Sendable, CustomStringConvertible {
        var name: String
        /// The declared type, upper-cased.
        var type: String
        var isNotNull: Bool
        /// The default as SQLite evaluates it, normalised by the column's affinity; `nil` for none.
        var defaultValue: String?
        /// The 1-based position in the primary key, 0 when not part of it.
        var primaryKeyIndex: Int
        /// The default as written in the DDL.
        var defaultSQL: String?

        var description: String {
            "\(name) \(type)\(isNotNull ? " NOT NULL" : "")\(defaultValue.map { " DEFAULT \($0)" } ?? "")"
        }

        static func == (lhs: Column, rhs: Column) -> Bool {
            lhs.name == rhs.name && lhs.type == rhs.type && lhs.isNotNull == rhs.isNotNull
                && lhs.defaultValue == rhs.defaultValue && lhs.primaryKeyIndex == rhs.primaryKeyIndex
        }

        func hash(into hasher: inout Hasher) { hasher.combine(name) }
    }

    struct Index: Hashable, Sendable, CustomStringConvertible {
        var name: String
        var isUnique: Bool
        var columns: [String]
        var description: String { "\(isUnique ? "UNIQUE " : "")\(name)(\(columns.joined(separator: ", ")))" }
    }

    var table: String
    /// Columns in declaration order.
    var columnList: [Column]
    var primaryKey: [String]
    /// Indexes except SQLite's automatic primary-key index.
    var indexes: Set<Index>

    var columns: [String: Column] { Dictionary(columnList.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first }) }

    static func == (lhs: TableSnapshot, rhs: TableSnapshot) -> Bool {
        lhs.table == rhs.table && lhs.columns == rhs.columns && lhs.primaryKey == rhs.primaryKey && lhs.indexes == rhs.indexes
    }

    static func read(_ db: Database, table: String) throws -> TableSnapshot {
        let quoted = ContractSQL.quoted(table)
        var columns: [Column] = []
        for row in try Row.fetchAll(db, sql: "PRAGMA table_info(\(quoted))") {
            let type = (row["type"] as String? ?? "").uppercased()
            let defaultSQL: String? = row["dflt_value"]
            columns.append(
                Column(
                    name: row["name"], type: type, isNotNull: row["notnull"] as Int64? == 1,
                    defaultValue: try defaultSQL.map { try evaluatedDefault($0, type: type, db) },
                    primaryKeyIndex: Int(row["pk"] as Int64? ?? 0), defaultSQL: defaultSQL
                ))
        }
        guard !columns.isEmpty else { throw SampleError("no table \(table)") }
        let primaryKey = columns.filter { $0.primaryKeyIndex > 0 }.sorted { $0.primaryKeyIndex < $1.primaryKeyIndex }.map(\.name)
        var indexes = Set<Index>()
        for row in try Row.fetchAll(db, sql: "PRAGMA index_list(\(quoted))") where row["origin"] as String? != "pk" {
            let name: String = row["name"]
            let indexColumns = try Row.fetchAll(db, sql: "PRAGMA index_info(\(ContractSQL.quoted(name)))")
                .sorted { ($0["seqno"] as Int64? ?? 0) < ($1["seqno"] as Int64? ?? 0) }
                .map { $0["name"] as String? ?? "<expression>" }
            indexes.insert(Index(name: name, isUnique: row["unique"] as Int64? == 1, columns: indexColumns))
        }
        return TableSnapshot(table: table, columnList: columns, primaryKey: primaryKey, indexes: indexes)
    }

    /// The user tables of a database (not SQLite's, not GRDB's migration table).
    static func tables(_ db: Database) throws -> Set<String> {
        try String.fetchSet(
            db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'grdb_migrations'"
        )
    }

    /// A column default, evaluated by SQLite and normalised as the column's affinity stores it.
    static func evaluatedDefault(_ sql: String, type: String, _ db: Database) throws -> String {
        let value = try DatabaseValue.fetchOne(db, sql: "SELECT (\(sql))") ?? .null
        return describe(value.converted(toAffinityOf: type))
    }

    /// A stable, typed description of a stored value (JSON text in canonical form).
    static func describe(_ value: DatabaseValue) -> String {
        switch value.storage {
        case .null: return "NULL"
        case .int64(let number): return "int \(number)"
        case .double(let number): return "real \(number)"
        case .string(let text):
            if let first = text.first, first == "{" || first == "[", let canonical = try? CanonicalJSON.text(of: Data(text.utf8)) {
                return "json \(canonical)"
            }
            return "text '\(text)'"
        case .blob(let data): return "blob x'\(data.map { String(format: "%02x", $0) }.joined())'"
        }
    }

    /// Human-readable differences from `expected`, empty when the two are the same.
    func differences(from expected: TableSnapshot) -> [String] {
        var lines: [String] = []
        let actual = columns
        let wanted = expected.columns
        for name in Set(wanted.keys).subtracting(actual.keys).sorted() { lines.append("missing column \(wanted[name]!)") }
        for name in Set(actual.keys).subtracting(wanted.keys).sorted() { lines.append("unexpected column \(actual[name]!)") }
        for name in Set(actual.keys).intersection(wanted.keys).sorted() where actual[name]! != wanted[name]! {
            lines.append(
                "column \(actual[name]!) (pk \(actual[name]!.primaryKeyIndex)), expected \(wanted[name]!) (pk \(wanted[name]!.primaryKeyIndex))")
        }
        if primaryKey != expected.primaryKey { lines.append("primary key \(primaryKey), expected \(expected.primaryKey)") }
        for index in expected.indexes.subtracting(indexes).sorted(by: { $0.name < $1.name }) { lines.append("missing index \(index)") }
        for index in indexes.subtracting(expected.indexes).sorted(by: { $0.name < $1.name }) { lines.append("unexpected index \(index)") }
        return lines
    }
}

extension DatabaseValue {
    /// The value as a column of declared type `type` stores it (SQLite's affinity rules, for the
    /// numeric cases that matter here).
    func converted(toAffinityOf type: String) -> DatabaseValue {
        let type = type.uppercased()
        switch storage {
        case .int64(let number) where type.contains("REAL") || type.contains("FLOA") || type.contains("DOUB"):
            return Double(number).databaseValue
        case .double(let number) where type.contains("INT"):
            if let exact = Int64(exactly: number) { return exact.databaseValue }
            return self
        default:
            return self
        }
    }
}

/// Rows written generically from `PRAGMA table_info`, and what they must read back as.
enum SampleRows {
    static let count = 4

    /// A value for column `index` of row `row`: of the column's declared type, distinct per row,
    /// NULL in some rows of a nullable column that is not part of the primary key.
    static func value(for column: TableSnapshot.Column, index: Int, row: Int) -> DatabaseValue {
        if !column.isNotNull && column.primaryKeyIndex == 0 && (row + index) % 3 == 1 { return .null }
        let type = column.type
        if type.contains("INT") {
            // Beyond 32 bits, so a narrowing copy would show.
            return (Int64(index + 1) * 1_000_000_007 + Int64(row)).databaseValue
        }
        if type.contains("REAL") || type.contains("FLOA") || type.contains("DOUB") {
            return (Double(index + 1) + Double(row) * 0.25 + 0.125).databaseValue
        }
        if type.contains("BLOB") || type.isEmpty {
            return Data([UInt8(index % 256), UInt8(row), 0x00, 0xFF]).databaseValue
        }
        // Text: a quote, a slash and non-ASCII characters, to catch a copy that re-quotes values.
        return "\(column.name) r\(row) 'é/✓'".databaseValue
    }

    /// Inserts `count` rows into `table` and returns them, column name → value.
    static func insert(_ db: Database, table: String) throws -> [[String: DatabaseValue]] {
        let snapshot = try TableSnapshot.read(db, table: table)
        var rows: [[String: DatabaseValue]] = []
        for row in 0..<count {
            var values: [String: DatabaseValue] = [:]
            for (index, column) in snapshot.columnList.enumerated() {
                values[column.name] = value(for: column, index: index, row: row)
            }
            let names = snapshot.columnList.map(\.name)
            let sql =
                "INSERT INTO \(ContractSQL.quoted(table)) (\(names.map(ContractSQL.quoted).joined(separator: ", "))) VALUES ("
                + Array(repeating: "?", count: names.count).joined(separator: ", ") + ")"
            try db.execute(sql: sql, arguments: StatementArguments(names.map { values[$0]! }))
            rows.append(values)
        }
        return rows
    }

    /// Every row of `table`, keyed by its primary key values (in key order).
    static func rowsByKey(_ db: Database, table: String, key: [String]) throws -> [[DatabaseValue]: Row] {
        var rows: [[DatabaseValue]: Row] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT * FROM \(ContractSQL.quoted(table))") {
            rows[key.map { row[$0] as DatabaseValue }] = row
        }
        return rows
    }
}

/// The schema a database created fresh at the current version of every contract has, built
/// from the descriptors (not from the migrations), for the invariant "migrated = fresh".
enum FreshSchema {
    /// The DDL of `contract`'s table at its current version on `side`.
    ///
    /// Contract columns, primary key and declared indexes come from the descriptor. Sync metadata
    /// (`_`-prefixed columns and the indexes over envelope and metadata columns only) is not part
    /// of any contract's history, so it is taken from the table the create step makes.
    static func createStatements(contract: String, side: Side, createdTable first: TableSnapshot) throws -> [String] {
        guard let table = ContractSQL.table(of: contract) else { throw SampleError("\(contract) has no table") }
        let entity = ContractRegistry.entity(named: contract)
        let isEvent = entity == nil
        let envelopeNames = isEvent ? ContractSQL.envelopeColumns.map(\.name) : []
        let fields = ContractSQL.fieldColumns(of: contract, side: side)
        let fieldNames = Set(fields.map(\.name))

        var definitions: [String] = []
        func define(_ name: String, _ type: String, notNull: Bool, defaultSQL: String?) {
            var text = ContractSQL.quoted(name) + " " + type
            if notNull { text += " NOT NULL" }
            if let defaultSQL { text += " DEFAULT " + defaultSQL }
            definitions.append(text)
        }
        for column in ContractSQL.envelopeColumns where isEvent {
            define(column.name, column.type, notNull: column.notNull, defaultSQL: nil)
        }
        for field in fields {
            let encrypted = side == .client && field.isEncrypted
            define(
                field.name, ContractSQL.columnType(field, side: side), notNull: !field.isOptional,
                defaultSQL: encrypted ? nil : try field.defaultValue.flatMap { try literal($0, kind: field.kind) }
            )
        }
        for column in first.columnList where column.name.hasPrefix("_") && !fieldNames.contains(column.name) {
            define(column.name, column.type, notNull: column.isNotNull, defaultSQL: column.defaultSQL)
        }
        let key = entity?.primaryKey ?? "event_id"
        let primaryKey = side == .server ? ["_tenant_id", key] : [key]
        definitions.append("PRIMARY KEY (" + primaryKey.map(ContractSQL.quoted).joined(separator: ", ") + ")")
        var statements = ["CREATE TABLE \(ContractSQL.quoted(table)) (\n    " + definitions.joined(separator: ",\n    ") + "\n)"]

        func index(_ name: String, _ columns: [String], unique: Bool) -> String {
            "CREATE \(unique ? "UNIQUE " : "")INDEX \(ContractSQL.quoted(name)) ON \(ContractSQL.quoted(table)) ("
                + columns.map(ContractSQL.quoted).joined(separator: ", ") + ")"
        }
        let metadataNames = Set(envelopeNames).union(first.columnList.map(\.name).filter { $0.hasPrefix("_") })
        for existing in first.indexes.sorted(by: { $0.name < $1.name })
        where Set(existing.columns).isSubset(of: metadataNames) {
            statements.append(index(existing.name, existing.columns, unique: existing.isUnique))
        }
        if let entity {
            let localNames = Set(entity.localFields.map(\.name))
            // A device holding several scopes of the contract (team) keeps a lookup index where
            // the server keeps a unique one: uniqueness holds per scope.
            let scope = ContractRegistry.scope(named: entity.scope)
            let severalOnADevice = !(scope.map { Set($0.placeholders).isSubset(of: ["tenant_id", "user_id", "device_id"]) } ?? true)
            for declared in entity.indexes {
                switch side {
                case .client:
                    if declared.isUnique && severalOnADevice {
                        statements.append(index(declared.name + "_lookup", declared.fields, unique: false))
                    } else {
                        statements.append(index(declared.name, declared.fields, unique: declared.isUnique))
                    }
                case .server:
                    // Local fields exist on devices only; server lookups are per tenant, and
                    // unique means unique within a scope.
                    guard localNames.isDisjoint(with: declared.fields) else { continue }
                    if declared.isUnique {
                        statements.append(index(declared.name + "_per_scope", ["_tenant_id", "_scope_key"] + declared.fields, unique: true))
                    } else {
                        statements.append(index(declared.name, ["_tenant_id"] + declared.fields, unique: false))
                    }
                }
            }
            if side == .server {
                for column in subscriptionIndexColumns(of: entity) {
                    statements.append(index("\(table)_\(column)_subscription_idx", ["_tenant_id", column], unique: false))
                }
            }
        }
        return statements
    }

    /// The columns of `entity` a subscription selects by that no declared index leads with: the
    /// root's filter fields (unless one is the primary key), the foreign keys `has_many`
    /// includes follow. Worked out here from the descriptors, not from the generator.
    static func subscriptionIndexColumns(of entity: EntityDescriptor) -> [String] {
        var columns: [String] = []
        func need(_ column: String) {
            guard column != entity.primaryKey, !entity.indexes.contains(where: { $0.fields.first == column }), !columns.contains(column) else {
                return
            }
            columns.append(column)
        }
        for subscription in ContractRegistry.subscriptions {
            if subscription.entity == entity.name, !subscription.filter.contains(where: { $0.field == entity.primaryKey }) {
                subscription.filter.forEach { need($0.field) }
            }
            func walk(_ includes: [SubscriptionDescriptor.Include]) {
                for include in includes {
                    if include.kind == .hasMany, include.target == entity.name { need(include.foreignKey) }
                    walk(include.includes)
                }
            }
            walk(subscription.includes)
        }
        return columns
    }

    /// The SQLite literal of a descriptor default.
    static func literal(_ value: JSONValue, kind: FieldKind) throws -> String? {
        func text(_ string: String) -> String { "'" + string.replacingOccurrences(of: "'", with: "''") + "'" }
        switch (kind, value) {
        case (_, .null): return nil
        case (.json, _), (.list, _): return text(try CanonicalJSON.text(value))
        case (.bytes, .string(let base64)):
            guard let data = Data(base64Encoded: base64) else { throw SampleError("bad base64 default \(base64)") }
            return "X'" + data.map { String(format: "%02X", $0) }.joined() + "'"
        case (.timestamp, .string(let iso)):
            guard let timestamp = Timestamp(iso8601: iso) else { throw SampleError("bad timestamp default \(iso)") }
            return String(timestamp.millisecondsSince1970)
        case (_, .bool(let flag)): return flag ? "1" : "0"
        case (_, .int(let number)): return String(number)
        case (_, .double(let number)): return "\(number)"
        case (_, .string(let string)): return text(string)
        case (_, .array), (_, .object): return text(try CanonicalJSON.text(value))
        }
    }
}
