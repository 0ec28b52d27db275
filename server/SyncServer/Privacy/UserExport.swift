import ContractRuntime
public import Foundation

/// Everything the server holds about one user (a learner's right of access), as JSON lines,
/// one object per line, each with a `type`:
///
/// - `user`: the tenant, the user, when the export was made, the erasure if there was one;
/// - `device`: each push stream the user's devices own (`client_id`, `device_id`, `last_seq`);
/// - `team`: each team the user belongs to;
/// - `revocation`: each revocation of the user or of one of their devices;
/// - `row`: each live row of every scope the user owns, in its contract's current version;
/// - `event`: each event the user sent, in any scope, and every event of the scopes they own;
/// - `file`: each file the user uploaded (its hash, size, type, when it was stored, and the
///   path its bytes are read from), after their devices' keys;
/// - `audit`: each audit entry the user's identity wrote, with its detail in clear (`null`
///   with `detail_erased` once erased).
///
/// The lines come in that order, rows and events by contract then by the order they were last
/// written in their scope (events the user sent into scopes of others then by primary key), audit
/// entries by id, so two exports of the same history are byte for byte the same but for
/// `exported_at`.
///
/// An export is read a page at a time, each page bounded in bytes (`pageBytes`, the server's
/// listing budget), never whole: a user with a thousand rows of 250 kB is read
/// and written in pages of a few MB, whatever the total.
public struct UserExport: Sendable {
    let storage: any SyncStorage
    let clock: any ServerClock

    /// An export service on `storage`.
    public init(storage: any ServerStorage, clock: any ServerClock = SystemClock()) {
        self.storage = storage.engine
        self.clock = clock
    }

    /// How many lines of each type an export wrote.
    public struct Summary: Hashable, Sendable {
        /// The lines written, by line type.
        public var lines: [String: Int] = [:]
        /// Whether the server held anything about the user: a line besides the `user` line,
        /// or an erasure on record. An export of a name the server never saw (a typo, a user
        /// of another tenant) finds nothing, and says so instead of exporting an empty user.
        public var foundAnything = false
    }

    /// Writes the export to `output`, line by line.
    /// - Parameters:
    ///   - tenant: the tenant the user belongs to.
    ///   - userID: the user whose data is exported.
    ///   - pageBytes: the bytes of rows (or audit details) read from storage at once, at most
    ///     but for the last one read; the server's listing page budget.
    ///   - output: takes each line (it may wait: a response sent as it is written).
    /// - Throws: ``ServiceError`` 400 for an empty tenant or user; a storage failure as 500.
    @discardableResult
    public func export(
        tenant: String, userID: String, pageBytes: Int = 4 * 1024 * 1024, to output: (Data) async throws -> Void
    ) async throws -> Summary {
        try await run(tenant: tenant, userID: userID, pageBytes: pageBytes, stopAtFinding: false, to: output)
    }

    /// Whether the server holds anything about the user (``Summary/foundAnything``), read as the
    /// export reads it, up to the first thing found.
    public func holdsAnything(tenant: String, userID: String) async throws -> Bool {
        do {
            return try await run(tenant: tenant, userID: userID, pageBytes: 64 * 1024, stopAtFinding: true) { _ in }.foundAnything
        } catch is FoundSomething {
            return true
        }
    }

    /// Thrown to stop a probe at the first line beyond the `user` line.
    private struct FoundSomething: Error {}

