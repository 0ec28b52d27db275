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
/// - `audit`: each audit entry the user's identity wrote, with its detail in clear (`null`
///   with `detail_erased` once erased).
///
/// The lines come in that order, rows and events by contract then primary key, audit entries
/// by id, so two exports of the same history are byte for byte the same but for `exported_at`.
public struct UserExport: Sendable {
    let storage: any SyncStorage
    let clock: any ServerClock

    public init(storage: any ServerStorage, clock: any ServerClock = SystemClock()) {
        self.storage = storage.engine
        self.clock = clock
    }

    /// How many lines of each type an export wrote.
    public struct Summary: Hashable, Sendable {
        public var lines: [String: Int] = [:]
        /// Whether the server held anything about the user: a line besides the `user` line,
        /// or an erasure on record. An export of a name the server never saw (a typo, a user
        /// of another tenant) finds nothing, and says so instead of exporting an empty user.
        public var foundAnything = false
    }

    /// Writes the export to `output`, line by line.
    /// - Throws: ``ServiceError`` 400 for an empty tenant or user; a storage failure as 500.
    @discardableResult
    public func export(tenant: String, userID: String, to output: (Data) throws -> Void) async throws -> Summary {
        guard !tenant.isEmpty, !userID.isEmpty else { throw ServiceError.malformed("an export names a tenant and a user") }
        var summary = Summary()
        func write(_ type: String, _ fields: [String: JSONValue]) throws {
            var object = fields
            object["type"] = .string(type)
            try output(Data((CanonicalJSON.text(.object(object)) + "\n").utf8))
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
        try write("user", user)
        let devices = Set(clients.compactMap(\.owner?.deviceID))
        for client in clients {
            try write(
                "device",
                [
                    "client_id": .string(client.clientID), "device_id": client.owner.map { .string($0.deviceID) } ?? .null,
                    "last_seq": .int(client.lastSeq), "updated_at": .int(client.updatedAt),
                ])
        }
        for team in teams { try write("team", ["team_id": .string(team)]) }
        for revocation in revocations
        where (revocation.kind == .user && revocation.subject == userID) || (revocation.kind == .device && devices.contains(revocation.subject)) {
            try write(
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
            try write("census", fields)
        }

        let owned = UserErasure.ownedScopes(tenant: tenant, userID: userID, devices: devices.sorted(), contracts: storage.contracts)
        for (scope, scopeKey) in owned {
            for entity in storage.contracts.entities.sorted(by: { $0.name < $1.name }) where entity.scope == scope.name {
                let table = ContractTable(entity)
                let rows = try await storage.read { try await UserErasure.rows(of: table, scopeKey: scopeKey, tenant: tenant, in: $0) }
                for row in rows where row.integer("_deleted") != 1 {
                    try write(
                        "row",
                        [
                            "entity": .string(entity.name), "scope": .string(scopeKey), "version": .int(row.integer("_version") ?? 0),
                            "row": .object(RowShaping.currentWireRow(row, entity: entity)),
                        ])
                }
            }
        }
        for event in storage.contracts.events.sorted(by: { $0.name < $1.name }) {
            let table = ContractTable(event)
            var seen = Set<String>()
            let events = try await storage.read { reader in
                var events: [StoredRow] = []
                for (scope, scopeKey) in owned where scope.name == event.scope {
                    events += try await UserErasure.rows(of: table, scopeKey: scopeKey, tenant: tenant, in: reader)
                }
                return events + (try await reader.rows(in: table, tenant: tenant, where: ["user_id": .text(userID)], limit: Int(Int32.max)))
            }
            for row in events.sorted(by: { ($0.text(table.primaryKey) ?? "") < ($1.text(table.primaryKey) ?? "") }) {
                guard let id = row.text(table.primaryKey), seen.insert(id).inserted else { continue }
                try write(
                    "event",
                    [
                        "event": .string(event.name), "scope": .string(row.text("_scope_key") ?? ""),
                        "payload": .object(RowShaping.wireEvent(row, event: event, version: event.currentVersion)),
                    ])
            }
        }

        // The public keys the user's devices registered, which the audit names their signed writes by.
        for deviceKey in try await storage.read({ try await DeviceKeyStore.keys(tenant: tenant, userID: userID, in: $0) }) {
            try write("device_key", deviceKey)
        }

        var after: Int64 = 0
        while true {
            let from = after
            let (page, details) = try await storage.read { reader in
                let page = try await reader.auditEntries(tenant: tenant, userID: userID, after: from, limit: 1000)
                return (page, try await AuditChain.readableDetails(of: page, in: reader, key: key))
            }
            guard let last = page.last else { break }
            after = last.id
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
                try write("audit", line)
            }
        }
        summary.foundAnything = identity.erasedAt != nil || summary.lines.contains { $0.key != "user" && $0.value > 0 }
        return summary
    }
}
