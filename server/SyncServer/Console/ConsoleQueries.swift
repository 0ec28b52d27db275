import ContractRuntime
import Foundation

/// What the console reads beyond the storage's own methods: a tenant's troubled pushes newest
/// first, its erasures, and what erasing a user would touch. Server tables only, in SQL both
/// storages speak (``StorageReader/serverTableQuery(_:_:)``).
struct ConsoleQueries: Sendable {
    let storage: any SyncStorage

    /// A push whose audit entry records a conflicted or rejected mutation.
    struct TroubledPush: Sendable {
        var entry: AuditEntry
        /// Each conflicted or rejected mutation of it, from the entry's detail; empty when the
        /// detail was erased (the user's data erased since) or does not read.
        var changes: [Change]
        var detailErased: Bool
    }

    /// One mutation as the audit detail tells it: ids and codes, never the row's values.
    struct Change: Sendable {
        var entity: String
        var rowID: String
        var outcome: String
        /// The refusal's code (`invalid_payload`, …), else the resolution, else the conflict policy
        /// that decided (`version_check`).
        var reason: String?
        var seq: Int64?
    }

    /// The tenant's pushes with a conflicted or rejected mutation, newest first, with ids below
    /// `before` (all when `nil`), at most `limit`.
    func troubledPushes(tenant: String, before: Int64?, limit: Int) async throws -> [TroubledPush] {
        try await troubledPushesPage(tenant: tenant, before: before, limit: limit, pageBytes: .max).pushes
    }

    /// A page of ``troubledPushes(tenant:before:limit:)`` bounded in bytes as every listing is
    /// (``ResponsePage``, by the size of each entry's detail, read first), and whether more follow.
    func troubledPushesPage(tenant: String, before: Int64?, limit: Int, pageBytes: Int) async throws -> (pushes: [TroubledPush], hasMore: Bool) {
        let key = storage.auditKey
        let filter = "tenant = ? AND id < ? AND operation = ? AND (outcome LIKE ? OR outcome LIKE ?)"
        let arguments: [ColumnValue] = [
            .text(tenant), .integer(before ?? Int64.max), .text(AuditOperation.push.rawValue), .text("%conflicted%"), .text("%rejected%"),
        ]
        return try await storage.read { reader in
            let sizes = try await reader.serverTableQuery(
                "SELECT LENGTH(detail) + 512 AS bytes FROM audit_log WHERE \(filter) ORDER BY id DESC LIMIT ?",
                arguments + [.integer(Int64(limit + 1))])
            var page = ResponsePage(byteBudget: pageBytes)
            while page.count < sizes.count, page.count < limit, page.hasRoom { page.take(bytes: Int(sizes[page.count].integer("bytes") ?? 0)) }
            let rows = try await reader.serverTableQuery(
                """
                SELECT id, tenant, recorded_at, user_id, device_id, entity, row_id, operation, outcome, detail, previous_hash, hash
                FROM audit_log WHERE \(filter) ORDER BY id DESC LIMIT ?
                """,
                arguments + [.integer(Int64(page.count))])
            let entries = rows.map(Self.auditEntry)
            let details = try await AuditChain.readableDetails(of: entries, in: reader, key: key)
            return (
                zip(entries, details).map { entry, detail in
                    guard let detail else { return TroubledPush(entry: entry, changes: [], detailErased: true) }
                    let changes = ((try? AuditedChange.changes(of: entry, readableDetail: detail)) ?? []).filter {
                        $0.outcome == .conflicted || $0.outcome == .rejected
                    }
                    return TroubledPush(entry: entry, changes: changes.map(Self.change), detailErased: false)
                }, page.count < sizes.count
            )
        }
    }

    private static func change(_ audited: AuditedChange) -> Change {
        var reason: String?
        if case .object(let error)? = audited.detail["error"], case .string(let code)? = error["code"] {
            reason = code
        } else if case .string(let resolution)? = audited.detail["resolution"] {
            reason = resolution
        } else if case .string(let policy)? = audited.detail["policy"] {
            reason = policy
        }
        var seq: Int64?
        if case .int(let number)? = audited.detail["seq"] { seq = number }
        return Change(entity: audited.entity, rowID: audited.rowID, outcome: audited.outcome.rawValue, reason: reason, seq: seq)
    }

