import ContractRuntime
import Foundation
import GRDB

/// Which rows go when subscriptions let go of them (docs/client.md, "Subscriptions").
///
/// A row a subscription stops holding (it left the subscription, the subscription expired after
/// ``OfflineStore/unsubscribeSubscription(id:)``, was refused, or a fresh sync after an expired
/// cursor did not deliver it again) is deleted from the device unless
/// - another subscription still holds it (an ended one too, until its TTL passes);
/// - a write of it is not on the server yet (pending, sending, waiting, conflicted, failed) or
///   a conflict on it is open;
/// - it belongs to a scope the engine syncs whole: its contract's scope is one the engine names
///   (`user`), or the scope key its fields make (``OfflineStore/scopeKey(contract:id:)``) is one
///   the engine names (`ops:team:team-1`); a row whose key cannot be worked out, in a scope of
///   which the engine names some key, stays.
///
/// The engine tells the store its scopes when it is made (``OfflineStore/recordWholeScopes(_:)``),
/// so housekeeping knows them too; a store no engine told goes by the scopes it has pulled.
extension OfflineStore {
    /// Records the scopes the sync engine pulls whole (its ``SyncEngineConfiguration/scopes``).
    package func recordWholeScopes(_ scopes: [String]) throws(OfflineStoreError) {
        let text = CanonicalJSON.text(.array(scopes.sorted().map(JSONValue.string)))
        try write { db in
            if try Metadata.get(db, .wholeScopes) != text { try Metadata.set(db, .wholeScopes, text) }
        }
    }

    /// Deletes the subscriptions whose TTL passed since they were ended, and evicts their rows
    /// unless held otherwise. Returns the rows evicted, by contract. The engine runs it before
    /// every pull, and housekeeping (``runHousekeeping()``) too.
    @discardableResult
    package func expireSubscriptions() throws(OfflineStoreError) -> [String: Int] {
        let now = now().millisecondsSince1970
        return try write { db in try expireSubscriptions(db, now: now) }
    }

