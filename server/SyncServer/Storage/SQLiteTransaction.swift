import ContractRuntime
import ContractRuntimeGRDB
import Crypto
import Foundation
import GRDB

/// `INSERT … (columns) VALUES (?, …), …` texts per verb, table, column list and row count, built
/// once per process.
private let insertSQLCache = InsertSQLCache()

private final class InsertSQLCache: @unchecked Sendable {
    private let lock = NSLock()
    private var texts: [[String]: String] = [:]

    func sql(_ verb: String, table: String, columns: [String], rows: Int = 1) -> String {
        let key = [verb, table, String(rows)] + columns
        lock.lock()
        defer { lock.unlock() }
        if let text = texts[key] { return text }
        let tuple = "(" + Array(repeating: "?", count: columns.count).joined(separator: ", ") + ")"
        let text =
            "\(verb) INTO \"\(table)\" (" + columns.map { "\"\($0)\"" }.joined(separator: ", ") + ") VALUES "
            + Array(repeating: tuple, count: rows).joined(separator: ", ")
        texts[key] = text
        return text
    }
}

/// GRDB-backed reader and transaction. Table and column names come from the contract
/// registry (validated snake_case identifiers) and are quoted; values are always bound, never
/// interpolated. Statements are prepared once per connection and reused (`cachedStatement`):
/// compiling SQL was most of a push's cost.
///
/// Writes are kept back and sent in multi-row statements (see ``AuditTail``): upserted rows,
/// stored push results and audit entries go out before any read that could see them, and at the
/// end of the transaction (``flushCounters()``). A push of 500 then costs a few dozen statements
/// for its writes instead of three per mutation; executing a statement, not storing a row, was
/// most of what a write cost.
struct SQLiteTransaction: StorageTransaction {
    let db: Database
    let auditTail: AuditTail

    private static func quoted(_ name: String) -> String { "\"" + name + "\"" }

    private func statement(_ sql: String) throws -> GRDB.Statement {
        try db.cachedStatement(sql: sql)
    }

    private static func storedRow(_ row: Row) -> StoredRow {
        StoredRow(layout: StoredRow.Layout(Array(row.columnNames)), values: row.databaseValues.map { ColumnValue($0) })
    }

    func row(in table: ContractTable, tenant: String, id: String) async throws -> StoredRow? {
        let key = StoredRowKey(table: table, tenant: tenant, id: id)
        if let unsent = auditTail.unsentRows[key] { return unsent }
        if let known = auditTail.knownRows[key] { return known }
        let sql = "SELECT * FROM \(Self.quoted(table.name)) WHERE \"_tenant_id\" = ? AND \(Self.quoted(table.primaryKey)) = ?"
        return try Row.fetchOne(statement(sql), arguments: [tenant, id]).map(Self.storedRow)
    }

    /// Ids looked up per statement by ``prefetchRows(in:tenant:ids:)``; a shorter list is padded
    /// with its last id, so every lookup runs the one prepared statement.
    private static let prefetchBatch = 100

    func prefetchRows(in table: ContractTable, tenant: String, ids: [String]) async throws {
        try writeUnsentRows()
        let wanted = Array(Set(ids.filter { auditTail.knownRows.index(forKey: .init(table: table, tenant: tenant, id: $0)) == nil }))
        guard !wanted.isEmpty else { return }
        // The rows read ahead are the ones the push goes on to write: room for them at once.
        auditTail.knownRows.reserveCapacity(auditTail.knownRows.count + wanted.count)
        auditTail.unsentRows.reserveCapacity(auditTail.unsentRows.count + wanted.count)
        auditTail.unsentOrder.reserveCapacity(auditTail.unsentOrder.count + wanted.count)
        let sql =
            "SELECT * FROM \(Self.quoted(table.name)) WHERE \"_tenant_id\" = ? AND \(Self.quoted(table.primaryKey)) IN ("
            + Array(repeating: "?", count: Self.prefetchBatch).joined(separator: ", ") + ")"
        let select = try statement(sql)
        for start in stride(from: 0, to: wanted.count, by: Self.prefetchBatch) {
            var chunk = Array(wanted[start..<min(start + Self.prefetchBatch, wanted.count)])
            for id in chunk { auditTail.knownRows[.init(table: table, tenant: tenant, id: id)] = .some(nil) }
            chunk += Array(repeating: chunk[chunk.count - 1], count: Self.prefetchBatch - chunk.count)
            for row in try Row.fetchAll(select, arguments: StatementArguments([tenant] + chunk)) {
                let stored = Self.storedRow(row)
                guard let id = stored.text(table.primaryKey) else { continue }
                auditTail.knownRows[.init(table: table, tenant: tenant, id: id)] = .some(stored)
            }
        }
    }

