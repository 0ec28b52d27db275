public import ContractRuntime
public import Foundation
import GRDB
public import SyncProtocol

/// Subscriptions in the device store: what the device subscribed to, with each one's cursor,
/// and which rows each holds (docs/client.md, "Subscriptions").
///
/// A subscription's rows live in the contracts' own tables, beside the rows of scopes synced
/// whole; `subscription_rows` records which subscription holds which row. A row goes from the
/// device (it is *evicted*) when no subscription holds it any more, unless
/// - a write of it is not on the server yet (pending, sending, waiting, conflicted, failed) or a
///   conflict on it is open;
/// - it belongs to a scope the engine syncs whole (its contract's scope is one of the engine's).
///
/// A subscription the app ends (``unsubscribeSubscription(id:)``) keeps holding its rows until
/// its TTL passes; then it is deleted and its rows evicted by the rule above.
extension OfflineStore {
    static let subscriptionStatements = [
        """
        CREATE TABLE "\(EngineNames.ClientTable.subscriptions.rawValue)" (
            "id" TEXT PRIMARY KEY NOT NULL,
            "name" TEXT NOT NULL,
            "parameters" TEXT NOT NULL,
            "scope" TEXT,
            "cursor" TEXT,
            "ttl_seconds" INTEGER NOT NULL,
            "priority" TEXT NOT NULL,
            "created_at" INTEGER NOT NULL,
            "has_synced" INTEGER NOT NULL DEFAULT 0,
            "last_synced_at" INTEGER,
            "unsubscribed_at" INTEGER,
            "last_error" TEXT,
            "resyncing" INTEGER NOT NULL DEFAULT 0,
            UNIQUE ("name", "parameters", "scope")
        )
        """,
        """
        CREATE TABLE "\(EngineNames.ClientTable.subscriptionRows.rawValue)" (
            "subscription_id" TEXT NOT NULL,
            "entity" TEXT NOT NULL,
            "row_id" TEXT NOT NULL,
            "stale" INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY ("subscription_id", "entity", "row_id")
        ) WITHOUT ROWID
        """,
        #"CREATE INDEX "subscription_rows_by_row" ON "subscription_rows" ("entity", "row_id")"#,
    ]

    // MARK: Subscribing

