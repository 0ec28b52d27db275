public import ContractRuntime
import Foundation
import GRDB
import SyncProtocol

extension OfflineStore {
    /// Conflicts, oldest first: the open ones, or all.
    public func conflicts(includeResolved: Bool = false) throws(OfflineStoreError) -> [ConflictRecord] {
        try read { db in
            let sql = #"SELECT * FROM "conflicts""# + (includeResolved ? "" : #" WHERE "resolution" IS NULL"#) + #" ORDER BY "id""#
            return try Row.fetchAll(db, sql: sql).map { row throws(OfflineStoreError) in try conflictRecord(row) }
        }
    }

    /// One conflict.
    public func conflict(id: Int64) throws(OfflineStoreError) -> ConflictRecord? {
        try read { db in
            try Row.fetchOne(db.cachedStatement(sql: #"SELECT * FROM "conflicts" WHERE "id" = ?"#), arguments: [id]).map {
                row throws(OfflineStoreError) in
                try conflictRecord(row)
            }
        }
    }

    /// Resolves an open conflict by keeping the device's row (queued again, based on the
    /// server's version; returns the new entry) or taking the server's (returns `nil`).
    ///
    /// A conflicted event (a `TaskStatusChanged` whose task has moved on) is a fact
    /// about what the device saw: taking theirs discards it (the row it was about comes with the
    /// next pull), and keeping it is refused with ``OfflineStoreError/invalidResolution(reason:)``,
    /// since the same event would conflict again; record a new one instead.
    @discardableResult
    public func resolveConflict(_ id: Int64, with choice: ConflictChoice) throws(OfflineStoreError) -> QueuedWrite? {
        if let event = try openEventConflict(id: id) {
            guard choice == .takeTheirs else {
                throw .invalidResolution(
                    reason: "conflict \(id) is about a \(event) event, which cannot be sent again as it was: take theirs and record a new one"
                )
            }
            let now = now().millisecondsSince1970
            try write { db in
                guard
                    let row = try Row.fetchOne(
                        db.cachedStatement(sql: #"SELECT * FROM "conflicts" WHERE "id" = ? AND "resolution" IS NULL"#), arguments: [id])
                else { throw OfflineStoreError.conflictNotFound(id: id) }
                try close(db, try conflictRecord(row), .takeTheirs, now: now)
            }
            return nil
        }
        switch choice {
        case .keepMine:
            return try writeChange { db, now in
                let (conflict, entity) = try openConflict(db, id: id)
                let queued = try resubmit(db, entity, conflict: conflict, now: now)
                try close(db, conflict, .keepMine, now: now)
                return queued
            }
        case .takeTheirs:
            let now = now().millisecondsSince1970
            try write { db in
                let (conflict, entity) = try openConflict(db, id: id)
                try close(db, conflict, .takeTheirs, now: now)
                // A later write of the row still on its way (another conflict of it kept, or a new
                // edit) is the user's newer word: the row it wrote stays until the server answers
                // it. Taking theirs then settles only this conflict.
                let newer =
                    try Bool.fetchOne(
                        db,
                        sql: """
                            SELECT EXISTS (SELECT 1 FROM "outbox" WHERE "entity" = ? AND "row_id" = ? AND "seq" > ?
                                AND "status" IN \(OutboxStatus.sql(OutboxStatus.unsent)))
                            """,
                        arguments: [conflict.entity, conflict.rowId, conflict.seq]
                    ) ?? false
                if newer { return }
                if let serverRow = conflict.serverRow {
                    try storeServerRow(
                        db, entity, wire: serverRow, schemaVersion: entity.currentVersion, serverVersion: conflict.serverVersion,
                        now: now
                    )
                } else {
                    try db.execute(
                        sql: "DELETE FROM \(entity.table.quotedDatabaseIdentifier) WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = ?",
                        arguments: [conflict.rowId]
                    )
                }
            }
            return nil
        }
    }

    /// Resolves an open conflict with a merged row: stored locally and queued, based on the
    /// server's version.
    @discardableResult
    public func resolveConflict<E: ContractEntity>(_ id: Int64, merged value: E) throws(OfflineStoreError) -> QueuedWrite? {
        let entity = E.descriptor
        let wire = try Self.wireObject(value, contract: entity.name)
        return try writeChange { db, now in
            let (conflict, _) = try openConflict(db, id: id)
            guard conflict.entity == entity.name, conflict.rowId == value.contractPrimaryKey else {
                throw OfflineStoreError.invalidResolution(
                    reason: "conflict \(id) is about \(conflict.entity) '\(conflict.rowId)', not \(entity.name) '\(value.contractPrimaryKey)'"
                )
            }
            let (columns, _) = try encode(entity, id: conflict.rowId, wire: wire, missing: .defaults)
            if try rowExists(db, entity, id: conflict.rowId) {
                try db.execute(
                    sql: "UPDATE \(entity.table.quotedDatabaseIdentifier) SET "
                        + columns.map { "\($0.name.quotedDatabaseIdentifier) = ?" }.joined(separator: ", ")
                        + " WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = ?",
                    arguments: StatementArguments(columns.map(\.value) + [conflict.rowId.databaseValue])
                )
            } else {
                let names = columns.map(\.name) + ["_schema_version"]
                try db.execute(
                    sql: "INSERT INTO \(entity.table.quotedDatabaseIdentifier) (\(names.map(\.quotedDatabaseIdentifier).joined(separator: ", "))) "
                        + "VALUES (\(Array(repeating: "?", count: names.count).joined(separator: ", ")))",
                    arguments: StatementArguments(columns.map(\.value) + [entity.currentVersion.databaseValue])
                )
            }
            let queued = try resubmit(db, entity, conflict: conflict, now: now)
            try close(db, conflict, .merged, now: now)
            return queued
        }
    }

    // MARK: - Internals

    func conflictRecord(_ row: Row) throws(OfflineStoreError) -> ConflictRecord {
        let id: Int64 = row["id"]
        let clientMutationId: String = row["client_mutation_id"]
        func open(_ column: String) throws(OfflineStoreError) -> [String: JSONValue]? {
            guard let sealed: Data = row[column] else { return nil }
            guard let plaintext = try? crypto.openRecord(sealed, context: Self.conflictContext(clientMutationId, column)),
                case .object(let object)? = ColumnCodec.parseJSON(plaintext)
            else { throw .unsealFailed(table: "conflicts", column: column, id: String(id)) }
            return object
        }
        return ConflictRecord(
            id: id, seq: row["outbox_seq"], clientMutationId: clientMutationId, entity: row["entity"], rowId: row["row_id"],
            op: MutationOperation(rawValue: row["op"]) ?? .update, localRow: try open("local_row"), serverRow: try open("server_row"),
            serverVersion: row["server_version"], serverResolution: row["server_resolution"],
            resolution: (row["resolution"] as String?).flatMap(ConflictResolution.init(rawValue:)),
            detectedAt: Timestamp(millisecondsSince1970: row["detected_at"]).date,
            resolvedAt: (row["resolved_at"] as Int64?).map { Timestamp(millisecondsSince1970: $0).date }
        )
    }

    static func conflictContext(_ clientMutationId: String, _ column: String) -> String {
        "conflict\u{0}\(clientMutationId)\u{0}\(column)"
    }

    /// Records a `conflicted` answer and sets the entry's status. Returns whether the policy
    /// settled it at once (a last-writer-wins or field-merge loss: the server's row is taken).
    func recordConflict(_ db: Database, _ record: OutboxRecord, result: MutationResult, now: Int64) throws -> Bool {
        let entity = contracts.entity(named: record.entity)
        var localRow: [String: JSONValue]?
        if let entity, let row = try fetchRow(db, entity, id: record.rowId) {
            localRow = try codec.wireObject(row, fields: entity.fields, table: entity.table, id: record.rowId)
        }
        var serverRow: [String: JSONValue]?
        if case .object(let object)? = result.serverRow { serverRow = object }
        func seal(_ row: [String: JSONValue]?, _ column: String) throws -> Data? {
            guard let row else { return nil }
            return try crypto.sealRecord(
                Data(CanonicalJSON.text(.object(row)).utf8), context: Self.conflictContext(record.clientMutationId, column)
            )
        }
        // A last-writer-wins or field-merge loss leaves nothing to decide: the later write
        // stands, whether it is a row (taken) or a delete (the local row goes).
        let settles = entity.map { [.lastWriterWins, .fieldMerge].contains($0.conflict) } == true && result.resolution == "lost"
        try db.execute(
            sql: """
                INSERT INTO "conflicts" ("outbox_seq", "client_mutation_id", "entity", "row_id", "op", "local_row", "server_row",
                    "server_version", "server_resolution", "resolution", "detected_at", "resolved_at")
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                record.seq, record.clientMutationId, record.entity, record.rowId, record.op.rawValue,
                try seal(localRow, "local_row"), try seal(serverRow, "server_row"), result.serverVersion, result.resolution,
                settles ? ConflictResolution.takeTheirs.rawValue : nil, now, settles ? now : nil,
            ]
        )
        try setStatus(db, record.seq, settles ? .done : .conflicted, error: nil, now: now)
        if settles, let entity {
            if let serverRow {
                try storeServerRow(
                    db, entity, wire: serverRow, schemaVersion: entity.currentVersion, serverVersion: result.serverVersion, now: now
                )
            } else {
                try db.execute(
                    sql: "DELETE FROM \(entity.table.quotedDatabaseIdentifier) WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = ?",
                    arguments: [record.rowId]
                )
            }
        }
        return settles
    }

    /// Keeps the server side of a row's open conflicts current: after a pulled row (or a pulled
    /// delete) is stored, what the conflicts recorded as the server's is replaced by it, so that
    /// taking theirs takes the server's latest row and keeping mine is based on its version. A
    /// pull never brings a row twice, so without this, taking theirs could put back an older row
    /// than the one the device had already received.
    func refreshOpenConflicts(_ db: Database, _ entity: EntityDescriptor, id: String, deleted: Bool) throws {
        let open = try Row.fetchAll(
            db.cachedStatement(
                sql: #"SELECT "id", "client_mutation_id" FROM "conflicts" WHERE "entity" = ? AND "row_id" = ? AND "resolution" IS NULL"#),
            arguments: [entity.name, id]
        )
        guard !open.isEmpty else { return }
        var serverRow: [String: JSONValue]?
        var serverVersion: Int64?
        if !deleted, let row = try fetchRow(db, entity, id: id) {
            serverRow = try codec.wireObject(row, fields: entity.fields, table: entity.table, id: id)
            serverVersion = row[Self.serverVersionKey]
        }
        for conflict in open {
            let clientMutationId: String = conflict["client_mutation_id"]
            let sealed = try serverRow.map {
                try crypto.sealRecord(Data(CanonicalJSON.text(.object($0)).utf8), context: Self.conflictContext(clientMutationId, "server_row"))
            }
            try db.cachedStatement(sql: #"UPDATE "conflicts" SET "server_row" = ?, "server_version" = COALESCE(?, "server_version") WHERE "id" = ?"#)
                .execute(
                    arguments: [sealed, serverVersion, conflict["id"] as Int64]
                )
        }
    }

    /// The event contract an open conflict is about, or `nil` when it is about an entity.
    private func openEventConflict(id: Int64) throws(OfflineStoreError) -> String? {
        try read { db in
            let name = try String.fetchOne(
                db.cachedStatement(sql: #"SELECT "entity" FROM "conflicts" WHERE "id" = ? AND "resolution" IS NULL"#), arguments: [id])
            return name.flatMap { contracts.entity(named: $0) == nil && contracts.event(named: $0) != nil ? $0 : nil }
        }
    }

    private func openConflict(_ db: Database, id: Int64) throws -> (ConflictRecord, EntityDescriptor) {
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(sql: #"SELECT * FROM "conflicts" WHERE "id" = ? AND "resolution" IS NULL"#), arguments: [id])
        else { throw OfflineStoreError.conflictNotFound(id: id) }
        let conflict = try conflictRecord(row)
        guard let entity = contracts.entity(named: conflict.entity) else {
            throw OfflineStoreError.unknownContract(conflict.entity)
        }
        return (conflict, entity)
    }

    /// Marks a conflict resolved and its outbox entry done.
    func close(_ db: Database, _ conflict: ConflictRecord, _ resolution: ConflictResolution, now: Int64) throws {
        try db.cachedStatement(sql: #"UPDATE "conflicts" SET "resolution" = ?, "resolved_at" = ? WHERE "id" = ?"#).execute(
            arguments: [resolution.rawValue, now, conflict.id]
        )
        try db.cachedStatement(
            sql:
                #"UPDATE "outbox" SET "status" = \#(OutboxStatus.done.sql), "updated_at" = ? WHERE "seq" = ? AND "status" = \#(OutboxStatus.conflicted.sql)"#
        ).execute(
            arguments: [now, conflict.seq]
        )
    }

    /// Queues the device's current row again, based on the server's version of the conflict.
    private func resubmit(_ db: Database, _ entity: EntityDescriptor, conflict: ConflictRecord, now: Int64) throws -> QueuedWrite {
        let id = conflict.rowId
        guard let row = try fetchRow(db, entity, id: id) else {
            // Mine is deleted: delete theirs.
            let clock = try tickIfNeeded(db, entity, .delete, now: now)
            return try appendOutbox(
                db, entity: entity.name, op: .delete, rowId: id, content: OutboxContent(payload: nil, base: conflict.serverRow),
                baseVersion: conflict.serverVersion, hlc: clock, occurredAt: nil, hash: nil, schemaVersion: entity.currentVersion,
                now: now
            )
        }
        let mine = try codec.wireObject(row, fields: entity.fields, table: entity.table, id: id)
        try db.execute(
            sql:
                "UPDATE \(entity.table.quotedDatabaseIdentifier) SET \"_server_version\" = ? WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = ?",
            arguments: [conflict.serverVersion, id]
        )
        let op: MutationOperation
        // A whole row leaves out null fields, as the generated types encode it; a patch names them.
        var payload = mine.filter { $0.value != .null }
        var base: [String: JSONValue]?
        if let theirs = conflict.serverRow {
            let changed = mine.filter { $0.key != entity.primaryKey && theirs[$0.key] != $0.value }
            base = theirs.filter { changed[$0.key] != nil }
            if entity.conflict == .fieldMerge {
                op = .patch
                payload = changed
                payload[entity.primaryKey] = mine[entity.primaryKey]
            } else {
                op = .update
            }
        } else {
            // Theirs is deleted: create mine again.
            op = .create
        }
        let clock = try tickIfNeeded(db, entity, op, now: now)
        return try appendOutbox(
            db, entity: entity.name, op: op, rowId: id, content: OutboxContent(payload: .object(payload), base: base),
            // A create carries the deletion's version: the server takes it as bringing the row back.
            baseVersion: conflict.serverVersion, hlc: clock, occurredAt: nil, hash: nil,
            schemaVersion: entity.currentVersion, now: now
        )
    }
}
