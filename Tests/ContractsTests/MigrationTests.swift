import ContractRuntime
import Contracts
import Foundation
import GRDB
import OutpostTestSupport
import Testing

/// The generated SQL, run for real: every migration on a fresh SQLite file, for the client and
/// the server separately, then the resulting schema checked against the descriptors.
@Suite("Generated SQLite migrations", .blockingWork)
struct MigrationTests {
    // MARK: The migration lists

    @Test("Migration identifiers are unique and name their table and version", arguments: Side.allCases)
    func identifiersAreUniqueAndWellFormed(_ side: Side) throws {
        let migrations = side.migrations
        #expect(!migrations.isEmpty, "\(side): no migrations")
        let identifiers = migrations.map(\.identifier)
        #expect(Set(identifiers).count == identifiers.count, "\(side): duplicate migration identifiers")
        for migration in migrations {
            let table = try #require(
                ContractSQL.table(of: migration.contract), "\(side) \(migration.identifier): unknown contract \(migration.contract)"
            )
            #expect(
                migration.identifier.hasPrefix("\(table).v\(migration.version)."),
                "\(side) \(migration.identifier): expected `\(table).v\(migration.version).<step>`"
            )
            #expect(!migration.statements.isEmpty, "\(side) \(migration.identifier): no statements")
        }
    }

    @Test("Each migration's checksum is the SHA-256 of its statements", arguments: Side.allCases)
    func checksumsMatchTheStatements(_ side: Side) {
        for migration in side.migrations {
            #expect(isLowercaseSHA256Hex(migration.checksum), "\(side) \(migration.identifier): checksum format")
            let expected = ReferenceSHA256.hex(migration.statements.joined(separator: ";\n"))
            #expect(migration.checksum == expected, "\(side) \(migration.identifier): checksum does not match its SQL")
        }
    }

    @Test("Every contract's migrations are in version order and none is past its current version", arguments: Side.allCases)
    func migrationsReachTheCurrentVersion(_ side: Side) throws {
        let migrations = side.migrations
        for name in AllContracts.names {
            let versions = migrations.filter { $0.contract == name }.map(\.version)
            let current = try #require(ContractSQL.currentVersion(of: name))
            #expect(!versions.isEmpty, "\(side): no migration for \(name)")
            #expect(versions == versions.sorted(), "\(side): migrations of \(name) out of version order")
            // A version that leaves the table as it was (an enum value added, a doc changed) has no
            // step, so the last step may be older than the current version. That the steps reach
            // the current schema is checked by MigrationHistoryTests (migrated = created fresh).
            #expect((versions.last ?? 0) <= current, "\(side): migrations of \(name) end at v\(versions.last ?? 0), after v\(current)")
            #expect(versions.allSatisfy { $0 >= 1 && $0 <= current }, "\(side): \(name) migration versions \(versions)")
        }
        let unknown = Set(migrations.map(\.contract)).subtracting(AllContracts.names)
        #expect(unknown.isEmpty, "\(side): migrations for contracts that are not in the registry: \(unknown)")
    }

    // MARK: Running them

    @Test("The migrations create exactly the contract tables", arguments: Side.allCases)
    func migrationsCreateTheContractTables(_ side: Side) throws {
        let database = try TemporaryDatabase.migrated(side)
        let tables = try database.queue.read { db in
            try String.fetchSet(
                db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'grdb_migrations'"
            )
        }
        let expected = Set(ContractRegistry.entities.map(\.table) + ContractRegistry.events.map(\.table))
        #expect(tables == expected, "\(side): missing \(expected.subtracting(tables)), unexpected \(tables.subtracting(expected))")
    }

    @Test("Running the migrator again, on the same or a reopened database, is a no-op", arguments: Side.allCases)
    func migratingTwiceIsANoOp(_ side: Side) throws {
        let database = try TemporaryDatabase.migrated(side)
        let migrator = ContractSQL.migrator(side.migrations)
        let identifiers = Set(side.migrations.map(\.identifier))

        func schema(_ queue: DatabaseQueue) throws -> [String] {
            try queue.read { db in
                try String.fetchAll(db, sql: "SELECT type || ' ' || name || ' ' || ifnull(sql, '') FROM sqlite_master ORDER BY type, name")
            }
        }
        let before = try schema(database.queue)
        let applied = try database.queue.read { try migrator.appliedIdentifiers($0) }
        #expect(applied == identifiers)
        #expect(try database.queue.read { try migrator.hasCompletedMigrations($0) })

        try migrator.migrate(database.queue)
        #expect(try schema(database.queue) == before, "\(side): a second migrate changed the schema")
        #expect(try database.queue.read { try migrator.appliedIdentifiers($0) } == identifiers)

        let reopened = try DatabaseQueue(path: database.path)
        try migrator.migrate(reopened)
        #expect(try schema(reopened) == before, "\(side): migrating a reopened database changed the schema")
        try reopened.close()
    }

    @Test(
        "Each table has every descriptor field as a column of the right type",
        arguments: Side.allCases, AllContracts.names
    )
    func tableColumnsMatchTheDescriptor(_ side: Side, _ name: String) throws {
        let database = try TemporaryDatabase.migrated(side)
        let table = try #require(ContractSQL.table(of: name))
        let isEvent = ContractRegistry.event(named: name) != nil
        let columns = try database.queue.read { try $0.columns(in: table) }
        let byName = Dictionary(columns.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let label = "\(side) \(table)"

        var expected: [ContractSQL.Column] = isEvent ? ContractSQL.envelopeColumns : []
        for field in ContractSQL.fieldColumns(of: name, side: side) {
            expected.append(
                ContractSQL.Column(name: field.name, type: ContractSQL.columnType(field, side: side), notNull: !field.isOptional)
            )
        }
        for column in expected {
            guard let actual = byName[column.name] else {
                Issue.record("\(label): no column \(column.name)")
                continue
            }
            #expect(actual.type.uppercased() == column.type, "\(label).\(column.name): type \(actual.type), expected \(column.type)")
            #expect(actual.isNotNull == column.notNull, "\(label).\(column.name): NOT NULL is \(actual.isNotNull)")
        }
        for column in ContractSQL.metadataColumns(side: side, isEvent: isEvent) {
            #expect(byName[column] != nil, "\(label): no metadata column \(column)")
        }
        // Anything else is sync metadata, and metadata columns are `_`-prefixed.
        let known = Set(expected.map(\.name))
        for column in columns where !known.contains(column.name) {
            #expect(column.name.hasPrefix("_"), "\(label): column \(column.name) is not in the contract")
        }
        if side == .server, let entity = ContractRegistry.entity(named: name) {
            for field in entity.localFields {
                #expect(byName[field.name] == nil, "\(label): client-only field \(field.name) exists on the server")
            }
        }
        // A column has a DEFAULT exactly when its field has a contract default.
        for field in ContractSQL.fieldColumns(of: name, side: side) {
            guard let column = byName[field.name] else { continue }
            #expect(
                (column.defaultValueSQL != nil) == (field.defaultValue != nil),
                "\(label).\(field.name): DEFAULT \(column.defaultValueSQL ?? "none") vs contract default \(String(describing: field.defaultValue))"
            )
        }
    }

    @Test("Each table has the expected primary key", arguments: Side.allCases, AllContracts.names)
    func primaryKeys(_ side: Side, _ name: String) throws {
        let database = try TemporaryDatabase.migrated(side)
        let table = try #require(ContractSQL.table(of: name))
        let key = ContractRegistry.entity(named: name)?.primaryKey ?? "event_id"
        let expected = side == .server ? ["_tenant_id", key] : [key]
        let actual = try database.queue.read { try $0.primaryKey(table).columns }
        #expect(actual == expected, "\(side) \(table): primary key \(actual)")
    }

    @Test("Every declared index exists with its columns and uniqueness", arguments: Side.allCases, AllContracts.entityNames)
    func declaredIndexesExist(_ side: Side, _ name: String) throws {
        let entity = try #require(ContractRegistry.entity(named: name))
        let database = try TemporaryDatabase.migrated(side)
        let indexes = try database.queue.read { try $0.indexes(on: entity.table) }
        // Unique means unique within a scope: the server's unique indexes span tenant, scope and
        // fields; a device that can hold several scopes of the contract keeps a lookup index.
        let scope = ContractRegistry.scope(named: entity.scope)
        let severalOnADevice = !(scope.map { Set($0.placeholders).isSubset(of: ["tenant_id", "user_id", "device_id"]) } ?? true)
        for declared in entity.indexes {
            var name = declared.name
            var unique = declared.isUnique
            var columns = declared.fields
            switch side {
            case .client:
                if declared.isUnique && severalOnADevice {
                    name += "_lookup"
                    unique = false
                }
            case .server:
                columns = (declared.isUnique ? ["_tenant_id", "_scope_key"] : ["_tenant_id"]) + declared.fields
                if declared.isUnique { name += "_per_scope" }
            }
            let label = "\(side) \(entity.table) index \(name)"
            guard let index = indexes.first(where: { $0.name == name }) else {
                Issue.record("\(label) does not exist (found \(indexes.map(\.name)))")
                continue
            }
            #expect(index.isUnique == unique, "\(label): unique is \(index.isUnique)")
            #expect(index.columns == columns, "\(label): columns \(index.columns)")
        }
        if side == .server {
            #expect(
                indexes.contains { $0.columns == ["_tenant_id", "_scope_key", "_seq"] },
                "server \(entity.table): no (_tenant_id, _scope_key, _seq) index for pulls by cursor"
            )
        }
    }

    // MARK: Writing rows

    @Test(
        "A row with only the required columns inserts, and defaults read back as the contract says",
        arguments: Side.allCases, AllContracts.names
    )
    func minimalRowTakesTheDefaults(_ side: Side, _ name: String) throws {
        let database = try TemporaryDatabase.migrated(side)
        let table = try #require(ContractSQL.table(of: name))
        let fields = ContractSQL.fieldColumns(of: name, side: side)
        try database.queue.write { db in
            let supplied = try ContractSQL.insertMinimalRow(db, contract: name, side: side)
            let row = try #require(try Row.fetchOne(db, sql: "SELECT * FROM \(ContractSQL.quoted(table))"))
            for field in fields {
                let label = "\(side) \(table).\(field.name)"
                let stored: DatabaseValue = row[field.name]
                if supplied[field.name] != nil { continue }
                if let defaultValue = field.defaultValue {
                    #expect(
                        ContractSQL.storedValue(stored, matchesDefault: defaultValue, kind: field.kind),
                        "\(label): stored \(stored) for the contract default \(defaultValue)"
                    )
                } else {
                    #expect(field.isOptional, "\(label): required but was not supplied")
                    #expect(stored.isNull, "\(label): expected NULL, read \(stored)")
                }
            }
            if side == .server, ContractRegistry.entity(named: name) != nil {
                #expect(row["_version"] as Int64? == 1, "server \(table): _version must start at 1")
                #expect(row["_deleted"] as Int64? == 0, "server \(table): _deleted must start false")
            }
            if side == .client {
                let syncedAt: DatabaseValue = row["_synced_at"]
                #expect(syncedAt.isNull, "client \(table): a new row is not synced yet")
            }
        }
    }

    @Test("A required column refuses NULL", arguments: Side.allCases, AllContracts.names)
    func requiredColumnsRefuseNull(_ side: Side, _ name: String) throws {
        let database = try TemporaryDatabase.migrated(side)
        let table = try #require(ContractSQL.table(of: name))
        for field in ContractSQL.fieldColumns(of: name, side: side) where !field.isOptional {
            database.queue.inDatabase { db -> Void in
                #expect(throws: DatabaseError.self, "\(side) \(table).\(field.name) accepted NULL") {
                    try db.inSavepoint {
                        try ContractSQL.insertMinimalRow(
                            db, contract: name, side: side, overrides: [field.name: .null], alsoSupply: [field.name]
                        )
                        return .rollback
                    }
                }
            }
        }
    }

    @Test("Unique indexes reject a second row with the same key (per tenant and scope on the server)", arguments: Side.allCases)
    func uniqueIndexesAreEnforced(_ side: Side) throws {
        let entities = ContractRegistry.entities.filter { $0.indexes.contains(where: \.isUnique) }
        try #require(!entities.isEmpty, "no unique index in the registry: this test would prove nothing")
        for entity in entities {
            let key = try #require(entity.field(named: entity.primaryKey))
            // A device holding several teams keeps their rows side by side: uniqueness is the server's, per scope.
            let scope = ContractRegistry.scope(named: entity.scope)
            if side == .client, !(scope.map { Set($0.placeholders).isSubset(of: ["tenant_id", "user_id", "device_id"]) } ?? true) { continue }
            for index in entity.indexes where index.isUnique {
                let database = try TemporaryDatabase.migrated(side)
                let label = "\(side) \(entity.table) \(index.name)"
                func primaryKey(_ suffix: String) -> DatabaseValue {
                    if case .uuid = key.kind { return "3f2b8c1e-9a4d-4e6f-8b1a-0c2d3e4f5a\(suffix)".databaseValue }
                    return "row-\(suffix)".databaseValue
                }
                try database.queue.inDatabase { db in
                    try ContractSQL.insertMinimalRow(
                        db, contract: entity.name, side: side, overrides: [key.name: primaryKey("01")], alsoSupply: index.fields
                    )
                    #expect(throws: DatabaseError.self, "\(label): a duplicate key was accepted") {
                        try ContractSQL.insertMinimalRow(
                            db, contract: entity.name, side: side, overrides: [key.name: primaryKey("02")], alsoSupply: index.fields
                        )
                    }
                    if side == .server {
                        #expect(throws: Never.self, "\(label): the same key in another scope was refused") {
                            try ContractSQL.insertMinimalRow(
                                db, contract: entity.name, side: side,
                                overrides: [key.name: primaryKey("04"), "_scope_key": "another:scope".databaseValue], alsoSupply: index.fields
                            )
                        }
                        #expect(throws: Never.self, "\(label): the same key in another tenant was refused") {
                            try ContractSQL.insertMinimalRow(
                                db, contract: entity.name, side: side, tenant: "tenant-b",
                                overrides: [key.name: primaryKey("03")], alsoSupply: index.fields
                            )
                        }
                    }
                }
            }
        }
    }

    @Test("The server keeps the same id apart per tenant", arguments: AllContracts.names)
    func serverPrimaryKeyIsPerTenant(_ name: String) throws {
        let database = try TemporaryDatabase.migrated(.server)
        try database.queue.inDatabase { db in
            try ContractSQL.insertMinimalRow(db, contract: name, side: .server, tenant: "tenant-a")
            #expect(throws: DatabaseError.self, "server \(name): the same key twice in one tenant was accepted") {
                try ContractSQL.insertMinimalRow(db, contract: name, side: .server, tenant: "tenant-a")
            }
            // Another tenant may reuse the id (unique indexes are per tenant too).
            #expect(throws: Never.self, "server \(name): another tenant could not reuse the id") {
                try ContractSQL.insertMinimalRow(db, contract: name, side: .server, tenant: "tenant-b")
            }
        }
    }
}