    func changes(
        in tables: [ContractTable], tenant: String, scopeKey: String, after: Int64, limit: Int, byteBudget: Int, pageColumnsOnly: Bool
    ) async throws -> [(table: ContractTable, row: StoredRow)] {
        try writeUnsentRows()
        var last = try lastSequenceOfChanges(in: tables, tenant: tenant, scopeKey: scopeKey, after: after, limit: limit)
        var merged: [(sequence: Int64, table: ContractTable, row: StoredRow)] = []
        for table in tables {
            let sql = """
                SELECT * FROM \(Self.quoted(table.name))
                WHERE "_tenant_id" = ? AND "_scope_key" = ? AND "_seq" > ? AND "_seq" <= ? ORDER BY "_seq" LIMIT ?
                """
            // Each row read straight from the statement as it steps (no copied GRDB row in
            // between), column by index, with the column names read once per table.
            let select = try statement(sql)
            let layout = StoredRow.Layout(select.columnNames)
            let sequence = layout.position(of: "_seq")
            let rows = try Row.fetchCursor(select, arguments: [tenant, scopeKey, after, last, limit])
            var bytes = 0
            while try rows.next() != nil {
                let values = layout.names.indices.map { index in
                    ColumnValue(DatabaseValue(sqliteStatement: select.sqliteStatement, index: CInt(index)))
                }
                var order: Int64 = 0
                if let sequence, case .integer(let value) = values[sequence] { order = value }
                let row = StoredRow(layout: layout, values: values)
                merged.append((order, table, row))
                bytes += row.storedBytes
                // Past the budget this table reads no further, and no table's rows beyond this
                // one can be in the page: its rows up to here are all the page may hold.
                if bytes > byteBudget {
                    last = min(last, order)
                    break
                }
            }
        }
        merged.sort { $0.sequence < $1.sequence }
        return StoredRow.withinBudget(merged.lazy.filter { $0.sequence <= last }.map { ($0.table, $0.row) }, limit: limit, byteBudget: byteBudget)
    }

    /// The `_seq` of the last row a page of `limit` changes holds, across the tables: read from
    /// their `(_tenant_id, _scope_key, _seq)` indexes alone, it bounds each table's query, so no
    /// table reads whole rows the page then leaves out. `Int64.max` when the tables hold fewer.
    private func lastSequenceOfChanges(in tables: [ContractTable], tenant: String, scopeKey: String, after: Int64, limit: Int) throws -> Int64 {
        guard tables.count > 1 else { return .max }
        let candidates = tables.map { table in
            """
            SELECT "_seq" FROM (SELECT "_seq" FROM \(Self.quoted(table.name))
                WHERE "_tenant_id" = ? AND "_scope_key" = ? AND "_seq" > ? ORDER BY "_seq" LIMIT ?)
            """
        }
        let sql = "SELECT \"_seq\" FROM (" + candidates.joined(separator: " UNION ALL ") + ") ORDER BY \"_seq\" LIMIT 1 OFFSET ?"
        var arguments: [DatabaseValue] = []
        for _ in tables { arguments += [tenant.databaseValue, scopeKey.databaseValue, after.databaseValue, limit.databaseValue] }
        arguments.append((limit - 1).databaseValue)
        return try Int64.fetchOne(statement(sql), arguments: StatementArguments(arguments)) ?? .max
    }

    func rows(in table: ContractTable, tenant: String, where conditions: [String: ColumnValue], limit: Int) async throws -> [StoredRow] {
        try writeUnsentRows()
        var clauses = ["\"_tenant_id\" = ?"]
        var arguments: [DatabaseValue] = [tenant.databaseValue]
        for column in conditions.keys.sorted() {
            clauses.append("\(Self.quoted(column)) IS ?")
            arguments.append(conditions[column]!.databaseValue)
        }
        arguments.append(limit.databaseValue)
        let sql =
            "SELECT * FROM \(Self.quoted(table.name)) WHERE \(clauses.joined(separator: " AND ")) ORDER BY \(Self.quoted(table.primaryKey)) LIMIT ?"
        return try Row.fetchAll(statement(sql), arguments: StatementArguments(arguments)).map(Self.storedRow)
    }

    func lastSequence(tenant: String, clientID: String) async throws -> Int64 {
        if let pending = auditTail.clientSequences[.init(tenant: tenant, key: clientID)] { return pending }
        return try Int64.fetchOne(statement("SELECT last_seq FROM clients WHERE tenant = ? AND client_id = ?"), arguments: [tenant, clientID]) ?? 0
    }

