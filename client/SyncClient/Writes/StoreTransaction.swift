public import ContractRuntime
public import Foundation
public import GRDB

/// Several writes in one transaction: all of them or none, in the outbox in this order, with
/// the app's own tables (``StoreExtension``) changed in the same transaction. What
/// ``OfflineStore/transaction(_:)`` hands to its closure; valid only inside it.
///
/// ```swift
/// try store.transaction { transaction throws(OfflineStoreError) in
///     try transaction.create(Inspection(id: id, siteId: site, title: title))
///     for item in template { try transaction.create(ChecklistItem(id: store.newIdentifier(), inspectionId: id, title: item)) }
///     try transaction.withDatabase { db in
///         try db.execute(sql: #"INSERT INTO "recent_sites" ("site_id", "at") VALUES (?, ?)"#, arguments: [site, transaction.now])
///     }
/// }
/// ```
///
/// Each write is checked and queued as the store's own method of the same name does.
public final class StoreTransaction {
    let store: OfflineStore
    let db: Database
    /// When the transaction began, in milliseconds since 1970 (the store's clock).
    public let now: Int64
    private var checkedWritable = false

    init(store: OfflineStore, db: Database, now: Int64) {
        self.store = store
        self.db = db
        self.now = now
    }

    /// Reads inside the transaction: its own writes are seen.
    public var reader: StoreReader { StoreReader(db, codec: store.codec, contracts: store.contracts) }

    /// Runs `body` on the transaction's SQLite connection, for the tables of the store's
    /// extensions and the client-only (`local`) columns of contract tables. The synced columns of
    /// contract tables and the store's own tables are the store's: change them through its
    /// writes, or the outbox and the server disagree. A failure is an
    /// ``OfflineStoreError/database(code:message:)``.
    public func withDatabase<T>(_ body: (Database) throws -> T) throws(OfflineStoreError) -> T {
        do {
            return try body(db)
        } catch {
            throw OfflineStore.map(error)
        }
    }

    /// Creates a row (``OfflineStore/create(_:)``).
    @discardableResult
    public func create<E: ContractEntity>(_ value: E) throws(OfflineStoreError) -> QueuedWrite {
        let entity = E.descriptor
        try OfflineStore.requireWritable(entity, .create)
        let wire = try OfflineStore.wireObject(value, contract: entity.name)
        return try queued { try store.insertCreated(db, entity, id: value.contractPrimaryKey, wire: wire, now: now) }
    }

    /// Replaces a row (``OfflineStore/update(_:)``); `nil` when no field changed.
    @discardableResult
    public func update<E: ContractEntity>(_ value: E) throws(OfflineStoreError) -> QueuedWrite? {
        let entity = E.descriptor
        try OfflineStore.requireWritable(entity, .update)
        let wire = try OfflineStore.wireObject(value, contract: entity.name)
        return try queued {
            try store.changeRow(db, entity, id: value.contractPrimaryKey, newValues: wire, wholeRow: true, now: now)
        }
    }

    /// Sets some fields of a row (``OfflineStore/patch(_:id:_:)``); `nil` when no value changed.
    @discardableResult
    public func patch<E: PatchableEntity>(_ type: E.Type, id: String, _ changes: [E.Change]) throws(OfflineStoreError) -> QueuedWrite? {
        let entity = E.descriptor
        try OfflineStore.requireWritable(entity, .patch)
        let values = try OfflineStore.wireValues(of: changes, contract: entity.name)
        return try queued { try store.changeRow(db, entity, id: id, newValues: values, wholeRow: false, now: now) }
    }

    /// Deletes a row (``OfflineStore/delete(_:id:)``).
    @discardableResult
    public func delete<E: ContractEntity>(_ type: E.Type, id: String) throws(OfflineStoreError) -> QueuedWrite {
        let entity = E.descriptor
        try OfflineStore.requireWritable(entity, .delete)
        return try queued { try store.deleteRow(db, entity, id: id, now: now) }
    }

    /// Records an event (``OfflineStore/record(_:occurredAt:)``).
    @discardableResult
    public func record<P: ContractEvent>(_ payload: P, occurredAt: Date? = nil) throws(OfflineStoreError) -> EventEnvelope<P> {
        let prepared = try store.prepareRecord(payload, occurredAt: occurredAt)
        _ = try queued { try store.insertEvent(db, prepared, now: now) }
        return prepared.envelope
    }

