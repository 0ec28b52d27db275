public import ContractRuntime
import Foundation
import GRDB

/// Typed reads inside one consistent snapshot: what ``OfflineStore/read(_:)`` and
/// `OfflineStore.observe(_:)` hand to their closure. Every read method of ``OfflineStore``
/// has its twin here, so several reads can share a snapshot:
///
/// ```swift
/// let (detail, tasks) = try store.read { reader in
///     (try reader.unitDetail(id: "u-1"), try reader.tasks(teamId: "t-1"))
/// }
/// ```
///
/// Valid only inside the closure it was given to.
public struct StoreReader {
    let db: Database
    let codec: RowCodec
    let contracts: ContractCatalog

    init(_ db: Database, codec: RowCodec, contracts: ContractCatalog) {
        self.contracts = contracts
        self.db = db
        self.codec = codec
    }

    // MARK: Generic reads

    /// The rows of an entity matching `filter`, in `order` (primary-key order when empty).
    public func all<E: ContractEntity>(
        _ type: E.Type, where filter: RowFilter<E>? = nil, orderBy order: [RowOrder] = [], limit: Int? = nil
    ) throws(OfflineStoreError) -> [E] {
        let entity = E.descriptor
        let rows = try fetchRows(entity, filter: filter?.node, order: order, limit: limit)
        var values: [E] = []
        values.reserveCapacity(rows.count)
        for row in rows { values.append(try decode(E.self, row: row)) }
        return values
    }

    /// The row with this primary key, or `nil`.
    public func fetch<E: ContractEntity>(_ type: E.Type, id: String) throws(OfflineStoreError) -> E? {
        guard let row = try row(E.descriptor, id: id) else { return nil }
        return try decode(E.self, row: row)
    }

    /// How many rows match `filter`.
    public func count<E: ContractEntity>(_ type: E.Type, where filter: RowFilter<E>? = nil) throws(OfflineStoreError) -> Int {
        let entity = E.descriptor
        var arguments = StatementArguments()
        var sql = "SELECT COUNT(*) FROM \(entity.table.quotedDatabaseIdentifier)"
        if let node = filter?.node {
            sql += " WHERE " + (try self.sql(node, entity: entity, arguments: &arguments))
        }
        return try run { try Int.fetchOne(db, sql: sql, arguments: arguments) ?? 0 }
    }

    /// The client-only columns of a row (`local:` in its contract), or `nil` when there is no
    /// such row.
    public func localState<E: LocalStateEntity>(_ type: E.Type, id: String) throws(OfflineStoreError) -> E.LocalState? {
        let entity = E.descriptor
        guard let row = try row(entity, id: id) else { return nil }
        return try decodeLocalState(E.self, row: row, id: id)
    }

    /// A row in wire form (contract fields only, encrypted fields opened), by contract name.
    public func wireRow(_ contract: String, id: String) throws(OfflineStoreError) -> [String: JSONValue]? {
        guard let entity = contracts.entity(named: contract) else { throw .unknownContract(contract) }
        guard let row = try row(entity, id: id) else { return nil }
        return try codec.wireObject(row, fields: entity.fields, table: entity.table, id: id)
    }

    /// The sync metadata of a row: the schema version it was stored under, the server version
    /// it is based on (`nil` for a row never synced) and when it last came from the server.
    public func syncInfo<E: ContractEntity>(_ type: E.Type, id: String) throws(OfflineStoreError) -> RowSyncInfo? {
        guard let row = try row(E.descriptor, id: id) else { return nil }
        return RowSyncInfo(
            schemaVersion: row["_schema_version"] ?? 0, serverVersion: row["_server_version"],
            syncedAt: (row["_synced_at"] as Int64?).map { Timestamp(millisecondsSince1970: $0) }
        )
    }

    // MARK: Relations

    /// The rows of `Child` that a `has_many` relation of `parent`'s contract points at (or that
    /// point at `parent` through a `belongs_to` of `Child`), in primary-key order unless `order`
    /// says otherwise.
    ///
    /// ```swift
    /// let lessons = try reader.children(Lesson.self, of: unit, orderBy: [.ascending("sort_index")])
    /// ```
    public func children<Parent: ContractEntity, Child: ContractEntity>(
        _ type: Child.Type, of parent: Parent, orderBy order: [RowOrder] = []
    ) throws(OfflineStoreError) -> [Child] {
        try children(Child.self, ofKeys: [parent.contractPrimaryKey], parent: Parent.descriptor, orderBy: order)
    }