    func pushResults(tenant: String, clientID: String, covering seq: Int64) async throws -> PushResultRecord? {
        try writePendingResults()
        // The record starting at or before `seq` closest to it; it covers `seq` unless `seq` lies past its end.
        guard
            let row = try Row.fetchOne(
                statement(
                    """
                    SELECT first_seq, last_seq, results FROM push_results
                    WHERE tenant = ? AND client_id = ? AND first_seq <= ? ORDER BY first_seq DESC LIMIT 1
                    """),
                arguments: [tenant, clientID, seq]
            ), seq <= row["last_seq"] as Int64
        else { return nil }
        return try PushResultRecord(firstSeq: row["first_seq"], storedText: row["results"])
    }

    func scopeSequence(tenant: String, scopeKey: String) async throws -> Int64 {
        if let pending = auditTail.scopeSequences[.init(tenant: tenant, key: scopeKey)] { return pending }
        return try Int64.fetchOne(
            statement("SELECT last_seq FROM scope_sequences WHERE tenant = ? AND scope_key = ?"), arguments: [tenant, scopeKey]
        ) ?? 0
    }

    func compactedSequence(tenant: String, scopeKey: String) async throws -> Int64 {
        try Int64.fetchOne(
            statement("SELECT compacted_seq FROM scope_sequences WHERE tenant = ? AND scope_key = ?"), arguments: [tenant, scopeKey]
        ) ?? 0
    }

    func auditEntries(after afterID: Int64, limit: Int) async throws -> [AuditEntry] {
        try writePendingAudit()
        return try Row.fetchAll(statement("SELECT * FROM audit_log WHERE id > ? ORDER BY id LIMIT ?"), arguments: [afterID, limit]).map(
            Self.auditEntry)
    }

    func serverTableQuery(_ sql: String, _ arguments: [ColumnValue]) async throws -> [StoredRow] {
        try Row.fetchAll(statement(sql), arguments: StatementArguments(arguments.map(\.databaseValue))).map(Self.storedRow)
    }

    func auditEntries(tenant: String, after afterID: Int64, limit: Int) async throws -> [AuditEntry] {
        try writePendingAudit()
        return try Row.fetchAll(
            statement("SELECT * FROM audit_log WHERE tenant = ? AND id > ? ORDER BY id LIMIT ?"), arguments: [tenant, afterID, limit]
        ).map(Self.auditEntry)
    }

    func auditEntries(tenant: String, userID: String, after afterID: Int64, limit: Int) async throws -> [AuditEntry] {
        try writePendingAudit()
        return try Row.fetchAll(
            statement("SELECT * FROM audit_log WHERE tenant = ? AND user_id = ? AND id > ? ORDER BY id LIMIT ?"),
            arguments: [tenant, userID, afterID, limit]
        ).map(Self.auditEntry)
    }

    private static func auditEntry(_ row: Row) -> AuditEntry {
        AuditEntry(
            id: row["id"], tenant: row["tenant"], recordedAt: row["recorded_at"], userID: row["user_id"],
            deviceID: row["device_id"], entity: row["entity"], rowID: row["row_id"],
            operation: AuditOperation(rawValue: row["operation"]), outcome: AuditOutcome(rawValue: row["outcome"]), detail: row["detail"],
            previousHash: row["previous_hash"], hash: row["hash"]
        )
    }

    func wrappedAuditUserKey(tenant: String, userID: String) async throws -> String? {
        try writePendingAudit()
        return try storedWrappedKey(tenant: tenant, userID: userID)
    }

    private func storedWrappedKey(tenant: String, userID: String) throws -> String? {
        try String.fetchOne(statement("SELECT wrapped_key FROM audit_user_keys WHERE tenant = ? AND user_id = ?"), arguments: [tenant, userID])
    }

    /// The user's data key: kept from earlier in this transaction, else read and unwrapped, else
    /// made and stored (in this transaction).
    private func auditDataKey(tenant: String, userID: String) throws -> AuditDetails.DataKey {
        let name = AuditTail.ScopeKey(tenant: tenant, key: userID)
        if let known = auditTail.userKeys[name] { return known }
        let dataKey: AuditDetails.DataKey
        if let wrapped = try storedWrappedKey(tenant: tenant, userID: userID) {
            dataKey = AuditDetails.DataKey(try AuditDetails.unwrap(wrapped, tenant: tenant, userID: userID, key: auditTail.key))
        } else {
            let (made, wrapped) = try AuditDetails.newDataKey(tenant: tenant, userID: userID, key: auditTail.key)
            try statement("INSERT INTO audit_user_keys (tenant, user_id, wrapped_key, created_at) VALUES (?, ?, ?, ?)")
                .execute(arguments: [tenant, userID, wrapped, Int64(Date().timeIntervalSince1970 * 1000)])
            dataKey = AuditDetails.DataKey(made)
        }
        auditTail.userKeys[name] = dataKey
        return dataKey
    }

