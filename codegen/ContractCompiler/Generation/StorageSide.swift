/// Which set of migrations: the device's SQLite tables, the server's SQLite tables, or the
/// server's tables in PostgreSQL's dialect. The raw value names the set in `contracts.lock`.
package enum StorageSide: String, Sendable, CaseIterable {
    case client
    case server
    case serverPostgres = "server_postgres"

    /// Whether the tables are the server's (tenant and scope columns, sync metadata).
    package var isServer: Bool { self != .client }

    package var dialect: SQLDialect { self == .serverPostgres ? .postgres : .sqlite }

    /// The registry property the generated migrations are published under.
    var registryProperty: String {
        switch self {
        case .client: return "clientMigrations"
        case .server: return "serverMigrations"
        case .serverPostgres: return "serverPostgresMigrations"
        }
    }
}

/// The SQL dialect migrations are written in.
package enum SQLDialect: Sendable {
    case sqlite
    case postgres
}

/// Column types the schema builder names itself (sync metadata, event envelopes), per dialect.
enum MetadataColumnType {
    case text
    case integer
    /// A yes/no flag: 0/1 in SQLite, a real boolean in PostgreSQL.
    case flag
    /// Milliseconds since 1970 in SQLite, `TIMESTAMPTZ` in PostgreSQL.
    case timestamp

    func sql(_ dialect: SQLDialect) -> String {
        switch (self, dialect) {
        case (.text, _): return "TEXT"
        case (.integer, .sqlite), (.flag, .sqlite), (.timestamp, .sqlite): return "INTEGER"
        case (.integer, .postgres): return "BIGINT"
        case (.flag, .postgres): return "BOOLEAN"
        case (.timestamp, .postgres): return "TIMESTAMPTZ"
        }
    }
}
