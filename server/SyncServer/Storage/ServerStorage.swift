public import ContractRuntime

/// The server's database, as an app or an operator tool holds it: ``SQLiteStorage`` (embedded,
/// the default) or ``PostgresStorage`` (several server processes on one database).
///
/// The sync logic reads and writes it through transactions that stay inside the engine; an app
/// reads rows with ``snapshot(_:)`` and writes them through the engine's own writes
/// (``ContentService``, reducers), so every write it makes is sequenced, locked and audited as
/// the engine's are.
public protocol ServerStorage: Sendable {
    /// The contracts whose tables this storage holds (it ran their migrations when it opened).
    var contracts: ContractCatalog { get }

    /// The key this storage seals the audit log with.
    var auditKey: AuditKey { get }

    /// The engine's storage behind this value. Only Outpost's storages make one; a type that
    /// wraps a storage returns the wrapped storage's.
    var backend: StorageBackend { get }
}

/// Outpost's storage behind a ``ServerStorage``: opaque outside the engine.
public struct StorageBackend: Sendable {
    package let storage: any SyncStorage

    package init(_ storage: any SyncStorage) {
        self.storage = storage
    }
}

extension ServerStorage {
    /// The storage the engine's logic runs on.
    package var engine: any SyncStorage { backend.storage }

    /// Runs `body` against one consistent snapshot of the database: every read it makes sees
    /// the same committed state.
    public func snapshot<T: Sendable>(_ body: @escaping @Sendable (StorageSnapshot) async throws -> T) async throws -> T {
        try await engine.read { reader in try await body(StorageSnapshot(reader: reader)) }
    }
}

/// Reads of contract rows in one snapshot (``ServerStorage/snapshot(_:)``), for an app's own
/// routes. Rows come as stored: every field by name, the sync metadata columns (`_seq`,
/// `_scope_key`, `_deleted`, `_version`, …) included, tombstones included.
public struct StorageSnapshot {
    let reader: any StorageReader

    /// The row of `entity` with this primary key in a tenant; `nil` when there is none.
    public func row(of entity: EntityDescriptor, tenant: String, id: String) async throws -> StoredRow? {
        try await reader.row(in: ContractTable(entity), tenant: tenant, id: id)
    }

    /// Rows of `entity` in a tenant whose columns equal `conditions` (`.null` matches NULL), in
    /// primary-key order, at most `limit`.
    public func rows(
        of entity: EntityDescriptor, tenant: String, where conditions: [String: ColumnValue], limit: Int = 10_000
    ) async throws -> [StoredRow] {
        try await reader.rows(in: ContractTable(entity), tenant: tenant, where: conditions, limit: limit)
    }

    /// The changed rows of `entities` in one scope whose `_seq` is above `after`, in `_seq`
    /// order (a pull's order), at most `limit`: what a route that serves a scope by cursor reads.
    public func changes(
        of entities: [EntityDescriptor], tenant: String, scopeKey: String, after: Int64, limit: Int
    ) async throws -> [(entity: EntityDescriptor, row: StoredRow)] {
        let tables = entities.map(ContractTable.init)
        let byTable = Dictionary(zip(tables.map(\.name), entities), uniquingKeysWith: { first, _ in first })
        return try await reader.changes(
            in: tables, tenant: tenant, scopeKey: scopeKey, after: after, limit: limit, byteBudget: .max, pageColumnsOnly: false
        )
        .compactMap { change in byTable[change.table.name].map { ($0, change.row) } }
    }

    /// The highest `_seq` of the scope whose tombstones were compacted (0 when none were): a
    /// cursor below it may have missed a delete (``ServerHousekeeping``), so a route serving
    /// the scope by cursor answers 410 `cursor_expired` for it.
    public func compactedSequence(tenant: String, scopeKey: String) async throws -> Int64 {
        try await reader.compactedSequence(tenant: tenant, scopeKey: scopeKey)
    }
}
