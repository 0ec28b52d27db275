import ContractRuntime
import SyncProtocol

/// The record of rows that moved off a value a subscription selects by: whenever a stored row's
/// filter field or include foreign key changes, the database itself (a trigger on the contract
/// table, whatever statement wrote it) records the row, the column, the value it held and the
/// `_seq` of the write, in `subscription_moves`. A subscription's pull reads it to tell devices
/// which of its rows left (``SubscriptionPlan/leaves(in:members:tenant:scopeKey:after:through:)``).
///
/// The triggers are derived from the contracts' subscriptions each time a storage opens
/// (``statements(for:dialect:)``), so a contract change that tracks another column needs no
/// migration; the table is the server's own (`server.v11.subscription_moves`). Moves are pruned
/// with the tombstones they outlive (``ServerHousekeeping``): a cursor below the compacted
/// sequence is expired anyway.
struct RowMoves {
    let reader: any StorageReader
    let tenant: String
    let scopeKey: String
    let after: Int64
    let through: Int64

    static let table = EngineNames.ServerTable.subscriptionMoves.rawValue

    /// Rows of `table` whose `column` held one of `values` and changed in the window.
    func rows(in table: String, column: String, from values: [String]) async throws -> Set<String> {
        try await distinct("row_id", in: table, column: column, where: "old_value", in: values)
    }

    /// The values `column` held before it changed in the window, in these rows of `table`.
    func previousValues(in table: String, column: String, rows ids: [String]) async throws -> Set<String> {
        try await distinct("old_value", in: table, column: column, where: "row_id", in: ids)
    }

    /// The distinct `answer`s of the moves of `table`'s `column` in the window whose `key` is one
    /// of `values` (read in runs of ``SubscriptionPlan/chunk``).
    private func distinct(_ answer: String, in table: String, column: String, where key: String, in values: [String]) async throws -> Set<String> {
        var found: Set<String> = []
        for part in values.sorted().chunked(SubscriptionPlan.chunk) where !part.isEmpty {
            let sql = """
                SELECT DISTINCT "\(answer)" FROM "\(Self.table)" WHERE "tenant" = ? AND "scope_key" = ? AND "table_name" = ? AND "column_name" = ?
                AND "\(key)" IN (\(Array(repeating: "?", count: part.count).joined(separator: ", "))) AND "seq" > ? AND "seq" <= ?
                """
            let arguments: [ColumnValue] =
                [.text(tenant), .text(scopeKey), .text(table), .text(column)] + part.map(ColumnValue.text) + [.integer(after), .integer(through)]
            for row in try await reader.serverTableQuery(sql, arguments) { if let value = row.text(answer) { found.insert(value) } }
        }
        return found
    }

    // MARK: Triggers

    /// The columns each contract table's moves are recorded for: the filter fields of the
    /// subscriptions rooted in it, and the foreign keys their includes follow. By table.
    static func trackedColumns(of contracts: ContractCatalog) -> [String: Set<String>] {
        var tracked: [String: Set<String>] = [:]
        for subscription in contracts.subscriptions {
            guard let root = contracts.entity(named: subscription.entity) else { continue }
            for condition in subscription.filter where condition.field != root.primaryKey {
                tracked[root.table, default: []].insert(condition.field)
            }
            func walk(_ includes: [SubscriptionDescriptor.Include], above: EntityDescriptor) {
                for include in includes {
                    guard let target = contracts.entity(named: include.target) else { continue }
                    switch include.kind {
                    case .hasMany: tracked[target.table, default: []].insert(include.foreignKey)
                    case .belongsTo: tracked[above.table, default: []].insert(include.foreignKey)
                    }
                    walk(include.includes, above: target)
                }
            }
            walk(subscription.includes, above: root)
        }
        return tracked
    }

    enum Dialect {
        case sqlite
        case postgres
    }

    /// The prefix of every trigger (and PostgreSQL function) this derives.
    static let triggerPrefix = "outpost_moves_"

