import ContractRuntime
import Crypto
import Foundation
import NIOConcurrencyHelpers
import PostgresNIO

/// Reads and writes of one PostgreSQL transaction (or read-only snapshot) on one leased
/// connection. Table and column names come from the contract registry and the catalog (validated
/// snake_case identifiers) and are quoted; values are always bound, never interpolated.
///
/// Locks (docs/scaling.md): a client's row in `clients` and a scope's row in `scope_sequences` are
/// row-locked (`INSERT … ON CONFLICT DO UPDATE … RETURNING`, which waits for a concurrent holder
/// and then reads the committed value) and held to the commit; the audit chain's head row is
/// locked last, just before the commit, so the chain's critical section is a few statements long.
/// Counters moved under a lock, stored push results and audit entries are kept in memory and
/// written by ``finish()`` in a few statements. Upserted rows are kept too (a read of the same
/// row is answered from them) and sent in multi-row statements before any query that could see
/// them, and at the end: a push of 500 creates is then one round trip per read instead of two
/// per mutation.
final class PostgresTransaction: StorageTransaction {
    private let connection: PostgresConnection
    private let catalog: PostgresCatalog
    private let logger: Logger

    /// Clients locked by this transaction → their last `seq` (moved by recorded results).
    private var clients: [Key: Int64] = [:]
    private var movedClients: Set<Key> = []
    /// Clients locked by this transaction → the `seq` they acknowledged (written by ``finish()``).
    private var acknowledged: [Key: Int64] = [:]
    /// Scopes locked by this transaction → the last sequence number handed out.
    private var scopes: [Key: Int64] = [:]
    private var movedScopes: Set<Key> = []
    /// Push result records not written yet (``finish()`` writes them), in the order recorded.
    private var pushResults: [PushResultRow] = []
    private var audit: [AuditEntry] = []
    /// Users' audit data keys read or made in this transaction; never kept across transactions
    /// (another process may erase a user meanwhile).
    private var userKeys: [Key: AuditDetails.DataKey] = [:]
    /// Upserted rows not sent yet: the newest version per row, in the order first written.
    private var unsentRows: [StoredRowKey: StoredRow] = [:]
    private var unsentOrder: [StoredRowKey] = []
    /// Rows read ahead (``prefetchRows(in:tenant:ids:)``), `nil` for an id known to be absent;
    /// an entry is dropped when the transaction writes its row.
    private var knownRows: [StoredRowKey: StoredRow?] = [:]
    /// Unsent rows read ahead and found absent: sent with a plain multi-row `INSERT`, faster
    /// than `INSERT … ON CONFLICT DO UPDATE … RETURNING`. Should another transaction insert one
    /// meanwhile, the `INSERT` fails with a unique violation and the transaction runs again,
    /// which then reads it. (Not `COPY`: postgres-nio 1.33 stops the process, a
    /// `preconditionFailure`, when the database cuts the session in the middle of one.)
    private var absentRows: Set<StoredRowKey> = []
    /// Lookups read ahead (``prefetchMatches(in:tenant:columns:keys:)``): the stored rows each
    /// key's columns held when read, before this transaction wrote any of them.
    private var matches: [MatchKey: [StoredRow]] = [:]
    /// The newest version of every row this transaction wrote since it first read ahead, by
    /// table name: laid over ``matches`` when a lookup is answered from them.
    private var written: [String: [StoredRowKey: StoredRow]] = [:]
    /// The column sets read ahead, by table name, and the rows written since under each key
    /// they took (a row written again under another key stays listed, and is checked).
    private var matchColumns: [String: Set<[String]>] = [:]
    private var writtenByMatch: [MatchKey: [StoredRowKey]] = [:]
    /// Rows sent to each contract table (``PostgresTableStatistics`` counts them once committed).
    private(set) var sentRowCounts: [String: Int] = [:]

    private struct Key: Hashable {
        var tenant: String
        var name: String
    }

    private struct PushResultRow {
        var client: Key
        var record: PushResultRecord
        var recordedAt: Int64
    }

    private let auditKey: AuditKey

    /// The channel this transaction's commit notifies (``CommitNotification/channel(schema:)``).
    private let notificationChannel: String

    init(connection: PostgresConnection, catalog: PostgresCatalog, logger: Logger, auditKey: AuditKey, notificationChannel: String) {
        self.notificationChannel = notificationChannel
        self.connection = connection
        self.catalog = catalog
        self.logger = logger
        self.auditKey = auditKey
    }

    // MARK: - Statements