    func eraseAuditDetails(tenant: String, userID: String) async throws -> Int {
        try writePendingAudit()
        auditTail.userKeys[AuditTail.ScopeKey(tenant: tenant, key: userID)] = nil
        guard let wrapped = try storedWrappedKey(tenant: tenant, userID: userID) else { return 0 }
        let keyID = AuditDetails.keyID(of: try AuditDetails.unwrap(wrapped, tenant: tenant, userID: userID, key: auditTail.key))
        try statement("DELETE FROM audit_user_keys WHERE tenant = ? AND user_id = ?").execute(arguments: [tenant, userID])
        // The entries encrypted under that key (not those of a key erased before).
        let prefix = AuditDetails.prefix + keyID + ":"
        return try Int.fetchOne(
            statement("SELECT COUNT(*) FROM audit_log WHERE tenant = ? AND user_id = ? AND substr(detail, 1, ?) = ?"),
            arguments: [tenant, userID, prefix.utf8.count, prefix]
        ) ?? 0
    }

    func moveAuditBase(from previous: AuditBase, to base: AuditBase) async throws -> Int {
        try writePendingAudit()
        guard let head = try Row.fetchOne(statement("SELECT base_id, base_hash FROM audit_head")),
            head["base_id"] as Int64 == previous.lastID, head["base_hash"] as String == previous.lastHash,
            try String.fetchOne(statement("SELECT hash FROM audit_log WHERE id = ?"), arguments: [base.lastID]) == base.lastHash
        else { throw AuditArchiveError.baseMoved }
        try statement("DELETE FROM audit_log WHERE id <= ?").execute(arguments: [base.lastID])
        let deleted = db.changesCount
        try statement("UPDATE audit_head SET base_id = ?, base_hash = ?, base_seal = ?").execute(arguments: [base.lastID, base.lastHash, base.seal])
        return deleted
    }

    func clientOwner(tenant: String, clientID: String) async throws -> ClientOwner? {
        guard
            let row = try Row.fetchOne(
                statement("SELECT user_id, device_id FROM clients WHERE tenant = ? AND client_id = ?"), arguments: [tenant, clientID]
            ), let userID: String = row["user_id"], let deviceID: String = row["device_id"]
        else { return nil }
        return ClientOwner(userID: userID, deviceID: deviceID)
    }

    func lockClient(tenant: String, clientID: String, owner: ClientOwner) async throws -> ClientLock {
        let key = AuditTail.ScopeKey(tenant: tenant, key: clientID)
        if let pending = auditTail.clientSequences[key] {
            // Locked earlier in this transaction, which checked the owner then.
            return .owned(lastSeq: pending)
        }
        let row = try Row.fetchOne(
            statement("SELECT last_seq, user_id, device_id FROM clients WHERE tenant = ? AND client_id = ?"), arguments: [tenant, clientID]
        )
        guard let row else {
            try statement("INSERT INTO clients (tenant, client_id, last_seq, updated_at, user_id, device_id) VALUES (?, ?, 0, ?, ?, ?)")
                .execute(arguments: [tenant, clientID, Int64(Date().timeIntervalSince1970 * 1000), owner.userID, owner.deviceID])
            return .owned(lastSeq: 0)
        }
        let lastSeq: Int64 = row["last_seq"]
        switch (row["user_id"] as String?, row["device_id"] as String?) {
        case (let userID?, let deviceID?):
            return ClientOwner(userID: userID, deviceID: deviceID) == owner ? .owned(lastSeq: lastSeq) : .ownedByOther
        default:
            // A stream from before owners were recorded, with no audited push to tell whose it was.
            try statement("UPDATE clients SET user_id = ?, device_id = ? WHERE tenant = ? AND client_id = ?")
                .execute(arguments: [owner.userID, owner.deviceID, tenant, clientID])
            return .owned(lastSeq: lastSeq)
        }
    }

    func lockScope(tenant: String, scopeKey: String) async throws {}

    func nextScopeSequence(tenant: String, scopeKey: String) async throws -> Int64 {
        let key = AuditTail.ScopeKey(tenant: tenant, key: scopeKey)
        let next = try await scopeSequence(tenant: tenant, scopeKey: scopeKey) + 1
        auditTail.scopeSequences[key] = next
        return next
    }