    /// Sets a row's client-only columns (``OfflineStore/setLocalState(_:id:_:)``); allowed in
    /// read-only mode.
    public func setLocalState<E: LocalStateEntity>(_ type: E.Type, id: String, _ state: E.LocalState) throws(OfflineStoreError) {
        let entity = E.descriptor
        let wire = try OfflineStore.wireObject(state, contract: entity.name)
        try withDatabase { db in try store.writeLocalState(db, entity, id: id, wire: wire) }
    }

    /// Pins a row (``OfflineStore/pin(_:id:)``).
    public func pin<E: ContractEntity>(_ type: E.Type, id: String) throws(OfflineStoreError) {
        try withDatabase { db in try OfflineStore.pin(db, E.descriptor, id: id, now: now) }
    }

    /// Lets a pinned row go again (``OfflineStore/unpin(_:id:)``).
    public func unpin<E: ContractEntity>(_ type: E.Type, id: String) throws(OfflineStoreError) {
        try withDatabase { db in try OfflineStore.unpin(db, E.descriptor, id: id) }
    }

    /// Notes that the app opened a row now (``OfflineStore/markAccessed(_:id:)``).
    public func markAccessed<E: ContractEntity>(_ type: E.Type, id: String) throws(OfflineStoreError) {
        try withDatabase { db in try OfflineStore.setLocalBookkeeping(db, E.descriptor, id: id, field: "last_accessed_at", to: now) }
    }

    /// Forgets the pull cursors of `scopes` (by name, and by key for scopes without
    /// parameters), so that the next sync lists their rows again from the start, deletions
    /// included: after the app removed rows of a scope from the device (its own cache) and
    /// wants the server's list back.
    public func forgetCursors(ofScopes scopes: [String]) throws(OfflineStoreError) {
        var keys: Set<String> = []
        for scope in scopes {
            keys.insert(scope)
            if let key = store.contracts.scope(named: scope)?.key([:]) { keys.insert(key) }
        }
        guard !keys.isEmpty else { return }
        try withDatabase { db in
            try db.execute(
                sql: #"UPDATE "sync_state" SET "cursor" = NULL WHERE "scope_key" IN ("#
                    + Array(repeating: "?", count: keys.count).joined(separator: ", ") + ")",
                arguments: StatementArguments(keys.sorted())
            )
        }
    }

    /// Settles an open conflict as the app resolved it itself (its outbox entry done, nothing
    /// queued): for a conflicted event the app answers in its own way, recording a new event
    /// in the same transaction. Returns the conflict as it was.
    ///
    /// - Throws: ``OfflineStoreError/conflictNotFound(id:)`` when no open conflict has that id.
    @discardableResult
    public func settleConflict(_ id: Int64, as resolution: ConflictResolution) throws(OfflineStoreError) -> ConflictRecord {
        let row = try withDatabase { db in
            try Row.fetchOne(db, sql: #"SELECT * FROM "conflicts" WHERE "id" = ? AND "resolution" IS NULL"#, arguments: [id])
        }
        guard let row else { throw .conflictNotFound(id: id) }
        let conflict = try store.conflictRecord(row)
        try withDatabase { db in try store.close(db, conflict, resolution, now: now) }
        return conflict
    }

    /// Stores the server's row a conflict brought (``ConflictRecord/serverRow``) as a pulled
    /// row of `E`, unless the device holds that server version or a newer one; returns whether
    /// it was stored. The device's unsynced writes of the row are replayed on top.
    @discardableResult
    public func storeServerRow<E: ContractEntity>(_ type: E.Type, of conflict: ConflictRecord) throws(OfflineStoreError) -> Bool {
        let entity = E.descriptor
        guard let serverRow = conflict.serverRow, let version = conflict.serverVersion else { return false }
        return try withDatabase { db in
            let id = serverRow[entity.primaryKey].flatMap { if case .string(let id) = $0 { id } else { nil } } ?? conflict.rowId
            let held = try Int64.fetchOne(
                db,
                sql:
                    "SELECT \"_server_version\" FROM \(entity.table.quotedDatabaseIdentifier) WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = ?",
                arguments: [id]
            )
            guard held.map({ $0 < version }) ?? true else { return false }
            try store.storeServerRow(db, entity, wire: serverRow, schemaVersion: entity.currentVersion, serverVersion: version, now: now)
            return true
        }
    }

    /// A queued write: refused while the store is read-only (checked once per transaction).
    private func queued<T>(_ body: () throws -> T) throws(OfflineStoreError) -> T {
        try withDatabase { db in
            if !checkedWritable {
                try store.requireNotReadOnly(db, now: now)
                checkedWritable = true
            }
            return try body()
        }
    }
}

extension OfflineStore {
    /// Runs `body` in one write transaction: every write it makes, to contract rows, the outbox
    /// and the extensions' tables, is kept together or not at all. Throwing rolls it back.
    ///
    /// - Throws: what `body` throws; ``OfflineStoreError/readOnlyUntilSync(since:)`` from the
    ///   first queued write in read-only mode.
    public func transaction<T>(_ body: (StoreTransaction) throws(OfflineStoreError) -> T) throws(OfflineStoreError) -> T {
        let now = now().millisecondsSince1970
        return try write { db in try body(StoreTransaction(store: self, db: db, now: now)) }
    }

