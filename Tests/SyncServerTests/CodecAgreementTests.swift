import ContractRuntime
import EngineTestContracts
import Foundation
import GRDB
import OutpostTestSupport
import PostgresNIO
import Testing

@testable import SyncClient
@testable import SyncServer

/// One table of every contract type × edge value, run through the device's store codec and a
/// column of the device's real table type, the server's SQLite storage and its PostgreSQL
/// storage (real databases, the real contract column types): each must give the same answer,
/// and the answer the table states.
@Suite("Contract types: device, server and PostgreSQL agree", .blockingWork)
struct CodecAgreementTests {
    /// The device's codec of the engines' own contracts.
    static let columns = ColumnCodec(codec: ContractCatalog(ContractRegistry.self).codec)

    /// What a value becomes: stored and read back as `wire`, or refused with a reason.
    enum Outcome: Hashable, CustomStringConvertible {
        case stored(JSONValue)
        case refused(String)

        var description: String {
            switch self {
            case .stored(let value): return "stored \(value)"
            case .refused(let reason): return "refused: \(reason)"
            }
        }
    }

    struct Case: CustomStringConvertible {
        var probe: Probe
        var value: JSONValue
        var expected: Outcome
        var description: String { "\(probe.field.name) ← \(CanonicalJSON.text(value))" }
    }

    /// A real field of a real contract (entity or event), chosen by what its type is.
    struct Probe {
        var table: String
        var field: FieldDescriptor

        static func first(_ matches: (FieldDescriptor) -> Bool) -> Probe {
            let contracts = ContractRegistry.entities.map { ($0.table, $0.fields) } + ContractRegistry.events.map { ($0.table, $0.fields) }
            for (table, fields) in contracts {
                for field in fields where !field.isEncrypted && !field.isPrimaryKey && matches(field) {
                    return Probe(table: table, field: field)
                }
            }
            fatalError("no contract field matches the probe")
        }

        static func kind(_ kind: FieldKind, optional: Bool? = nil) -> Probe {
            first { $0.kind == kind && (optional == nil || $0.isOptional == optional) }
        }
    }

    static let int = Probe.kind(.int, optional: false)
    static let double = Probe.kind(.double, optional: false)
    static let bool = Probe.kind(.bool)
    static let timestamp = Probe.kind(.timestamp, optional: false)
    static let optionalTimestamp = Probe.kind(.timestamp, optional: true)
    static let date = Probe.kind(.date)
    static let uuid = Probe.first { if case .uuid = $0.kind { return true } else { return false } }
    static let json = Probe.kind(.json)
    static let bytes = Probe.kind(.bytes)
    static let list = Probe.first { if case .list = $0.kind { return true } else { return false } }
    static let limitedString = Probe.first { $0.kind == .string && $0.maxLength != nil }
    static let id = Probe.kind(.id, optional: false)
    static let enumWithFallback = Probe.first { if case .enumeration(_, .some) = $0.kind { return true } else { return false } }
    static let enumWithoutFallback = Probe.first { if case .enumeration(_, nil) = $0.kind { return true } else { return false } }

    static func enumValues(_ probe: Probe) -> (known: String, fallback: String?) {
        guard case .enumeration(let values, let fallback) = probe.field.kind else { fatalError("not an enum") }
        return (values[0], fallback)
    }