    /// The rows of `Child` under any of `parents`, in one query.
    public func children<Parent: ContractEntity, Child: ContractEntity>(
        _ type: Child.Type, of parents: [Parent], orderBy order: [RowOrder] = []
    ) throws(OfflineStoreError) -> [Child] {
        try children(Child.self, ofKeys: parents.map(\.contractPrimaryKey), parent: Parent.descriptor, orderBy: order)
    }

    func children<Child: ContractEntity>(
        _ type: Child.Type, ofKeys keys: [String], parent: EntityDescriptor, orderBy order: [RowOrder]
    ) throws(OfflineStoreError) -> [Child] {
        let foreignKey = try Self.foreignKey(from: parent, to: Child.descriptor)
        guard !keys.isEmpty else { return [] }
        return try all(
            Child.self, where: RowFilter(.oneOf(field: foreignKey, values: keys.map(JSONValue.string))), orderBy: order
        )
    }

    /// The foreign key of `child` that points at `parent`, from the contracts' relations.
    static func foreignKey(from parent: EntityDescriptor, to child: EntityDescriptor) throws(OfflineStoreError) -> String {
        if let relation = parent.relations.first(where: { $0.kind == .hasMany && $0.target == child.name }) {
            return relation.foreignKey
        }
        if let relation = child.relations.first(where: { $0.kind == .belongsTo && $0.target == parent.name }) {
            return relation.foreignKey
        }
        if let field = child.fields.first(where: { $0.kind == .ref(parent.name) }) {
            return field.name
        }
        throw .unknownField(contract: child.name, field: "relation to \(parent.name)")
    }

    // MARK: Internals

    func run<T>(_ body: () throws -> T) throws(OfflineStoreError) -> T {
        do {
            return try body()
        } catch {
            throw OfflineStore.map(error)
        }
    }

    func row(_ entity: EntityDescriptor, id: String) throws(OfflineStoreError) -> Row? {
        try run {
            try Row.fetchOne(
                db.cachedStatement(
                    sql: "SELECT * FROM \(entity.table.quotedDatabaseIdentifier) WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = ?"
                ),
                arguments: [id]
            )
        }
    }

    func fetchRows(
        _ entity: EntityDescriptor, filter: RowFilter<some ContractEntity>.Node?, order: [RowOrder], limit: Int?
    ) throws(OfflineStoreError) -> [Row] {
        var arguments = StatementArguments()
        var sql = "SELECT * FROM \(entity.table.quotedDatabaseIdentifier)"
        if let filter {
            sql += " WHERE " + (try self.sql(filter, entity: entity, arguments: &arguments))
        }
        sql += " ORDER BY " + (try Self.orderSQL(order, entity: entity))
        if let limit {
            sql += " LIMIT ?"
            _ = arguments.append(contentsOf: [max(0, limit)])
        }
        let statement = sql
        let values = arguments
        return try run { try Row.fetchAll(db, sql: statement, arguments: values) }
    }

    func decode<E: ContractEntity>(_ type: E.Type, row: Row) throws(OfflineStoreError) -> E {
        let entity = E.descriptor
        let id = codec.key(of: row, entity: entity)
        let wire = try codec.wireObject(row, fields: entity.fields, table: entity.table, id: id)
        do {
            return try WireCoding.decode(E.self, from: wire)
        } catch {
            throw .unreadableRow(contract: entity.name, id: id, reason: error.reason)
        }
    }

    func decodeLocalState<E: LocalStateEntity>(_ type: E.Type, row: Row, id: String) throws(OfflineStoreError) -> E.LocalState {
        let entity = E.descriptor
        let wire = try codec.wireObject(row, fields: entity.localFields, table: entity.table, id: id)
        do {
            return try WireCoding.decode(E.LocalState.self, from: wire.filter { $0.value != .null })
        } catch {
            throw .unreadableRow(contract: entity.name, id: id, reason: error.reason)
        }
    }

