import Foundation
import OutpostTestSupport
import PostgresNIO
import Testing

@testable import SyncServer

/// A plain connection to the test PostgreSQL, beside the storages under test: to see which
/// backends wait for a lock, and to hold locks or read tables the way another process would.
final class PostgresProbe: Sendable {
    let client: PostgresClient
    private let running: Task<Void, Never>
    let schema: String

    init(schema: String) throws {
        let configuration = try StorageKind.postgresConfiguration(schema: schema)
        var options = PostgresClient.Configuration(
            host: configuration.host, port: configuration.port, username: configuration.username, password: configuration.password,
            database: configuration.database, tls: .disable
        )
        options.options.additionalStartupParameters = [("search_path", schema)]
        options.options.maximumConnections = 2
        client = PostgresClient(configuration: options)
        let client = client
        running = Task { await client.run() }
        self.schema = schema
    }

    deinit {
        running.cancel()
    }

    /// Sessions of the storages on this schema (not of other tests) waiting for a lock.
    func backendsWaitingForLocks() async throws -> Int {
        let name = try StorageKind.postgresConfiguration(schema: schema).applicationName
        let rows = try await client.query(
            "SELECT count(*)::BIGINT FROM pg_stat_activity WHERE application_name = \(name) AND wait_event_type = 'Lock'"
        ).collect()
        return Int(try rows.first?.decode(Int64.self) ?? 0)
    }

    /// Waits until at least `count` backends wait for a lock (or fails the test after 20 s).
    func waitForLockWaiters(_ count: Int, _ comment: Comment) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while try await backendsWaitingForLocks() < count {
            guard ContinuousClock.now < deadline else {
                Issue.record("\(comment): fewer than \(count) backends ever waited for a lock")
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// One number from a query.
    func integer(_ sql: String) async throws -> Int64 {
        let rows = try await client.query(PostgresQuery(unsafeSQL: sql)).collect()
        return try rows.first?.decode(Int64.self) ?? 0
    }
}