    static var cases: [Case] {
        let bytesText = Data([0, 1, 2, 253, 254, 255]).base64EncodedString()
        let limit = limitedString.field.maxLength ?? 0
        let withFallback = enumValues(enumWithFallback), withoutFallback = enumValues(enumWithoutFallback)
        return [
            // Integers: whole doubles are integers everywhere; fractions, huge and non-finite doubles are not.
            Case(probe: int, value: .int(42), expected: .stored(.int(42))),
            Case(probe: int, value: .double(3), expected: .stored(.int(3))),
            Case(probe: int, value: .double(2.5), expected: .refused("must be a whole number")),
            Case(probe: int, value: .double(1e300), expected: .refused("must be a whole number")),
            Case(probe: int, value: .double(.nan), expected: .refused("must be a whole number")),
            Case(probe: int, value: .int(.max), expected: .stored(.int(.max))),
            Case(probe: int, value: .int(.min), expected: .stored(.int(.min))),
            Case(probe: int, value: .string("5"), expected: .refused("must be a whole number")),
            Case(probe: int, value: .null, expected: .refused("is required")),
            // Doubles: integers widen; non-finite values have no JSON form and are refused.
            Case(probe: double, value: .int(2), expected: .stored(.double(2))),
            Case(probe: double, value: .double(0.1), expected: .stored(.double(0.1))),
            Case(probe: double, value: .double(-1e300), expected: .stored(.double(-1e300))),
            Case(probe: double, value: .double(.infinity), expected: .refused("must be a finite number")),
            Case(probe: double, value: .double(.nan), expected: .refused("must be a finite number")),
            Case(probe: bool, value: .bool(true), expected: .stored(.bool(true))),
            Case(probe: bool, value: .int(1), expected: .refused("must be true or false")),
            // Timestamps and dates: invalid calendar values are refused, not rolled over.
            Case(probe: timestamp, value: .string("2026-01-31T08:00:00.123Z"), expected: .stored(.string("2026-01-31T08:00:00.123Z"))),
            Case(probe: timestamp, value: .string("1969-12-31T23:59:59.999Z"), expected: .stored(.string("1969-12-31T23:59:59.999Z"))),
            Case(
                probe: timestamp, value: .string("2026-02-30T00:00:00.000Z"),
                expected: .refused("must be an ISO-8601 timestamp such as 2026-01-31T08:00:00.000Z")),
            Case(probe: timestamp, value: .string("yesterday"), expected: .refused("must be an ISO-8601 timestamp such as 2026-01-31T08:00:00.000Z")),
            Case(probe: optionalTimestamp, value: .null, expected: .stored(.null)),
            Case(probe: date, value: .string("2024-02-29"), expected: .stored(.string("2024-02-29"))),
            Case(probe: date, value: .string("2026-02-29"), expected: .refused("must be a date such as 2026-01-31")),
            Case(probe: date, value: .string("2026-13-01"), expected: .refused("must be a date such as 2026-01-31")),
            // UUIDs are stored lowercase.
            Case(
                probe: uuid, value: .string("6F1C2A8E-4B5D-4E7F-9A0B-1C2D3E4F5A6B"),
                expected: .stored(.string("6f1c2a8e-4b5d-4e7f-9a0b-1c2d3e4f5a6b"))),
            Case(probe: uuid, value: .string("6f1c2a8e"), expected: .refused("must be a UUID")),
            // Bytes: base64 both ways; anything else refused.
            Case(probe: bytes, value: .string(bytesText), expected: .stored(.string(bytesText))),
            Case(probe: bytes, value: .string("not base64!"), expected: .refused("must be base64 text")),
            // JSON: any document, read back in the same shape; whole doubles read as integers.
            Case(
                probe: json, value: .object(["b": .array([.int(1), .double(2.0), .string("naïve"), .null]), "a": .object([:])]),
                expected: .stored(.object(["b": .array([.int(1), .int(2), .string("naïve"), .null]), "a": .object([:])]))
            ),
            Case(probe: list, value: .array([.string("b"), .string("a")]), expected: .stored(.array([.string("b"), .string("a")]))),
            Case(probe: list, value: .array([.string("b"), .null]), expected: .refused("must not contain null")),
            Case(probe: list, value: .string("b"), expected: .refused("must be a list")),
            // Lengths: characters for text, bytes for ids.
            Case(
                probe: limitedString, value: .string(String(repeating: "é", count: limit)),
                expected: .stored(.string(String(repeating: "é", count: limit)))),
            Case(
                probe: limitedString, value: .string(String(repeating: "é", count: limit + 1)),
                expected: .refused("is longer than \(limit) characters")),
            Case(
                probe: id, value: .string(String(repeating: "i", count: FieldCodec.maximumIDBytes)),
                expected: .stored(.string(String(repeating: "i", count: FieldCodec.maximumIDBytes)))),
            Case(
                probe: id, value: .string(String(repeating: "i", count: FieldCodec.maximumIDBytes + 1)),
                expected: .refused("is longer than \(FieldCodec.maximumIDBytes) bytes, the most an id may have")),
            // Enums: a write of an unknown value is refused, with a fallback or without one.
            Case(probe: enumWithFallback, value: .string(withFallback.known), expected: .stored(.string(withFallback.known))),
            Case(probe: enumWithFallback, value: .string("from_the_future"), expected: .refused(enumReason(enumWithFallback))),
            Case(probe: enumWithoutFallback, value: .string("from_the_future"), expected: .refused(enumReason(enumWithoutFallback))),
            Case(probe: enumWithoutFallback, value: .string(withoutFallback.known), expected: .stored(.string(withoutFallback.known))),
        ]
    }

    static func enumReason(_ probe: Probe) -> String {
        guard case .enumeration(let values, _) = probe.field.kind else { return "" }
        return "must be one of \(values.joined(separator: ", "))"
    }

    // MARK: The three paths