    /// ``expireSubscriptions()`` in the caller's transaction.
    func expireSubscriptions(_ db: Database, now: Int64) throws -> [String: Int] {
        let expired = try String.fetchAll(
            db.cachedStatement(
                sql: #"SELECT "id" FROM "subscriptions" WHERE "unsubscribed_at" IS NOT NULL AND "unsubscribed_at" + "ttl_seconds" * 1000 <= ?"#),
            arguments: [now])
        guard !expired.isEmpty else { return [:] }
        var candidates: [(entity: String, id: String)] = []
        for id in expired {
            let held = try Row.fetchAll(
                db.cachedStatement(sql: #"SELECT "entity", "row_id" FROM "subscription_rows" WHERE "subscription_id" = ?"#), arguments: [id])
            candidates += held.map { ($0["entity"], $0["row_id"]) }
            try db.cachedStatement(sql: #"DELETE FROM "subscription_rows" WHERE "subscription_id" = ?"#).execute(arguments: [id])
            try db.cachedStatement(sql: #"DELETE FROM "subscriptions" WHERE "id" = ?"#).execute(arguments: [id])
        }
        return try evictUnheld(candidates, db)
    }

    /// Forgets the rows subscriptions hold that are no longer on the device (a scope's pull
    /// deleted them, housekeeping dropped them): their counts stay true.
    func forgetVanishedSubscriptionRows(_ db: Database) throws {
        let entities = try String.fetchAll(db.cachedStatement(sql: #"SELECT DISTINCT "entity" FROM "subscription_rows""#))
        for name in entities {
            guard let entity = contracts.entity(named: name) else { continue }
            try db.execute(
                sql: """
                    DELETE FROM "subscription_rows" WHERE "entity" = ? AND NOT EXISTS (
                        SELECT 1 FROM \(entity.table.quotedDatabaseIdentifier)
                        WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = "subscription_rows"."row_id")
                    """,
                arguments: [name])
        }
    }

    /// Deletes those of `rows` nothing holds any more (see the rule above). Returns how many
    /// went, by contract. A row kept only for its write not yet on the server or its open
    /// conflict is remembered (`eviction_candidates`) and looked at again by housekeeping
    /// (``evictSettledCandidates(_:)``): once the write is on the server and the conflict settled,
    /// it goes too, unless something holds it then.
    @discardableResult
    func evictUnheld(_ rows: [(entity: String, id: String)], _ db: Database) throws -> [String: Int] {
        guard !rows.isEmpty else { return [:] }
        let whole = try WholeScopes(db, store: self)
        let subscribed = try db.cachedStatement(
            sql: #"SELECT EXISTS (SELECT 1 FROM "subscription_rows" WHERE "entity" = ?1 AND "row_id" = ?2)"#)
        let unsettled = try db.cachedStatement(
            sql: """
                SELECT EXISTS (SELECT 1 FROM "outbox" WHERE "entity" = ?1 AND "row_id" = ?2 AND "status" IN \(Self.unsyncedStatusesSQL))
                    OR EXISTS (SELECT 1 FROM "conflicts" WHERE "entity" = ?1 AND "row_id" = ?2 AND "resolution" IS NULL)
                """)
        let remember = try db.cachedStatement(sql: #"INSERT OR IGNORE INTO "eviction_candidates" ("entity", "row_id") VALUES (?, ?)"#)
        let forget = try db.cachedStatement(sql: #"DELETE FROM "eviction_candidates" WHERE "entity" = ? AND "row_id" = ?"#)
        var evicted: [String: Int] = [:]
        var seen: Set<String> = []
        for (name, id) in rows where seen.insert(name + "\u{0}" + id).inserted {
            guard let entity = contracts.entity(named: name) else {
                try forget.execute(arguments: [name, id])
                continue
            }
            if try Bool.fetchOne(subscribed, arguments: [name, id]) ?? true || whole.holds(entity, id: id, db) {
                try forget.execute(arguments: [name, id])
                continue
            }
            if try Bool.fetchOne(unsettled, arguments: [name, id]) ?? true {
                try remember.execute(arguments: [name, id])
                continue
            }
            try forget.execute(arguments: [name, id])
            try db.execute(
                sql: "DELETE FROM \(entity.table.quotedDatabaseIdentifier) WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = ?", arguments: [id])
            if db.changesCount > 0 { evicted[name, default: 0] += db.changesCount }
        }
        return evicted
    }

    /// Evicts the rows kept earlier only for a write or a conflict (`eviction_candidates`)
    /// whose write is on the server and conflict settled now, unless something holds them.
    /// Housekeeping runs it (after every sync, and when the store opens).
    func evictSettledCandidates(_ db: Database) throws -> [String: Int] {
        let candidates = try Row.fetchAll(db.cachedStatement(sql: #"SELECT "entity", "row_id" FROM "eviction_candidates""#))
        return try evictUnheld(candidates.map { ($0["entity"], $0["row_id"]) }, db)
    }

    /// The scopes the engine syncs whole, as the eviction rule reads them.
    struct WholeScopes {
        /// Contract scopes the engine names whole (`user`): every row of them stays.
        var names: Set<String> = []
        /// Scope keys the engine names (`ops:team:team-1`), by their contract scope.
        var keys: [String: Set<String>] = [:]
        let store: OfflineStore

        init(_ db: Database, store: OfflineStore) throws {
            self.store = store
            let configured: [String]
            if let text = try Metadata.get(db, .wholeScopes), case .array(let items)? = JSONParser.parse(Data(text.utf8)) {
                configured = items.compactMap { if case .string(let scope) = $0 { scope } else { nil } }
            } else {
                // No engine told this store its scopes: the scopes it has pulled stand for them.
                configured = try String.fetchAll(db.cachedStatement(sql: #"SELECT "scope_key" FROM "sync_state" WHERE "last_pull_at" IS NOT NULL"#))
            }
            for scope in configured {
                if store.contracts.scope(named: scope) != nil {
                    names.insert(scope)
                } else if let name = store.priorities.scopeName(scope) {
                    keys[name, default: []].insert(scope)
                }
            }
        }

        /// Whether the row belongs to a scope synced whole.
        func holds(_ entity: EntityDescriptor, id: String, _ db: Database) throws -> Bool {
            if names.contains(entity.scope) { return true }
            guard let keys = keys[entity.scope] else { return false }
            guard let key = try store.scopeKey(db, contract: entity.name, id: id) else { return true }
            return keys.contains(key)
        }
    }
}
