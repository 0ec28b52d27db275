import ContractRuntime
public import GRDB

/// Tables an app keeps in the offline store beside its contracts' tables, with their migrations
/// and their part in the storage guard: what a feature needs that no contract describes (a
/// download manager's records, bookkeeping of the device's own).
///
/// Given when the store is opened (`OfflineStore(_:contracts:extensions:)`). Its
/// migrations run after the store's own and before the contracts', in order, once each; its
/// tables are read and written inside ``OfflineStore/read(_:)`` (``StoreReader/withDatabase(_:)``) and
/// ``OfflineStore/transaction(_:)`` (``StoreTransaction/withDatabase(_:)``), in the same snapshot and
/// transaction as the rows and writes of the contracts.
///
/// ```swift
/// struct Bookmarks: StoreExtension {
///     var name: String { "bookmarks" }
///     var migrations: [StoreMigration] {
///         [StoreMigration("bookmarks.v1", [#"CREATE TABLE "bookmarks" ("row_id" TEXT PRIMARY KEY NOT NULL, "at" INTEGER NOT NULL)"#])]
///     }
///     var tables: [String] { ["bookmarks"] }
/// }
/// let store = try OfflineStore(configuration, contracts: ContractRegistry.self, extensions: [Bookmarks()])
/// ```
public protocol StoreExtension: Sendable {
    /// The extension's name, in errors and in ``HousekeepingReport/reclaimed``.
    var name: String { get }

    /// The migrations that create and change the extension's tables, in order. Like the
    /// store's own they are history: a released migration never changes, a change is a new
    /// one appended. Identifiers are unique in the store.
    var migrations: [StoreMigration] { get }

    /// The tables the migrations create. The store refuses to open when one of them is a
    /// contract's table or one of its own (`EngineNames`).
    var tables: [String] { get }

    /// Frees `bytes` of the volume, or as much as it can, when the store's housekeeping finds
    /// less free space than ``StorageLimits/minimumFreeBytes``; returns the ids of what it
    /// removed. Never removes what the server does not have yet.
    func reclaimSpace(_ bytes: Int64, in store: OfflineStore) throws(OfflineStoreError) -> [String]

    /// Runs in the transaction that opens the store, after the migrations: puts right what a
    /// process that was killed left half-done in the extension's tables (a download shown as
    /// running). A failure stops the store from opening.
    func storeDidOpen(_ database: Database) throws
}

extension StoreExtension {
    /// Does nothing.
    public func storeDidOpen(_ database: Database) throws {}

    /// Frees nothing.
    public func reclaimSpace(_ bytes: Int64, in store: OfflineStore) throws(OfflineStoreError) -> [String] { [] }
}

/// One migration of a ``StoreExtension``: SQL statements run in one transaction.
public struct StoreMigration: Hashable, Sendable {
    /// Recorded in the database once the migration ran; never reused.
    public var identifier: String
    /// The statements, run in order.
    public var statements: [String]

    /// A migration with its identifier and statements.
    public init(_ identifier: String, _ statements: [String]) {
        self.identifier = identifier
        self.statements = statements
    }
}

extension OfflineStore {
    /// Refuses extensions whose names, migrations or tables collide with each other, the
    /// contracts or the store's own.
    static func validate(_ extensions: [any StoreExtension], contracts: ContractCatalog) throws(OfflineStoreError) {
        var owners: [String: String] = [:]
        for table in EngineNames.ClientTable.allCases { owners[table.rawValue] = "the store" }
        for entity in contracts.entities { owners[entity.table] = "contract \(entity.name)" }
        for event in contracts.events { owners[event.table] = "contract \(event.name)" }
        var migrations = Set(ClientSchema.migrations.map(\.identifier) + contracts.clientMigrations.map(\.identifier))
        var names: Set<String> = []
        for storeExtension in extensions {
            let name = storeExtension.name
            guard names.insert(name).inserted else { throw .invalidExtension(name: name, reason: "two extensions have this name") }
            for table in storeExtension.tables {
                if let owner = owners[table] {
                    throw .invalidExtension(name: name, reason: "its table '\(table)' is already \(owner)'s")
                }
                owners[table] = "extension \(name)"
            }
            for migration in storeExtension.migrations where !migrations.insert(migration.identifier).inserted {
                throw .invalidExtension(name: name, reason: "the migration identifier '\(migration.identifier)' is already used")
            }
        }
    }
}