    @discardableResult
    private func run(_ sql: String, _ bindings: PostgresBindings = PostgresBindings()) async throws -> [PostgresRow] {
        try await connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger).collect()
    }

    /// The rows of a query as stored rows sharing one layout (the query's columns, found once),
    /// rather than each row hashing every column name into a layout of its own.
    private func storedRows(_ sql: String, _ bindings: PostgresBindings) async throws -> [StoredRow] {
        let rows = try await run(sql, bindings)
        guard let first = rows.first else { return [] }
        let layout = StoredRow.Layout(first.map(\.columnName))
        return try rows.map { row in
            var values: [ColumnValue] = []
            values.reserveCapacity(layout.names.count)
            for cell in row { values.append(try PostgresValues.value(of: cell)) }
            return StoredRow(layout: layout, values: values)
        }
    }

    private func integer(_ rows: [PostgresRow]) throws -> Int64? {
        guard let cell = rows.first?.first else { return nil }
        guard case .integer(let number) = try PostgresValues.value(of: cell) else { return nil }
        return number
    }

    private static func quoted(_ name: String) -> String { "\"" + name + "\"" }

    // MARK: - StorageReader

    func row(in table: ContractTable, tenant: String, id: String) async throws -> StoredRow? {
        let key = StoredRowKey(table: table, tenant: tenant, id: id)
        if let unsent = unsentRows[key] { return unsent }
        if let known = knownRows[key] { return known }
        let columns = try catalog.columns(of: table.name)
        var bindings = PostgresBindings()
        bindings.append(tenant)
        try PostgresValues.bind(.text(id), as: columns.type(of: table.primaryKey), into: &bindings)
        let sql = "SELECT * FROM \(Self.quoted(table.name)) WHERE \"_tenant_id\" = $1 AND \(Self.quoted(table.primaryKey)) = $2"
        return try await storedRows(sql, bindings).first
    }

    /// One statement for every id (`= ANY` of an array), instead of a round trip per row.
    func prefetchRows(in table: ContractTable, tenant: String, ids: [String]) async throws {
        var wanted = Array(
            Set(
                ids.filter {
                    knownRows.index(forKey: StoredRowKey(table: table, tenant: tenant, id: $0)) == nil
                        && unsentRows[StoredRowKey(table: table, tenant: tenant, id: $0)] == nil
                }))
        guard !wanted.isEmpty else { return }
        // An id of another type, or a UUID not in the lowercase form PostgreSQL answers with,
        // is read on its own (`row`), bound as its type.
        guard let (cast, sendable) = try idArray(of: table) else { return }
        wanted = wanted.filter(sendable)
        guard !wanted.isEmpty else { return }
        // The rows read ahead are the ones the push goes on to write, with a result each: room for them at once.
        knownRows.reserveCapacity(knownRows.count + wanted.count)
        unsentRows.reserveCapacity(unsentRows.count + wanted.count)
        unsentOrder.reserveCapacity(unsentOrder.count + wanted.count)
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(wanted)
        let sql = "SELECT * FROM \(Self.quoted(table.name)) WHERE \"_tenant_id\" = $1 AND \(Self.quoted(table.primaryKey)) = ANY($2\(cast))"
        for id in wanted { knownRows[StoredRowKey(table: table, tenant: tenant, id: id)] = .some(nil) }
        for row in try await storedRows(sql, bindings) {
            guard let id = row.text(table.primaryKey) else { continue }
            knownRows[StoredRowKey(table: table, tenant: tenant, id: id)] = .some(row)
        }
    }

    /// How a table's ids go in one array parameter (`= ANY($2…)`): sent as text with the cast
    /// its key's type needs, and which ids may go (a UUID only in the lowercase form PostgreSQL
    /// answers with, so the rows found match their ids); `nil` for a key of another type.
    private func idArray(of table: ContractTable) throws -> (cast: String, sendable: (String) -> Bool)? {
        switch try catalog.columns(of: table.name).type(of: table.primaryKey) {
        case .text, .varchar: ("", { _ in true })
        case .uuid: ("::uuid[]", { UUID(uuidString: $0)?.uuidString.lowercased() == $0 })
        default: nil
        }
    }

    /// One statement for every id not known already (text and lowercase UUID keys; another id
    /// is left out of the answer, and its mutation reads its row itself).
    func scopeKeys(in table: ContractTable, tenant: String, ids: [String]) async throws -> [String: String] {
        var keys: [String: String] = [:]
        var wanted: [String] = []
        for id in Set(ids) {
            let key = StoredRowKey(table: table, tenant: tenant, id: id)
            if let row = unsentRows[key] ?? knownRows[key] ?? nil {
                if let scope = row.text("_scope_key") { keys[id] = scope }
            } else if knownRows[key] == nil {
                wanted.append(id)
            }
        }
        guard let (cast, sendable) = try idArray(of: table) else { return keys }
        wanted = wanted.filter(sendable)
        guard !wanted.isEmpty else { return keys }
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(wanted)
        let primaryKey = Self.quoted(table.primaryKey)
        let sql = """
            SELECT \(primaryKey)::text, "_scope_key" FROM \(Self.quoted(table.name))
            WHERE "_tenant_id" = $1 AND \(primaryKey) = ANY($2\(cast))
            """
        for row in try await run(sql, bindings) {
            let (id, scope) = try row.decode((String, String).self)
            keys[id] = scope
        }
        return keys
    }

    func changes(
        in tables: [ContractTable], tenant: String, scopeKey: String, after: Int64, limit: Int, byteBudget: Int, pageColumnsOnly: Bool
    ) async throws -> [(table: ContractTable, row: StoredRow)] {
        try await sendRows()
        var merged: [(sequence: Int64, table: ContractTable, row: StoredRow)] = []
        var last = Int64.max
        for table in try await tablesWithChanges(tables, tenant: tenant, scopeKey: scopeKey, after: after) {
            var bindings = PostgresBindings()
            bindings.append(tenant)
            bindings.append(scopeKey)
            bindings.append(after)
            bindings.append(Int64(limit))
            bindings.append(Int64(byteBudget))
            // The database counts each row's bytes and leaves out the rows after the one that
            // takes the table past the budget, so they never cross the connection or take memory.
            let columns = try catalog.columns(of: table.name)
            let size = Self.rowBytes(columns)
            // A page leaves out the columns it never writes (each costs a decode per row) and
            // gets their bytes instead, so a row still measures whole.
            let left = pageColumnsOnly ? Self.pageOmitted(columns) : []
            let selected = columns.types.keys.filter { !left.contains($0) }.sorted().map(Self.quoted).joined(separator: ", ")
            let leftBytes = left.isEmpty ? "" : ", \(Self.exactBytes(of: left, in: columns)) AS \"\(Self.omittedBytesColumn)\""
            let outerLeftBytes = left.isEmpty ? "" : ", \"\(Self.omittedBytesColumn)\""
            // Each row's bytes computed once (a `jsonb` column's as text), then summed in order.
            let sql = """
                SELECT \(selected)\(outerLeftBytes), "\(Self.runningBytesColumn)" FROM (
                    SELECT *, (SUM("\(Self.rowBytesColumn)") OVER (ORDER BY "_seq" ROWS UNBOUNDED PRECEDING))::bigint AS "\(Self.runningBytesColumn)"
                    FROM (
                        SELECT \(selected)\(leftBytes), \(size) AS "\(Self.rowBytesColumn)"
                        FROM \(Self.quoted(table.name))
                        WHERE "_tenant_id" = $1 AND "_scope_key" = $2 AND "_seq" > $3 ORDER BY "_seq" LIMIT $4
                    ) AS taken
                ) AS page
                WHERE "\(Self.runningBytesColumn)" - "\(Self.rowBytesColumn)" <= $5
                ORDER BY "_seq"
                """
            let page = try await run(sql, bindings)
            guard let first = page.first else { continue }
            // One layout for the page's rows: the table's columns, without those the query adds.
            let names = first.map(\.columnName)
            let kept = names.indices.filter { names[$0] != Self.runningBytesColumn && names[$0] != Self.omittedBytesColumn }
            guard let runningPosition = names.firstIndex(of: Self.runningBytesColumn) else {
                throw PostgresStorageError.unexpectedAnswer("a page of '\(table.name)' without its running bytes")
            }
            let omittedPosition = names.firstIndex(of: Self.omittedBytesColumn)
            let layout = StoredRow.Layout(kept.map { names[$0] })
            for cells in page {
                var values: [ColumnValue] = []
                values.reserveCapacity(kept.count)
                var running: Int64 = 0
                var omitted: Int64?
                for (position, cell) in cells.enumerated() {
                    let value = try PostgresValues.value(of: cell)
                    if position == runningPosition {
                        guard case .integer(let bytes) = value else { throw PostgresStorageError.unexpectedAnswer("a page's running bytes") }
                        running = bytes
                    } else if position == omittedPosition {
                        guard case .integer(let bytes) = value else { throw PostgresStorageError.unexpectedAnswer("a page's omitted bytes") }
                        omitted = bytes
                    } else {
                        values.append(value)
                    }
                }
                let row = StoredRow(
                    layout: layout, values: values, measuredBytes: omitted.map { RowSize.storedBytes(of: values) + Int($0) })
                let order = row.integer("_seq") ?? 0
                merged.append((order, table, row))
                // Past the budget: no table's rows beyond this one can be in the page.
                if running > byteBudget { last = min(last, order) }
            }
        }
        merged.sort { $0.sequence < $1.sequence }
        return StoredRow.withinBudget(merged.lazy.filter { $0.sequence <= last }.map { ($0.table, $0.row) }, limit: limit, byteBudget: byteBudget)
    }

    /// The engine's columns a pull page never writes: whose the row is, when and by whom it was
    /// last written, its clocks. Only those whose bytes the database counts exactly as
    /// ``StoredRow/storedBytes`` does (text and fixed-size values; a `jsonb` column's text is
    /// not the canonical JSON the row holds).
    private static let pageUnwritten = ["_tenant_id", "_scope_key", "_hlc", "_field_clocks", "_updated_by", "_updated_at", "_schema_version"]

    private static func pageOmitted(_ columns: PostgresCatalog.Columns) -> [String] {
        pageUnwritten.filter { name in
            switch columns.types[name] {
            case .text?, .varchar?, .int8?, .int4?, .int2?, .float8?, .float4?, .bool?, .timestamptz?: true
            default: false
            }
        }
    }

    /// The bytes of `names` as ``StoredRow/storedBytes`` counts them: a text's UTF-8 bytes, 8 for
    /// a number, a boolean or a time, 0 for NULL.
    private static func exactBytes(of names: [String], in columns: PostgresCatalog.Columns) -> String {
        let terms = names.map { name -> String in
            switch columns.types[name]! {
            case .text, .varchar: "COALESCE(octet_length(\(quoted(name))), 0)"
            default: "(CASE WHEN \(quoted(name)) IS NULL THEN 0 ELSE 8 END)"
            }
        }
        return "(" + terms.joined(separator: " + ") + ")::bigint"
    }

    /// The tables of `tables` holding rows of the scope after `after`, in one statement: a pull
    /// most often finds changes in one of its scope's tables, and an empty table's page query
    /// would cost a round trip for nothing.
    private func tablesWithChanges(_ tables: [ContractTable], tenant: String, scopeKey: String, after: Int64) async throws -> [ContractTable] {
        guard tables.count > 1 else { return tables }
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(scopeKey)
        bindings.append(after)
        let probes = tables.map { table in
            "EXISTS (SELECT 1 FROM \(Self.quoted(table.name)) WHERE \"_tenant_id\" = $1 AND \"_scope_key\" = $2 AND \"_seq\" > $3)"
        }
        guard let row = try await run("SELECT ARRAY[" + probes.joined(separator: ", ") + "]", bindings).first else {
            throw PostgresStorageError.unexpectedAnswer("no answer to which tables changed")
        }
        let changed = try row.decode([Bool].self)
        guard changed.count == tables.count else { throw PostgresStorageError.unexpectedAnswer("which tables changed: \(changed.count) answers") }
        return zip(tables, changed).filter(\.1).map(\.0)
    }

    /// The columns a page query adds: the bytes of the columns it left out, a row's bytes (only
    /// inside the query), and the bytes of the table's rows up to and including it. None is
    /// part of the stored row.
    private static let omittedBytesColumn = "_omitted_bytes"
    private static let rowBytesColumn = "_row_bytes"
    private static let runningBytesColumn = "_page_bytes"

    /// A row's bytes as ``StoredRow/storedBytes`` counts them, computed by PostgreSQL: the text
    /// of variable-length columns (JSON as text, close to what a device receives), 8 for others.
    private static func rowBytes(_ columns: PostgresCatalog.Columns) -> String {
        let terms = columns.types.keys.sorted().map { name -> String in
            switch columns.types[name]! {
            case .text, .varchar, .jsonb, .json: "COALESCE(octet_length(\(quoted(name))::text), 0)"
            case .bytea: "COALESCE(octet_length(\(quoted(name))), 0)"
            default: "8"
            }
        }
        return "(" + (terms.isEmpty ? "0" : terms.joined(separator: " + ")) + ")::bigint"
    }

    /// Reads the stored rows, then lays this transaction's unsent rows of the table over them:
    /// a lookup (a push's uniqueness check, a reducer's read) costs one statement and leaves the
    /// unsent rows to go out together, instead of sending them first, one round trip each.
    func rows(in table: ContractTable, tenant: String, where conditions: [String: ColumnValue], limit: Int) async throws -> [StoredRow] {
        if !matches.isEmpty, let answer = matchedRows(in: table, tenant: tenant, where: conditions, limit: limit) { return answer }
        let columns = try catalog.columns(of: table.name)
        let unsent = unsentOrder.filter { $0.table == table && $0.tenant == tenant }
        var bindings = PostgresBindings()
        bindings.append(tenant)
        var clauses = ["\"_tenant_id\" = $1"]
        for column in conditions.keys.sorted() {
            let value = conditions[column]!
            if value.isNull {
                // `= NULL` matches nothing, and `IS NOT DISTINCT FROM` cannot use an index.
                clauses.append("\(Self.quoted(column)) IS NULL")
            } else {
                try PostgresValues.bind(value, as: columns.type(of: column), into: &bindings)
                clauses.append("\(Self.quoted(column)) = $\(bindings.count)")
            }
        }
        // Stored rows an unsent version replaces may no longer match: read enough to fill the
        // limit without them.
        bindings.append(Int64(min(Int(Int32.max), limit + unsent.count)))
        let sql =
            "SELECT * FROM \(Self.quoted(table.name)) WHERE \(clauses.joined(separator: " AND ")) "
            + "ORDER BY \(Self.quoted(table.primaryKey)) LIMIT $\(bindings.count)"
        let stored = try await storedRows(sql, bindings)
        guard !unsent.isEmpty else { return stored }
        return Self.overlay(stored, in: table, tenant: tenant, where: conditions, limit: limit, newer: { self.unsentRows[$0] }, others: unsent)
    }

    /// `stored` with this transaction's newer version of each row laid over it (kept only while
    /// it still matches `conditions`), and those of `others` (rows it wrote) that match, in
    /// primary-key order (bytes), at most `limit`.
    private static func overlay(
        _ stored: [StoredRow], in table: ContractTable, tenant: String, where conditions: [String: ColumnValue], limit: Int,
        newer: (StoredRowKey) -> StoredRow?, others: some Sequence<StoredRowKey>
    ) -> [StoredRow] {
        var merged: [StoredRow] = []
        var seen: Set<StoredRowKey> = []
        for row in stored {
            guard let id = row.text(table.primaryKey) else { continue }
            let key = StoredRowKey(table: table, tenant: tenant, id: id)
            seen.insert(key)
            if let newer = newer(key) {
                if Self.row(newer, matches: conditions) { merged.append(newer) }
            } else {
                merged.append(row)
            }
        }
        for key in others where seen.insert(key).inserted {
            if let row = newer(key), Self.row(row, matches: conditions) { merged.append(row) }
        }
        merged.sort { ($0.text(table.primaryKey) ?? "").utf8.lexicographicallyPrecedes(($1.text(table.primaryKey) ?? "").utf8) }
        return Array(merged.prefix(limit))
    }

    /// A lookup's key among the ones read ahead: columns sorted, values compared byte for byte.
    private struct MatchKey: Hashable {
        var table: String
        var tenant: String
        var columns: [String]
        var values: [ExactValue]

        init(table: String, tenant: String, conditions: [(column: String, value: ColumnValue)]) {
            // Thousands are made per push: the columns usually come sorted already.
            let inOrder = zip(conditions, conditions.dropFirst()).allSatisfy { $0.column < $1.column }
            let sorted = inOrder ? conditions : conditions.sorted { $0.column < $1.column }
            self.table = table
            self.tenant = tenant
            columns = sorted.map(\.column)
            values = sorted.map { ExactValue($0.value) }
        }
    }

    /// A column value whose text is equal only to the same bytes, as PostgreSQL's `=` has it
    /// (Swift's `String` equality is Unicode equivalence).
    private struct ExactValue: Hashable {
        var value: ColumnValue

        init(_ value: ColumnValue) { self.value = value }

        static func == (left: ExactValue, right: ExactValue) -> Bool {
            switch (left.value, right.value) {
            case (.text(let a), .text(let b)): a.utf8.elementsEqual(b.utf8)
            case (let a, let b): a == b
            }
        }

        func hash(into hasher: inout Hasher) {
            switch value {
            case .text(let text):
                hasher.combine(0)
                // The bytes at once: a byte at a time was most of a push's uniqueness bookkeeping.
                hasher.combine(text.utf8.count)
                let hashed: Void? = text.utf8.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
                if hashed == nil { Array(text.utf8).withUnsafeBytes { hasher.combine(bytes: $0) } }
            default: hasher.combine(value)
            }
        }
    }

    /// Reads the stored rows holding each key in one statement per call: the keys go as one
    /// text array per column, joined to the table on its columns (cast to their types), which
    /// takes the unique index they belong to. Only text and integer columns, whose values read
    /// back exactly as they were sent, are read ahead; other keys are looked up when asked.
    func prefetchMatches(in table: ContractTable, tenant: String, columns: [String], keys: [[ColumnValue]]) async throws {
        let types = try catalog.columns(of: table.name)
        var casts: [String] = []
        for column in columns {
            switch try types.type(of: column) {
            case .text, .varchar: casts.append("text")
            case .int8: casts.append("bigint")
            case .int4: casts.append("integer")
            default: return
            }
        }
        var wanted: [MatchKey: [ColumnValue]] = [:]
        wanted.reserveCapacity(keys.count)
        matches.reserveCapacity(matches.count + keys.count)
        writtenByMatch.reserveCapacity(writtenByMatch.count + keys.count)
        for values in keys where values.count == columns.count && !values.contains(.null) {
            let key = MatchKey(table: table.name, tenant: tenant, conditions: Array(zip(columns, values)))
            if matches[key] == nil { wanted[key] = values }
        }
        // A key a row read ahead holds is held by that row alone (the index is unique): an
        // update that keeps its row's unique values needs no lookup.
        for (rowKey, known) in knownRows where rowKey.table == table && rowKey.tenant == tenant && !wanted.isEmpty {
            guard let row = known else { continue }
            let key = MatchKey(table: table.name, tenant: tenant, conditions: columns.map { ($0, row[$0]) })
            if wanted.removeValue(forKey: key) != nil { matches[key] = [row] }
        }
        guard !wanted.isEmpty else {
            matchColumns[table.name, default: []].insert(columns.sorted())
            return
        }
        // Rows written before the read ahead would be missing from `written`: send them first.
        try await sendRows()
        var bindings = PostgresBindings()
        bindings.append(tenant)
        var joins: [String] = []
        for (position, column) in columns.enumerated() {
            let texts: [String] = wanted.values.map { values in
                switch values[position] {
                case .text(let text): text
                case .integer(let number): String(number)
                default: ""
                }
            }
            bindings.append(texts)
            joins.append("t.\(Self.quoted(column)) = k.c\(position)::\(casts[position])")
        }
        let unnest = columns.indices.map { "$\($0 + 2)::text[]" }.joined(separator: ", ")
        let names = columns.indices.map { "c\($0)" }.joined(separator: ", ")
        let sql = """
            SELECT t.* FROM \(Self.quoted(table.name)) AS t JOIN UNNEST(\(unnest)) AS k(\(names))
            ON \(joins.joined(separator: " AND ")) WHERE t."_tenant_id" = $1
            """
        let found = try await storedRows(sql, bindings)
        var byKey: [MatchKey: [StoredRow]] = [:]
        for row in found {
            let key = MatchKey(table: table.name, tenant: tenant, conditions: columns.map { ($0, row[$0]) })
            byKey[key, default: []].append(row)
        }
        for key in wanted.keys { matches[key] = byKey[key] ?? [] }
        matchColumns[table.name, default: []].insert(columns.sorted())
    }

    /// A lookup answered from the rows read ahead, with this transaction's writes laid over
    /// them; `nil` when its key was not read ahead.
    private func matchedRows(in table: ContractTable, tenant: String, where conditions: [String: ColumnValue], limit: Int) -> [StoredRow]? {
        let key = MatchKey(table: table.name, tenant: tenant, conditions: conditions.map { ($0.key, $0.value) })
        guard let stored = matches[key] else { return nil }
        let ownWrites = written[table.name] ?? [:]
        let others = writtenByMatch[key] ?? []
        // The usual uniqueness check: at most the row itself holds the values, and nothing this
        // transaction wrote does; what `overlay` answers, without its set and sort.
        if others.isEmpty, stored.count <= 1 {
            guard limit > 0, let row = stored.first, let id = row.text(table.primaryKey) else { return [] }
            guard let newer = ownWrites[StoredRowKey(table: table, tenant: tenant, id: id)] else { return [row] }
            return Self.row(newer, matches: conditions) ? [newer] : []
        }
        return Self.overlay(stored, in: table, tenant: tenant, where: conditions, limit: limit, newer: { ownWrites[$0] }, others: others)
    }

    /// Whether a row's columns equal `conditions`, text compared byte for byte as PostgreSQL's
    /// `=` does (not by Unicode equivalence, as Swift's `String` does).
    private static func row(_ row: StoredRow, matches conditions: [String: ColumnValue]) -> Bool {
        conditions.allSatisfy { column, value in
            switch (row[column], value) {
            case (.text(let stored), .text(let wanted)): stored.utf8.elementsEqual(wanted.utf8)
            case (let stored, let wanted): stored == wanted
            }
        }
    }

    func lastSequence(tenant: String, clientID: String) async throws -> Int64 {
        if let locked = clients[Key(tenant: tenant, name: clientID)] { return locked }
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(clientID)
        return try integer(await run("SELECT last_seq FROM clients WHERE tenant = $1 AND client_id = $2", bindings)) ?? 0
    }

    func clientOwner(tenant: String, clientID: String) async throws -> ClientOwner? {
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(clientID)
        let rows = try await run("SELECT user_id, device_id FROM clients WHERE tenant = $1 AND client_id = $2", bindings)
        guard let row = rows.first.map(Array.init), row.count == 2, case .text(let userID) = try PostgresValues.value(of: row[0]),
            case .text(let deviceID) = try PostgresValues.value(of: row[1])
        else { return nil }
        return ClientOwner(userID: userID, deviceID: deviceID)
    }

    // MARK: Identity held by the server

    func identityState(tenant: String, userID: String, deviceID: String) async throws -> IdentityState {
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(deviceID)
        bindings.append(userID)
        // One round trip: the revocation and the teams together.
        let rows = try await run(
            """
            SELECT (SELECT MAX(revoked_at) FROM revocations
                    WHERE tenant = $1 AND ((kind = 'device' AND subject = $2) OR (kind = 'user' AND subject = $3))),
                   ARRAY(SELECT team_id FROM team_members WHERE tenant = $1 AND user_id = $3 ORDER BY team_id),
                   (SELECT erased_at FROM erasures WHERE tenant = $1 AND user_id = $3)
            """, bindings)
        guard let row = rows.first else { return IdentityState(revokedAt: nil, teams: []) }
        let (revokedAt, teams, erasedAt) = try row.decode((Int64?, [String], Int64?).self)
        return IdentityState(revokedAt: revokedAt, teams: teams, erasedAt: erasedAt)
    }

    func revocations(tenant: String) async throws -> [Revocation] {
        var bindings = PostgresBindings()
        bindings.append(tenant)
        return try await run("SELECT kind, subject, revoked_at FROM revocations WHERE tenant = $1 ORDER BY kind, subject", bindings)
            .compactMap { row in
                let (kind, subject, revokedAt) = try row.decode((String, String, Int64).self)
                return RevocationKind(rawValue: kind).map { Revocation(kind: $0, subject: subject, revokedAt: revokedAt) }
            }
    }

    func clients(tenant: String, ownedBy userID: String) async throws -> [ClientRecord] {
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(userID)
        return try await run(
            "SELECT client_id, user_id, device_id, last_seq, updated_at FROM clients WHERE tenant = $1 AND user_id = $2 ORDER BY client_id",
            bindings
        ).map { row in
            let (clientID, user, device, lastSeq, updatedAt) = try row.decode((String, String?, String?, Int64, Int64).self)
            let owner = user.flatMap { user in device.map { ClientOwner(userID: user, deviceID: $0) } }
            return ClientRecord(clientID: clientID, owner: owner, lastSeq: lastSeq, updatedAt: updatedAt)
        }
    }

    func urgentChanges(tenant: String, scopeKey: String, after: Int64, limit: Int) async throws -> [UrgentChange] {
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(scopeKey)
        bindings.append(after)
        bindings.append(Int64(limit))
        return try await run(
            """
            SELECT table_name, row_id, MAX(seq) AS seq FROM urgent_changes
            WHERE tenant = $1 AND scope_key = $2 AND seq > $3 GROUP BY table_name, row_id ORDER BY MAX(seq) LIMIT $4
            """, bindings
        ).map { row in
            let (table, rowID, sequence) = try row.decode((String, String, Int64).self)
            return UrgentChange(table: table, rowID: rowID, sequence: sequence)
        }
    }

    func deleteRow(in table: ContractTable, tenant: String, id: String) async throws {
        try await sendRows()
        knownRows.removeValue(forKey: StoredRowKey(table: table, tenant: tenant, id: id))
        // A lookup read ahead may name the row: the table's are read again when asked.
        if !matches.isEmpty {
            matches = matches.filter { $0.key.table != table.name }
            matchColumns[table.name] = nil
        }
        let columns = try catalog.columns(of: table.name)
        var bindings = PostgresBindings()
        bindings.append(tenant)
        try PostgresValues.bind(.text(id), as: columns.type(of: table.primaryKey), into: &bindings)
        try await run("DELETE FROM \(Self.quoted(table.name)) WHERE \"_tenant_id\" = $1 AND \(Self.quoted(table.primaryKey)) = $2", bindings)
    }

    func deletePushResults(tenant: String, ownedBy userID: String) async throws -> Int {
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(userID)
        return try await run(
            """
            WITH gone AS (
                DELETE FROM push_results WHERE tenant = $1
                AND client_id IN (SELECT client_id FROM clients WHERE tenant = $1 AND user_id = $2) RETURNING 1
            ) SELECT COUNT(*) FROM gone
            """, bindings
        ).first.map { try Int($0.decode(Int64.self)) } ?? 0
    }

    func recordErasure(tenant: String, userID: String, at: Int64) async throws {
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(userID)
        bindings.append(at)
        try await run(
            """
            INSERT INTO erasures (tenant, user_id, erased_at) VALUES ($1, $2, $3)
            ON CONFLICT (tenant, user_id) DO UPDATE SET erased_at = GREATEST(erasures.erased_at, excluded.erased_at)
            """, bindings)
        var member = PostgresBindings()
        member.append(tenant)
        member.append(userID)
        try await run("DELETE FROM team_members WHERE tenant = $1 AND user_id = $2", member)
        var streams = PostgresBindings()
        streams.append(at * 1000)
        streams.append(tenant)
        streams.append(userID)
        try await run("UPDATE clients SET updated_at = $1 WHERE tenant = $2 AND user_id = $3", streams)
    }

    func pruneUrgentChanges(markedBefore: Int64, limit: Int) async throws -> Int {
        var bindings = PostgresBindings()
        bindings.append(markedBefore)
        bindings.append(Int64(limit))
        return try await run(
            """
            WITH gone AS (
                DELETE FROM urgent_changes WHERE ctid IN (
                    SELECT ctid FROM urgent_changes WHERE marked_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)
                RETURNING 1
            ) SELECT COUNT(*) FROM gone
            """, bindings
        ).first.map { try Int($0.decode(Int64.self)) } ?? 0
    }

    func markUrgent(_ change: UrgentChange, tenant: String, scopeKey: String, at: Int64) async throws {
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(scopeKey)
        bindings.append(change.sequence)
        bindings.append(change.table)
        bindings.append(change.rowID)
        bindings.append(at)
        try await run(
            """
            INSERT INTO urgent_changes (tenant, scope_key, seq, table_name, row_id, marked_at) VALUES ($1, $2, $3, $4, $5, $6)
            ON CONFLICT (tenant, scope_key, seq) DO UPDATE SET table_name = excluded.table_name, row_id = excluded.row_id, marked_at = excluded.marked_at
            """, bindings)
    }

    func teamMemberships(tenant: String) async throws -> [(team: String, user: String)] {
        var bindings = PostgresBindings()
        bindings.append(tenant)
        return try await run("SELECT team_id, user_id FROM team_members WHERE tenant = $1 ORDER BY team_id, user_id", bindings).map { row in
            let (team, user) = try row.decode((String, String).self)
            return (team: team, user: user)
        }
    }

    func revoke(tenant: String, kind: RevocationKind, subject: String, at: Int64) async throws {
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(kind.rawValue)
        bindings.append(subject)
        bindings.append(at)
        try await run(
            """
            INSERT INTO revocations (tenant, kind, subject, revoked_at) VALUES ($1, $2, $3, $4)
            ON CONFLICT (tenant, kind, subject) DO UPDATE SET revoked_at = GREATEST(revocations.revoked_at, excluded.revoked_at)
            """, bindings)
    }

    func setTeamMembership(tenant: String, team: String, userID: String, isMember: Bool) async throws -> Bool {
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(team)
        bindings.append(userID)
        // RETURNING says whether a row was added or removed, in the same round trip.
        if isMember {
            return try await !run(
                "INSERT INTO team_members (tenant, team_id, user_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING 1", bindings
            ).isEmpty
        } else {
            return try await !run("DELETE FROM team_members WHERE tenant = $1 AND team_id = $2 AND user_id = $3 RETURNING 1", bindings).isEmpty
        }
    }

    func auditHead() async throws -> AuditHead? {
        guard let row = try await storedRows("SELECT * FROM audit_head WHERE singleton", PostgresBindings()).first else { return nil }
        let baseID = row.integer("base_id") ?? 0
        let base =
            baseID > 0
            ? AuditBase(lastID: baseID, lastHash: row.text("base_hash") ?? AuditChain.genesis, seal: row.text("base_seal") ?? "") : nil
        return AuditHead(
            lastID: row.integer("last_id") ?? 0, lastHash: row.text("last_hash") ?? AuditChain.genesis, keyedFrom: row.integer("keyed_from") ?? 1,
            keyFingerprint: row.text("key_fingerprint"), seal: row.text("seal"), detailsFrom: row.integer("details_from"), base: base
        )
    }

    func wrappedAuditUserKey(tenant: String, userID: String) async throws -> String? {
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(userID)
        let rows = try await run("SELECT wrapped_key FROM audit_user_keys WHERE tenant = $1 AND user_id = $2", bindings)
        guard let cell = rows.first?.first, case .text(let text) = try PostgresValues.value(of: cell) else { return nil }
        return text
    }

    func eraseAuditDetails(tenant: String, userID: String) async throws -> Int {
        userKeys[Key(tenant: tenant, name: userID)] = nil
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(userID)
        let deleted = try await run("DELETE FROM audit_user_keys WHERE tenant = $1 AND user_id = $2 RETURNING wrapped_key", bindings)
        guard let cell = deleted.first?.first, case .text(let wrapped) = try PostgresValues.value(of: cell) else { return 0 }
        let keyID = AuditDetails.keyID(of: try AuditDetails.unwrap(wrapped, tenant: tenant, userID: userID, key: auditKey))
        // The entries encrypted under that key (not those of a key erased before).
        bindings.append(AuditDetails.prefix + keyID + ":%")
        return Int(try integer(await run("SELECT COUNT(*) FROM audit_log WHERE tenant = $1 AND user_id = $2 AND detail LIKE $3", bindings)) ?? 0)
    }

    func moveAuditBase(from previous: AuditBase, to base: AuditBase) async throws -> Int {
        // The head's row lock: one archive at a time, and none while entries are chained.
        let head = try await storedRows("SELECT base_id, base_hash FROM audit_head WHERE singleton FOR UPDATE", PostgresBindings()).first
        var hashBindings = PostgresBindings()
        hashBindings.append(base.lastID)
        let archived = try await run("SELECT hash FROM audit_log WHERE id = $1", hashBindings).first?.first
        guard let head, head.integer("base_id") == previous.lastID, head.text("base_hash") == previous.lastHash,
            let archived, case .text(let hash) = try PostgresValues.value(of: archived), hash == base.lastHash
        else { throw AuditArchiveError.baseMoved }
        let deleted = try await run("DELETE FROM audit_log WHERE id <= $1 RETURNING 1", hashBindings).count
        var bindings = PostgresBindings()
        bindings.append(base.lastID)
        bindings.append(base.lastHash)
        bindings.append(base.seal)
        try await run("UPDATE audit_head SET base_id = $1, base_hash = $2, base_seal = $3 WHERE singleton", bindings)
        return deleted
    }

    func pushResults(tenant: String, clientID: String, covering seq: Int64) async throws -> PushResultRecord? {
        let client = Key(tenant: tenant, name: clientID)
        if let pending = pushResults.last(where: { $0.client == client && $0.record.firstSeq <= seq && seq <= $0.record.lastSeq }) {
            return pending.record
        }
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(clientID)
        bindings.append(seq)
        // The record starting at or before `seq` closest to it; it covers `seq` unless `seq` lies past its end.
        let rows = try await run(
            """
            SELECT first_seq, last_seq, results FROM push_results
            WHERE tenant = $1 AND client_id = $2 AND first_seq <= $3 ORDER BY first_seq DESC LIMIT 1
            """, bindings)
        guard let row = rows.first else { return nil }
        let (first, last, results) = try row.decode((Int64, Int64, String).self)
        guard seq <= last else { return nil }
        return try PushResultRecord(firstSeq: first, storedText: results)
    }

    func scopeSequence(tenant: String, scopeKey: String) async throws -> Int64 {
        if let locked = scopes[Key(tenant: tenant, name: scopeKey)] { return locked }
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(scopeKey)
        return try integer(await run("SELECT last_seq FROM scope_sequences WHERE tenant = $1 AND scope_key = $2", bindings)) ?? 0
    }

    func pullState(tenant: String, scopeKey: String, clientID: String?) async throws -> PullState {
        // One statement for the three reads, unless this transaction holds newer values of its own.
        if let clientID, clients[Key(tenant: tenant, name: clientID)] != nil {
            return PullState(
                compactedSequence: try await compactedSequence(tenant: tenant, scopeKey: scopeKey),
                owner: try await clientOwner(tenant: tenant, clientID: clientID),
                lastSequence: try await lastSequence(tenant: tenant, clientID: clientID)
            )
        }
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(scopeKey)
        bindings.append(clientID)
        let rows = try await run(
            """
            SELECT (SELECT compacted_seq FROM scope_sequences WHERE tenant = $1 AND scope_key = $2), c.user_id, c.device_id, c.last_seq
            FROM (SELECT 1) AS one LEFT JOIN clients c ON c.tenant = $1 AND c.client_id = $3
            """, bindings)
        guard let row = rows.first else { throw PostgresStorageError.unexpectedAnswer("no pull state") }
        let (compacted, userID, deviceID, lastSeq) = try row.decode((Int64?, String?, String?, Int64?).self)
        let owner = userID.flatMap { user in deviceID.map { ClientOwner(userID: user, deviceID: $0) } }
        return PullState(compactedSequence: compacted ?? 0, owner: owner, lastSequence: lastSeq ?? 0)
    }

    func compactedSequence(tenant: String, scopeKey: String) async throws -> Int64 {
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(scopeKey)
        return try integer(await run("SELECT compacted_seq FROM scope_sequences WHERE tenant = $1 AND scope_key = $2", bindings)) ?? 0
    }

    func auditEntries(after afterID: Int64, limit: Int) async throws -> [AuditEntry] {
        var bindings = PostgresBindings()
        bindings.append(afterID)
        bindings.append(Int64(limit))
        let sql = """
            SELECT id, tenant, recorded_at, user_id, device_id, entity, row_id, operation, outcome, detail, previous_hash, hash
            FROM audit_log WHERE id > $1 ORDER BY id LIMIT $2
            """
        return try await storedRows(sql, bindings).map(Self.auditEntry)
    }

    func serverTableQuery(_ sql: String, _ arguments: [ColumnValue]) async throws -> [StoredRow] {
        var bindings = PostgresBindings()
        for argument in arguments {
            switch argument {
            case .null: bindings.appendNull()
            case .integer(let number): bindings.append(number)
            case .real(let number): bindings.append(number)
            case .text(let text): bindings.append(text)
            case .blob(let data): bindings.append(ByteBuffer(bytes: data))
            }
        }
        // `?` placeholders become `$1`, `$2`…: the statements are the storages' shared SQL.
        var numbered = ""
        var index = 0
        for character in sql {
            if character == "?" {
                index += 1
                numbered += "$\(index)"
            } else {
                numbered.append(character)
            }
        }
        return try await storedRows(numbered, bindings)
    }

    func auditEntries(tenant: String, after afterID: Int64, limit: Int) async throws -> [AuditEntry] {
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(afterID)
        bindings.append(Int64(limit))
        let sql = """
            SELECT id, tenant, recorded_at, user_id, device_id, entity, row_id, operation, outcome, detail, previous_hash, hash
            FROM audit_log WHERE tenant = $1 AND id > $2 ORDER BY id LIMIT $3
            """
        return try await storedRows(sql, bindings).map(Self.auditEntry)
    }

    func auditEntries(tenant: String, userID: String, after afterID: Int64, limit: Int) async throws -> [AuditEntry] {
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(userID)
        bindings.append(afterID)
        bindings.append(Int64(limit))
        let sql = """
            SELECT id, tenant, recorded_at, user_id, device_id, entity, row_id, operation, outcome, detail, previous_hash, hash
            FROM audit_log WHERE tenant = $1 AND user_id = $2 AND id > $3 ORDER BY id LIMIT $4
            """
        return try await storedRows(sql, bindings).map(Self.auditEntry)
    }

    private static func auditEntry(_ row: StoredRow) -> AuditEntry {
        AuditEntry(
            id: row.integer("id") ?? 0, tenant: row.text("tenant") ?? "", recordedAt: row.integer("recorded_at") ?? 0,
            userID: row.text("user_id") ?? "", deviceID: row.text("device_id") ?? "", entity: row.text("entity") ?? "",
            rowID: row.text("row_id") ?? "", operation: AuditOperation(rawValue: row.text("operation") ?? ""),
            outcome: AuditOutcome(rawValue: row.text("outcome") ?? ""),
            detail: row.text("detail") ?? "", previousHash: row.text("previous_hash") ?? "", hash: row.text("hash") ?? ""
        )
    }

    // MARK: - Locks and counters

    func lockClient(tenant: String, clientID: String, owner: ClientOwner) async throws -> ClientLock {
        let key = Key(tenant: tenant, name: clientID)
        // Locked earlier in this transaction, which checked the owner then.
        if let locked = clients[key] { return .owned(lastSeq: locked) }
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(clientID)
        bindings.append(Self.nowMilliseconds())
        bindings.append(owner.userID)
        bindings.append(owner.deviceID)
        // The update takes the row lock; a concurrent holder is waited for, then its committed
        // `last_seq` is what comes back. A stream without an owner (recorded before owners were)
        // is claimed by the caller; an owned one keeps its owner, which the caller compares.
        let rows = try await run(
            """
            INSERT INTO clients (tenant, client_id, last_seq, updated_at, user_id, device_id) VALUES ($1, $2, 0, $3, $4, $5)
            ON CONFLICT (tenant, client_id) DO UPDATE SET last_seq = clients.last_seq,
                user_id = COALESCE(clients.user_id, excluded.user_id),
                device_id = CASE WHEN clients.user_id IS NULL THEN excluded.device_id ELSE clients.device_id END
            RETURNING last_seq, user_id, device_id
            """, bindings)
        guard let row = rows.first.map(Array.init), row.count == 3 else { throw PostgresStorageError.unexpectedAnswer("clients") }
        guard case .integer(let last) = try PostgresValues.value(of: row[0]),
            case .text(let userID) = try PostgresValues.value(of: row[1]),
            case .text(let deviceID) = try PostgresValues.value(of: row[2])
        else { throw PostgresStorageError.unexpectedAnswer("clients") }
        guard ClientOwner(userID: userID, deviceID: deviceID) == owner else { return .ownedByOther }
        clients[key] = last
        return .owned(lastSeq: last)
    }

    func lockScope(tenant: String, scopeKey: String) async throws {
        _ = try await lockedScope(Key(tenant: tenant, name: scopeKey))
    }

    private func lockedScope(_ key: Key) async throws -> Int64 {
        if let locked = scopes[key] { return locked }
        var bindings = PostgresBindings()
        bindings.append(key.tenant)
        bindings.append(key.name)
        let last =
            try integer(
                await run(
                    """
                    INSERT INTO scope_sequences (tenant, scope_key, last_seq) VALUES ($1, $2, 0)
                    ON CONFLICT (tenant, scope_key) DO UPDATE SET last_seq = scope_sequences.last_seq RETURNING last_seq
                    """, bindings)) ?? 0
        scopes[key] = last
        return last
    }

    func nextScopeSequence(tenant: String, scopeKey: String) async throws -> Int64 {
        let key = Key(tenant: tenant, name: scopeKey)
        let next = try await lockedScope(key) + 1
        scopes[key] = next
        movedScopes.insert(key)
        return next
    }

    // MARK: - Writes

    func upsert(_ row: StoredRow, in table: ContractTable) async throws {
        guard let id = row.text(table.primaryKey), let tenant = row.text("_tenant_id") else {
            throw PostgresStorageError.unsupportedValue("a row of '\(table.name)' without its tenant or primary key")
        }
        let key = StoredRowKey(table: table, tenant: tenant, id: id)
        if !matches.isEmpty, let columnSets = matchColumns[table.name] {
            written[table.name, default: [:]][key] = row
            for columns in columnSets {
                writtenByMatch[MatchKey(table: table.name, tenant: tenant, conditions: columns.map { ($0, row[$0]) }), default: []].append(key)
            }
        }
        let known = knownRows.removeValue(forKey: key)
        if unsentRows.updateValue(row, forKey: key) == nil {
            unsentOrder.append(key)
            if case .some(.none) = known { absentRows.insert(key) }
        }
    }

    func insertIfAbsent(_ row: StoredRow, in table: ContractTable) async throws -> Bool {
        try await sendRows()
        if let id = row.text(table.primaryKey), let tenant = row.text("_tenant_id") {
            knownRows.removeValue(forKey: StoredRowKey(table: table, tenant: tenant, id: id))
        } else {
            knownRows.removeAll()
        }
        let (sql, bindings) = try insert([row], in: table, mode: .ignoring)
        sentRowCounts[table.name, default: 0] += 1
        return try await !run(sql, bindings).isEmpty
    }

    /// Sends the unsent rows, table by table, in statements of at most a few thousand values.
    private func sendRows() async throws {
        guard !unsentOrder.isEmpty else { return }
        let order = unsentOrder, rows = unsentRows, absent = absentRows
        unsentOrder = []
        unsentRows = [:]
        absentRows = []
        var batch: [StoredRow] = []
        var batchTable: ContractTable?
        var batchColumns: [String] = []
        var batchAbsent = false
        // Rows built on one shared layout (a push's rows of one contract) have the batch's
        // columns without sorting their names again.
        var batchLayout: StoredRow.Layout?
        func send() async throws {
            guard let table = batchTable, !batch.isEmpty else { return }
            defer { batch = [] }
            sentRowCounts[table.name, default: 0] += batch.count
            if batchAbsent {
                let (sql, bindings) = try insert(batch, in: table, mode: .new)
                _ = try await run(sql, bindings)
                return
            }
            let (sql, bindings) = try insert(batch, in: table, mode: .replacing)
            // Each row comes back unless the id is stored in another scope.
            if try await run(sql, bindings).count != batch.count { throw PostgresStorageError.rowInAnotherScope(table: table.name) }
        }
        for key in order {
            let row = rows[key]!
            let isAbsent = absent.contains(key)
            var sameColumns =
                key.table == batchTable && isAbsent == batchAbsent
                && (row.layout === batchLayout || row.columnNames.sorted() == batchColumns)
            if sameColumns { batchLayout = row.layout }
            if sameColumns, (batch.count + 1) * batchColumns.count > 30_000 { sameColumns = false }
            if !sameColumns {
                try await send()
                batchTable = key.table
                batchColumns = row.columnNames.sorted()
                batchLayout = row.layout
                batchAbsent = isAbsent
            }
            batch.append(row)
        }
        try await send()
    }

    /// `INSERT … VALUES (…), (…)` for rows with the same columns, `ON CONFLICT …` as `mode` says.
    private func insert(_ rows: [StoredRow], in table: ContractTable, mode: PostgresCatalog.InsertMode) throws -> (String, PostgresBindings) {
        var columns = try SentColumns(of: rows[0], in: table, catalog: catalog)
        var bindings = PostgresBindings(capacity: columns.names.count * rows.count)
        for row in rows {
            for (index, position) in columns.positions(in: row).enumerated() {
                try PostgresValues.bind(row.value(at: position), as: columns.types[index], into: &bindings)
            }
        }
        let (head, tail) = catalog.insertClauses(table: table, columns: columns.names, mode: mode)
        return (head + catalog.valueTuples(rows: rows.count, width: columns.names.count) + tail, bindings)
    }

    /// The columns rows with the same names are sent in (sorted) with their types, and where
    /// each row holds them: each column's type and each layout's positions found once, not per
    /// row and column.
    private struct SentColumns {
        let names: [String]
        let types: [PostgresDataType]
        private var layout: StoredRow.Layout?
        private var layoutPositions: [Int] = []

        init(of row: StoredRow, in table: ContractTable, catalog: PostgresCatalog) throws {
            let columns = try catalog.columns(of: table.name)
            names = row.columnNames.sorted()
            types = try names.map { try columns.type(of: $0) }
        }

        /// The positions of ``names`` in `row`.
        mutating func positions(in row: StoredRow) -> [Int] {
            if row.layout !== layout {
                layout = row.layout
                layoutPositions = names.map { row.layout.position(of: $0)! }
            }
            return layoutPositions
        }
    }

    func recordPushResults(tenant: String, clientID: String, _ record: PushResultRecord, recordedAt: Int64) async throws {
        guard !record.results.isEmpty else { return }
        let key = Key(tenant: tenant, name: clientID)
        pushResults.append(PushResultRow(client: key, record: record, recordedAt: recordedAt))
        clients[key] = record.lastSeq
        movedClients.insert(key)
    }

    func appendAudit(_ entry: AuditEntry) async throws {
        audit.append(entry)
    }
    func acknowledgePushResults(tenant: String, clientID: String, through seq: Int64) async throws {
        // Written by finish() with the client's row (locked by lockClient): no round trip of its own.
        let key = Key(tenant: tenant, name: clientID)
        acknowledged[key] = max(acknowledged[key] ?? 0, seq)
    }

    func prunePushResults(recordedBefore: Int64, limit: Int) async throws -> Int {
        var bindings = PostgresBindings()
        bindings.append(recordedBefore)
        bindings.append(Int64(limit))
        // Results are only ever inserted, so a concurrent housekeeper is the only other deleter:
        // rows it holds are skipped rather than waited for.
        let rows = try await run(
            """
            DELETE FROM push_results WHERE (tenant, client_id, first_seq) IN (
                SELECT p.tenant, p.client_id, p.first_seq FROM push_results p
                JOIN clients c ON c.tenant = p.tenant AND c.client_id = p.client_id
                WHERE p.last_seq <= c.acked_seq AND p.recorded_at < $1 LIMIT $2 FOR UPDATE OF p SKIP LOCKED)
            RETURNING 1
            """, bindings)
        return rows.count
    }

    func tombstones(in table: ContractTable, updatedBefore: Int64, limit: Int) async throws -> [Tombstone] {
        // `_deleted` is a BOOLEAN and `_updated_at` a TIMESTAMPTZ in PostgreSQL.
        try await sendRows()
        var bindings = PostgresBindings()
        bindings.append(updatedBefore)
        bindings.append(Int64(limit))
        let sql = """
            SELECT "_tenant_id", "_scope_key", "_seq" FROM \(Self.quoted(table.name))
            WHERE "_deleted" AND "_updated_at" < to_timestamp($1::BIGINT / 1000.0) LIMIT $2
            """
        return try await run(sql, bindings).map { row in
            let (tenant, scopeKey, seq) = try row.decode((String, String, Int64).self)
            return Tombstone(tenant: tenant, scopeKey: scopeKey, seq: seq)
        }
    }

    func deleteTombstones(_ tombstones: [Tombstone], in table: ContractTable, updatedBefore: Int64) async throws -> [Tombstone] {
        guard !tombstones.isEmpty else { return [] }
        try await sendRows()
        knownRows.removeAll()
        var bindings = PostgresBindings()
        bindings.append(tombstones.map(\.tenant))
        bindings.append(tombstones.map(\.scopeKey))
        bindings.append(tombstones.map(\.seq))
        bindings.append(updatedBefore)
        let sql = """
            DELETE FROM \(Self.quoted(table.name))
            WHERE ("_tenant_id", "_scope_key", "_seq") IN (SELECT * FROM UNNEST($1::TEXT[], $2::TEXT[], $3::BIGINT[]))
                AND "_deleted" AND "_updated_at" < to_timestamp($4::BIGINT / 1000.0)
            RETURNING "_tenant_id", "_scope_key", "_seq"
            """
        return try await run(sql, bindings).map { row in
            let (tenant, scopeKey, seq) = try row.decode((String, String, Int64).self)
            return Tombstone(tenant: tenant, scopeKey: scopeKey, seq: seq)
        }
    }

    func raiseCompactedSequence(tenant: String, scopeKey: String, to seq: Int64) async throws {
        var bindings = PostgresBindings()
        bindings.append(tenant)
        bindings.append(scopeKey)
        bindings.append(seq)
        try await run(
            """
            INSERT INTO scope_sequences (tenant, scope_key, last_seq, compacted_seq) VALUES ($1, $2, $3, $3)
            ON CONFLICT (tenant, scope_key) DO UPDATE SET compacted_seq = GREATEST(scope_sequences.compacted_seq, excluded.compacted_seq)
            """, bindings)
    }

    /// Writes what was kept in memory: moved counters, stored results, and the audit entries,
    /// chained under the head's lock. Called once, just before the commit.
    func finish() async throws {
        try await sendRows()
        guard !audit.isEmpty else {
            var bindings = PostgresBindings()
            guard let positions = positionClauses(&bindings) else { return }
            try await run("WITH \(positions) SELECT count(*) FROM notified", bindings)
            return
        }
        let head = try await writePositionsAndLockAuditHead()
        try sealAuditDetails()
        try await chainAudit(after: head)
    }

    /// The `WITH` clauses that write the moved scopes' sequences and their notification (read
    /// from `notified`: a `SELECT` clause runs only when read), the push results and the clients'
    /// positions; `nil` when there is nothing to write.
    private func positionClauses(_ bindings: inout PostgresBindings) -> String? {
        let order = { (left: Key, right: Key) in (left.tenant, left.name) < (right.tenant, right.name) }
        let scopeKeys = movedScopes.sorted(by: order)
        let clientKeys = movedClients.union(acknowledged.keys).filter { clients[$0] != nil }.sorted(by: order)
        guard !scopeKeys.isEmpty || !pushResults.isEmpty || !clientKeys.isEmpty else { return nil }
        func parameter<Value: PostgresDynamicTypeEncodable>(_ value: Value) -> String {
            bindings.append(value)
            return "$\(bindings.count)"
        }
        return """
            moved_scopes AS (
                UPDATE scope_sequences AS stored SET last_seq = moved.last_seq
                FROM UNNEST(\(parameter(scopeKeys.map(\.tenant)))::TEXT[], \(parameter(scopeKeys.map(\.name)))::TEXT[],
                            \(parameter(scopeKeys.map { scopes[$0]! }))::BIGINT[]) AS moved (tenant, scope_key, last_seq)
                WHERE stored.tenant = moved.tenant AND stored.scope_key = moved.scope_key
            ), results AS (
                INSERT INTO push_results (tenant, client_id, first_seq, last_seq, results, recorded_at)
                SELECT * FROM UNNEST(\(parameter(pushResults.map(\.client.tenant)))::TEXT[], \(parameter(pushResults.map(\.client.name)))::TEXT[],
                                     \(parameter(pushResults.map(\.record.firstSeq)))::BIGINT[], \(parameter(pushResults.map(\.record.lastSeq)))::BIGINT[],
                                     \(parameter(pushResults.map(\.record.storedText)))::TEXT[], \(parameter(pushResults.map(\.recordedAt)))::BIGINT[])
            ), positions AS (
                INSERT INTO clients (tenant, client_id, last_seq, updated_at, acked_seq)
                SELECT * FROM UNNEST(\(parameter(clientKeys.map(\.tenant)))::TEXT[], \(parameter(clientKeys.map(\.name)))::TEXT[],
                                     \(parameter(clientKeys.map { clients[$0]! }))::BIGINT[],
                                     \(parameter(Array(repeating: Self.nowMilliseconds(), count: clientKeys.count)))::BIGINT[],
                                     \(parameter(clientKeys.map { acknowledged[$0] ?? 0 }))::BIGINT[])
                ON CONFLICT (tenant, client_id) DO UPDATE SET last_seq = EXCLUDED.last_seq, updated_at = EXCLUDED.updated_at,
                    acked_seq = GREATEST(clients.acked_seq, EXCLUDED.acked_seq)
            ), notified AS (
                -- Delivered to every listening process (this one too) when the transaction
                -- commits, and never when it rolls back.
                SELECT pg_notify(\(parameter(notificationChannel)), payload)
                FROM UNNEST(\(parameter(CommitNotification.payloads(scopeKeys.map { ScopeChange(tenant: $0.tenant, scopeKey: $0.name, sequence: scopes[$0]!) })))::TEXT[]) AS payload
            )
            """
    }

    /// The chain's head as this transaction locked it.
    private struct AuditHeadState {
        var lastID: Int64
        var lastHash: String
        var keyedFrom: Int64
    }

    /// One statement, one round trip: writes the positions (``positionClauses(_:)``), reads or
    /// makes the data keys of the users whose audit details this transaction lacks keys for (a
    /// key another transaction is making is waited for and read), and takes the chain's head,
    /// held to the commit so the next transaction chains after this one.
    private func writePositionsAndLockAuditHead() async throws -> AuditHeadState {
        let missing = Set(audit.filter { AuditDetails.isEncrypted(userID: $0.userID) }.map { Key(tenant: $0.tenant, name: $0.userID) })
            .filter { userKeys[$0] == nil }.sorted { ($0.tenant, $0.name) < ($1.tenant, $1.name) }
        var bindings = PostgresBindings()
        let positions = positionClauses(&bindings)
        bindings.append(missing.map(\.tenant))
        let keys = bindings.count
        bindings.append(missing.map(\.name))
        bindings.append(try missing.map { try AuditDetails.newDataKey(tenant: $0.tenant, userID: $0.name, key: auditKey).1 })
        bindings.append(Array(repeating: Self.nowMilliseconds(), count: missing.count))
        // `DO UPDATE` (to itself) returns the stored key when the user has one already.
        let sql = """
            WITH \(positions.map { $0 + ", " } ?? "")keys AS (
                INSERT INTO audit_user_keys (tenant, user_id, wrapped_key, created_at)
                SELECT * FROM UNNEST($\(keys)::TEXT[], $\(keys + 1)::TEXT[], $\(keys + 2)::TEXT[], $\(keys + 3)::BIGINT[])
                ON CONFLICT (tenant, user_id) DO UPDATE SET wrapped_key = audit_user_keys.wrapped_key
                RETURNING tenant, user_id, wrapped_key
            )
            SELECT h.last_id, h.last_hash, h.keyed_from,
                   ARRAY(SELECT tenant FROM keys), ARRAY(SELECT user_id FROM keys), ARRAY(SELECT wrapped_key FROM keys),
                   \(positions == nil ? "0" : "(SELECT count(*) FROM notified)")
            FROM audit_head AS h WHERE h.singleton FOR UPDATE OF h
            """
        guard let row = try await run(sql, bindings).first else { throw PostgresStorageError.unexpectedAnswer("audit_head") }
        let (lastID, lastHash, keyedFrom, tenants, users, wrapped, _) = try row.decode(
            (Int64, String, Int64?, [String], [String], [String], Int64).self)
        for (tenant, (userID, wrappedKey)) in zip(tenants, zip(users, wrapped)) {
            userKeys[Key(tenant: tenant, name: userID)] = AuditDetails.DataKey(
                try AuditDetails.unwrap(wrappedKey, tenant: tenant, userID: userID, key: auditKey)
            )
        }
        return AuditHeadState(lastID: lastID, lastHash: lastHash, keyedFrom: keyedFrom ?? 1)
    }

    /// Encrypts the details of the entries kept in memory under their users' data keys
    /// (``AuditDetails``), read or made by ``writePositionsAndLockAuditHead()``.
    private func sealAuditDetails() throws {
        var nonces = try AuditDetails.nonces(audit.count(where: { AuditDetails.isEncrypted(userID: $0.userID) }))[...]
        for index in audit.indices where AuditDetails.isEncrypted(userID: audit[index].userID) {
            guard let dataKey = userKeys[Key(tenant: audit[index].tenant, name: audit[index].userID)] else {
                throw PostgresStorageError.unexpectedAnswer("audit_user_keys")
            }
            audit[index].detail = try AuditDetails.seal(audit[index].detail, under: dataKey, nonce: nonces.removeFirst())
        }
    }

    /// Numbers and hashes the entries after the locked head, and writes them and the new head.
    private func chainAudit(after head: AuditHeadState) async throws {
        var id = head.lastID
        var hash = head.lastHash
        // Numbered and sealed in order; only the id and the two hashes differ from the entries kept.
        var ids: [Int64] = [], previousHashes: [String] = [], hashes: [String] = []
        ids.reserveCapacity(audit.count)
        previousHashes.reserveCapacity(audit.count)
        hashes.reserveCapacity(audit.count)
        for index in audit.indices {
            id += 1
            audit[index].id = id
            previousHashes.append(hash)
            hash = AuditChain.seal(of: audit[index], previousHash: hash, key: auditKey)
            hashes.append(hash)
            ids.append(id)
        }
        var bindings = PostgresBindings()
        bindings.append(ids)
        bindings.append(audit.map(\.tenant))
        bindings.append(audit.map(\.recordedAt))
        bindings.append(audit.map(\.userID))
        bindings.append(audit.map(\.deviceID))
        bindings.append(audit.map(\.entity))
        bindings.append(audit.map(\.rowID))
        bindings.append(audit.map(\.operation.rawValue))
        bindings.append(audit.map(\.outcome.rawValue))
        bindings.append(audit.map(\.detail))
        bindings.append(previousHashes)
        bindings.append(hashes)
        bindings.append(id)
        bindings.append(hash)
        bindings.append(AuditChain.seal(lastID: id, lastHash: hash, keyedFrom: head.keyedFrom, key: auditKey))
        // The entries and the new head in one statement: one round trip less while the head is held.
        try await run(
            """
            WITH entries AS (
                INSERT INTO audit_log (id, tenant, recorded_at, user_id, device_id, entity, row_id, operation, outcome, detail, previous_hash, hash)
                SELECT * FROM UNNEST($1::BIGINT[], $2::TEXT[], $3::BIGINT[], $4::TEXT[], $5::TEXT[], $6::TEXT[], $7::TEXT[], $8::TEXT[],
                                     $9::TEXT[], $10::TEXT[], $11::TEXT[], $12::TEXT[])
            )
            UPDATE audit_head SET last_id = $13, last_hash = $14, seal = $15 WHERE singleton
            """, bindings)
    }

    private static func nowMilliseconds() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
}