    static func queryableField(_ name: String, of entity: EntityDescriptor) throws(OfflineStoreError) -> FieldDescriptor {
        guard let field = entity.field(named: name) else { throw .unknownField(contract: entity.name, field: name) }
        if field.isEncrypted {
            throw .fieldNotQueryable(contract: entity.name, field: name, reason: "it is encrypted on the device")
        }
        return field
    }

    func queryValue(_ value: JSONValue, field: FieldDescriptor, entity: EntityDescriptor) throws(OfflineStoreError) -> DatabaseValue {
        if value == .null { return .null }
        do {
            return try codec.columns.columnValue(value, for: field, mode: .query)
        } catch {
            throw .invalidValue(contract: entity.name, field: field.name, reason: error.reason)
        }
    }

    func sql<E>(
        _ node: RowFilter<E>.Node, entity: EntityDescriptor, arguments: inout StatementArguments
    ) throws(OfflineStoreError) -> String {
        switch node {
        case .compare(let name, let comparison, let value):
            let field = try Self.queryableField(name, of: entity)
            let stored = try queryValue(value, field: field, entity: entity)
            _ = arguments.append(contentsOf: [stored])
            let column = name.quotedDatabaseIdentifier
            switch comparison {
            case .equals: return "\(column) IS ?"
            case .notEquals: return "\(column) IS NOT ?"
            default: return "\(column) \(comparison.rawValue) ?"
            }
        case .isNull(let name, let negated):
            _ = try Self.queryableField(name, of: entity)
            return "\(name.quotedDatabaseIdentifier) IS \(negated ? "NOT " : "")NULL"
        case .oneOf(let name, let values):
            let field = try Self.queryableField(name, of: entity)
            guard !values.isEmpty else { return "0" }
            var stored: [DatabaseValue] = []
            for value in values { stored.append(try queryValue(value, field: field, entity: entity)) }
            _ = arguments.append(contentsOf: StatementArguments(stored))
            return "\(name.quotedDatabaseIdentifier) IN (\(Array(repeating: "?", count: stored.count).joined(separator: ", ")))"
        case .all(let nodes):
            guard !nodes.isEmpty else { return "1" }
            var parts: [String] = []
            for node in nodes { parts.append("(" + (try sql(node, entity: entity, arguments: &arguments)) + ")") }
            return parts.joined(separator: " AND ")
        case .any(let nodes):
            guard !nodes.isEmpty else { return "0" }
            var parts: [String] = []
            for node in nodes { parts.append("(" + (try sql(node, entity: entity, arguments: &arguments)) + ")") }
            return parts.joined(separator: " OR ")
        case .not(let node):
            return "NOT (" + (try sql(node, entity: entity, arguments: &arguments)) + ")"
        }
    }

    static func orderSQL(_ order: [RowOrder], entity: EntityDescriptor) throws(OfflineStoreError) -> String {
        var terms: [String] = []
        for key in order {
            let field = try Self.queryableField(key.field, of: entity)
            let column = key.field.quotedDatabaseIdentifier
            let direction = key.descending ? " DESC" : ""
            switch key.kind {
            case .value:
                terms.append(column + direction)
            case .declaredOrder:
                guard case .enumeration(let values, _) = field.kind else {
                    throw .fieldNotQueryable(contract: entity.name, field: key.field, reason: "declared order needs an enum field")
                }
                // Literal SQL from the contract's own values, quoted.
                let cases = values.enumerated().map { index, value in
                    "WHEN '\(value.replacingOccurrences(of: "'", with: "''"))' THEN \(index)"
                }
                terms.append("CASE \(column) \(cases.joined(separator: " ")) ELSE \(values.count) END" + direction)
            }
        }
        // Ties (and no order at all) by primary key, so results are stable.
        terms.append(entity.primaryKey.quotedDatabaseIdentifier)
        return terms.joined(separator: ", ")
    }
}

/// A row's sync metadata (its `_schema_version`, `_server_version` and `_synced_at` columns).
public struct RowSyncInfo: Hashable, Sendable {
    /// The contract version the row was stored under.
    public var schemaVersion: Int
    /// The server's version of the row this copy is based on; `nil` for a row made on the
    /// device and not yet acknowledged.
    public var serverVersion: Int64?
    /// When the row last came from the server.
    public var syncedAt: Timestamp?
}
