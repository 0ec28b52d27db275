public import ContractRuntime
import Foundation
import GRDB
package import SyncProtocol

/// Subscriptions in the device store: what the device subscribed to, with each one's cursor,
/// and which rows each holds (docs/client.md, "Subscriptions").
///
/// A subscription's rows live in the contracts' own tables, beside the rows of scopes synced
/// whole; `subscription_rows` records which subscription holds which row. A row goes from the
/// device (it is *evicted*) when no subscription holds it any more, unless something else does
/// (`evictUnheld`, in OfflineStore+SubscriptionEviction.swift).
///
/// A subscription the app ends (``unsubscribeSubscription(id:)``) keeps holding its rows until
/// its TTL passes; then it is deleted and its rows evicted by that rule.
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

    /// When the app last used what a subscription holds (``markSubscriptionUsed(id:)``): the
    /// least recently used go first when space is short (``subscriptionsInEvictionOrder(neverUsedAge:)``).
    /// And the rows a subscription let go of that stayed only for a write not on the server yet
    /// or an open conflict: looked at again by housekeeping, and evicted once that is settled.
    static let subscriptionEvictionStatements = [
        #"ALTER TABLE "subscriptions" ADD COLUMN "last_used_at" INTEGER"#,
        """
        CREATE TABLE "\(EngineNames.ClientTable.evictionCandidates.rawValue)" (
            "entity" TEXT NOT NULL,
            "row_id" TEXT NOT NULL,
            PRIMARY KEY ("entity", "row_id")
        ) WITHOUT ROWID
        """,
    ]

    // MARK: Subscribing

    /// Records a subscription (or finds the one already recorded for the same name, parameters
    /// and scope, and makes it active again, refused or ended), after checking `request` against
    /// its contract. Nothing is pulled here: the engine pulls it with its next sync
    /// (``SyncEngine/subscribe(_:ttl:priority:)`` is the call an app makes).
    ///
    /// - Parameters:
    ///   - request: what to sync: a subscription the contracts declare, with its parameters.
    ///   - ttl: how long its rows stay after it ends; the contract's `ttl` when `nil`.
    ///   - priority: its tier; the contract's `priority` when `nil`.
    /// - Throws: ``SubscriptionError`` for an unknown subscription, parameters it does not take
    ///   or a negative TTL; nothing is stored then.
    public func subscribe(_ request: SubscriptionRequest, ttl: Duration? = nil, priority: SyncPriority? = nil) throws(SubscriptionError)
        -> SubscriptionStatus
    {
        let descriptor = try Self.check(request, contracts: contracts, priorities: priorities)
        let parameters = CanonicalJSON.text(.object(request.parameters))
        let ttlSeconds = try ttl.map { ttl throws(SubscriptionError) in try Self.seconds(ttl) } ?? descriptor.defaultTTLSeconds
        let priority = priority ?? descriptor.priority
        let now = now().millisecondsSince1970
        let made = ulids.nextString()
        do {
            let id = try write { db -> String in
                if let existing = try Row.fetchOne(
                    db.cachedStatement(
                        sql: #"SELECT "id", "last_error" FROM "subscriptions" WHERE "name" = ? AND "parameters" = ? AND "scope" IS ?"#),
                    arguments: [request.name, parameters, request.scope])
                {
                    let id: String = existing["id"]
                    // A refused one is asked again from scratch (the app subscribes anew).
                    let refused = (existing["last_error"] as String?) != nil
                    try db.execute(
                        sql: """
                            UPDATE "subscriptions" SET "unsubscribed_at" = NULL, "ttl_seconds" = ?, "priority" = ?, "last_error" = NULL,
                                "cursor" = CASE WHEN ? THEN NULL ELSE "cursor" END, "has_synced" = CASE WHEN ? THEN 0 ELSE "has_synced" END
                            WHERE "id" = ?
                            """,
                        arguments: [ttlSeconds, priority.rawValue, refused, refused, id])
                    return id
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
    /// passes (then they are evicted, unless something else holds them). Ending an ended one
    /// changes nothing (its TTL counts from the first end) unless `ttl` is given.
    ///
    /// - Parameters:
    ///   - id: the subscription's id.
    ///   - ttl: how long its rows stay from now on, instead of the TTL it was made with (a
    ///     completed unit kept a week, licensed content until its licence ends).
    /// - Throws: ``SubscriptionError/notFound(id:)`` when the store holds no such subscription;
    ///   ``SubscriptionError/invalidParameter(name:reason:)`` for a negative TTL.
    public func unsubscribeSubscription(id: String, keepingFor ttl: Duration? = nil) throws(SubscriptionError) {
        let now = now().millisecondsSince1970
        let seconds = try ttl.map { ttl throws(SubscriptionError) in try Self.seconds(ttl) }
        let changed = try updateSubscription(id) { db in
            if let seconds {
                try db.cachedStatement(sql: #"UPDATE "subscriptions" SET "unsubscribed_at" = ?, "ttl_seconds" = ? WHERE "id" = ?"#).execute(
                    arguments: [now, seconds, id])
            } else {
                try db.cachedStatement(sql: #"UPDATE "subscriptions" SET "unsubscribed_at" = COALESCE("unsubscribed_at", ?) WHERE "id" = ?"#).execute(
                    arguments: [now, id])
            }
        }
        if !changed { throw .notFound(id: id) }
    }

    /// Notes that the app used what a subscription holds now (the learner opened the unit):
    /// the least recently used subscriptions are evicted first when space is short.
    ///
    /// - Throws: ``SubscriptionError/notFound(id:)`` when the store holds no such subscription.
    public func markSubscriptionUsed(id: String) throws(SubscriptionError) {
        let now = now().millisecondsSince1970
        let changed = try updateSubscription(id) { db in
            try db.cachedStatement(sql: #"UPDATE "subscriptions" SET "last_used_at" = ? WHERE "id" = ?"#).execute(arguments: [now, id])
        }
        if !changed { throw .notFound(id: id) }
    }

    /// Deletes a subscription now, whatever its TTL, and evicts the rows it held unless
    /// something else holds them (another subscription, a scope synced whole, a write not yet
    /// on the server, an open conflict). Returns the rows evicted, by contract: what an app
    /// runs when space is short, in ``subscriptionsInEvictionOrder(neverUsedAge:)``.
    ///
    /// - Throws: ``SubscriptionError/notFound(id:)`` when the store holds no such subscription.
    @discardableResult
    public func evictSubscription(id: String) throws(SubscriptionError) -> [String: Int] {
        let outcome: [String: Int]?
        do {
            outcome = try write { db -> [String: Int]? in
                guard
                    try Bool.fetchOne(db.cachedStatement(sql: #"SELECT EXISTS (SELECT 1 FROM "subscriptions" WHERE "id" = ?)"#), arguments: [id])
                        == true
                else { return nil }
                return try deleteSubscription(id, db)
            }
        } catch {
            throw .store(String(describing: error))
        }
        guard let outcome else { throw .notFound(id: id) }
        return outcome
    }

    /// The subscriptions that hold rows, in the order to evict them when space is short:
    /// 1. ended ones (still holding their rows until their TTL passes), the soonest to expire first;
    /// 2. active ones never used (``markSubscriptionUsed(id:)``) and made more than `neverUsedAge` ago, oldest first;
    /// 3. the other active ones, least recently used first (last used, else last synced, else made).
    ///
    /// Refused subscriptions hold nothing and are not listed.
    ///
    /// - Parameter neverUsedAge: how long after it was made an active subscription never used
    ///   goes before the ones in use (3 days).
    public func subscriptionsInEvictionOrder(neverUsedAge: Duration = .seconds(3 * 86_400)) throws(OfflineStoreError) -> [SubscriptionStatus] {
        let now = now().date
        let neverUsedBefore = now.addingTimeInterval(-TimeInterval(neverUsedAge.components.seconds))
        let held = try subscriptions().filter { $0.error == nil }
        func rank(_ status: SubscriptionStatus) -> (Int, Date) {
            if let expiresAt = status.expiresAt { return (0, expiresAt) }
            if status.lastUsedAt == nil, status.createdAt <= neverUsedBefore { return (1, status.createdAt) }
            return (2, status.lastUsedAt ?? status.lastSyncedAt ?? status.createdAt)
        }
        return held.map { (status: $0, rank: rank($0)) }
            .sorted { ($0.rank.0, $0.rank.1, $0.status.id) < ($1.rank.0, $1.rank.1, $1.status.id) }
            .map(\.status)
    }

    /// Runs `body` on one subscription row in a write; whether it changed a row.
    private func updateSubscription(_ id: String, _ body: (Database) throws -> Void) throws(SubscriptionError) -> Bool {
        do {
            return try write { db in
                try body(db)
                return db.changesCount > 0
            }
        } catch {
            throw .store(String(describing: error))
        }
    }

    /// A TTL in whole seconds, refused when negative.
    private static func seconds(_ ttl: Duration) throws(SubscriptionError) -> Int {
        let (seconds, attoseconds) = ttl.components
        guard seconds >= 0, attoseconds >= 0 else { throw .invalidParameter(name: "ttl", reason: "a TTL cannot be negative") }
        return Int(clamping: seconds)
    }

    // MARK: Reading

    /// Every subscription the store holds (active, refused, or ended and not yet expired), oldest first.
    public func subscriptions() throws(OfflineStoreError) -> [SubscriptionStatus] {
        try read { db in
            try Row.fetchAll(db.cachedStatement(sql: #"SELECT * FROM "subscriptions" ORDER BY "created_at", "id""#)).map { try status(of: $0, db) }
        }
    }

    /// One subscription's state; `nil` when the store holds none with this id (never, refused
    /// and read, or expired).
    public func subscriptionStatus(id: String) throws(OfflineStoreError) -> SubscriptionStatus? {
        try read { db in
            try Row.fetchOne(db.cachedStatement(sql: #"SELECT * FROM "subscriptions" WHERE "id" = ?"#), arguments: [id]).map {
                try status(of: $0, db)
            }
        }
    }

    /// The rows a subscription holds on the device: primary keys by entity name, sorted.
    public func subscriptionRowIDs(id: String) throws(OfflineStoreError) -> [String: [String]] {
        try read { db in
            var rows: [String: [String]] = [:]
            for row in try Row.fetchAll(
                db.cachedStatement(
                    sql: #"SELECT "entity", "row_id" FROM "subscription_rows" WHERE "subscription_id" = ? ORDER BY "entity", "row_id""#),
                arguments: [id])
            {
                rows[row["entity"], default: []].append(row["row_id"])
            }
            return rows
        }
    }

    /// The subscriptions counted as ``SyncStatus/subscriptions`` shows them.
    package func subscriptionCounts() throws(OfflineStoreError) -> SubscriptionCounts {
        try read { db in try Self.subscriptionCounts(db) }
    }

    static func subscriptionCounts(_ db: Database) throws -> SubscriptionCounts {
        var counts = SubscriptionCounts()
        let sql = """
            SELECT
                COALESCE(SUM("unsubscribed_at" IS NULL AND "last_error" IS NULL), 0) AS "active",
                COALESCE(SUM("unsubscribed_at" IS NULL AND "last_error" IS NULL AND "has_synced" = 0), 0) AS "waiting",
                COALESCE(SUM("unsubscribed_at" IS NOT NULL), 0) AS "ended",
                COALESCE(SUM("unsubscribed_at" IS NULL AND "last_error" IS NOT NULL), 0) AS "refused"
            FROM "subscriptions"
            """
        if let row = try Row.fetchOne(db.cachedStatement(sql: sql)) {
            (counts.active, counts.awaitingFirstSync, counts.ended, counts.refused) = (row["active"], row["waiting"], row["ended"], row["refused"])
        }
        counts.rows =
            try Int.fetchOne(db.cachedStatement(sql: #"SELECT COUNT(*) FROM (SELECT DISTINCT "entity", "row_id" FROM "subscription_rows")"#)) ?? 0
        return counts
    }

    private func status(of row: Row, _ db: Database) throws -> SubscriptionStatus {
        let id: String = row["id"]
        let rows =
            try Int.fetchOne(db.cachedStatement(sql: #"SELECT COUNT(*) FROM "subscription_rows" WHERE "subscription_id" = ?"#), arguments: [id]) ?? 0
        let ttl: Int = row["ttl_seconds"]
        let ended: Int64? = row["unsubscribed_at"]
        let last: Int64? = row["last_synced_at"]
        let used: Int64? = row["last_used_at"]
        let error = (row["last_error"] as String?).map(ErrorDetail.init(storedText:))
        return SubscriptionStatus(
            id: id, request: Self.request(of: row), isActive: ended == nil && error == nil, hasSynced: (row["has_synced"] as Int) == 1,
            lastSyncedAt: last.map { Timestamp(millisecondsSince1970: $0).date }, rowCount: rows,
            priority: SyncPriority(rawValue: row["priority"]) ?? .normal, ttl: .seconds(ttl),
            expiresAt: ended.map { Timestamp(millisecondsSince1970: $0 + Int64(ttl) * 1000).date }, error: error,
            createdAt: Timestamp(millisecondsSince1970: row["created_at"]).date, lastUsedAt: used.map { Timestamp(millisecondsSince1970: $0).date })
    }

    /// The request a `subscriptions` row stands for.
    private static func request(of row: Row) -> SubscriptionRequest {
        let parameters: String = row["parameters"]
        var values: [String: JSONValue] = [:]
        if case .object(let object)? = JSONParser.parse(Data(parameters.utf8)) { values = object }
        return SubscriptionRequest(name: row["name"], parameters: values, scope: row["scope"])
    }

    // MARK: Checking

    /// The descriptor `request` names, its parameters checked as the server checks them: each
    /// one the subscription declares, and no other; a value a JSON string that is an identifier
    /// (not empty, at most 256 bytes, no control character, NFC), one of its values for an enum;
    /// a list a non-empty array of at most its `maxCount` such values. A scope key must be one
    /// of the root entity's scope.
    static func check(
        _ request: SubscriptionRequest, contracts: ContractCatalog, priorities: PullPriorities
    ) throws(SubscriptionError) -> SubscriptionDescriptor {
        guard let descriptor = contracts.subscription(named: request.name) else {
            throw .unknownSubscription(name: request.name, known: contracts.subscriptions.map(\.name).sorted())
        }
        for name in request.parameters.keys.sorted() where descriptor.parameter(named: name) == nil {
            let takes = descriptor.parameters.map(\.name)
            throw .invalidParameter(
                name: name,
                reason: "'\(request.name)' takes no parameter '\(name)'; it takes \(takes.isEmpty ? "none" : takes.joined(separator: ", "))")
        }
        for parameter in descriptor.parameters {
            guard let value = request.parameters[parameter.name] else {
                throw .invalidParameter(name: parameter.name, reason: "'\(request.name)' needs it (\(parameter.kind.spelling))")
            }
            if case .list(let element) = parameter.kind {
                guard case .array(let items) = value, !items.isEmpty else {
                    throw .invalidParameter(name: parameter.name, reason: "takes a non-empty array of \(element.spelling) values")
                }
                guard items.count <= parameter.maxCount else {
                    throw .invalidParameter(name: parameter.name, reason: "takes at most \(parameter.maxCount) values; it has \(items.count)")
                }
                for item in items { try checkValue(item, kind: element, parameter: parameter.name) }
            } else {
                try checkValue(value, kind: parameter.kind, parameter: parameter.name)
            }
        }
        if let scope = request.scope {
            if let problem = identifierProblem(scope) { throw .invalidParameter(name: "scope", reason: problem) }
            if let root = contracts.entity(named: descriptor.entity), let named = priorities.scopeName(scope), named != root.scope {
                throw .invalidParameter(name: "scope", reason: "'\(request.name)' reads the scope '\(root.scope)', not '\(named)'")
            }
        }
        return descriptor
    }

    private static func checkValue(_ value: JSONValue, kind: FieldKind, parameter: String) throws(SubscriptionError) {
        guard case .string(let text) = value else {
            throw .invalidParameter(name: parameter, reason: "takes \(kind.spelling) values as strings, not \(CanonicalJSON.text(value))")
        }
        if let problem = identifierProblem(text) { throw .invalidParameter(name: parameter, reason: problem) }
        if case .enumeration(let allowed, _) = kind, !allowed.contains(text) {
            throw .invalidParameter(name: parameter, reason: "'\(text)' is not one of \(allowed.joined(separator: ", "))")
        }
    }

    /// Why the server would refuse `text` as an identifier, or `nil`.
    private static func identifierProblem(_ text: String) -> String? {
        if text.isEmpty { return "a value cannot be empty" }
        if text.utf8.count > 256 { return "a value is at most 256 bytes; this one has \(text.utf8.count)" }
        if text.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) {
            return "a value cannot hold a control character"
        }
        if !UnicodeIdentifier.isNormalized(text) { return "a value must be in Unicode NFC" }
        return nil
    }

    // MARK: Syncing (the engine's)

    /// A subscription the engine pulls.
    package struct PulledSubscription: Sendable {
        package var id: String
        package var request: SubscriptionRequest
        package var cursor: String?
        package var priority: SyncPriority
    }

    /// The active subscriptions (neither ended nor refused), by priority then age.
    package func activeSubscriptions() throws(OfflineStoreError) -> [PulledSubscription] {
        try read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: #"SELECT * FROM "subscriptions" WHERE "unsubscribed_at" IS NULL AND "last_error" IS NULL ORDER BY "created_at", "id""#)
            ).map { row in
                PulledSubscription(
                    id: row["id"], request: Self.request(of: row), cursor: row["cursor"], priority: SyncPriority(rawValue: row["priority"]) ?? .normal
                )
            }
        }.sorted { ($0.priority, $0.id) < ($1.priority, $1.id) }
    }

    /// Applies one subscription page in one transaction: its rows through the same path as a
    /// pull page (pending writes and conflicts kept), the rows it holds, its leaves (evicted
    /// unless held otherwise) and its cursor. At the end of a fresh sync after an expired
    /// cursor, the rows it no longer delivered are let go the same way.
    @discardableResult
    package func applySubscriptionPage(_ page: SubscriptionPullResponse.Page) throws(OfflineStoreError) -> ServerChangesReport {
        var prepared = prepare(ServerChanges(upserts: page.upserts, deletes: page.deletes))
        prepared.subscription = .init(id: page.id, cursor: page.cursor, hasMore: page.hasMore, leaves: page.leaves)
        return try applyServerChanges(pages: [prepared])[0]
    }

    /// The subscription part of ``applyServerChanges(pages:)``, in its transaction.
    func applySubscription(_ target: PreparedServerChanges.SubscriptionTarget, _ changes: PreparedServerChanges, now: Int64, _ db: Database) throws {
        // Ended or deleted meanwhile: its rows are stored like any pulled rows, and held by nothing new.
        guard try Bool.fetchOne(db.cachedStatement(sql: #"SELECT 1 FROM "subscriptions" WHERE "id" = ?"#), arguments: [target.id]) ?? false else {
            return
        }
        let held = try Self.heldContractNames(db)
        let hold = try db.cachedStatement(
            sql: """
                INSERT INTO "subscription_rows" ("subscription_id", "entity", "row_id", "stale") VALUES (?, ?, ?, 0)
                ON CONFLICT DO UPDATE SET "stale" = 0
                """)
        for (name, rows) in changes.upserts where !held.contains(name) {
            guard case .entity(_, let rows) = rows else { continue }
            for row in rows { try hold.execute(arguments: [target.id, name, row.id]) }
        }
        // A deleted row is gone for every subscription. One an unsynced edit or an open conflict
        // kept is an eviction candidate: once that is settled (kept mine: the row is back on the
        // server), it goes unless something holds it then.
        var candidates: [(entity: String, id: String)] = []
        let release = try db.cachedStatement(sql: #"DELETE FROM "subscription_rows" WHERE "entity" = ? AND "row_id" = ?"#)
        for (name, ids) in changes.deletes where !held.contains(name) {
            for id in ids {
                try release.execute(arguments: [name, id])
                candidates.append((name, id))
            }
        }
        let leave = try db.cachedStatement(sql: #"DELETE FROM "subscription_rows" WHERE "subscription_id" = ? AND "entity" = ? AND "row_id" = ?"#)
        for (name, ids) in target.leaves {
            for id in ids {
                try leave.execute(arguments: [target.id, name, id])
                candidates.append((name, id))
            }
        }
        let done = !target.hasMore
        if done {
            // A fresh sync after an expired cursor: what it did not deliver again is let go.
            let stale = try Row.fetchAll(
                db.cachedStatement(sql: #"SELECT "entity", "row_id" FROM "subscription_rows" WHERE "subscription_id" = ? AND "stale" = 1"#),
                arguments: [target.id])
            candidates += stale.map { ($0["entity"], $0["row_id"]) }
            try db.cachedStatement(sql: #"DELETE FROM "subscription_rows" WHERE "subscription_id" = ? AND "stale" = 1"#).execute(arguments: [
                target.id
            ])
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
        try evictUnheld(candidates, db)
    }

    /// The server expired a subscription's cursor (`cursor_expired`): it is synced again from
    /// no cursor, and the rows it holds now are marked, so those the fresh sync does not deliver
    /// again are let go when it ends (``applySubscription(_:_:now:_:)``). A crash part-way
    /// resumes the fresh sync from its last stored cursor.
    package func restartSubscription(id: String) throws(OfflineStoreError) {
        try write { db in
            try db.cachedStatement(sql: #"UPDATE "subscriptions" SET "cursor" = NULL, "resyncing" = 1 WHERE "id" = ?"#).execute(arguments: [id])
            try db.cachedStatement(sql: #"UPDATE "subscription_rows" SET "stale" = 1 WHERE "subscription_id" = ?"#).execute(arguments: [id])
        }
    }

    /// Records that the server refused a subscription (`forbidden`, `subscription_too_broad`,
    /// `unknown_subscription`, `malformed_request`): it is pulled no more, everything it held is
    /// let go (evicted unless held otherwise), and its error is kept for the app to read
    /// (``SubscriptionStatus/error``) until ``forgetSubscription(id:)``.
    package func refuseSubscription(id: String, _ error: ErrorDetail) throws(OfflineStoreError) {
        try write { db in
            try db.cachedStatement(
                sql: #"UPDATE "subscriptions" SET "last_error" = ?, "cursor" = NULL, "has_synced" = 0, "resyncing" = 0 WHERE "id" = ?"#
            ).execute(
                arguments: [error.storedText, id])
            let held = try Row.fetchAll(
                db.cachedStatement(sql: #"SELECT "entity", "row_id" FROM "subscription_rows" WHERE "subscription_id" = ?"#), arguments: [id])
            try db.cachedStatement(sql: #"DELETE FROM "subscription_rows" WHERE "subscription_id" = ?"#).execute(arguments: [id])
            try evictUnheld(held.map { ($0["entity"], $0["row_id"]) }, db)
        }
    }

    /// Deletes a subscription and lets go of what it held (a refused one once the app has read
    /// why, ``SubscriptionHandle/waitForFirstSync()``).
    package func forgetSubscription(id: String) throws(OfflineStoreError) {
        try write { db in _ = try deleteSubscription(id, db) }
    }

    /// Deletes a subscription and evicts what it held unless held otherwise.
    func deleteSubscription(_ id: String, _ db: Database) throws -> [String: Int] {
        let held = try Row.fetchAll(
            db.cachedStatement(sql: #"SELECT "entity", "row_id" FROM "subscription_rows" WHERE "subscription_id" = ?"#), arguments: [id])
        try db.cachedStatement(sql: #"DELETE FROM "subscription_rows" WHERE "subscription_id" = ?"#).execute(arguments: [id])
        try db.cachedStatement(sql: #"DELETE FROM "subscriptions" WHERE "id" = ?"#).execute(arguments: [id])
        return try evictUnheld(held.map { ($0["entity"], $0["row_id"]) }, db)
    }
}

extension ErrorDetail {
    /// An error as ``storedText`` wrote it (a plain message when it is not JSON).
    init(storedText text: String) {
        self =
            (try? JSONDecoder().decode(ErrorDetail.self, from: Data(text.utf8))) ?? ErrorDetail(code: ErrorCode("unknown"), message: text)
    }
}
