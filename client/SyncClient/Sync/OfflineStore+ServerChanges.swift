import ContractRuntime
package import Foundation
import GRDB
package import SyncProtocol

extension OfflineStore {
    /// Applies server rows in one transaction, with the scope's cursor when given: a crash
    /// leaves either the page and its cursor, or neither. The commit does not wait for the disk
    /// (a power loss right after can undo the page and its cursor together, and the next pull
    /// fetches them again); a killed app keeps it.
    ///
    /// Entity rows replace the contract columns of the local copy (client-only columns are
    /// kept) and record the server version (the row's `_server_version`) and `_synced_at`.
    /// A row the device still has unsynced writes for (pending, sending, waiting, conflicted or
    /// failed) is stored with those writes replayed on top, so the user's edits stay visible and
    /// the server's other changes arrive. Event envelopes are inserted once. Deletes remove rows.
    ///
    /// - Throws: ``OfflineStoreError/invalidValue(contract:field:reason:)`` for a row that does
    ///   not fit its contract (nothing is applied then).
    @discardableResult
    package func applyServerChanges(_ changes: ServerChanges) throws(OfflineStoreError) -> ServerChangesReport {
        try applyServerChanges(pages: [prepare(changes)])[0]
    }

    /// Applies several pulled pages, prepared beforehand (``prepare(_:)``), in order, in one
    /// transaction: each page exactly as ``applyServerChanges(_:)`` would, the last cursor of a
    /// scope winning. A crash leaves all of them or none. One commit for several pages writes
    /// each database page touched by them once instead of once per pulled page (with random
    /// keys, most of an index). Returns one report per page.
    func applyServerChanges(pages: [PreparedServerChanges]) throws(OfflineStoreError) -> [ServerChangesReport] {
        let now = now().millisecondsSince1970
        return try writeRefetchable { db in
            let held = try Self.heldContractNames(db)
            return try pages.map { changes in try apply(changes, held: held, now: now, db) }
        }
    }