/// Every table's column types, read from the database once after its migrations ran, and the
/// `INSERT` texts built from them.
final class PostgresCatalog: Sendable {
    struct Columns: Sendable {
        var table: String
        var types: [String: PostgresDataType]

        func type(of column: String) throws(PostgresStorageError) -> PostgresDataType {
            guard let type = types[column] else {
                throw .unsupportedValue("the table '\(table)' has no column '\(column)'")
            }
            return type
        }
    }

    private let tables: [String: Columns]
    private let insertTexts = NIOLockedValueBox<[[String]: (String, String)]>([:])
    /// Per tuple width: `($1, …), (…), …` for as many rows as asked so far, and where each row's
    /// tuple ends in it (in UTF-8 bytes). The text for fewer rows is a prefix of it.
    private let tupleTexts = NIOLockedValueBox<[Int: (text: String, ends: [Int])]>([:])

    init(tables: [String: [String: PostgresDataType]]) {
        self.tables = tables.reduce(into: [:]) { $0[$1.key] = Columns(table: $1.key, types: $1.value) }
    }

    func columns(of table: String) throws(PostgresStorageError) -> Columns {
        guard let columns = tables[table] else { throw .unknownTable(table) }
        return columns
    }

    /// `($1, $2), ($3, $4), …`: `rows` tuples of `width` numbered parameters, cut from the longest
    /// text made so far for that width (a push's inserts have the same few widths and sizes).
    func valueTuples(rows: Int, width: Int) -> String {
        guard rows > 0 else { return "" }
        return tupleTexts.withLockedValue { texts in
            var entry = texts[width] ?? (text: "", ends: [])
            if entry.ends.count < rows {
                var bytes = Array(entry.text.utf8)
                var parameter = entry.ends.count * width + 1
                for row in entry.ends.count..<rows {
                    if row > 0 { bytes.append(contentsOf: [0x2C, 0x20]) }
                    bytes.append(0x28)
                    for column in 0..<width {
                        if column > 0 { bytes.append(contentsOf: [0x2C, 0x20]) }
                        bytes.append(0x24)
                        bytes.append(contentsOf: String(parameter).utf8)
                        parameter += 1
                    }
                    bytes.append(0x29)
                    entry.ends.append(bytes.count)
                }
                entry.text = String(decoding: bytes, as: UTF8.self)
                texts[width] = entry
            }
            return String(decoding: entry.text.utf8.prefix(entry.ends[rows - 1]), as: UTF8.self)
        }
    }