    private func run(
        tenant: String, userID: String, pageBytes: Int, stopAtFinding: Bool, to output: (Data) async throws -> Void
    ) async throws -> Summary {
        guard !tenant.isEmpty, !userID.isEmpty else { throw ServiceError.malformed("an export names a tenant and a user") }
        let pageBytes = max(1, pageBytes)
        var summary = Summary()
        func write(_ type: String, _ fields: [String: JSONValue]) async throws {
            if stopAtFinding, type != "user" { throw FoundSomething() }
            var object = fields
            object["type"] = .string(type)
            try await output(Data((CanonicalJSON.text(.object(object)) + "\n").utf8))
            summary.lines[type, default: 0] += 1
        }
        let key = storage.auditKey
        let now = clock.now()
        let (identity, clients, revocations, teams) = try await storage.read { reader in
            let state = try await reader.identityState(tenant: tenant, userID: userID, deviceID: "")
            let clients = try await reader.clients(tenant: tenant, ownedBy: userID)
            return (state, clients, try await reader.revocations(tenant: tenant), state.teams)
        }
        var user: [String: JSONValue] = [
            "tenant": .string(tenant), "user_id": .string(userID), "exported_at": .string(now.iso8601),
        ]
        if let erasedAt = identity.erasedAt { user["erased_at"] = .int(erasedAt) }
        try await write("user", user)
        let devices = Set(clients.compactMap(\.owner?.deviceID))
        for client in clients {
            try await write(
                "device",
                [
                    "client_id": .string(client.clientID), "device_id": client.owner.map { .string($0.deviceID) } ?? .null,
                    "last_seq": .int(client.lastSeq), "updated_at": .int(client.updatedAt),
                ])
        }
        for team in teams { try await write("team", ["team_id": .string(team)]) }
        for revocation in revocations
        where (revocation.kind == .user && revocation.subject == userID) || (revocation.kind == .device && devices.contains(revocation.subject)) {
            try await write(
                "revocation",
                [
                    "kind": .string(revocation.kind.rawValue), "subject": .string(revocation.subject), "revoked_at": .int(revocation.revokedAt),
                ])
        }

        let census = try await storage.read { reader in
            try await reader.serverTableQuery(
                "SELECT * FROM device_census WHERE tenant = ? AND user_id = ? ORDER BY device_id", [.text(tenant), .text(userID)])
        }
        for device in census.map(FleetCensus.device) {
            guard case .object(var fields) = device.json else { continue }
            fields["tenant"] = nil
            fields["user"] = nil
            try await write("census", fields)
        }

        let owned = UserErasure.ownedScopes(tenant: tenant, userID: userID, devices: devices.sorted(), contracts: storage.contracts)
        for (scope, scopeKey) in owned {
            for entity in storage.contracts.entities.sorted(by: { $0.name < $1.name }) where entity.scope == scope.name {
                try await forEachRow(of: ContractTable(entity), scopeKey: scopeKey, tenant: tenant, pageBytes: pageBytes) { row in
                    guard row.integer("_deleted") != 1 else { return }
                    try await write(
                        "row",
                        [
                            "entity": .string(entity.name), "scope": .string(scopeKey), "version": .int(row.integer("_version") ?? 0),
                            "row": .object(RowShaping.currentWireRow(row, entity: entity)),
                        ])
                }
            }
        }
        let ownedKeys = Set(owned.map(\.1))
        for event in storage.contracts.events.sorted(by: { $0.name < $1.name }) {
            let table = ContractTable(event)
            func line(_ row: StoredRow) async throws {
                try await write(
                    "event",
                    [
                        "event": .string(event.name), "scope": .string(row.text("_scope_key") ?? ""),
                        "payload": .object(RowShaping.wireEvent(row, event: event, version: event.currentVersion)),
                    ])
            }
            // Every event of the scopes the user owns, then those the user sent into others'.
            for (scope, scopeKey) in owned where scope.name == event.scope {
                try await forEachRow(of: table, scopeKey: scopeKey, tenant: tenant, pageBytes: pageBytes) { try await line($0) }
            }
            try await forEachEvent(
                of: table, largestRowBytes: event.maxBytes, sentBy: userID, outside: ownedKeys, tenant: tenant, pageBytes: pageBytes
            ) { try await line($0) }
        }

        // The public keys the user's devices registered, which the audit names their signed writes by.
        for deviceKey in try await storage.read({ try await DeviceKeyStore.keys(tenant: tenant, userID: userID, in: $0) }) {
            try await write("device_key", deviceKey)
        }

        // The files the user uploaded, by hash, in pages; their bytes are at `path` for a token
        // that may read them (each file whole would not fit a line).
        var lastFile = ""
        while true {
            let after = lastFile
            let files = try await storage.read { reader in
                try await reader.serverTableQuery(
                    """
                    SELECT "sha256", "size", "content_type", "stored_at" FROM "\(EngineNames.ServerTable.files.rawValue)"
                    WHERE "tenant" = ? AND "uploaded_by" = ? AND "sha256" > ? ORDER BY "sha256" LIMIT 500
                    """, [.text(tenant), .text(userID), .text(after)])
            }
            for file in files {
                guard let hash = file.text("sha256") else { continue }
                try await write(
                    "file",
                    [
                        "sha256": .string(hash), "size": .int(file.integer("size") ?? 0), "content_type": .string(file.text("content_type") ?? ""),
                        "stored_at": .string(Timestamp(millisecondsSince1970: file.integer("stored_at") ?? 0).iso8601),
                        "path": .string("/sync/v1/files/\(hash)"),
                    ])
                lastFile = hash
            }
            if files.count < 500 { break }
        }

        var after: Int64 = 0
        // Entries per read: a few at first, then as many as the largest seen so far fit in a page.
        var entriesPerRead = 8
        while true {
            let (from, limit) = (after, entriesPerRead)
            let (page, details) = try await storage.read { reader in
                let page = try await reader.auditEntries(tenant: tenant, userID: userID, after: from, limit: limit)
                return (page, try await AuditChain.readableDetails(of: page, in: reader, key: key))
            }
            guard let last = page.last else { break }
            after = last.id
            let largest = page.map { $0.detail.utf8.count + 256 }.max() ?? 256
            entriesPerRead = max(1, min(1000, pageBytes / max(1024, largest)))
            for (entry, detail) in zip(page, details) {
                var line: [String: JSONValue] = [
                    "id": .int(entry.id), "recorded_at": .int(entry.recordedAt), "user_id": .string(entry.userID),
                    "device_id": .string(entry.deviceID), "entity": .string(entry.entity), "row_id": .string(entry.rowID),
                    "operation": .string(entry.operation.rawValue), "outcome": .string(entry.outcome.rawValue),
                ]
                if let detail {
                    line["detail"] = JSONParser.parse(detail) ?? .string(detail)
                } else {
                    line["detail"] = .null
                    line["detail_erased"] = .bool(true)
                }
                try await write("audit", line)
            }
        }
        summary.foundAnything = identity.erasedAt != nil || summary.lines.contains { $0.key != "user" && $0.value > 0 }
        return summary
    }