    /// Writes what was kept in memory (rows, stored results, counters, audit entries and the
    /// audit head); called once at the end of a write transaction. Returns the scopes whose
    /// sequence moved, for the commit observers.
    func flushCounters() throws -> [ScopeChange] {
        let changes = auditTail.scopeSequences.map { ScopeChange(tenant: $0.key.tenant, scopeKey: $0.key.key, sequence: $0.value) }
        try writeUnsentRows()
        try writePendingResults()
        for (key, value) in auditTail.scopeSequences {
            try statement(
                """
                INSERT INTO scope_sequences (tenant, scope_key, last_seq) VALUES (?, ?, ?)
                ON CONFLICT (tenant, scope_key) DO UPDATE SET last_seq = excluded.last_seq
                """
            ).execute(arguments: [key.tenant, key.key, value])
        }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        for (key, value) in auditTail.clientSequences {
            try statement(
                """
                INSERT INTO clients (tenant, client_id, last_seq, updated_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (tenant, client_id) DO UPDATE SET last_seq = excluded.last_seq, updated_at = excluded.updated_at
                """
            ).execute(arguments: [key.tenant, key.key, value, now])
        }
        auditTail.scopeSequences.removeAll()
        auditTail.clientSequences.removeAll()
        try writePendingAudit()
        if auditTail.moved {
            let seal = AuditChain.seal(lastID: auditTail.id, lastHash: auditTail.hash, keyedFrom: auditTail.keyedFrom, key: auditTail.key)
            try statement("UPDATE audit_head SET last_id = ?, last_hash = ?, seal = ?").execute(arguments: [auditTail.id, auditTail.hash, seal])
            auditTail.moved = false
        }
        return changes
    }

    func upsert(_ row: StoredRow, in table: ContractTable) async throws {
        guard let id = row.text(table.primaryKey), let tenant = row.text("_tenant_id") else {
            // Not addressable as a kept row: written at once, after the rows kept before it.
            try writeUnsentRows()
            auditTail.knownRows.removeAll()
            try insertRows(
                "INSERT OR REPLACE", into: table.name, columns: row.columnNames,
                values: row.columnNames.indices.map { row.value(at: $0).databaseValue })
            return
        }
        let key = StoredRowKey(table: table, tenant: tenant, id: id)
        auditTail.knownRows.removeValue(forKey: key)
        if auditTail.unsentRows.updateValue(row, forKey: key) == nil { auditTail.unsentOrder.append(key) }
    }

    func insertIfAbsent(_ row: StoredRow, in table: ContractTable) async throws -> Bool {
        try writeUnsentRows()
        if let id = row.text(table.primaryKey), let tenant = row.text("_tenant_id") {
            auditTail.knownRows.removeValue(forKey: .init(table: table, tenant: tenant, id: id))
        } else {
            auditTail.knownRows.removeAll()
        }
        let columns = row.columnNames
        let sql = insertSQLCache.sql("INSERT OR IGNORE", table: table.name, columns: columns)
        try statement(sql).execute(arguments: StatementArguments(columns.indices.map { row.value(at: $0).databaseValue }))
        return db.changesCount > 0
    }

    func recordPushResults(tenant: String, clientID: String, _ record: PushResultRecord, recordedAt: Int64) async throws {
        guard !record.results.isEmpty else { return }
        auditTail.pendingResults += [
            tenant.databaseValue, clientID.databaseValue, record.firstSeq.databaseValue, record.lastSeq.databaseValue,
            record.storedText.databaseValue, recordedAt.databaseValue,
        ]
        auditTail.clientSequences[.init(tenant: tenant, key: clientID)] = record.lastSeq
    }

    // MARK: Writes kept back

    /// Rows per multi-row `INSERT`, largest first: a push's writes take a few statements, and
    /// there are only four texts per table to prepare.
    private static let insertBatches = [64, 16, 4, 1]

    /// Inserts rows given as `columns.count` values each, one after the other, in multi-row
    /// statements.
    private func insertRows(_ verb: String, into table: String, columns: [String], values: [DatabaseValue]) throws {
        let width = columns.count
        let count = values.count / width
        var done = 0
        while done < count {
            let size = Self.insertBatches.first { $0 <= count - done } ?? 1
            let sql = insertSQLCache.sql(verb, table: table, columns: columns, rows: size)
            try execute(statement(sql), binding: values[(done * width)..<((done + size) * width)])
            done += size
        }
    }

