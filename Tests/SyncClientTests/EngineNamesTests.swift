import ContractRuntime
import EngineTestContracts
import GRDB
import OutpostTestSupport
import SyncClient
import Testing

/// The compiler refuses a contract that takes a name of ``EngineNames``; these tests make sure
/// the list holds every table a device's store really has, so a new client table cannot be
/// taken by a contract (and collide with it on the device) because nobody reserved it.
@Suite("Reserved names: the device's store", .blockingWork)
struct ClientEngineNamesTests {
    /// The tables and the columns of each table of a freshly opened store on the engines' own
    /// contracts (with the tables of its extensions, if any: the store checks them when it opens).
    private func storeSchema() throws -> (tables: [String: Set<String>], extensionTables: Set<String>) {
        let test = try TestStore.engine()
        let extensionTables = Set(test.store.extensions.flatMap(\.tables))
        return (
            try test.raw { db in
                var tables: [String: Set<String>] = [:]
                for table in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'") {
                    tables[table] = Set(try db.columns(in: table).map(\.name))
                }
                return tables
            }, extensionTables
        )
    }

    @Test("every table of a device's store is a contract's or reserved, and every reserved client table is there")
    func tablesAreReserved() throws {
        let (tables, extensionTables) = try storeSchema()
        let contractTables = Set(ContractRegistry.entities.map(\.table) + ContractRegistry.events.map(\.table))
        #expect(contractTables.isSubset(of: tables.keys))
        for table in Set(tables.keys).subtracting(contractTables).subtracting(extensionTables).sorted() {
            let reserved =
                EngineNames.ClientTable(rawValue: table) != nil || EngineNames.LibraryTable(rawValue: table) != nil
                || EngineNames.reservedTablePrefixes.contains { table.hasPrefix($0) }
            #expect(reserved, "the store's table '\(table)' is not in EngineNames.ClientTable: a contract could take its name")
        }
        for table in EngineNames.ClientTable.allCases {
            #expect(tables[table.rawValue] != nil, "EngineNames.ClientTable.\(table) names no table of the store")
        }
    }

    @Test("every column the device adds to a contract table is reserved")
    func columnsAreReserved() throws {
        let tables = try storeSchema().tables
        for entity in ContractRegistry.entities {
            let added = (tables[entity.table] ?? []).subtracting((entity.fields + entity.localFields).map(\.name))
            #expect(!added.isEmpty, "\(entity.table) has no columns of the device's")
            #expect(added.isSubset(of: EngineNames.reservedColumns), "\(entity.table): \(added.subtracting(EngineNames.reservedColumns).sorted())")
        }
    }
}