    private func apply(_ changes: PreparedServerChanges, held: Set<String>, now: Int64, _ db: Database) throws -> ServerChangesReport {
        var report = ServerChangesReport()
        let repulling = try Self.repullingScopeName(db, scopeKey: changes.scopeKey)
        for (name, rows) in changes.upserts {
            if held.contains(name) {
                report.heldForUpdate[name, default: 0] += rows.count
                continue
            }
            switch rows {
            case .entity(let entity, let rows):
                // Rows with unsynced writes, looked up once for the page (usually none).
                let unsynced = try String.fetchSet(
                    db.cachedStatement(sql: #"SELECT "row_id" FROM "outbox" WHERE "entity" = ? AND "status" IN "# + Self.unsyncedStatusesSQL),
                    arguments: [entity.name]
                )
                let upsert = try db.cachedStatement(sql: Self.serverUpsertSQL(entity))
                for row in rows {
                    let rebased = try storePreparedRow(
                        db, entity, row, now: now, replay: unsynced.isEmpty ? .never : .ifQueued(unsynced), upsert: upsert)
                    if rebased { report.rebased[name, default: 0] += 1 }
                }
                report.upserted[name, default: 0] += rows.count
                // A scope pulled again from scratch remembers what it delivered (OfflineStore+Repull).
                if let repulling {
                    try Self.recordRepulledRows(db, scopeName: repulling, entity: entity, ids: rows.map(\.id))
                }
            case .events(let event, let envelopes):
                for envelope in envelopes {
                    try storeServerEvent(db, event, envelope: envelope, now: now)
                }
                report.upserted[name, default: 0] += envelopes.count
            case .unknown:
                report.unknownContracts.append(name)
            case .invalid(let error, _):
                throw error
            }
        }
        // Pulled deletes update the conflicts open on their rows (rare: looked for only when any is open).
        var openConflicts = false
        if !changes.deletes.isEmpty {
            openConflicts =
                try Bool.fetchOne(db.cachedStatement(sql: #"SELECT EXISTS (SELECT 1 FROM "conflicts" WHERE "resolution" IS NULL)"#)) ?? false
        }
        for name in changes.deletes.keys.sorted() {
            if held.contains(name) {
                report.heldForUpdate[name, default: 0] += changes.deletes[name]?.count ?? 0
                continue
            }
            guard let entity = contracts.entity(named: name) else {
                if !report.unknownContracts.contains(name) { report.unknownContracts.append(name) }
                continue
            }
            // A row the user changed and has not synced stays: their change goes to the server,
            // which answers with a `deleted` conflict the app settles (keep: the row comes back;
            // take theirs: it goes). Removing it here would turn "keep mine" into a delete.
            let edited = try String.fetchSet(
                db.cachedStatement(
                    sql:
                        #"SELECT "row_id" FROM "outbox" WHERE "entity" = ? AND "op" != 'delete' AND "status" IN \#(OutboxStatus.sql(OutboxStatus.unsent + [.conflicted]))"#
                ),
                arguments: [entity.name]
            )
            for id in changes.deletes[name] ?? [] {
                if edited.contains(id) {
                    if openConflicts { try refreshOpenConflicts(db, entity, id: id, deleted: true) }
                    continue
                }
                try db.execute(
                    sql: "DELETE FROM \(entity.table.quotedDatabaseIdentifier) WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = ?",
                    arguments: [id]
                )
                report.deleted[name, default: 0] += db.changesCount
                if openConflicts { try refreshOpenConflicts(db, entity, id: id, deleted: true) }
            }
        }
        if let subscription = changes.subscription {
            try applySubscription(subscription, changes, now: now, db)
        }
        if let scopeKey = changes.scopeKey {
            configuration.faultPauses.pause(at: .pullApply)
            try db.cachedStatement(
                sql: """
                    INSERT INTO "sync_state" ("scope_key", "cursor", "last_pull_at") VALUES (?, ?, ?)
                    ON CONFLICT ("scope_key") DO UPDATE SET "cursor" = COALESCE(excluded."cursor", "cursor"),
                        "last_pull_at" = excluded."last_pull_at"
                    """
            ).execute(arguments: [scopeKey, changes.cursor, now])
        }
        return report
    }

    /// Deletes cached rows stored under a schema version below their contract's
    /// `oldest_supported` (`OLDEST_SUPPORTED_UNIT_SCHEMA`, …), so the next pull downloads them
    /// again. Rows with unsynced writes are kept. Returns the number deleted per entity.
    @discardableResult
    package func purgeUnsupportedRows() throws(OfflineStoreError) -> [String: Int] {
        try write { db in try purgeUnsupportedRows(db) }
    }

    /// Deletes the rows below their contract's oldest supported schema version (see
    /// ``purgeUnsupportedRows()``). With `onlyWhereNeeded` (the housekeeping after each sync),
    /// only the tables that may hold such rows are read: those this store has not purged yet
    /// (each is purged once when the store opens, for rows an older build left) and those a
    /// server row below its oldest supported version was stored into since
    /// (``noteStoredSchemaVersion(_:_:_:)``); the others are not read at every sync.
    func purgeUnsupportedRows(_ db: Database, onlyWhereNeeded: Bool = false) throws -> [String: Int] {
        var purged: [String: Int] = [:]
        let done = onlyWhereNeeded ? purgedEntities.withLock { $0 } : []
        var purging: [String] = []
        for entity in contracts.entities where !done.contains(entity.name) {
            try db.cachedStatement(
                sql: """
                    DELETE FROM \(entity.table.quotedDatabaseIdentifier) WHERE "_schema_version" < ?
                    AND \(entity.primaryKey.quotedDatabaseIdentifier) NOT IN (
                        SELECT "row_id" FROM "outbox" WHERE "entity" = ? AND "status" IN \(Self.unsyncedStatusesSQL))
                    """
            ).execute(arguments: [entity.oldestSupported, entity.name])
            if db.changesCount > 0 { purged[entity.name] = db.changesCount }
            purging.append(entity.name)
        }
        // Known purged once the deletes are committed; a row stored below the oldest supported
        // version after them (by a later transaction) takes its entity out again.
        let purgedEntities = purgedEntities
        let purgedNow = purging
        db.afterNextTransaction { _ in
            purgedEntities.withLock { $0.formUnion(purgedNow) }
        }
        return purged
    }

    /// Called in the transaction that stores `values` (a server row's column values, with its
    /// `_schema_version` after the contract fields): a row below the contract's oldest supported
    /// version makes the next housekeeping read the entity's table again.
    func noteStoredSchemaVersion(_ db: Database, _ entity: EntityDescriptor, _ values: [DatabaseValue]) {
        guard values.count > entity.fields.count, case .int64(let version) = values[entity.fields.count].storage,
            version < Int64(entity.oldestSupported)
        else { return }
        _ = purgedEntities.withLock { $0.remove(entity.name) }
    }

    /// Every scope's sync bookkeeping, by scope key.
    public func syncStates() throws(OfflineStoreError) -> [ScopeSyncState] {
        try read { db in try Self.syncStates(db) }
    }

    static func syncStates(_ db: Database) throws -> [ScopeSyncState] {
        try Row.fetchAll(db.cachedStatement(sql: #"SELECT * FROM "sync_state" ORDER BY "scope_key""#)).map { row in
            func date(_ column: String) -> Date? {
                (row[column] as Int64?).map { Timestamp(millisecondsSince1970: $0).date }
            }
            return ScopeSyncState(
                scopeKey: row["scope_key"], cursor: row["cursor"], lastPullAt: date("last_pull_at"),
                lastPushAt: date("last_push_at"), lastSuccessAt: date("last_success_at"),
                lastError: (row["last_error"] as String?).flatMap { try? JSONDecoder().decode(ErrorDetail.self, from: Data($0.utf8)) },
                lastErrorAt: date("last_error_at")
            )
        }
    }

    /// The stored cursor of a scope, `nil` before its first pull.
    package func cursor(forScope scopeKey: String) throws(OfflineStoreError) -> String? {
        try read { db in
            try String.fetchOne(db.cachedStatement(sql: #"SELECT "cursor" FROM "sync_state" WHERE "scope_key" = ?"#), arguments: [scopeKey])
        }
    }

    /// Stores a scope's cursor on its own (after a first download by priority tiers, whose
    /// pages stored none).
    package func storeCursor(_ cursor: String, forScope scopeKey: String) throws(OfflineStoreError) {
        let now = now().millisecondsSince1970
        try write { db in
            try db.execute(
                sql: """
                    INSERT INTO "sync_state" ("scope_key", "cursor", "last_pull_at") VALUES (?, ?, ?)
                    ON CONFLICT ("scope_key") DO UPDATE SET "cursor" = excluded."cursor", "last_pull_at" = excluded."last_pull_at"
                    """,
                arguments: [scopeKey, cursor, now]
            )
        }
    }

    /// Records the outcome of syncing a scope: success (error `nil`) or why it failed.
    package func recordScopeSync(_ scopeKey: String, error: ErrorDetail? = nil, at date: Date? = nil) throws(OfflineStoreError) {
        let at = (date.map { Timestamp($0) } ?? now()).millisecondsSince1970
        try write { db in
            if let error {
                try db.execute(
                    sql: """
                        INSERT INTO "sync_state" ("scope_key", "last_error", "last_error_at") VALUES (?, ?, ?)
                        ON CONFLICT ("scope_key") DO UPDATE SET "last_error" = excluded."last_error", "last_error_at" = excluded."last_error_at"
                        """,
                    arguments: [scopeKey, error.storedText, at]
                )
            } else {
                try db.execute(
                    sql: """
                        INSERT INTO "sync_state" ("scope_key", "last_success_at") VALUES (?, ?)
                        ON CONFLICT ("scope_key") DO UPDATE SET "last_success_at" = excluded."last_success_at",
                            "last_error" = NULL, "last_error_at" = NULL
                        """,
                    arguments: [scopeKey, at]
                )
            }
        }
    }

    /// Advances the device's hybrid logical clock past a clock seen from the server, so later
    /// local writes order after it.
    package func observeRemoteClock(_ remote: HybridLogicalClock) throws(OfflineStoreError) {
        let now = now()
        try write { db in
            let stored =
                try Metadata.get(db, .hlc).flatMap(HybridLogicalClock.init)
                ?? HybridLogicalClock(milliseconds: 0, counter: 0, node: identity.clientId)
            try Metadata.set(db, .hlc, stored.receive(remote, now: now).description)
        }
    }

    /// The scope key a stored row belongs to (`ops:team:t-1`): its contract's scope template
    /// filled from the row's fields and the signed-in user; `nil` when the row is not stored or a
    /// placeholder has no value.
    package func scopeKey(contract: String, id: String) throws(OfflineStoreError) -> String? {
        try read { db in try scopeKey(db, contract: contract, id: id) }
    }

    // MARK: - Internals

    func scopeKey(_ db: Database, contract: String, id: String) throws -> String? {
        let scopeName: String, table: String, primaryKey: String, fields: [FieldDescriptor]
        if let entity = contracts.entity(named: contract) {
            (scopeName, table, primaryKey, fields) = (entity.scope, entity.table, entity.primaryKey, entity.fields)
        } else if let event = contracts.event(named: contract) {
            (scopeName, table, primaryKey, fields) = (event.scope, event.table, "event_id", event.fields)
        } else {
            throw OfflineStoreError.unknownContract(contract)
        }
        guard let scope = contracts.scope(named: scopeName) else { return nil }
        var values = ["user_id": identity.userId]
        let placeholders = scope.keyTemplate.split(separator: "{").dropFirst().compactMap { $0.split(separator: "}").first.map(String.init) }
        for name in placeholders where values[name] == nil {
            guard let field = fields.first(where: { $0.name == name }), !field.isEncrypted else { return nil }
            guard
                let value = try DatabaseValue.fetchOne(
                    db,
                    sql:
                        "SELECT \(name.quotedDatabaseIdentifier) FROM \(table.quotedDatabaseIdentifier) WHERE \(primaryKey.quotedDatabaseIdentifier) = ?",
                    arguments: [id]
                ), let text = codec.columns.keyText(codec.columns.wireValue(value, for: field), kind: field.kind)
            else { return nil }
            values[name] = text
        }
        return scope.key(values)
    }

    static let unsyncedStatusesSQL = OutboxStatus.sql(OutboxStatus.keepingTheirRow)

    /// Whether ``storePreparedRow(_:_:_:now:replay:upsert:)`` looks
    /// for unsynced writes to replay.
    enum Replay {
        case always
        case never
        /// Only for these row ids.
        case ifQueued(Set<String>)
    }

    /// Stores a server row (wire form of `schemaVersion`) and replays the device's unsynced
    /// writes of that row on top. Returns whether writes were replayed.
    @discardableResult
    func storeServerRow(
        _ db: Database, _ entity: EntityDescriptor, wire shaped: [String: JSONValue], schemaVersion: Int, serverVersion: Int64?, now: Int64
    ) throws -> Bool {
        let row = try prepareServerRow(entity, wire: shaped, schemaVersion: schemaVersion, serverVersion: serverVersion)
        return try storePreparedRow(db, entity, row, now: now)
    }

    /// Stores a prepared server row (see ``prepareServerRow(_:wire:schemaVersion:serverVersion:)``)
    /// and replays the device's unsynced writes of that row on top. `upsert` is the statement of
    /// ``serverUpsertSQL(_:)``, when the caller stores many rows of the entity.
    func storePreparedRow(
        _ db: Database, _ entity: EntityDescriptor, _ row: PreparedServerRow, now: Int64, replay: Replay = .always,
        upsert: GRDB.Statement? = nil
    ) throws -> Bool {
        let statement = try upsert ?? db.cachedStatement(sql: Self.serverUpsertSQL(entity))
        noteStoredSchemaVersion(db, entity, row.values)
        if let changes = row.changes {
            // Any write of the row in the outbox, even one done: its values came from the
            // device, not from a row the server sent (a stamped version field, a merge with a
            // change this device never pulled), so they are no base to merge onto.
            let written =
                try Bool.fetchOne(
                    db.cachedStatement(sql: #"SELECT EXISTS (SELECT 1 FROM "outbox" WHERE "entity" = ? AND "row_id" = ?)"#),
                    arguments: [entity.name, row.id]
                ) ?? false
            guard !written, let merged = try merge(db, entity, row, changes) else {
                throw OfflineStoreError.partialRowNotHeld(contract: entity.name, id: row.id)
            }
            try statement.execute(binding: merged, then: now.databaseValue)
            return false
        }
        try statement.execute(binding: row.values, then: now.databaseValue)
        switch replay {
        case .never: return false
        case .ifQueued(let ids) where !ids.contains(row.id): return false
        case .always, .ifQueued:
            try refreshOpenConflicts(db, entity, id: row.id, deleted: false)
            return try replayUnsyncedWrites(db, entity, id: row.id)
        }
    }

    /// The column values of a row that came with only its changed fields, the others taken
    /// from the row the device holds; `nil` when the device cannot merge them: it does not hold
    /// the row, holds it shaped for an older version of the contract, or at another server
    /// version than the one the changes apply to. The engine then pulls the page again with
    /// whole rows. A row the device wrote itself (any entry in the outbox) is never merged: its
    /// fields hold what the device wrote, not what the server stored.
    private func merge(_ db: Database, _ entity: EntityDescriptor, _ row: PreparedServerRow, _ changes: PreparedServerRow.Changes) throws
        -> [DatabaseValue]?
    {
        let count = entity.fields.count
        guard case .int64(let newVersion) = row.values[count + 1].storage else { return nil }
        let columns = (entity.fields.map(\.name) + ["_schema_version", "_server_version"]).map(\.quotedDatabaseIdentifier)
        guard
            let held = try Row.fetchOne(
                db.cachedStatement(
                    sql: "SELECT \(columns.joined(separator: ", ")) FROM \(entity.table.quotedDatabaseIdentifier) "
                        + "WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = ?"),
                arguments: [row.id]
            ),
            case .int64(let schemaVersion) = (held[count] as DatabaseValue).storage, schemaVersion == Int64(entity.currentVersion),
            case .int64(let heldVersion) = (held[count + 1] as DatabaseValue).storage,
            heldVersion == changes.baseVersion, heldVersion < newVersion
        else { return nil }
        var values = row.values
        for index in 0..<count where !changes.present[index] {
            values[index] = held[index]
        }
        return values
    }

    /// `INSERT … ON CONFLICT DO UPDATE` of every contract field (in the contract's order, as
    /// ``RowCodec/columns(contract:table:id:fields:wire:mode:missing:)`` gives them with missing
    /// fields defaulted) and the sync columns; the text is made once per contract, not per row.
    static func serverUpsertSQL(_ entity: EntityDescriptor) -> String {
        if let made = upsertSQLByTable.withLock({ $0[entity.table] }) { return made }
        let names = entity.fields.map(\.name) + ["_schema_version", "_server_version", "_synced_at"]
        let updates = names.filter { $0 != entity.primaryKey }.map { "\($0.quotedDatabaseIdentifier) = excluded.\($0.quotedDatabaseIdentifier)" }
        let sql =
            "INSERT INTO \(entity.table.quotedDatabaseIdentifier) (\(names.map(\.quotedDatabaseIdentifier).joined(separator: ", "))) "
            + "VALUES (\(Array(repeating: "?", count: names.count).joined(separator: ", "))) "
            + "ON CONFLICT (\(entity.primaryKey.quotedDatabaseIdentifier)) DO UPDATE SET \(updates.joined(separator: ", "))"
        upsertSQLByTable.withLock { $0[entity.table] = sql }
        return sql
    }

    private static let upsertSQLByTable = Locked<[String: String]>([:])

    /// Re-applies the device's unsynced writes of a row over what is stored, in `seq` order.
    func replayUnsyncedWrites(_ db: Database, _ entity: EntityDescriptor, id: String) throws -> Bool {
        let rows = try Row.fetchAll(
            db,
            sql: #"SELECT * FROM "outbox" WHERE "entity" = ? AND "row_id" = ? AND "status" IN "# + Self.unsyncedStatusesSQL
                + #" ORDER BY "seq""#,
            arguments: [entity.name, id]
        )
        guard !rows.isEmpty else { return false }
        for row in rows {
            guard let record = OutboxRecord(row: row), let content = try openVerified(db, record) else { continue }
            switch record.op {
            case .delete:
                try db.execute(
                    sql: "DELETE FROM \(entity.table.quotedDatabaseIdentifier) WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = ?",
                    arguments: [id]
                )
            case .create, .update, .patch:
                guard case .object(let payload)? = content.payload else { continue }
                try overwrite(db, entity, id: id, wire: payload.filter { $0.key != entity.primaryKey })
            case .event:
                continue
            }
        }
        return true
    }

    /// Sets contract fields of an existing row from wire values (checked as server values: they
    /// were checked when written).
    func overwrite(_ db: Database, _ entity: EntityDescriptor, id: String, wire: [String: JSONValue]) throws {
        let columns = try codec.columns(
            contract: entity.name, table: entity.table, id: id, fields: entity.fields, wire: wire, mode: .read, missing: .skip
        )
        guard !columns.isEmpty else { return }
        try Self.updateColumns(db, entity, id: id, columns)
    }

    /// A row in the shape of an older contract version, in the current shape: old field names
    /// renamed, fields that version does not know left out (they take their defaults).
    static func currentShape(_ wire: [String: JSONValue], entity: EntityDescriptor, version: Int) -> [String: JSONValue] {
        guard version != entity.currentVersion, let known = entity.knownFieldsByVersion[version] else { return wire }
        var shaped: [String: JSONValue] = [:]
        for field in known {
            guard let current = field.currentName, let value = wire[field.wireName] else { continue }
            shaped[current] = value
        }
        return shaped
    }

    /// The key of the server's row version in a pulled entity row (contract fields never start
    /// with `_`).
    static let serverVersionKey = "_server_version"

    /// The key that marks a pulled entity row carrying only the fields changed since the
    /// device's cursor, with the server version those changes apply to.
    static let baseVersionKey = "_base_version"

    /// The server version a wire row carries: its `_server_version`, or else its `int` version
    /// field (which the server stamps with the row's version).
    static func serverVersion(of wire: [String: JSONValue], entity: EntityDescriptor) -> Int64? {
        if case .int(let version)? = wire[serverVersionKey] { return version }
        guard let name = entity.versionField, let field = entity.field(named: name), field.kind == .int,
            case .int(let version)? = wire[name]
        else { return nil }
        return version
    }

    /// Inserts an event envelope from the server once; a known one gets its `recorded_at`.
    func storeServerEvent(_ db: Database, _ event: EventDescriptor, envelope: [String: JSONValue], now: Int64) throws {
        guard case .string(let eventId)? = envelope["event_id"] else {
            throw OfflineStoreError.invalidValue(contract: event.name, field: "event_id", reason: "is missing")
        }
        let version: Int = {
            if case .int(let number)? = envelope["schema_version"] { return Int(number) }
            return event.currentVersion
        }()
        func text(_ key: String) -> String? {
            if case .string(let value)? = envelope[key] { return value }
            return nil
        }
        func millis(_ key: String) -> Int64? { text(key).flatMap(Timestamp.init(iso8601:))?.millisecondsSince1970 }
        guard case .object(var payload)? = envelope["payload"] else {
            throw OfflineStoreError.invalidValue(contract: event.name, field: "payload", reason: "is missing")
        }
        if version != event.currentVersion, let known = event.knownFieldsByVersion[version] {
            var shaped: [String: JSONValue] = [:]
            for field in known {
                guard let current = field.currentName, let value = payload[field.wireName] else { continue }
                shaped[current] = value
            }
            payload = shaped
        }
        let columns = try codec.columns(
            contract: event.name, table: event.table, id: eventId, fields: event.fields, wire: payload, mode: .read,
            missing: .defaults
        )
        let envelopeColumns: [(name: String, value: DatabaseValue)] = [
            ("event_id", eventId.databaseValue), ("schema_version", version.databaseValue),
            ("user_id", (text("user_id") ?? "").databaseValue), ("device_id", (text("device_id") ?? "").databaseValue),
            ("occurred_at", (millis("occurred_at") ?? now).databaseValue), ("recorded_at", millis("recorded_at").databaseValue),
            ("hash", (text("hash") ?? "").databaseValue), ("_synced_at", now.databaseValue),
        ]
        let all = envelopeColumns + columns
        try db.execute(
            sql: "INSERT INTO \(event.table.quotedDatabaseIdentifier) (\(all.map(\.name.quotedDatabaseIdentifier).joined(separator: ", "))) "
                + "VALUES (\(Array(repeating: "?", count: all.count).joined(separator: ", "))) "
                + #"ON CONFLICT ("event_id") DO UPDATE SET "recorded_at" = COALESCE(excluded."recorded_at", "recorded_at"), "#
                + #""_synced_at" = excluded."_synced_at""#,
            arguments: StatementArguments(all.map { $0.value as (any DatabaseValueConvertible)? })
        )
    }
}