    /// A new unique identifier for a row or an event: a ULID from the store's clock and random
    /// source, so ids made on one device sort by creation time.
    public func newIdentifier() -> String { ulids.nextString() }
}

extension StoreReader {
    /// The stored event with that `event_id`, or `nil`.
    public func event<P: ContractEvent>(_ type: P.Type, id: String) throws(OfflineStoreError) -> EventEnvelope<P>? {
        try events(P.self, sql: #"WHERE "event_id" = ?"#, arguments: [id]).first
    }

    /// The stored events of a type whose payload `field` holds `value`, oldest first.
    ///
    /// - Throws: ``OfflineStoreError/unknownField(contract:field:)`` when the event has no such field.
    public func events<P: ContractEvent>(_ type: P.Type, where field: String, equals value: String) throws(OfflineStoreError) -> [EventEnvelope<P>] {
        guard P.descriptor.fields.contains(where: { $0.name == field && !$0.isEncrypted }) else {
            throw .unknownField(contract: P.descriptor.name, field: field)
        }
        return try events(P.self, sql: "WHERE \(field.quotedDatabaseIdentifier) = ?", arguments: [value])
    }

    /// The stored events of a type, oldest first.
    public func events<P: ContractEvent>(_ type: P.Type) throws(OfflineStoreError) -> [EventEnvelope<P>] {
        try events(P.self, sql: "", arguments: [])
    }

    private func events<P: ContractEvent>(_ type: P.Type, sql condition: String, arguments: StatementArguments) throws(OfflineStoreError)
        -> [EventEnvelope<P>]
    {
        let rows = try withDatabase { db in
            try Row.fetchAll(
                db,
                sql: "SELECT * FROM \(P.descriptor.table.quotedDatabaseIdentifier) \(condition) ORDER BY \"occurred_at\", \"event_id\"",
                arguments: arguments
            )
        }
        return try rows.map { row throws(OfflineStoreError) in try OfflineStore.envelope(P.self, row: row, codec: codec) }
    }

    /// Runs `body` on the snapshot's SQLite connection, for reading the tables of the store's
    /// extensions beside the contract rows. A failure is an ``OfflineStoreError/database(code:message:)``.
    public func withDatabase<T>(_ body: (Database) throws -> T) throws(OfflineStoreError) -> T {
        do {
            return try body(db)
        } catch {
            throw OfflineStore.map(error)
        }
    }

    /// The rows and events that writes not yet on the server (any outbox entry not `done`)
    /// are about, each once, in the order they were first written.
    public func unsyncedRows() throws(OfflineStoreError) -> [RowReference] {
        try withDatabase { db in
            try Row.fetchAll(
                db,
                sql: #"SELECT "entity", "row_id", MIN("seq") AS "first" FROM "outbox" WHERE "status" != \#(OutboxStatus.done.sql) "#
                    + #"GROUP BY "entity", "row_id" ORDER BY "first""#
            ).map { RowReference(contract: $0["entity"], id: $0["row_id"]) }
        }
    }
}

/// A row (or an event) of a contract, by its contract's name and its id.
public struct RowReference: Hashable, Sendable {
    /// The contract's name (`Unit`).
    public var contract: String
    /// The row's primary key, or the event's `event_id`.
    public var id: String

    /// A reference to the row `id` of `contract`.
    public init(contract: String, id: String) {
        self.contract = contract
        self.id = id
    }
}
