import ContractRuntime
import Contracts
import Foundation
import GRDB
import Testing

/// Which side's generated migrations a test runs.
enum Side: String, Sendable, CaseIterable, CustomStringConvertible {
    case client
    case server

    var migrations: [ContractMigration] {
        switch self {
        case .client: return ContractRegistry.clientMigrations
        case .server: return ContractRegistry.serverMigrations
        }
    }

    var description: String { rawValue }
}

/// A real SQLite file in its own temporary directory, removed when the value goes away.
final class TemporaryDatabase {
    let directory: URL
    let path: String
    let queue: DatabaseQueue

    init(_ label: String) throws {
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("ContractsTests-\(label)-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        path = directory.appendingPathComponent("store.sqlite").path
        var configuration = Configuration()
        // A throwaway file: durability is not under test, and skipping fsync keeps the suite fast.
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = OFF") }
        queue = try DatabaseQueue(path: path, configuration: configuration)
    }

    /// A fresh database with every generated migration of `side` applied.
    static func migrated(_ side: Side) throws -> TemporaryDatabase {
        let database = try TemporaryDatabase("\(side)")
        try ContractSQL.migrator(side.migrations).migrate(database.queue)
        return database
    }

    deinit { try? FileManager.default.removeItem(at: directory) }
}

/// What the generated SQL must look like, derived from the descriptors only.
enum ContractSQL {
    /// A migrator with every generated migration registered under its identifier.
    ///
    /// A duplicate identifier is recorded as an issue and skipped (GRDB would trap on it).
    static func migrator(_ migrations: [ContractMigration]) -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        var seen = Set<String>()
        for migration in migrations {
            guard seen.insert(migration.identifier).inserted else {
                Issue.record("duplicate migration identifier \(migration.identifier) (skipped)")
                continue
            }
            migrator.registerMigration(migration.identifier) { db in
                for statement in migration.statements { try db.execute(sql: statement) }
            }
        }
        return migrator
    }

    struct Column: Hashable, Sendable, CustomStringConvertible {
        var name: String
        var type: String
        var notNull: Bool
        var description: String { "\(name) \(type)\(notNull ? " NOT NULL" : "")" }
    }

    /// The envelope columns every event table has on both sides.
    static let envelopeColumns: [Column] = [
        Column(name: "event_id", type: "TEXT", notNull: true),
        Column(name: "schema_version", type: "INTEGER", notNull: true),
        Column(name: "user_id", type: "TEXT", notNull: true),
        Column(name: "device_id", type: "TEXT", notNull: true),
        Column(name: "occurred_at", type: "INTEGER", notNull: true),
        Column(name: "recorded_at", type: "INTEGER", notNull: false),
        Column(name: "hash", type: "TEXT", notNull: true),
    ]

    /// Sync metadata columns that must exist (more `_`-prefixed columns are allowed).
    static func metadataColumns(side: Side, isEvent: Bool) -> [String] {
        switch (side, isEvent) {
        case (.client, false): return ["_schema_version", "_server_version", "_synced_at"]
        case (.client, true): return []
        case (.server, false): return ["_tenant_id", "_scope_key", "_seq", "_version", "_schema_version", "_deleted"]
        case (.server, true): return ["_tenant_id", "_scope_key", "_seq"]
        }
    }

    /// The SQLite type of a field's column.
    static func columnType(_ field: FieldDescriptor, side: Side) -> String {
        if side == .client && field.isEncrypted { return "BLOB" }
        return columnType(field.kind)
    }

    static func columnType(_ kind: FieldKind) -> String {
        switch kind {
        case .id, .string, .uuid, .ref, .enumeration, .date, .json, .list, .file: return "TEXT"
        case .int, .bool, .timestamp: return "INTEGER"
        case .double: return "REAL"
        case .bytes: return "BLOB"
        }
    }

    /// The fields that are columns of a contract's table on one side.
    static func fieldColumns(of name: String, side: Side) -> [FieldDescriptor] {
        if let entity = ContractRegistry.entity(named: name) {
            return side == .client ? entity.fields + entity.localFields : entity.fields + entity.serverOnlyFields
        }
        return ContractRegistry.event(named: name)?.fields ?? []
    }

    static func table(of name: String) -> String? {
        ContractRegistry.entity(named: name)?.table ?? ContractRegistry.event(named: name)?.table
    }

    static func currentVersion(of name: String) -> Int? {
        ContractRegistry.entity(named: name)?.currentVersion ?? ContractRegistry.event(named: name)?.currentVersion
    }

    // MARK: Rows