    /// Rows a page at most: read one page of `pageBytes` at a time, each in a read of its own
    /// (so none stays in memory after its page), in the order the scope last wrote them.
    private func forEachRow(
        of table: ContractTable, scopeKey: String, tenant: String, pageBytes: Int, _ body: (StoredRow) async throws -> Void
    ) async throws {
        var after: Int64 = 0
        while true {
            let from = after
            let rows = try await storage.read { reader in
                try await reader.changes(
                    in: [table], tenant: tenant, scopeKey: scopeKey, after: from, limit: 1000, byteBudget: pageBytes, pageColumnsOnly: false)
            }
            guard let last = rows.last?.row.integer("_seq") else { return }
            after = last
            for (_, row) in rows { try await body(row) }
        }
    }

    /// The events `userID` sent into scopes not in `outside` (the scopes of others), by primary
    /// key: their ids a page at a time, then their rows as many at once as `largestRowBytes`
    /// each fit in `pageBytes` (at least one).
    private func forEachEvent(
        of table: ContractTable, largestRowBytes: Int, sentBy userID: String, outside owned: Set<String>, tenant: String, pageBytes: Int,
        _ body: (StoredRow) async throws -> Void
    ) async throws {
        func quoted(_ name: String) -> String { "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
        let key = "CAST(\(quoted(table.primaryKey)) AS TEXT)"
        let sql = """
            SELECT \(key) AS id, "_scope_key" AS scope_key FROM \(quoted(table.name))
            WHERE "_tenant_id" = ? AND "user_id" = ? AND \(key) > ? ORDER BY \(key) LIMIT 1000
            """
        let perRead = max(1, pageBytes / max(1, largestRowBytes))
        var after = ""
        while true {
            let from = after
            let found = try await storage.read { reader in
                try await reader.serverTableQuery(sql, [.text(tenant), .text(userID), .text(from)])
            }
            guard let last = found.last?.text("id") else { return }
            after = last
            let ids = found.filter { !owned.contains($0.text("scope_key") ?? "") }.compactMap { $0.text("id") }
            for start in stride(from: 0, to: ids.count, by: perRead) {
                let batch = Array(ids[start..<min(start + perRead, ids.count)])
                let rows = try await storage.read { reader in
                    var rows: [StoredRow] = []
                    for id in batch { if let row = try await reader.row(in: table, tenant: tenant, id: id) { rows.append(row) } }
                    return rows
                }
                for row in rows { try await body(row) }
            }
        }
    }
}
