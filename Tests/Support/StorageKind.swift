package import ContractRuntime
package import Foundation
package import SyncServer
import Testing

/// The storages the suites run against, each test on a fresh database: the embedded SQLite, and
/// PostgreSQL.
///
/// PostgreSQL comes from `OUTPOST_TEST_POSTGRES_URL`, which `make test` sets (it runs the tests
/// under scripts/with-postgres.sh, which starts a throwaway PostgreSQL 15). Run by hand without
/// it, the PostgreSQL cases fail and say how to get one; they are never skipped.
package enum StorageKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    package var testDescription: String { rawValue }

    /// The variable the tests read the PostgreSQL URL from.
    package static let postgresVariable = "OUTPOST_TEST_POSTGRES_URL"

    package struct MissingPostgres: Error, CustomStringConvertible {
        package init() {}

        package var description: String {
            "no PostgreSQL for the tests: \(StorageKind.postgresVariable) is not set. Run `make test` (it starts a throwaway "
                + "PostgreSQL 15), or `scripts/with-postgres.sh --fast -- swift test --skip-build`, or set "
                + "\(StorageKind.postgresVariable)=postgres://USER@HOST:PORT/DB to a database the tests may write to"
        }
    }

    /// The test PostgreSQL's URL.
    package static func postgresURL() throws -> String {
        guard let url = ProcessInfo.processInfo.environment[postgresVariable], !url.isEmpty else { throw MissingPostgres() }
        return url
    }

    /// The configuration of the test PostgreSQL, with a schema of its own.
    package static func postgresConfiguration(schema: String = uniqueSchema()) throws -> PostgresStorage.Configuration {
        var configuration = try PostgresStorage.Configuration(url: postgresURL())
        configuration.schema = schema
        configuration.auditKey = testAuditKey
        return configuration
    }

    /// The audit key of the test databases (every storage on one schema needs the same).
    package static let testAuditKey = try! AuditKey(bytes: Data(repeating: 5, count: 32))

    /// A schema name no other test uses.
    package static func uniqueSchema() -> String {
        "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
    }

    /// A fresh, empty, migrated storage of this kind holding `contracts`. A SQLite database lives
    /// in `folder`; a PostgreSQL one in a schema of its own, left in the throwaway cluster (its
    /// connections close when the storage is released).
    package func makeStorage(in folder: URL, contracts: any ContractSchema.Type) async throws -> any SyncStorage {
        try await makeSharedStorages(1, in: folder, contracts: contracts)[0]
    }

    /// `count` storages on one database, each with its own connections, as `count` server
    /// processes open it.
    package func makeSharedStorages(
        _ count: Int, in folder: URL, schema: String = uniqueSchema(), contracts: any ContractSchema.Type
    ) async throws -> [any SyncStorage] {
        var storages: [any SyncStorage] = []
        switch self {
        case .sqlite:
            for _ in 0..<count { storages.append(try SQLiteStorage(directory: folder, contracts: contracts)) }
        case .postgres:
            let configuration = try Self.postgresConfiguration(schema: schema)
            for _ in 0..<count { storages.append(try await PostgresStorage(configuration: configuration, contracts: contracts)) }
        }
        return storages
    }
}