    /// Records a subscription (or finds the one already recorded for the same name, parameters
    /// and scope, and makes it active again), after checking `request` against its contract.
    /// Nothing is pulled here: the engine pulls it with its next sync.
    ///
    /// - Throws: ``SubscriptionError`` for an unknown subscription or parameters it does not
    ///   take; nothing is stored then.
    public func subscribe(_ request: SubscriptionRequest, ttl: Duration? = nil, priority: SyncPriority? = nil) throws(SubscriptionError)
        -> SubscriptionStatus
    {
        let descriptor = try Self.check(request, contracts: contracts)
        let parameters = CanonicalJSON.text(.object(request.parameters))
        let ttlSeconds = ttl.map { Int($0.components.seconds) } ?? descriptor.defaultTTLSeconds
        guard ttlSeconds >= 0 else { throw .invalidParameter(name: "ttl", reason: "a TTL cannot be negative") }
        let priority = priority ?? descriptor.priority
        let now = now().millisecondsSince1970
        let made = ulids.nextString()
        do {
            let id = try write { db -> String in
                if let existing = try String.fetchOne(
                    db, sql: #"SELECT "id" FROM "subscriptions" WHERE "name" = ? AND "parameters" = ? AND "scope" IS ?"#,
                    arguments: [request.name, parameters, request.scope])
                {
                    try db.execute(
                        sql: #"UPDATE "subscriptions" SET "unsubscribed_at" = NULL, "ttl_seconds" = ?, "priority" = ? WHERE "id" = ?"#,
                        arguments: [ttlSeconds, priority.rawValue, existing])
                    return existing
                }
                try db.execute(
                    sql: """
                        INSERT INTO "subscriptions" ("id", "name", "parameters", "scope", "ttl_seconds", "priority", "created_at")
                        VALUES (?, ?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [made, request.name, parameters, request.scope, ttlSeconds, priority.rawValue, now])
                return made
            }
            guard let status = try subscriptionStatus(id: id) else { throw SubscriptionError.notFound(id: id) }
            return status
        } catch let error as SubscriptionError {
            throw error
        } catch {
            throw .store(String(describing: error))
        }
    }

    /// Ends a subscription: it is pulled no more, and its rows stay readable until its TTL
    /// passes (then they are evicted, unless something else holds them).
    public func unsubscribeSubscription(id: String) throws(SubscriptionError) {
        let now = now().millisecondsSince1970
        let changed: Int
        do {
            changed = try write { db in
                try db.execute(
                    sql: #"UPDATE "subscriptions" SET "unsubscribed_at" = COALESCE("unsubscribed_at", ?) WHERE "id" = ?"#, arguments: [now, id])
                return db.changesCount
            }
        } catch {
            throw .store(String(describing: error))
        }
        if changed == 0 { throw .notFound(id: id) }
    }

    /// Every subscription the store holds (active, or ended and not yet expired), oldest first.
    public func subscriptions() throws(OfflineStoreError) -> [SubscriptionStatus] {
        try read { db in
            try Row.fetchAll(db, sql: #"SELECT * FROM "subscriptions" ORDER BY "created_at", "id""#).map { try status(of: $0, db) }
        }
    }

    /// One subscription's state; `nil` when the store holds none with this id (never, refused,
    /// or expired).
    public func subscriptionStatus(id: String) throws(OfflineStoreError) -> SubscriptionStatus? {
        try read { db in
            try Row.fetchOne(db, sql: #"SELECT * FROM "subscriptions" WHERE "id" = ?"#, arguments: [id]).map { try status(of: $0, db) }
        }
    }

    private func status(of row: Row, _ db: Database) throws -> SubscriptionStatus {
        let id: String = row["id"]
        let parameters: String = row["parameters"]
        let values: [String: JSONValue]
        if case .object(let object)? = JSONParser.parse(Data(parameters.utf8)) { values = object } else { values = [:] }
        let rows = try Int.fetchOne(db, sql: #"SELECT COUNT(*) FROM "subscription_rows" WHERE "subscription_id" = ?"#, arguments: [id]) ?? 0
        let ttl: Int = row["ttl_seconds"]
        let ended: Int64? = row["unsubscribed_at"]
        let last: Int64? = row["last_synced_at"]
        return SubscriptionStatus(
            id: id, request: SubscriptionRequest(name: row["name"], parameters: values, scope: row["scope"]), isActive: ended == nil,
            hasSynced: (row["has_synced"] as Int) == 1, lastSyncedAt: last.map { Timestamp(millisecondsSince1970: $0).date },
            rowCount: rows, priority: SyncPriority(rawValue: row["priority"]) ?? .normal, ttl: .seconds(ttl),
            expiresAt: ended.map { Timestamp(millisecondsSince1970: $0 + Int64(ttl) * 1000).date },
            error: (row["last_error"] as String?).flatMap { try? JSONDecoder().decode(ErrorDetail.self, from: Data($0.utf8)) })
    }

    /// The rows a subscription holds on the device: primary keys by entity name, sorted.
    public func subscriptionRowIDs(id: String) throws(OfflineStoreError) -> [String: [String]] {
        try read { db in
            var rows: [String: [String]] = [:]
            for row in try Row.fetchAll(
                db, sql: #"SELECT "entity", "row_id" FROM "subscription_rows" WHERE "subscription_id" = ? ORDER BY "entity", "row_id""#,
                arguments: [id])
            {
                rows[row["entity"], default: []].append(row["row_id"])
            }
            return rows
        }
    }

    /// The descriptor `request` names, its parameters checked against it.
    static func check(_ request: SubscriptionRequest, contracts: ContractCatalog) throws(SubscriptionError) -> SubscriptionDescriptor {
        guard let descriptor = contracts.subscription(named: request.name) else {
            throw .unknownSubscription(name: request.name, known: contracts.subscriptions.map(\.name).sorted())
        }
        for name in request.parameters.keys.sorted() where descriptor.parameter(named: name) == nil {
            throw .invalidParameter(name: name, reason: "'\(request.name)' takes no parameter '\(name)'")
        }
        for parameter in descriptor.parameters {
            guard let value = request.parameters[parameter.name] else {
                throw .invalidParameter(name: parameter.name, reason: "'\(request.name)' needs it (\(parameter.kind.spelling))")
            }
            func text(_ value: JSONValue) throws(SubscriptionError) {
                guard case .string(let text) = value, !text.isEmpty, text.utf8.count <= 256, !text.unicodeScalars.contains(where: { $0.value < 0x20 })
                else { throw .invalidParameter(name: parameter.name, reason: "a value is a non-empty identifier of at most 256 bytes") }
            }
            if case .list = parameter.kind {
                guard case .array(let items) = value, !items.isEmpty, items.count <= parameter.maxCount else {
                    throw .invalidParameter(name: parameter.name, reason: "a list of 1 to \(parameter.maxCount) values")
                }
                for item in items { try text(item) }
            } else {
                try text(value)
            }
        }
        return descriptor
    }

    // MARK: Syncing (the engine's)

    /// A subscription the engine pulls.
    package struct PulledSubscription: Sendable {
        package var id: String
        package var request: SubscriptionRequest
        package var cursor: String?
        package var priority: SyncPriority
    }

    /// The active subscriptions, by priority then age.
    package func activeSubscriptions() throws(OfflineStoreError) -> [PulledSubscription] {
        try read { db in
            try Row.fetchAll(db, sql: #"SELECT * FROM "subscriptions" WHERE "unsubscribed_at" IS NULL ORDER BY "created_at", "id""#).map { row in
                let parameters: String = row["parameters"]
                let values: [String: JSONValue]
                if case .object(let object)? = JSONParser.parse(Data(parameters.utf8)) { values = object } else { values = [:] }
                return PulledSubscription(
                    id: row["id"], request: SubscriptionRequest(name: row["name"], parameters: values, scope: row["scope"]), cursor: row["cursor"],
                    priority: SyncPriority(rawValue: row["priority"]) ?? .normal)
            }
        }.sorted { ($0.priority, $0.id) < ($1.priority, $1.id) }
    }

    /// The contract scopes the engine syncs whole (their rows are the scope pull's, never evicted here).
    package func wholeScopeNames(_ scopeKeys: [String]) -> Set<String> {
        Set(scopeKeys.map { repullScopeName($0) })
    }

    /// Applies one subscription page in one transaction: its rows through the same path as a
    /// pull page (pending writes and conflicts kept), the rows it holds, its leaves (evicted
    /// unless held otherwise) and its cursor. At the end of a fresh sync after an expired
    /// cursor, the rows it no longer delivered are let go.
    package func applySubscriptionPage(
        _ page: SubscriptionPullResponse.Page, wholeScopes: Set<String>
    ) throws(OfflineStoreError) -> ServerChangesReport {
        var prepared = prepare(ServerChanges(upserts: page.upserts, deletes: page.deletes))
        prepared.subscription = .init(id: page.id, cursor: page.cursor, hasMore: page.hasMore, leaves: page.leaves, wholeScopes: wholeScopes)
        return try applyServerChanges(pages: [prepared])[0]
    }

    /// The subscription part of ``applyServerChanges(pages:)``, in its transaction.
    func applySubscription(_ target: PreparedServerChanges.SubscriptionTarget, _ changes: PreparedServerChanges, now: Int64, _ db: Database) throws {
        guard try Bool.fetchOne(db, sql: #"SELECT 1 FROM "subscriptions" WHERE "id" = ?"#, arguments: [target.id]) ?? false else { return }
        let hold = try db.cachedStatement(
            sql: """
                INSERT INTO "subscription_rows" ("subscription_id", "entity", "row_id", "stale") VALUES (?, ?, ?, 0)
                ON CONFLICT DO UPDATE SET "stale" = 0
                """)
        for (name, rows) in changes.upserts {
            guard case .entity(_, let rows) = rows else { continue }
            for row in rows { try hold.execute(arguments: [target.id, name, row.id]) }
        }
        var candidates: [(entity: String, id: String)] = []
        for (name, ids) in changes.deletes {
            for id in ids {
                try db.execute(
                    sql: #"DELETE FROM "subscription_rows" WHERE "subscription_id" = ? AND "entity" = ? AND "row_id" = ?"#,
                    arguments: [target.id, name, id])
            }
        }
        for (name, ids) in target.leaves {
            for id in ids {
                try db.execute(
                    sql: #"DELETE FROM "subscription_rows" WHERE "subscription_id" = ? AND "entity" = ? AND "row_id" = ?"#,
                    arguments: [target.id, name, id])
                candidates.append((name, id))
            }
        }
        let done = !target.hasMore
        if done {
            // A fresh sync after an expired cursor: what it did not deliver again is let go.
            let stale = try Row.fetchAll(
                db, sql: #"SELECT "entity", "row_id" FROM "subscription_rows" WHERE "subscription_id" = ? AND "stale" = 1"#,
                arguments: [target.id])
            candidates += stale.map { ($0["entity"], $0["row_id"]) }
            try db.execute(sql: #"DELETE FROM "subscription_rows" WHERE "subscription_id" = ? AND "stale" = 1"#, arguments: [target.id])
        }
        try db.execute(
            sql: """
                UPDATE "subscriptions" SET "cursor" = COALESCE(?, "cursor"), "last_error" = NULL,
                    "has_synced" = CASE WHEN ? THEN 1 ELSE "has_synced" END,
                    "last_synced_at" = CASE WHEN ? THEN ? ELSE "last_synced_at" END,
                    "resyncing" = CASE WHEN ? THEN 0 ELSE "resyncing" END
                WHERE "id" = ?
                """,
            arguments: [target.cursor, done, done, now, done, target.id])
        try evictUnheld(candidates, wholeScopes: target.wholeScopes, db)
    }

    /// Records that the server refused a subscription: with `forbidden` (or another refusal
    /// that holds for good) the subscription and everything it held are let go, its error kept
    /// for the app to read until then; with `cursor_expired` it is synced again from no cursor,
    /// its rows kept until that sync ends.
    package func recordSubscriptionError(id: String, _ error: ErrorDetail, wholeScopes: Set<String>) throws(OfflineStoreError) -> Bool {
        try write { db in
            if error.code == .cursorExpired {
                try db.execute(sql: #"UPDATE "subscriptions" SET "cursor" = NULL, "resyncing" = 1 WHERE "id" = ?"#, arguments: [id])
                try db.execute(sql: #"UPDATE "subscription_rows" SET "stale" = 1 WHERE "subscription_id" = ?"#, arguments: [id])
                return true
            }
            try db.execute(sql: #"UPDATE "subscriptions" SET "last_error" = ?, "cursor" = NULL WHERE "id" = ?"#, arguments: [error.storedText, id])
            let held = try Row.fetchAll(db, sql: #"SELECT "entity", "row_id" FROM "subscription_rows" WHERE "subscription_id" = ?"#, arguments: [id])
            try db.execute(sql: #"DELETE FROM "subscription_rows" WHERE "subscription_id" = ?"#, arguments: [id])
            try evictUnheld(held.map { ($0["entity"], $0["row_id"]) }, wholeScopes: wholeScopes, db)
            return false
        }
    }

    /// Deletes a refused subscription once the app has read why (``SubscriptionHandle/waitForFirstSync()``).
    package func forgetSubscription(id: String) throws(OfflineStoreError) {
        try write { db in try db.execute(sql: #"DELETE FROM "subscriptions" WHERE "id" = ?"#, arguments: [id]) }
    }

    /// Deletes the subscriptions whose TTL passed since they were ended, and evicts their rows
    /// unless held otherwise. Returns how many rows were evicted.
    @discardableResult
    package func expireSubscriptions(wholeScopes: Set<String>) throws(OfflineStoreError) -> Int {
        let now = now().millisecondsSince1970
        return try write { db in
            let expired = try String.fetchAll(
                db, sql: #"SELECT "id" FROM "subscriptions" WHERE "unsubscribed_at" IS NOT NULL AND "unsubscribed_at" + "ttl_seconds" * 1000 <= ?"#,
                arguments: [now])
            var candidates: [(entity: String, id: String)] = []
            for id in expired {
                let held = try Row.fetchAll(
                    db, sql: #"SELECT "entity", "row_id" FROM "subscription_rows" WHERE "subscription_id" = ?"#, arguments: [id])
                candidates += held.map { ($0["entity"], $0["row_id"]) }
                try db.execute(sql: #"DELETE FROM "subscription_rows" WHERE "subscription_id" = ?"#, arguments: [id])
                try db.execute(sql: #"DELETE FROM "subscriptions" WHERE "id" = ?"#, arguments: [id])
            }
            return try evictUnheld(candidates, wholeScopes: wholeScopes, db)
        }
    }

    /// Deletes those of `rows` no subscription holds, that no unsynced write or open conflict
    /// involves, and whose contract's scope the engine does not sync whole. Returns how many.
    @discardableResult
    func evictUnheld(_ rows: [(entity: String, id: String)], wholeScopes: Set<String>, _ db: Database) throws -> Int {
        var evicted = 0
        for (name, id) in rows {
            guard let entity = contracts.entity(named: name), !wholeScopes.contains(entity.scope) else { continue }
            let held =
                try Bool.fetchOne(
                    db,
                    sql: """
                        SELECT EXISTS (SELECT 1 FROM "subscription_rows" WHERE "entity" = ? AND "row_id" = ?)
                            OR EXISTS (SELECT 1 FROM "outbox" WHERE "entity" = ? AND "row_id" = ? AND "status" IN \(Self.unsyncedStatusesSQL))
                            OR EXISTS (SELECT 1 FROM "conflicts" WHERE "entity" = ? AND "row_id" = ? AND "resolution" IS NULL)
                        """,
                    arguments: [name, id, name, id, name, id]) ?? true
            guard !held else { continue }
            try db.execute(
                sql: "DELETE FROM \(entity.table.quotedDatabaseIdentifier) WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = ?", arguments: [id])
            evicted += db.changesCount
        }
        return evicted
    }
}

/// What a device knows of one of its subscriptions.
public struct SubscriptionStatus: Sendable, Hashable {
    /// The store's id of the subscription.
    public var id: String
    public var request: SubscriptionRequest
    /// Pulled with every sync; `false` once ended (its rows stay until ``expiresAt``).
    public var isActive: Bool
    /// Whether a whole sync of it (every page) is on the device.
    public var hasSynced: Bool
    /// When its last page was stored.
    public var lastSyncedAt: Date?
    /// Rows it holds on the device.
    public var rowCount: Int
    public var priority: SyncPriority
    /// How long its rows stay after it ends.
    public var ttl: Duration
    /// When its rows go, once ended.
    public var expiresAt: Date?
    /// Why the server refused it, if it did.
    public var error: ErrorDetail?
}

/// Why a subscription cannot be made, or was refused.
public enum SubscriptionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The contracts declare no subscription by this name.
    case unknownSubscription(name: String, known: [String])
    /// A parameter is missing, not taken, or not of its type.
    case invalidParameter(name: String, reason: String)
    /// The server refused it: the device's identity may not read what it selects. Nothing of it is kept.
    case forbidden(message: String)
    /// The server refused it for another reason (`subscription_too_broad`, …). Nothing of it is kept.
    case refused(code: ErrorCode, message: String)
    /// The store holds no subscription with this id.
    case notFound(id: String)
    /// The store failed.
    case store(String)

    public var description: String {
        switch self {
        case .unknownSubscription(let name, let known):
            "the contracts declare no subscription '\(name)'; they declare \(known.isEmpty ? "none" : known.joined(separator: ", "))"
        case .invalidParameter(let name, let reason): "parameter '\(name)': \(reason)"
        case .forbidden(let message): "the server refused the subscription: \(message)"
        case .refused(let code, let message): "the server refused the subscription (\(code)): \(message)"
        case .notFound(let id): "no subscription '\(id)' on this device"
        case .store(let reason): "the store failed: \(reason)"
        }
    }
}
