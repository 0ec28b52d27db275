import ContractRuntime
import Foundation

/// Builds the tables of a contract, client side and server side.
package struct SchemaBuilder {
    let mapping: TypeMapping

    package init(set: ContractSet) {
        self.mapping = TypeMapping(set: set)
    }

    package func table(for contract: Contract, side: StorageSide) -> TableSchema {
        switch (contract.kind, side.isServer) {
        case (.entity, false): return clientEntityTable(contract)
        case (.entity, true): return serverEntityTable(contract, dialect: side.dialect)
        case (.event, false): return clientEventTable(contract)
        case (.event, true): return serverEventTable(contract, dialect: side.dialect)
        }
    }

    private func column(_ field: Field, side: StorageSide) -> TableSchema.Column {
        let encrypted = side == .client && field.isEncrypted
        return TableSchema.Column(
            name: field.name, sqlType: encrypted ? "BLOB" : mapping.sqlType(field.type.type, dialect: side.dialect),
            isNotNull: !field.type.isOptional, defaultSQL: mapping.sqlDefault(field, encryptedColumn: encrypted, dialect: side.dialect)
        )
    }

    private func metadata(_ name: String, _ type: MetadataColumnType, _ dialect: SQLDialect, notNull: Bool, default value: String? = nil)
        -> TableSchema.Column
    {
        TableSchema.Column(name: name, sqlType: type.sql(dialect), isNotNull: notNull, defaultSQL: value)
    }

    /// A column the engines keep on every contract table; its name is reserved (``EngineNames``).
    private func metadata(
        _ column: EngineNames.Column, _ type: MetadataColumnType, _ dialect: SQLDialect, notNull: Bool, default value: String? = nil
    ) -> TableSchema.Column {
        metadata(column.rawValue, type, dialect, notNull: notNull, default: value)
    }

    private func contractIndexes(_ contract: Contract, tenantPrefix: Bool) -> [TableSchema.IndexSchema] {
        // Local fields exist on the device only, so indexes that use them exist there only.
        let localNames = Set(contract.localFields.map(\.name))
        return contract.indexes.filter { !tenantPrefix || localNames.isDisjoint(with: $0.fields) }.map { index in
            // Server rows of every tenant share a table: every lookup is within one tenant, and
            // unique means unique within a tenant.
            let columns = (tenantPrefix ? [EngineNames.Column.tenantID.rawValue] : []) + index.fields
            return TableSchema.IndexSchema(
                name: TableSchema.indexName(table: contract.table, columns: index.fields, unique: index.isUnique),
                columns: columns, isUnique: index.isUnique
            )
        }
    }

    private func clientEntityTable(_ contract: Contract) -> TableSchema {
        var columns = contract.deviceFields.map { column($0, side: .client) }
        columns += contract.localFields.map { column($0, side: .client) }
        columns += [
            metadata(.schemaVersion, .integer, .sqlite, notNull: true),
            metadata(.serverVersion, .integer, .sqlite, notNull: false),
            metadata(.syncedAt, .integer, .sqlite, notNull: false),
        ]
        return TableSchema(
            name: contract.table, columns: columns, primaryKey: [contract.primaryKey?.name ?? "id"],
            indexes: contractIndexes(contract, tenantPrefix: false)
        )
    }

    private func serverEntityTable(_ contract: Contract, dialect: SQLDialect) -> TableSchema {
        let side: StorageSide = dialect == .postgres ? .serverPostgres : .server
        var columns = [metadata(.tenantID, .text, dialect, notNull: true)]
        columns += contract.fields.map { column($0, side: side) }
        columns += [
            metadata(.scopeKey, .text, dialect, notNull: true),
            metadata(.sequence, .integer, dialect, notNull: true),
            metadata(.version, .integer, dialect, notNull: true, default: "1"),
            metadata(.schemaVersion, .integer, dialect, notNull: true),
            metadata(.hlc, .text, dialect, notNull: false),
            metadata(.fieldClocks, .text, dialect, notNull: false),
            metadata(.deleted, .flag, dialect, notNull: true, default: dialect == .postgres ? "false" : "0"),
            metadata(.updatedAt, .timestamp, dialect, notNull: true),
            metadata(.updatedBy, .text, dialect, notNull: false),
        ]
        return TableSchema(
            name: contract.table, columns: columns, primaryKey: [EngineNames.Column.tenantID.rawValue, contract.primaryKey?.name ?? "id"],
            indexes: [scopeIndex(contract)] + contractIndexes(contract, tenantPrefix: true)
        )
    }

    /// A server table's pull index: one scope's rows in sequence order, within a tenant.
    private func scopeIndex(_ contract: Contract) -> TableSchema.IndexSchema {
        let columns: [EngineNames.Column] = [.tenantID, .scopeKey, .sequence]
        return TableSchema.IndexSchema(
            name: TableSchema.indexName(table: contract.table, columns: ["_scope", "_seq"], unique: false),
            columns: columns.map(\.rawValue), isUnique: false
        )
    }

    private func envelopeColumns(_ dialect: SQLDialect) -> [TableSchema.Column] {
        [
            metadata("event_id", .text, dialect, notNull: true),
            metadata("schema_version", .integer, dialect, notNull: true),
            metadata("user_id", .text, dialect, notNull: true),
            metadata("device_id", .text, dialect, notNull: true),
            metadata("occurred_at", .timestamp, dialect, notNull: true),
            metadata("recorded_at", .timestamp, dialect, notNull: false),
            metadata("hash", .text, dialect, notNull: true),
        ]
    }

    private func clientEventTable(_ contract: Contract) -> TableSchema {
        var columns = envelopeColumns(.sqlite)
        columns += contract.deviceFields.map { column($0, side: .client) }
        columns += [metadata(.syncedAt, .integer, .sqlite, notNull: false)]
        let occurred = TableSchema.IndexSchema(
            name: TableSchema.indexName(table: contract.table, columns: ["occurred_at"], unique: false),
            columns: ["occurred_at"], isUnique: false
        )
        return TableSchema(name: contract.table, columns: columns, primaryKey: ["event_id"], indexes: [occurred])
    }

    private func serverEventTable(_ contract: Contract, dialect: SQLDialect) -> TableSchema {
        let side: StorageSide = dialect == .postgres ? .serverPostgres : .server
        var columns = [metadata(.tenantID, .text, dialect, notNull: true)]
        columns += envelopeColumns(dialect)
        columns += contract.fields.map { column($0, side: side) }
        columns += [
            metadata(.scopeKey, .text, dialect, notNull: true),
            metadata(.sequence, .integer, dialect, notNull: true),
        ]
        return TableSchema(
            name: contract.table, columns: columns, primaryKey: [EngineNames.Column.tenantID.rawValue, "event_id"],
            indexes: [scopeIndex(contract)]
        )
    }
}
