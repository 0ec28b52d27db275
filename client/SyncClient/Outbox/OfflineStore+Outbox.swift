import ContractRuntime
package import Foundation
import GRDB
package import SyncProtocol

/// The outbox as the sync engine's push loop drives it:
///
/// ```swift
/// while let request = try store.nextPushRequest(limit: 100) {
///     do {
///         let response = try await transport.push(request)
///         try store.applyPushResponse(response)
///     } catch let failure as TransportFailure where failure.isRetryable {
///         try store.deferMutations(request.mutations.map(\.clientMutationId),
///                                  until: schedule.next(after: failure), error: failure.detail)
///         break
///     }
/// }
/// ```
///
/// Sequencing: every write gets the next local `seq`; it travels under a wire `seq`
/// (``OutboxEntry/pushSeq``) given when it is first handed to the sender, so a quarantined entry
/// that is never sent leaves no gap on the server. When the server answers `sequence_gap`
/// (a quarantined entry had been sent before), call ``resetPushSequence(serverLastSeq:)``.
extension OfflineStore {
    // MARK: Inspecting

    /// Outbox entries, oldest first, optionally only some statuses.
    public func outboxEntries(statuses: [OutboxStatus]? = nil, limit: Int? = nil) throws(OfflineStoreError) -> [OutboxEntry] {
        try read { db in
            var sql = #"SELECT * FROM "outbox""#
            var arguments = StatementArguments()
            if let statuses {
                sql += #" WHERE "status" IN ("# + Array(repeating: "?", count: statuses.count).joined(separator: ", ") + ")"
                arguments = StatementArguments(statuses.map(\.rawValue))
            }
            sql += #" ORDER BY "seq""#
            if let limit { sql += " LIMIT \(max(0, limit))" }
            return try Row.fetchAll(db, sql: sql, arguments: arguments).compactMap { OutboxRecord(row: $0)?.entry }
        }
    }

    /// One outbox entry.
    public func outboxEntry(seq: Int64) throws(OfflineStoreError) -> OutboxEntry? {
        try read { db in try Self.record(db, seq: seq)?.entry }
    }

    /// How many entries each status has.
    public func outboxCounts() throws(OfflineStoreError) -> OutboxCounts {
        try read { db in try Self.outboxCounts(db) }
    }

