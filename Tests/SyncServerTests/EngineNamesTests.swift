import ContractRuntime
import EngineTestContracts
import Foundation
import GRDB
import OutpostTestSupport
import PostgresNIO
import Testing

@testable import SyncServer

/// The compiler refuses a contract that takes a name of ``EngineNames``; these tests make sure
/// the list holds every table a server database really has, so a new server table cannot be
/// taken by a contract (and collide with it) because nobody reserved it. On a database of the
/// engines' own contracts.
@Suite("Reserved names: the server's database")
struct ServerEngineNamesTests {
    /// The tables and the columns of each table of a freshly opened, migrated database.
    private func schema(_ kind: StorageKind, in folder: URL) async throws -> [String: Set<String>] {
        switch kind {
        case .sqlite:
            _ = try SQLiteStorage(directory: folder, contracts: ContractRegistry.self, auditKey: StorageKind.testAuditKey)
            let queue = try DatabaseQueue(path: folder.appendingPathComponent("server.sqlite").path)
            defer { try? queue.close() }
            return try await queue.read { db in
                var tables: [String: Set<String>] = [:]
                for table in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'") {
                    tables[table] = Set(try db.columns(in: table).map(\.name))
                }
                return tables
            }
        case .postgres:
            let schema = StorageKind.uniqueSchema()
            _ = try await kind.makeSharedStorages(1, in: folder, schema: schema, contracts: ContractRegistry.self)
            let probe = try PostgresProbe(schema: schema)
            var tables: [String: Set<String>] = [:]
            let rows = try await probe.client.query(
                "SELECT table_name::text, column_name::text FROM information_schema.columns WHERE table_schema = \(schema)"
            )
            for try await (table, column) in rows.decode((String, String).self) {
                tables[table, default: []].insert(column)
            }
            return tables
        }
    }

    @Test("every table of a server database is a contract's or reserved", arguments: StorageKind.allCases)
    func tablesAreReserved(_ kind: StorageKind) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("engine-names-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let tables = try await schema(kind, in: folder)
        let contractTables = Set(ContractRegistry.entities.map(\.table) + ContractRegistry.events.map(\.table))
        #expect(contractTables.isSubset(of: tables.keys))
        for table in Set(tables.keys).subtracting(contractTables).sorted() {
            let reserved =
                EngineNames.ServerTable(rawValue: table) != nil || EngineNames.LibraryTable(rawValue: table) != nil
                || EngineNames.reservedTablePrefixes.contains { table.hasPrefix($0) }
            #expect(reserved, "the server's table '\(table)' is not in EngineNames.ServerTable: a contract could take its name")
        }
    }

    @Test("every column the server adds to a contract table is reserved", arguments: StorageKind.allCases)
    func columnsAreReserved(_ kind: StorageKind) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("engine-names-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let tables = try await schema(kind, in: folder)
        for entity in ContractRegistry.entities {
            let added = (tables[entity.table] ?? []).subtracting((entity.fields + entity.serverOnlyFields).map(\.name))
            #expect(!added.isEmpty, "\(entity.table) has no columns of the server's")
            #expect(added.isSubset(of: EngineNames.reservedColumns), "\(entity.table): \(added.subtracting(EngineNames.reservedColumns).sorted())")
        }
    }
}