    /// Statements that install the triggers for `contracts`, after those that drop any this
    /// prefix names (`existing`, as the database lists them): run in one transaction at startup.
    static func statements(for contracts: ContractCatalog, dialect: Dialect, existing: [(trigger: String, table: String)]) -> [String] {
        var statements: [String] = []
        for (trigger, table) in existing {
            switch dialect {
            case .sqlite: statements.append("DROP TRIGGER IF EXISTS \(SubscriptionPlan.quoted(trigger))")
            case .postgres: statements.append("DROP TRIGGER IF EXISTS \(SubscriptionPlan.quoted(trigger)) ON \(SubscriptionPlan.quoted(table))")
            }
        }
        let entities = Dictionary(contracts.entities.map { ($0.table, $0) }, uniquingKeysWith: { first, _ in first })
        for (table, columns) in trackedColumns(of: contracts).sorted(by: { $0.key < $1.key }) {
            guard let entity = entities[table] else { continue }
            let (t, pk) = (SubscriptionPlan.quoted(table), SubscriptionPlan.quoted(entity.primaryKey))
            let insert =
                "INSERT INTO \"\(Self.table)\" (\"tenant\", \"scope_key\", \"table_name\", \"column_name\", \"old_value\", \"row_id\", \"seq\")"
            switch dialect {
            case .sqlite:
                for column in columns.sorted() {
                    let c = SubscriptionPlan.quoted(column)
                    // Rows are written with `INSERT OR REPLACE`: the old row is read before it goes.
                    statements.append(
                        """
                        CREATE TRIGGER "\(triggerPrefix)\(table)_\(column)_replace" BEFORE INSERT ON \(t) FOR EACH ROW BEGIN
                        \(insert) SELECT o."_tenant_id", o."_scope_key", '\(table)', '\(column)', o.\(c), o.\(pk), NEW."_seq" FROM \(t) o
                        WHERE o."_tenant_id" = NEW."_tenant_id" AND o.\(pk) = NEW.\(pk) AND o.\(c) IS NOT NULL AND o.\(c) IS NOT NEW.\(c);
                        END
                        """)
                    statements.append(
                        """
                        CREATE TRIGGER "\(triggerPrefix)\(table)_\(column)_update" AFTER UPDATE OF \(c) ON \(t) FOR EACH ROW
                        WHEN OLD.\(c) IS NOT NULL AND OLD.\(c) IS NOT NEW.\(c) BEGIN
                        \(insert) VALUES (OLD."_tenant_id", OLD."_scope_key", '\(table)', '\(column)', OLD.\(c), OLD.\(pk), NEW."_seq");
                        END
                        """)
                }
            case .postgres:
                let function = "\(triggerPrefix)\(table)"
                let checks = columns.sorted().map { column in
                    let c = SubscriptionPlan.quoted(column)
                    return """
                        IF OLD.\(c) IS NOT NULL AND OLD.\(c) IS DISTINCT FROM NEW.\(c) THEN
                            \(insert) VALUES (OLD."_tenant_id", OLD."_scope_key", '\(table)', '\(column)', OLD.\(c)::text, OLD.\(pk)::text, NEW."_seq");
                        END IF;
                        """
                }
                statements.append(
                    """
                    CREATE OR REPLACE FUNCTION "\(function)"() RETURNS trigger LANGUAGE plpgsql AS $moves$
                    BEGIN
                    \(checks.joined(separator: "\n"))
                    RETURN NULL;
                    END
                    $moves$
                    """)
                statements.append(
                    "CREATE TRIGGER \"\(function)\" AFTER UPDATE ON \(t) FOR EACH ROW EXECUTE FUNCTION \"\(function)\"()")
            }
        }
        return statements
    }

    /// Lists this prefix's triggers: (trigger, table).
    static func existingTriggersSQL(_ dialect: Dialect) -> String {
        switch dialect {
        case .sqlite:
            "SELECT name AS \"trigger\", tbl_name AS \"table\" FROM sqlite_master WHERE type = 'trigger' AND name LIKE '\(triggerPrefix)%'"
        case .postgres:
            """
            SELECT t.tgname::text AS "trigger", c.relname::text AS "table" FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
            WHERE NOT t.tgisinternal AND t.tgname LIKE '\(triggerPrefix)%' AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
            """
        }
    }
}