    static func outboxCounts(_ db: Database) throws -> OutboxCounts {
        var counts: [OutboxStatus: Int] = [:]
        for row in try Row.fetchAll(db.cachedStatement(sql: #"SELECT "status", COUNT(*) AS "count" FROM "outbox" GROUP BY "status""#)) {
            if let status = OutboxStatus(rawValue: row["status"]) { counts[status] = row["count"] }
        }
        return OutboxCounts(byStatus: counts)
    }

    /// The entries whose HMAC or seal did not verify: never sent, kept as evidence until
    /// discarded (``discardQuarantined(seq:)``).
    public func quarantinedEntries() throws(OfflineStoreError) -> [OutboxEntry] {
        try outboxEntries(statuses: [.quarantined])
    }

    // MARK: Pushing

    /// The next mutations to push, oldest first, unsealed and verified, at most `limit`; marks
    /// them `sending`. Empty when nothing is due.
    ///
    /// The batch is the run of unsent entries from the oldest: it stops at a `waiting` entry
    /// whose ``OutboxEntry/nextAttemptAt`` is still ahead (order is never broken), and before a
    /// second `version_check` write of the same row (it needs the answer to the first for its
    /// `base_version`). Entries left `sending` by a crash are sent again (the server answers a
    /// repeat from its stored result). An entry that fails verification is quarantined and
    /// skipped.
    package func pendingMutations(limit: Int = 100) throws(OfflineStoreError) -> [Mutation] {
        let now = now().millisecondsSince1970
        return try write { db in
            let rows = try Row.fetchAll(
                db.cachedStatement(sql: #"SELECT * FROM "outbox" WHERE "status" IN \#(OutboxStatus.sql(OutboxStatus.unsent)) ORDER BY "seq""#)
            )
            var lastPushSeq = try Metadata.integer(db, .lastPushSeq) ?? 0
            let held = try Self.heldContractNames(db)
            var mutations: [Mutation] = []
            var versionChecked: Set<String> = []
            for row in rows {
                guard mutations.count < max(1, limit) else { break }
                guard let record = OutboxRecord(row: row) else {
                    try quarantine(db, seq: row["seq"], reason: "the entry names an unknown operation or status", now: now)
                    continue
                }
                if record.status == .waiting, let next = record.nextAttemptAt, next > now { break }
                if held.contains(record.entity) {
                    // Held until the app is updated. An entry already numbered may have reached
                    // the server, so nothing after it can go first.
                    if record.pushSeq != nil { break }
                    continue
                }
                guard let content = try openVerified(db, record, now: now) else { continue }
                if let entity = contracts.entity(named: record.entity), entity.conflict == .versionCheck {
                    let key = record.entity + "\u{0}" + record.rowId
                    if versionChecked.contains(key) { break }
                    versionChecked.insert(key)
                }
                let pushSeq: Int64
                if let assigned = record.pushSeq {
                    pushSeq = assigned
                } else {
                    lastPushSeq += 1
                    pushSeq = lastPushSeq
                }
                try db.execute(
                    sql: """
                        UPDATE "outbox" SET "status" = \(OutboxStatus.sending.sql), "push_seq" = ?, "attempts" = "attempts" + 1, "updated_at" = ?
                        WHERE "seq" = ?
                        """,
                    arguments: [pushSeq, now, record.seq]
                )
                mutations.append(
                    Mutation(
                        seq: pushSeq, clientMutationId: record.clientMutationId, entity: record.entity, op: record.op,
                        id: record.rowId, payload: content.payload, baseVersion: record.baseVersion, hlc: record.hlc,
                        base: record.op == .patch ? content.base : nil,
                        occurredAt: record.occurredAt.map { Timestamp(millisecondsSince1970: $0) }, hash: record.hash,
                        signature: content.signature
                    )
                )
            }
            try Metadata.set(db, .lastPushSeq, String(lastPushSeq))
            return mutations
        }
    }

    /// ``pendingMutations(limit:)`` wrapped in a push request with this client's id and schema
    /// versions; `nil` when nothing is due.
    package func nextPushRequest(limit: Int = 100) throws(OfflineStoreError) -> PushRequest? {
        let mutations = try pendingMutations(limit: limit)
        guard !mutations.isEmpty else { return nil }
        return PushRequest(clientId: identity.clientId, schema: try requestSchemaVersions(), mutations: mutations)
    }

    /// Applies a push response: see ``markResults(_:)``.
    @discardableResult
    package func applyPushResponse(_ response: PushResponse) throws(OfflineStoreError) -> PushReport {
        try markResults(response.results)
    }

    /// Records the server's answers, matched by `client_mutation_id`:
    ///
    /// - `applied`, `duplicate` → `done`. The row takes the server version; the next
    ///   `version_check` writes of the row that were based on the same version are rebased on
    ///   it; a server row in the answer (a merge, a last-writer-wins outcome) replaces the local
    ///   copy with the device's later unsynced writes replayed on top.
    /// - `conflicted` → `conflicted`, with both rows in ``conflicts(includeResolved:)``. A
    ///   `last_writer_wins` or `field_merge` loss (resolution `lost`) is settled at once: the
    ///   server's row is taken and the conflict recorded as resolved (``ConflictResolution/takeTheirs``).
    ///   Other conflicts wait for ``resolveConflict(_:with:)``.
    /// - `rejected` → `failed` with the server's error: visible, retryable (``retryFailed(seq:)``)
    ///   or discardable (``discardFailed(seq:)``).
    @discardableResult
    package func markResults(_ results: [MutationResult]) throws(OfflineStoreError) -> PushReport {
        let now = now().millisecondsSince1970
        return try write { db in
            var report = PushReport()
            var pushedScopes: Set<String> = []
            for result in results {
                guard
                    let row = try Row.fetchOne(
                        db.cachedStatement(sql: #"SELECT * FROM "outbox" WHERE "client_mutation_id" = ?"#), arguments: [result.clientMutationId]
                    ), let record = OutboxRecord(row: row)
                else {
                    report.unknown.append(result.clientMutationId)
                    continue
                }
                switch result.status {
                case .applied, .duplicate:
                    try setStatus(db, record.seq, .done, error: nil, now: now)
                    try settleDone(db, record, result: result, now: now)
                    if let scopeKey = try scopeKey(db, contract: record.entity, id: record.rowId) { pushedScopes.insert(scopeKey) }
                    report.done += 1
                case .conflicted:
                    let settled = try recordConflict(db, record, result: result, now: now)
                    if settled { report.settledByServer += 1 } else { report.conflicted += 1 }
                case .rejected:
                    let error = result.error ?? ErrorDetail(code: ErrorCode("rejected"), message: "the server refused the change")
                    try setStatus(db, record.seq, .failed, error: error, now: now)
                    report.failed += 1
                }
            }
            try Metadata.set(db, .lastPushAt, String(now))
            for scopeKey in pushedScopes.sorted() {
                try db.execute(
                    sql: """
                        INSERT INTO "sync_state" ("scope_key", "last_push_at") VALUES (?, ?)
                        ON CONFLICT ("scope_key") DO UPDATE SET "last_push_at" = excluded."last_push_at"
                        """,
                    arguments: [scopeKey, now]
                )
            }
            return report
        }
    }

    /// Puts mutations that could not be delivered (network error, 5xx, 429, 408) back to wait until
    /// `until`: `waiting`, retried by ``pendingMutations(limit:)`` once due.
    package func deferMutations(_ clientMutationIds: [String], until: Date, error: ErrorDetail) throws(OfflineStoreError) {
        let now = now().millisecondsSince1970
        let next = Timestamp(until).millisecondsSince1970
        try write { db in
            for id in clientMutationIds {
                try db.execute(
                    sql: """
                        UPDATE "outbox" SET "status" = \(OutboxStatus.waiting.sql), "next_attempt_at" = ?, "last_error" = ?, "updated_at" = ?
                        WHERE "client_mutation_id" = ? AND "status" IN \(OutboxStatus.sql(OutboxStatus.unsent))
                        """,
                    arguments: [next, error.storedText, now, id]
                )
            }
        }
    }

    /// After the server refused a push with `sequence_gap` naming `serverLastSeq` (the last wire
    /// `seq` it has done): every unsent entry sent under a later wire `seq` gets a new one on
    /// its next push, continuing from `serverLastSeq`. Safe: a refused request changed nothing.
    package func resetPushSequence(serverLastSeq: Int64) throws(OfflineStoreError) {
        try write { db in
            try db.execute(
                sql: """
                    UPDATE "outbox" SET "push_seq" = NULL
                    WHERE "push_seq" > ? AND "status" IN \(OutboxStatus.sql(OutboxStatus.renumberable))
                    """,
                arguments: [serverLastSeq]
            )
            try Metadata.set(db, .lastPushSeq, String(serverLastSeq))
        }
    }

    /// Checks the HMAC and seal of every entry not yet done; quarantines those that fail.
    /// Returns the `seq` of the entries quarantined now.
    @discardableResult
    package func verifyOutbox() throws(OfflineStoreError) -> [Int64] {
        let now = now().millisecondsSince1970
        return try writeCheckingSeal { db, tampered in
            var quarantined = tampered
            let rows = try Row.fetchAll(
                db, sql: #"SELECT * FROM "outbox" WHERE "status" IN "# + Self.unsyncedStatusesSQL + #" ORDER BY "seq""#
            )
            for row in rows {
                guard let record = OutboxRecord(row: row) else {
                    try quarantine(db, seq: row["seq"], reason: "the entry names an unknown operation or status", now: now)
                    quarantined.append(row["seq"])
                    continue
                }
                if try openVerified(db, record, now: now) == nil { quarantined.append(record.seq) }
            }
            return quarantined
        }
    }

    // MARK: Failed and quarantined entries

    /// Queues a failed write again, as a new entry (the server keeps its answer to the old
    /// `client_mutation_id` forever), with a fresh clock and the row's current server version;
    /// the failed entry is removed. The files it names that the server refused are offered again.
    @discardableResult
    public func retryFailed(seq: Int64) throws(OfflineStoreError) -> QueuedWrite {
        try writeChange { db, now in
            let (record, content) = try failedEntry(db, seq: seq, now: now)
            let entity = contracts.entity(named: record.entity)
            var baseVersion = record.baseVersion
            var clock = record.hlc
            if let entity {
                if let row = try fetchRow(db, entity, id: record.rowId) { baseVersion = row["_server_version"] }
                clock = try tickIfNeeded(db, entity, record.op, now: now)
            }
            try db.cachedStatement(sql: #"DELETE FROM "outbox" WHERE "seq" = ?"#).execute(arguments: [seq])
            try clearFileRefusals(db, entity: record.entity, payload: content.payload)
            return try appendOutbox(
                db, entity: record.entity, op: record.op, rowId: record.rowId, content: content, baseVersion: baseVersion,
                hlc: clock, occurredAt: record.occurredAt, hash: record.hash, schemaVersion: record.schemaVersion, now: now
            )
        }
    }

    /// Gives up a failed write: removes it and undoes its local effect where nothing changed
    /// since (a created row is deleted, changed fields get their previous values back, a
    /// deleted row comes back, a recorded event is removed).
    public func discardFailed(seq: Int64) throws(OfflineStoreError) {
        let now = now().millisecondsSince1970
        try write { db in
            let (record, content) = try failedEntry(db, seq: seq, now: now)
            try db.cachedStatement(sql: #"DELETE FROM "outbox" WHERE "seq" = ?"#).execute(arguments: [seq])
            try revert(db, record, content)
        }
    }

    /// Removes a quarantined entry (its content is not trusted: nothing is undone).
    public func discardQuarantined(seq: Int64) throws(OfflineStoreError) {
        try write { db in
            guard let record = try Self.record(db, seq: seq) else { throw OfflineStoreError.outboxEntryNotFound(seq: seq) }
            guard record.status == .quarantined else {
                throw OfflineStoreError.invalidOutboxState(seq: seq, status: record.status.rawValue, expected: ["quarantined"])
            }
            try db.cachedStatement(sql: #"DELETE FROM "outbox" WHERE "seq" = ?"#).execute(arguments: [seq])
        }
    }

    /// Deletes `done` entries last updated before `date`; returns how many.
    @discardableResult
    package func pruneCompletedOutbox(before date: Date) throws(OfflineStoreError) -> Int {
        let limit = Timestamp(date).millisecondsSince1970
        return try write { db in try Self.pruneCompletedOutbox(db, before: limit) }
    }

    static func pruneCompletedOutbox(_ db: Database, before limit: Int64) throws -> Int {
        try db.cachedStatement(sql: #"DELETE FROM "outbox" WHERE "status" = \#(OutboxStatus.done.sql) AND "updated_at" < ?"#).execute(arguments: [
            limit
        ])
        return db.changesCount
    }

    // MARK: - Internals

    static func record(_ db: Database, seq: Int64) throws -> OutboxRecord? {
        try Row.fetchOne(db.cachedStatement(sql: #"SELECT * FROM "outbox" WHERE "seq" = ?"#), arguments: [seq]).flatMap(OutboxRecord.init(row:))
    }

    func setStatus(_ db: Database, _ seq: Int64, _ status: OutboxStatus, error: ErrorDetail?, now: Int64) throws {
        try db.execute(
            sql: """
                UPDATE "outbox" SET "status" = ?, "last_error" = ?, "next_attempt_at" = NULL, "updated_at" = ? WHERE "seq" = ?
                """,
            arguments: [status.rawValue, error?.storedText, now, seq]
        )
    }

    /// The entry's sealed content, after checking its HMAC and opening its seal; `nil` (and the
    /// entry quarantined) when either fails.
    func openVerified(_ db: Database, _ record: OutboxRecord, now: Int64? = nil) throws -> OutboxContent? {
        let now = now ?? self.now().millisecondsSince1970
        guard crypto.isValidMAC(record.hmac, for: record.macFields) else {
            try quarantine(db, seq: record.seq, reason: "its HMAC does not match: the entry was modified", now: now)
            return nil
        }
        guard let plaintext = try? crypto.openRecord(record.payload, context: OutboxRecord.sealContext(record.clientMutationId)),
            let json = ColumnCodec.parseJSON(plaintext), let content = OutboxContent(json: json)
        else {
            try quarantine(db, seq: record.seq, reason: "its sealed payload does not open", now: now)
            return nil
        }
        return content
    }

    func quarantine(_ db: Database, seq: Int64, reason: String, now: Int64) throws {
        let error = ErrorDetail(code: ErrorCode("outbox_tampered"), message: "quarantined: \(reason)")
        try db.cachedStatement(
            sql: #"UPDATE "outbox" SET "status" = \#(OutboxStatus.quarantined.sql), "last_error" = ?, "updated_at" = ? WHERE "seq" = ?"#
        ).execute(
            arguments: [error.storedText, now, seq]
        )
    }

    /// Rewrites an entry's `base_version`, signing it again (its old signature was verified).
    func rebase(_ db: Database, _ record: OutboxRecord, baseVersion: Int64) throws {
        var updated = record
        updated.baseVersion = baseVersion
        try db.cachedStatement(sql: #"UPDATE "outbox" SET "base_version" = ?, "hmac" = ? WHERE "seq" = ?"#).execute(
            arguments: [baseVersion, crypto.mac(updated.macFields), record.seq]
        )
    }

    /// The local consequences of an applied (or duplicate) mutation.
    private func settleDone(_ db: Database, _ record: OutboxRecord, result: MutationResult, now: Int64) throws {
        if let event = contracts.event(named: record.entity) {
            try db.execute(
                sql: "UPDATE \(event.table.quotedDatabaseIdentifier) SET \"_synced_at\" = ? WHERE \"event_id\" = ?",
                arguments: [now, record.rowId]
            )
            return
        }
        guard let entity = contracts.entity(named: record.entity) else { return }
        if let version = result.serverVersion {
            // Later writes of the row that were based on what this one was based on are based on it now.
            let later = try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM "outbox" WHERE "entity" = ? AND "row_id" = ? AND "seq" > ?
                    AND "status" IN \(OutboxStatus.sql(OutboxStatus.unsent)) AND "base_version" IS ? ORDER BY "seq"
                    """,
                arguments: [record.entity, record.rowId, record.seq, record.baseVersion]
            )
            for row in later {
                guard let next = OutboxRecord(row: row), try openVerified(db, next, now: now) != nil else { continue }
                try rebase(db, next, baseVersion: version)
            }
        }
        if case .object(let serverRow)? = result.serverRow {
            try storeServerRow(
                db, entity, wire: serverRow, schemaVersion: entity.currentVersion, serverVersion: result.serverVersion, now: now
            )
        } else if record.op != .delete {
            try db.execute(
                sql: "UPDATE \(entity.table.quotedDatabaseIdentifier) SET \"_server_version\" = COALESCE(?, \"_server_version\"), "
                    + "\"_synced_at\" = ? WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = ?",
                arguments: [result.serverVersion, now, record.rowId]
            )
        }
    }

    private func failedEntry(_ db: Database, seq: Int64, now: Int64) throws -> (OutboxRecord, OutboxContent) {
        guard let record = try Self.record(db, seq: seq) else { throw OfflineStoreError.outboxEntryNotFound(seq: seq) }
        guard record.status == .failed else {
            throw OfflineStoreError.invalidOutboxState(seq: seq, status: record.status.rawValue, expected: ["failed"])
        }
        guard let content = try openVerified(db, record, now: now) else {
            throw OfflineStoreError.invalidOutboxState(seq: seq, status: OutboxStatus.quarantined.rawValue, expected: ["failed"])
        }
        return (record, content)
    }

    /// Undoes the local effect of a write that the server refused.
    private func revert(_ db: Database, _ record: OutboxRecord, _ content: OutboxContent) throws {
        if let event = contracts.event(named: record.entity) {
            try db.execute(
                sql: "DELETE FROM \(event.table.quotedDatabaseIdentifier) WHERE \"event_id\" = ?", arguments: [record.rowId]
            )
            return
        }
        guard let entity = contracts.entity(named: record.entity) else { return }
        let others =
            try Int.fetchOne(
                db,
                sql: #"SELECT COUNT(*) FROM "outbox" WHERE "entity" = ? AND "row_id" = ? AND "status" IN "# + Self.unsyncedStatusesSQL,
                arguments: [record.entity, record.rowId]
            ) ?? 0
        let existing = try fetchRow(db, entity, id: record.rowId)
        switch record.op {
        case .create:
            guard others == 0, existing != nil else { return }
            try db.execute(
                sql: "DELETE FROM \(entity.table.quotedDatabaseIdentifier) WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = ?",
                arguments: [record.rowId]
            )
        case .update, .patch:
            guard let existing, let base = content.base, case .object(let payload)? = content.payload else { return }
            let current = try codec.wireObject(existing, fields: entity.fields, table: entity.table, id: record.rowId)
            // Only fields still holding what this write set: later edits win.
            let restore = base.filter { name, _ in payload[name] != nil && current[name] == payload[name] }
            try overwrite(db, entity, id: record.rowId, wire: restore)
        case .delete:
            guard existing == nil, let base = content.base else { return }
            try storeServerRow(db, entity, wire: base, schemaVersion: record.schemaVersion, serverVersion: record.baseVersion, now: 0)
            try db.execute(
                sql:
                    "UPDATE \(entity.table.quotedDatabaseIdentifier) SET \"_synced_at\" = NULL WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = ?",
                arguments: [record.rowId]
            )
        case .event:
            return
        }
    }
}
