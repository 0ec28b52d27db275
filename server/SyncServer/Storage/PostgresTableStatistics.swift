import Logging
import NIOConcurrencyHelpers
import PostgresNIO

/// Makes sure every contract table has planner statistics once it holds enough rows for a plan
/// to matter.
///
/// A table created empty has none until autovacuum analyzes it, which may be minutes and
/// thousands of rows later. Without them PostgreSQL estimates each equality at a default
/// selectivity, so a lookup by a unique index's columns (a push's uniqueness check) ties with a
/// scan of the scope's `(_tenant_id, _scope_key, _seq)` index filtered row by row, and often takes
/// the scan: every lookup then reads the whole scope, and a push of 500 creates slows from
/// 0.3 s to 2 s as the table grows (docs/scaling.md has the plans). With statistics taken on a
/// thousand rows or more the unique index wins, and stays the choice as the table grows:
/// the planner scales the row counts by the table's current size, and autovacuum takes new
/// statistics as the table grows by its usual share.
///
/// So each process counts the rows it sends to each table, and when it has sent
/// ``rowsBeforeCheck`` to a table not known to have statistics, it looks for the table's column
/// statistics and, when there are none, runs `ANALYZE` on it, outside any transaction and off
/// the request's path. A table found with statistics is never looked at again by this process.
final class PostgresTableStatistics: Sendable {
    /// Rows sent to a table between two looks at its statistics.
    static let rowsBeforeCheck = 1_000

    private struct State {
        /// Tables known to have statistics.
        var analyzed: Set<String> = []
        /// Rows sent to the other tables since their last look.
        var sentSinceCheck: [String: Int] = [:]
        /// Tables being looked at now.
        var checking: Set<String> = []
    }

    private let state = NIOLockedValueBox(State())

    /// Counts rows a committed transaction sent; returns the tables due for a look (each is
    /// then being checked until ``finished(_:analyzed:)``).
    func recordSent(_ rowsByTable: [String: Int]) -> [String] {
        guard !rowsByTable.isEmpty else { return [] }
        return state.withLockedValue { state in
            var due: [String] = []
            for (table, rows) in rowsByTable where !state.analyzed.contains(table) {
                let sent = state.sentSinceCheck[table, default: 0] + rows
                state.sentSinceCheck[table] = sent
                if sent >= Self.rowsBeforeCheck, !state.checking.contains(table) {
                    state.checking.insert(table)
                    state.sentSinceCheck[table] = 0
                    due.append(table)
                }
            }
            return due
        }
    }

    /// Ends a look at `table`: `analyzed` when it has statistics now.
    func finished(_ table: String, analyzed: Bool) {
        state.withLockedValue { state in
            state.checking.remove(table)
            if analyzed {
                state.analyzed.insert(table)
                state.sentSinceCheck[table] = nil
            }
        }
    }

    /// Analyzes the table unless it has column statistics already; whether it has them now
    /// (a table analyzed while empty has none, and is analyzed again later).
    static func refresh(_ table: String, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        if try await hasStatistics(table, on: connection, logger: logger) { return true }
        try await connection.query(PostgresQuery(unsafeSQL: "ANALYZE \"\(table)\""), logger: logger)
        return try await hasStatistics(table, on: connection, logger: logger)
    }

    /// Whether `ANALYZE` has recorded column statistics of the table (in the connection's
    /// schema, the first of its search_path, where the sync statements find it).
    static func hasStatistics(_ table: String, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        let rows = try await connection.query(
            "SELECT EXISTS (SELECT 1 FROM pg_stats WHERE schemaname = current_schema() AND tablename = \(table))", logger: logger
        ).collect()
        return try rows.first?.decode(Bool.self) ?? false
    }
}