    /// A valid stored value of a field on one side.
    static func sampleValue(_ field: FieldDescriptor, side: Side) -> DatabaseValue {
        if side == .client && field.isEncrypted { return Data([0x01, 0x02, 0x03]).databaseValue }
        switch field.kind {
        case .id, .string, .uuid, .ref, .enumeration:
            let value = (try? WireSamples.value(for: field)) as? String
            return (value ?? "sample").databaseValue
        case .int: return Int64(4_000_000_123).databaseValue
        case .bool: return Int64(1).databaseValue
        case .double: return 1.5.databaseValue
        case .timestamp: return Int64(1_769_846_400_123).databaseValue
        case .date: return WireSamples.date.databaseValue
        case .json: return #"{"n":7}"#.databaseValue
        case .list: return #"["x"]"#.databaseValue
        case .bytes: return Data([0x00, 0x01, 0xFF]).databaseValue
        case .file: return #"{"content_type":"image/jpeg","sha256":"\#(FileReference.emptySHA256)","size":0}"#.databaseValue
        }
    }

    /// A value for a column that is not a contract field (envelope or sync metadata).
    static func metadataValue(column: ColumnInfo, contract: String, tenant: String) -> DatabaseValue {
        switch column.name {
        case "_tenant_id": return tenant.databaseValue
        case "_scope_key": return "scope:test".databaseValue
        case "_schema_version", "schema_version": return (currentVersion(of: contract) ?? 1).databaseValue
        case "event_id": return "01HZX3V9Q8K7M6N5P4R3S2T1A0".databaseValue
        case "hash": return String(repeating: "ab", count: 32).databaseValue
        case "occurred_at", "_updated_at": return Int64(1_769_846_400_123).databaseValue
        default:
            switch column.type.uppercased() {
            case "INTEGER": return Int64(1).databaseValue
            case "REAL": return 1.0.databaseValue
            case "BLOB": return Data([0x00]).databaseValue
            default: return "meta".databaseValue
            }
        }
    }

    /// Inserts one row that supplies only the NOT NULL columns without a default (plus `overrides`).
    @discardableResult
    static func insertMinimalRow(
        _ db: Database, contract: String, side: Side, tenant: String = "tenant-a",
        overrides: [String: DatabaseValue] = [:], alsoSupply: [String] = []
    ) throws -> [String: DatabaseValue] {
        guard let table = table(of: contract) else { throw SampleError("\(contract) has no table") }
        let fields = fieldColumns(of: contract, side: side)
        var values: [String: DatabaseValue] = [:]
        for column in try db.columns(in: table) {
            let needed = column.isNotNull && column.defaultValueSQL == nil
            guard needed || alsoSupply.contains(column.name) else { continue }
            if let field = fields.first(where: { $0.name == column.name }) {
                values[column.name] = sampleValue(field, side: side)
            } else {
                values[column.name] = metadataValue(column: column, contract: contract, tenant: tenant)
            }
        }
        values.merge(overrides) { _, override in override }
        let names = values.keys.sorted()
        let sql =
            "INSERT INTO \(quoted(table)) (\(names.map(quoted).joined(separator: ", "))) VALUES ("
            + Array(repeating: "?", count: names.count).joined(separator: ", ") + ")"
        try db.execute(sql: sql, arguments: StatementArguments(names.map { values[$0]! }))
        return values
    }

    static func quoted(_ identifier: String) -> String { "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }

    /// Whether a stored value equals the SQLite form of a descriptor default.
    static func storedValue(_ stored: DatabaseValue, matchesDefault value: JSONValue, kind: FieldKind) -> Bool {
        switch (value, stored.storage) {
        case (.null, .null): return true
        case (.bool(let flag), .int64(let number)): return number == (flag ? 1 : 0)
        case (.int(let expected), .int64(let number)): return number == expected
        case (.int(let expected), .double(let number)): return number == Double(expected)
        case (.double(let expected), .double(let number)): return number == expected
        case (.double(let expected), .int64(let number)): return Double(number) == expected
        case (.string(let text), .int64(let number)):
            // A timestamp default is ISO-8601 on the wire and milliseconds in SQLite.
            guard case .timestamp = kind, let timestamp = Timestamp(iso8601: text) else { return false }
            return timestamp.millisecondsSince1970 == number
        case (.string(let expected), .string(let text)):
            if case .json = kind { return jsonTextEquals(text, value) }
            return text == expected
        case (.array, .string(let text)), (.object, .string(let text)):
            return jsonTextEquals(text, value)
        default:
            return false
        }
    }

    private static func jsonTextEquals(_ text: String, _ value: JSONValue) -> Bool {
        guard let stored = try? CanonicalJSON.text(of: Data(text.utf8)),
            let expected = try? CanonicalJSON.text(value)
        else { return false }
        return stored == expected
    }
}