    /// The text before and after the `VALUES` tuples of an insert: `INSERT INTO t (…) VALUES `
    /// and the conflict clause (replace the row unless it is in another scope, or do nothing),
    /// built once per table and column list.
    /// What an `INSERT` does with a row whose key is stored already.
    enum InsertMode: String {
        /// Replaces it, unless it is in another scope (then the row does not come back).
        case replacing
        /// Leaves it (the row does not come back).
        case ignoring
        /// Fails on the key (rows read ahead and found absent: one stored meanwhile makes the
        /// transaction run again).
        case new
    }

    func insertClauses(table: ContractTable, columns: [String], mode: InsertMode) -> (String, String) {
        let key = [table.name, mode.rawValue] + columns
        if let clauses = insertTexts.withLockedValue({ $0[key] }) { return clauses }
        let quoted = columns.map { "\"\($0)\"" }
        let head = "INSERT INTO \"\(table.name)\" (" + quoted.joined(separator: ", ") + ") VALUES "
        var tail = " ON CONFLICT (\"_tenant_id\", \"\(table.primaryKey)\") "
        switch mode {
        case .new:
            tail = ""
        case .replacing:
            let updates = quoted.filter { $0 != "\"_tenant_id\"" && $0 != "\"\(table.primaryKey)\"" }.map { "\($0) = EXCLUDED.\($0)" }
            tail +=
                "DO UPDATE SET " + updates.joined(separator: ", ")
                + " WHERE \"\(table.name)\".\"_scope_key\" = EXCLUDED.\"_scope_key\" RETURNING 1"
        case .ignoring:
            tail += "DO NOTHING RETURNING 1"
        }
        insertTexts.withLockedValue { $0[key] = (head, tail) }
        return (head, tail)
    }
}