    /// The device: its store's codec, into a column of the type the device's migrations give it.
    static func throughDevice(_ cases: [Case], folder: URL) throws -> [Outcome] {
        let database = try DatabaseQueue(path: folder.appendingPathComponent("device.sqlite").path)
        try database.write { db in
            for migration in ContractRegistry.clientMigrations {
                for statement in migration.statements { try db.execute(sql: statement) }
            }
        }
        return try cases.enumerated().map { index, testCase -> Outcome in
            let stored: DatabaseValue
            do throws(FieldValueError) {
                stored = try Self.columns.columnValue(testCase.value, for: testCase.probe.field, mode: .write)
            } catch {
                return .refused(error.reason)
            }
            return try database.write { db in
                let type =
                    try String.fetchOne(
                        db, sql: "SELECT type FROM pragma_table_info(?) WHERE name = ?",
                        arguments: [testCase.probe.table, testCase.probe.field.name]
                    ) ?? ""
                try db.execute(sql: "CREATE TABLE probe_\(index) (v \(type))")
                try db.execute(sql: "INSERT INTO probe_\(index) (v) VALUES (?)", arguments: [stored])
                let read = try DatabaseValue.fetchOne(db, sql: "SELECT v FROM probe_\(index)") ?? .null
                return .stored(Self.columns.wireValue(read, for: testCase.probe.field))
            }
        }
    }

    /// The server: its codec, then a row written and read through the storage itself, in a
    /// column of the type the server's migrations give the contract's field.
    static func throughServer(_ cases: [Case], kind: StorageKind, folder: URL) async throws -> [Outcome] {
        let schema = StorageKind.uniqueSchema()
        _ = try await kind.makeSharedStorages(1, in: folder, schema: schema, contracts: ContractRegistry.self)
        // The probe tables: the field's own column type, keyed like a contract table.
        for (index, testCase) in cases.enumerated() {
            let table = testCase.probe.table, column = testCase.probe.field.name
            switch kind {
            case .sqlite:
                let database = try DatabaseQueue(path: folder.appendingPathComponent("server.sqlite").path)
                try await database.write { db in
                    let type = try String.fetchOne(db, sql: "SELECT type FROM pragma_table_info(?) WHERE name = ?", arguments: [table, column]) ?? ""
                    try db.execute(sql: "CREATE TABLE probe_\(index) (_tenant_id TEXT, id TEXT, v \(type), PRIMARY KEY (_tenant_id, id))")
                }
            case .postgres:
                let probe = try PostgresProbe(schema: schema)
                let rows = try await probe.client.query(
                    "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = \(schema + "." + table)::regclass AND attname = \(column)"
                ).collect()
                let type = try rows.first?.decode(String.self) ?? "TEXT"
                try await probe.client.query(
                    PostgresQuery(unsafeSQL: "CREATE TABLE probe_\(index) (_tenant_id TEXT, id TEXT, v \(type), PRIMARY KEY (_tenant_id, id))")
                )
            }
        }
        // Opened again, the storage knows the probe tables' column types as it knows the contracts'.
        let storage = try await kind.makeSharedStorages(1, in: folder, schema: schema, contracts: ContractRegistry.self)[0]
        var outcomes: [Outcome] = []
        for (index, testCase) in cases.enumerated() {
            let stored: ColumnValue
            do {
                stored = try RowCodec.columnValue(testCase.value, for: testCase.probe.field)
            } catch {
                outcomes.append(.refused(error.reason))
                continue
            }
            let table = ContractTable(name: "probe_\(index)", primaryKey: "id")
            let row = StoredRow(["_tenant_id": .text("t"), "id": .text("p"), "v": stored])
            let read = try await storage.write { transaction in
                _ = try await transaction.insertIfAbsent(row, in: table)
                return try await transaction.row(in: table, tenant: "t", id: "p")
            }
            outcomes.append(.stored(RowCodec.wireValue(read?["v"] ?? .null, for: testCase.probe.field)))
        }
        return outcomes
    }

    @Test("every contract type × edge value gives the same answer on the device, on SQLite and on PostgreSQL")
    func agree() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("codec-agreement-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let cases = Self.cases
        let device = try Self.throughDevice(cases, folder: folder)
        let sqlite = try await Self.throughServer(cases, kind: .sqlite, folder: folder)
        let postgres = try await Self.throughServer(cases, kind: .postgres, folder: folder)
        for (index, testCase) in cases.enumerated() {
            #expect(device[index] == testCase.expected, "device: \(testCase)")
            #expect(sqlite[index] == testCase.expected, "server on SQLite: \(testCase)")
            #expect(postgres[index] == testCase.expected, "server on PostgreSQL: \(testCase)")
        }
    }

    @Test("a row from the server reads an unknown enum value as the fallback, and refuses it where there is none")
    func enumFallbackOnRead() throws {
        let withFallback = Self.enumWithFallback.field, withoutFallback = Self.enumWithoutFallback.field
        let fallback = Self.enumValues(Self.enumWithFallback).fallback!
        #expect(try Self.columns.columnValue(.string("from_the_future"), for: withFallback, mode: .read) == fallback.databaseValue)
        #expect(throws: FieldValueError.self) { try Self.columns.columnValue(.string("from_the_future"), for: withoutFallback, mode: .read) }
        // A query filter never refuses an enum value: it matches nothing.
        #expect(try Self.columns.columnValue(.string("from_the_future"), for: withoutFallback, mode: .query) == "from_the_future".databaseValue)
    }
}