    static func auditEntry(_ row: StoredRow) -> AuditEntry {
        AuditEntry(
            id: row.integer("id") ?? 0, tenant: row.text("tenant") ?? "", recordedAt: row.integer("recorded_at") ?? 0,
            userID: row.text("user_id") ?? "", deviceID: row.text("device_id") ?? "", entity: row.text("entity") ?? "",
            rowID: row.text("row_id") ?? "", operation: AuditOperation(rawValue: row.text("operation") ?? ""),
            outcome: AuditOutcome(rawValue: row.text("outcome") ?? ""), detail: row.text("detail") ?? "",
            previousHash: row.text("previous_hash") ?? "", hash: row.text("hash") ?? "")
    }

    /// The tenant's erased users, most recent first, at most `limit` (a page of identifiers of
    /// 256 bytes at most each: far within any byte budget).
    func erasures(tenant: String, limit: Int = 1000) async throws -> [(userID: String, erasedAt: Int64)] {
        try await storage.read { reader in
            try await reader.serverTableQuery(
                "SELECT user_id, erased_at FROM erasures WHERE tenant = ? ORDER BY erased_at DESC, user_id LIMIT ?",
                [.text(tenant), .integer(Int64(limit))]
            ).map { ($0.text("user_id") ?? "", $0.integer("erased_at") ?? 0) }
        }
    }

    /// The tenant's latest revocations, most recent first, at most `limit`.
    func revocations(tenant: String, limit: Int = 1000) async throws -> [Revocation] {
        try await storage.read { reader in
            try await reader.serverTableQuery(
                "SELECT kind, subject, revoked_at FROM revocations WHERE tenant = ? ORDER BY revoked_at DESC, kind, subject LIMIT ?",
                [.text(tenant), .integer(Int64(limit))]
            ).compactMap { row in
                RevocationKind(rawValue: row.text("kind") ?? "").map {
                    Revocation(kind: $0, subject: row.text("subject") ?? "", revokedAt: row.integer("revoked_at") ?? 0)
                }
            }
        }
    }

    /// What erasing a user would touch, read as ``UserErasure`` finds it.
    struct ErasurePreview: Sendable {
        var userID: String
        /// The devices whose push streams the user owns.
        var devices: [String]
        /// The scopes the user owns, with the rows (live or deleted) and events each holds.
        var scopes: [(key: String, rows: Int, events: Int)]
        var teams: [String]
        /// When the user's data was erased before, seconds since 1970.
        var erasedAt: Int64?

        var holdsAnything: Bool { !devices.isEmpty || !teams.isEmpty || scopes.contains { $0.rows + $0.events > 0 } }
    }

    func erasurePreview(tenant: String, userID: String) async throws -> ErasurePreview {
        let contracts = storage.contracts
        return try await storage.read { reader in
            let devices = try await reader.clients(tenant: tenant, ownedBy: userID).compactMap(\.owner?.deviceID)
            var scopes: [(key: String, rows: Int, events: Int)] = []
            for (scope, key) in UserErasure.ownedScopes(tenant: tenant, userID: userID, devices: devices, contracts: contracts) {
                var rows = 0
                var events = 0
                for entity in contracts.entities where entity.scope == scope.name {
                    rows += try await UserErasure.rows(of: ContractTable(entity), scopeKey: key, tenant: tenant, in: reader).count
                }
                for event in contracts.events where event.scope == scope.name {
                    events += try await UserErasure.rows(of: ContractTable(event), scopeKey: key, tenant: tenant, in: reader).count
                }
                scopes.append((key, rows, events))
            }
            let state = try await reader.identityState(tenant: tenant, userID: userID, deviceID: "")
            return ErasurePreview(
                userID: userID, devices: Array(Set(devices)).sorted(), scopes: scopes, teams: state.teams, erasedAt: state.erasedAt)
        }
    }
}