    /// Runs a statement with `values` bound in order, one by one (`DatabaseValue.bind(to:at:)`):
    /// building `StatementArguments` from them went through GRDB's generic initializer, which
    /// cost more per value than SQLite's insert of it, and a push binds some 40 values per
    /// mutation. `values` holds exactly the statement's parameters.
    private func execute(_ statement: GRDB.Statement, binding values: ArraySlice<DatabaseValue>) throws {
        // Resets the statement and clears its bindings; every parameter is bound just below.
        statement.setUncheckedArguments(StatementArguments())
        let handle = statement.sqliteStatement
        var index: CInt = 1
        for value in values {
            let code = value.bind(to: handle, at: index)
            guard code == 0 else {  // SQLITE_OK
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: "parameter \(index) could not be bound", sql: statement.sql)
            }
            index += 1
        }
        try statement.execute()
    }

    /// Writes the upserted rows kept back, in the order first written (the newest version of
    /// each), rows of one table and column list together.
    private func writeUnsentRows() throws {
        guard !auditTail.unsentOrder.isEmpty else { return }
        let order = auditTail.unsentOrder, rows = auditTail.unsentRows
        auditTail.unsentOrder = []
        auditTail.unsentRows = [:]
        var index = 0
        while index < order.count {
            let table = order[index].table
            let columns = rows[order[index]]!.columnNames
            var values: [DatabaseValue] = []
            while index < order.count, order[index].table == table, let row = rows[order[index]], row.columnNames == columns {
                for position in columns.indices { values.append(row.value(at: position).databaseValue) }
                index += 1
            }
            try insertRows("INSERT OR REPLACE", into: table.name, columns: columns, values: values)
        }
    }

    private static let pushResultColumns = ["tenant", "client_id", "first_seq", "last_seq", "results", "recorded_at"]

    private func writePendingResults() throws {
        guard !auditTail.pendingResults.isEmpty else { return }
        let values = auditTail.pendingResults
        auditTail.pendingResults = []
        try insertRows("INSERT", into: "push_results", columns: Self.pushResultColumns, values: values)
    }

    private static let auditColumns = [
        "id", "tenant", "recorded_at", "user_id", "device_id", "entity", "row_id", "operation", "outcome", "detail", "previous_hash", "hash",
    ]

    /// Encrypts, chains and writes the audit entries kept back. Entries are numbered and sealed
    /// here, in the order they were appended: the writer is alone, so this is commit order.
    private func writePendingAudit() throws {
        guard !auditTail.pendingAudit.isEmpty else { return }
        let entries = auditTail.pendingAudit
        auditTail.pendingAudit = []
        try loadAuditTail()
        var values: [DatabaseValue] = []
        values.reserveCapacity(entries.count * Self.auditColumns.count)
        var nonces = try AuditDetails.nonces(entries.count(where: { AuditDetails.isEncrypted(userID: $0.userID) }))[...]
        for var entry in entries {
            if AuditDetails.isEncrypted(userID: entry.userID) {
                entry.detail = try AuditDetails.seal(
                    entry.detail, under: auditDataKey(tenant: entry.tenant, userID: entry.userID), nonce: nonces.removeFirst()
                )
            }
            entry.id = auditTail.id + 1
            entry.previousHash = auditTail.hash
            entry.hash = AuditChain.seal(of: entry, previousHash: entry.previousHash, key: auditTail.key)
            values += [
                entry.id.databaseValue, entry.tenant.databaseValue, entry.recordedAt.databaseValue, entry.userID.databaseValue,
                entry.deviceID.databaseValue, entry.entity.databaseValue, entry.rowID.databaseValue, entry.operation.rawValue.databaseValue,
                entry.outcome.rawValue.databaseValue, entry.detail.databaseValue, entry.previousHash.databaseValue, entry.hash.databaseValue,
            ]
            auditTail.id = entry.id
            auditTail.hash = entry.hash
        }
        try insertRows("INSERT", into: "audit_log", columns: Self.auditColumns, values: values)
        auditTail.moved = true
    }

    /// Reads the chain's end once per transaction. Inside the write transaction no other writer
    /// can append in between. The head, not the last row, says where the chain ends: a row
    /// deleted behind the server's back stays a visible gap.
    private func loadAuditTail() throws {
        guard !auditTail.loaded else { return }
        if let head = try Row.fetchOne(statement("SELECT last_id, last_hash, keyed_from FROM audit_head")) {
            auditTail.id = head["last_id"]
            auditTail.hash = head["last_hash"]
            auditTail.keyedFrom = head["keyed_from"]
        }
        auditTail.loaded = true
    }

    func acknowledgePushResults(tenant: String, clientID: String, through seq: Int64) async throws {
        try statement("UPDATE clients SET acked_seq = MAX(acked_seq, ?) WHERE tenant = ? AND client_id = ?")
            .execute(arguments: [seq, tenant, clientID])
    }

    func prunePushResults(recordedBefore: Int64, limit: Int) async throws -> Int {
        try writePendingResults()
        try statement(
            """
            DELETE FROM push_results WHERE rowid IN (
                SELECT p.rowid FROM push_results p JOIN clients c ON c.tenant = p.tenant AND c.client_id = p.client_id
                WHERE p.last_seq <= c.acked_seq AND p.recorded_at < ? LIMIT ?)
            """
        ).execute(arguments: [recordedBefore, limit])
        return db.changesCount
    }

    func tombstones(in table: ContractTable, updatedBefore: Int64, limit: Int) async throws -> [Tombstone] {
        try writeUnsentRows()
        let sql = """
            SELECT "_tenant_id", "_scope_key", "_seq" FROM \(Self.quoted(table.name))
            WHERE "_deleted" = 1 AND "_updated_at" < ? LIMIT ?
            """
        return try Row.fetchAll(statement(sql), arguments: [updatedBefore, limit]).map {
            Tombstone(tenant: $0[0], scopeKey: $0[1], seq: $0[2])
        }
    }

    func deleteTombstones(_ tombstones: [Tombstone], in table: ContractTable, updatedBefore: Int64) async throws -> [Tombstone] {
        try writeUnsentRows()
        auditTail.knownRows.removeAll()
        let delete = try statement(
            """
            DELETE FROM \(Self.quoted(table.name))
            WHERE "_tenant_id" = ? AND "_scope_key" = ? AND "_seq" = ? AND "_deleted" = 1 AND "_updated_at" < ?
            """)
        var deleted: [Tombstone] = []
        for tombstone in tombstones {
            try delete.execute(arguments: [tombstone.tenant, tombstone.scopeKey, tombstone.seq, updatedBefore])
            if db.changesCount > 0 { deleted.append(tombstone) }
        }
        return deleted
    }

    func raiseCompactedSequence(tenant: String, scopeKey: String, to seq: Int64) async throws {
        // The scope's row exists once its rows were written; the insert covers one that does not.
        try statement(
            """
            INSERT INTO scope_sequences (tenant, scope_key, last_seq, compacted_seq) VALUES (?, ?, ?, ?)
            ON CONFLICT (tenant, scope_key) DO UPDATE SET compacted_seq = MAX(compacted_seq, excluded.compacted_seq)
            """
        ).execute(arguments: [tenant, scopeKey, seq, seq])
    }

    func appendAudit(_ entry: AuditEntry) async throws {
        // Chained and written with the others (writePendingAudit): one multi-row statement per 64.
        auditTail.pendingAudit.append(entry)
    }

    // MARK: Identity held by the server

    func identityState(tenant: String, userID: String, deviceID: String) async throws -> IdentityState {
        let row = try Row.fetchOne(
            statement(
                """
                SELECT (SELECT MAX(revoked_at) FROM revocations
                        WHERE tenant = ? AND ((kind = 'device' AND subject = ?) OR (kind = 'user' AND subject = ?))) AS revoked_at,
                       (SELECT erased_at FROM erasures WHERE tenant = ? AND user_id = ?) AS erased_at
                """),
            arguments: [tenant, deviceID, userID, tenant, userID]
        )
        let teams = try String.fetchAll(
            statement("SELECT team_id FROM team_members WHERE tenant = ? AND user_id = ? ORDER BY team_id"), arguments: [tenant, userID]
        )
        return IdentityState(revokedAt: row?["revoked_at"], teams: teams, erasedAt: row?["erased_at"])
    }

    func revocations(tenant: String) async throws -> [Revocation] {
        try Row.fetchAll(statement("SELECT kind, subject, revoked_at FROM revocations WHERE tenant = ? ORDER BY kind, subject"), arguments: [tenant])
            .compactMap { row in
                RevocationKind(rawValue: row["kind"]).map { Revocation(kind: $0, subject: row["subject"], revokedAt: row["revoked_at"]) }
            }
    }

    func clients(tenant: String, ownedBy userID: String) async throws -> [ClientRecord] {
        try Row.fetchAll(
            statement("SELECT client_id, user_id, device_id, last_seq, updated_at FROM clients WHERE tenant = ? AND user_id = ? ORDER BY client_id"),
            arguments: [tenant, userID]
        ).map { row in
            let owner = (row["user_id"] as String?).flatMap { user in (row["device_id"] as String?).map { ClientOwner(userID: user, deviceID: $0) } }
            return ClientRecord(clientID: row["client_id"], owner: owner, lastSeq: row["last_seq"], updatedAt: row["updated_at"])
        }
    }

    func urgentChanges(tenant: String, scopeKey: String, after: Int64, limit: Int) async throws -> [UrgentChange] {
        try Row.fetchAll(
            statement(
                """
                SELECT table_name, row_id, MAX(seq) AS seq FROM urgent_changes
                WHERE tenant = ? AND scope_key = ? AND seq > ? GROUP BY table_name, row_id ORDER BY seq LIMIT ?
                """),
            arguments: [tenant, scopeKey, after, limit]
        ).map { UrgentChange(table: $0["table_name"], rowID: $0["row_id"], sequence: $0["seq"]) }
    }

    func deleteRow(in table: ContractTable, tenant: String, id: String) async throws {
        try writeUnsentRows()
        auditTail.knownRows.removeValue(forKey: .init(table: table, tenant: tenant, id: id))
        try statement("DELETE FROM \(Self.quoted(table.name)) WHERE \"_tenant_id\" = ? AND \(Self.quoted(table.primaryKey)) = ?")
            .execute(arguments: [tenant, id])
    }

    func deletePushResults(tenant: String, ownedBy userID: String) async throws -> Int {
        try writePendingResults()
        try statement(
            """
            DELETE FROM push_results WHERE tenant = ?
            AND client_id IN (SELECT client_id FROM clients WHERE tenant = ? AND user_id = ?)
            """
        ).execute(arguments: [tenant, tenant, userID])
        return db.changesCount
    }

    func recordErasure(tenant: String, userID: String, at: Int64) async throws {
        try statement(
            """
            INSERT INTO erasures (tenant, user_id, erased_at) VALUES (?, ?, ?)
            ON CONFLICT (tenant, user_id) DO UPDATE SET erased_at = MAX(erased_at, excluded.erased_at)
            """
        ).execute(arguments: [tenant, userID, at])
        try statement("DELETE FROM team_members WHERE tenant = ? AND user_id = ?").execute(arguments: [tenant, userID])
        try statement("UPDATE clients SET updated_at = ? WHERE tenant = ? AND user_id = ?").execute(arguments: [at * 1000, tenant, userID])
    }

    func pruneUrgentChanges(markedBefore: Int64, limit: Int) async throws -> Int {
        try statement(
            """
            DELETE FROM urgent_changes WHERE rowid IN (SELECT rowid FROM urgent_changes WHERE marked_at < ? LIMIT ?)
            """
        ).execute(arguments: [markedBefore, limit])
        return db.changesCount
    }

    func markUrgent(_ change: UrgentChange, tenant: String, scopeKey: String, at: Int64) async throws {
        try statement(
            """
            INSERT OR REPLACE INTO urgent_changes (tenant, scope_key, seq, table_name, row_id, marked_at) VALUES (?, ?, ?, ?, ?, ?)
            """
        ).execute(arguments: [tenant, scopeKey, change.sequence, change.table, change.rowID, at])
    }

    func teamMemberships(tenant: String) async throws -> [(team: String, user: String)] {
        try Row.fetchAll(statement("SELECT team_id, user_id FROM team_members WHERE tenant = ? ORDER BY team_id, user_id"), arguments: [tenant])
            .map { (team: $0["team_id"], user: $0["user_id"]) }
    }

    func revoke(tenant: String, kind: RevocationKind, subject: String, at: Int64) async throws {
        try statement(
            """
            INSERT INTO revocations (tenant, kind, subject, revoked_at) VALUES (?, ?, ?, ?)
            ON CONFLICT (tenant, kind, subject) DO UPDATE SET revoked_at = MAX(revoked_at, excluded.revoked_at)
            """
        ).execute(arguments: [tenant, kind.rawValue, subject, at])
    }

    func setTeamMembership(tenant: String, team: String, userID: String, isMember: Bool) async throws -> Bool {
        if isMember {
            try statement("INSERT OR IGNORE INTO team_members (tenant, team_id, user_id) VALUES (?, ?, ?)").execute(arguments: [tenant, team, userID])
        } else {
            try statement("DELETE FROM team_members WHERE tenant = ? AND team_id = ? AND user_id = ?").execute(arguments: [tenant, team, userID])
        }
        return db.changesCount > 0
    }

    func auditHead() async throws -> AuditHead? {
        try writePendingAudit()
        guard let row = try Row.fetchOne(statement("SELECT * FROM audit_head")) else {
            return nil
        }
        // Columns of later upgrades are read only when present (a head read by a test that
        // migrated part way).
        let baseID: Int64 = row.hasColumn("base_id") ? row["base_id"] : 0
        let base = baseID > 0 ? AuditBase(lastID: baseID, lastHash: row["base_hash"], seal: row["base_seal"] ?? "") : nil
        return AuditHead(
            lastID: row["last_id"], lastHash: row["last_hash"], keyedFrom: row["keyed_from"], keyFingerprint: row["key_fingerprint"],
            seal: row["seal"], detailsFrom: row.hasColumn("details_from") ? row["details_from"] : nil, base: base
        )
    }
}
