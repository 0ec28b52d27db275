public import ContractRuntime
public import Foundation
import GRDB
import SyncProtocol

/// Writes: each changes the local row and appends to the outbox in one transaction, so a crash
/// loses both or neither, and readers see the local result at once.
///
/// What each conflict policy adds to the queued mutation:
///
/// | policy | create | update | patch | delete |
/// | --- | --- | --- | --- | --- |
/// | `append_only` | the row | refused | refused | refused |
/// | `last_writer_wins` | `hlc` | `hlc` | `hlc`, `base` | `hlc` |
/// | `version_check` | — | `base_version` | `base_version`, `base` | `base_version` |
/// | `field_merge` | `hlc` | sent as a patch | `hlc`, `base` | `hlc` |
/// | `server_authoritative`, direction `down` | refused | refused | refused | refused |
///
/// `base_version` is the row's `_server_version` (the server version the local copy is based
/// on); when the row's own create is still on its way, it is filled in when the server answers
/// it. Every write is validated against its contract first (types, enum values, `max_length`,
/// required fields) and refused with ``OfflineStoreError/invalidValue(contract:field:reason:)``.
/// While unsynced writes are older than ``RetentionPolicy/readOnlyAfter``, every write throws
/// ``OfflineStoreError/readOnlyUntilSync(since:)``.
extension OfflineStore {
    /// Creates a row.
    ///
    /// - Throws: ``OfflineStoreError/rowAlreadyExists(contract:id:)``, ``OfflineStoreError/notWritable(contract:reason:)``,
    ///   ``OfflineStoreError/invalidValue(contract:field:reason:)``, ``OfflineStoreError/readOnlyUntilSync(since:)``.
    @discardableResult
    public func create<E: ContractEntity>(_ value: E) throws(OfflineStoreError) -> QueuedWrite {
        let entity = E.descriptor
        try Self.requireWritable(entity, .create)
        let wire = try Self.wireObject(value, contract: entity.name)
        let id = value.contractPrimaryKey
        return try writeChange { db, now in try insertCreated(db, entity, id: id, wire: wire, now: now) }
    }

    /// Replaces a row with `value` (under `field_merge`, queued as a patch of the fields that
    /// changed). Returns `nil`, queuing nothing, when no field changed.
    ///
    /// - Throws: ``OfflineStoreError/rowNotFound(contract:id:)`` and the errors of ``create(_:)``.
    @discardableResult
    public func update<E: ContractEntity>(_ value: E) throws(OfflineStoreError) -> QueuedWrite? {
        let entity = E.descriptor
        try Self.requireWritable(entity, .update)
        let wire = try Self.wireObject(value, contract: entity.name)
        return try change(entity, id: value.contractPrimaryKey, newValues: wire, wholeRow: true)
    }

    /// Sets some fields of a row. Returns `nil`, queuing nothing, when no value changed.
    ///
    /// ```swift
    /// try store.patch(Incident.self, id: "inc-1", [.state(.inProgress), .assigneeId("u-1")])
    /// ```
    ///
    /// - Throws: ``OfflineStoreError/rowNotFound(contract:id:)`` and the errors of ``create(_:)``.
    @discardableResult
    public func patch<E: PatchableEntity>(_ type: E.Type, id: String, _ changes: [E.Change]) throws(OfflineStoreError) -> QueuedWrite? {
        let entity = E.descriptor
        try Self.requireWritable(entity, .patch)
        let values = try Self.wireValues(of: changes, contract: entity.name)
        return try change(entity, id: id, newValues: values, wholeRow: false)
    }

    /// Deletes a row.
    ///
    /// - Throws: ``OfflineStoreError/rowNotFound(contract:id:)`` and the errors of ``create(_:)``.
    @discardableResult
    public func delete<E: ContractEntity>(_ type: E.Type, id: String) throws(OfflineStoreError) -> QueuedWrite {
        let entity = E.descriptor
        try Self.requireWritable(entity, .delete)
        return try writeChange { db, now in try deleteRow(db, entity, id: id, now: now) }
    }

    /// Records an event: stores it in its table and queues it, with an envelope made here
    /// (a ULID `event_id`, this user and device, `occurred_at`, and the SHA-256 of its payload).
    ///
    /// ```swift
    /// let envelope = try store.record(TaskStarted(teamId: "t-1", taskId: "task-1"))
    /// ```
    ///
    /// - Parameters:
    ///   - payload: the event, a value of a generated event type.
    ///   - occurredAt: when it happened; now by default.
    /// - Throws: ``OfflineStoreError/notWritable(contract:reason:)`` for an event devices do not
    ///   send, ``OfflineStoreError/invalidValue(contract:field:reason:)``,
    ///   ``OfflineStoreError/readOnlyUntilSync(since:)``.
    @discardableResult
    public func record<P: ContractEvent>(_ payload: P, occurredAt: Date? = nil) throws(OfflineStoreError) -> EventEnvelope<P> {
        let prepared = try prepareRecord(payload, occurredAt: occurredAt)
        _ = try writeChange { db, now in try insertEvent(db, prepared, now: now) }
        return prepared.envelope
    }

    /// Sets the client-only columns of a row. Never queued (they never leave the device) and
    /// allowed in read-only mode.
    ///
    /// - Throws: ``OfflineStoreError/rowNotFound(contract:id:)``, ``OfflineStoreError/invalidValue(contract:field:reason:)``.
    public func setLocalState<E: LocalStateEntity>(_ type: E.Type, id: String, _ state: E.LocalState) throws(OfflineStoreError) {
        let entity = E.descriptor
        let wire = try Self.wireObject(state, contract: entity.name)
        try write { db in try writeLocalState(db, entity, id: id, wire: wire) }
    }

    /// The stored events of a type, oldest first.
    public func events<P: ContractEvent>(_ type: P.Type) throws(OfflineStoreError) -> [EventEnvelope<P>] {
        try read { reader throws(OfflineStoreError) in try reader.events(P.self) }
    }

    // MARK: - Internals

    /// Refuses what the contract does not let devices write.
    static func requireWritable(_ entity: EntityDescriptor, _ op: MutationOperation) throws(OfflineStoreError) {
        if entity.direction == .down {
            throw .notWritable(contract: entity.name, reason: "it travels from the server to devices only (direction down)")
        }
        switch entity.conflict {
        case .serverAuthoritative:
            throw .notWritable(contract: entity.name, reason: "it is server-authoritative")
        case .appendOnly where op != .create:
            throw .notWritable(contract: entity.name, reason: "it is append-only: rows are created, never changed or deleted")
        default:
            break
        }
        if op == .delete, !entity.tombstones {
            throw .notWritable(contract: entity.name, reason: "its rows are never deleted (tombstones: false): no deletion could reach other devices")
        }
    }

    static func wireObject<Value: Encodable>(_ value: Value, contract: String) throws(OfflineStoreError) -> [String: JSONValue] {
        do {
            return try WireCoding.object(value)
        } catch {
            throw .invalidValue(contract: contract, field: "*", reason: error.reason)
        }
    }

    static func envelope<P: ContractEvent>(_ type: P.Type, row: Row, codec: RowCodec) throws(OfflineStoreError) -> EventEnvelope<P> {
        let event = P.descriptor
        let id: String = row["event_id"] ?? ""
        var wire: [String: JSONValue] = [
            "event_id": .string(id), "type": .string(event.name),
            "schema_version": .int(row["schema_version"] ?? Int64(event.currentVersion)),
            "user_id": .string(row["user_id"] ?? ""), "device_id": .string(row["device_id"] ?? ""),
            "occurred_at": .string(Timestamp(millisecondsSince1970: row["occurred_at"] ?? 0).iso8601),
            "hash": .string(row["hash"] ?? ""),
        ]
        if let recorded: Int64 = row["recorded_at"] { wire["recorded_at"] = .string(Timestamp(millisecondsSince1970: recorded).iso8601) }
        let payload = try codec.wireObject(row, fields: event.fields, table: event.table, id: id)
        wire["payload"] = .object(payload.filter { $0.value != .null })
        do {
            return try WireCoding.decode(EventEnvelope<P>.self, from: wire)
        } catch {
            throw .unreadableRow(contract: event.name, id: id, reason: error.reason)
        }
    }

    /// The wire values of typed field changes.
    static func wireValues<Change: EntityFieldChange>(of changes: [Change], contract: String) throws(OfflineStoreError) -> [String: JSONValue] {
        var values: [String: JSONValue] = [:]
        for change in changes {
            do {
                values[change.fieldName] = try change.wireValue()
            } catch {
                throw .invalidValue(contract: contract, field: change.fieldName, reason: "cannot be encoded")
            }
        }
        return values
    }

    /// An event a device may send, with its envelope made.
    func prepareRecord<P: ContractEvent>(_ payload: P, occurredAt: Date?) throws(OfflineStoreError) -> PreparedEvent<P> {
        let event = P.descriptor
        guard event.direction != .down else {
            throw .notWritable(contract: event.name, reason: "the event travels from the server to devices only (direction down)")
        }
        return try prepareEvent(payload, occurredAt: occurredAt.map(Timestamp.init))
    }

    /// An event ready to be stored: its envelope (id, hash) and its payload's wire form.
    struct PreparedEvent<P: ContractEvent> {
        var envelope: EventEnvelope<P>
        var wire: [String: JSONValue]
    }

    /// Makes an event's envelope: a ULID `event_id`, this user and device, `occurred_at` (now by
    /// default) and the SHA-256 of its payload.
    func prepareEvent<P: ContractEvent>(_ payload: P, occurredAt: Timestamp?) throws(OfflineStoreError) -> PreparedEvent<P> {
        let event = P.descriptor
        let wire = try Self.wireObject(payload, contract: event.name)
        do {
            let envelope = try EventEnvelope(
                eventId: ulids.nextString(), userId: identity.userId, deviceId: identity.deviceId, occurredAt: occurredAt ?? now(),
                payload: payload
            )
            return PreparedEvent(envelope: envelope, wire: wire)
        } catch {
            throw .invalidValue(contract: event.name, field: "payload", reason: "cannot be hashed")
        }
    }

    /// Stores a prepared event in its table and queues it, inside the caller's transaction.
    func insertEvent<P: ContractEvent>(_ db: Database, _ prepared: PreparedEvent<P>, now: Int64) throws -> QueuedWrite {
        let event = P.descriptor
        let envelope = prepared.envelope
        let eventId = envelope.eventId
        noteFilesNamed(in: prepared.wire, fields: event.fields)
        let columns = try codec.columns(
            contract: event.name, table: event.table, id: eventId, fields: event.fields, wire: prepared.wire, mode: .write,
            missing: .defaults
        )
        try recordNamedFiles(db, in: prepared.wire, fields: event.fields, now: now)
        let envelopeColumns: [(name: String, value: DatabaseValue)] = [
            ("event_id", eventId.databaseValue), ("schema_version", event.currentVersion.databaseValue),
            ("user_id", envelope.userId.databaseValue), ("device_id", envelope.deviceId.databaseValue),
            ("occurred_at", envelope.occurredAt.millisecondsSince1970.databaseValue), ("hash", envelope.hash.databaseValue),
        ]
        let all = envelopeColumns + columns
        try db.execute(
            sql: "INSERT INTO \(event.table.quotedDatabaseIdentifier) (\(all.map(\.name.quotedDatabaseIdentifier).joined(separator: ", "))) "
                + "VALUES (\(Array(repeating: "?", count: all.count).joined(separator: ", ")))",
            arguments: StatementArguments(all.map(\.value))
        )
        // The payload exactly as the envelope hashed it, so the server computes the same hash.
        return try appendOutbox(
            db, entity: event.name, op: .event, rowId: eventId, content: OutboxContent(payload: .object(prepared.wire), base: nil),
            baseVersion: nil, hlc: nil, occurredAt: envelope.occurredAt.millisecondsSince1970, hash: envelope.hash,
            schemaVersion: event.currentVersion, now: now
        )
    }

    /// Inserts a new row and queues its create, inside the caller's transaction.
    func insertCreated(_ db: Database, _ entity: EntityDescriptor, id: String, wire: [String: JSONValue], now: Int64) throws -> QueuedWrite {
        guard try !rowExists(db, entity, id: id) else { throw OfflineStoreError.rowAlreadyExists(contract: entity.name, id: id) }
        let (columns, normalized) = try encode(entity, id: id, wire: wire, missing: .defaults)
        try recordNamedFiles(db, in: normalized, fields: entity.fields, now: now)
        let names = columns.map(\.name) + ["_schema_version", "_server_version", "_synced_at"]
        let values = columns.map(\.value) + [entity.currentVersion.databaseValue, .null, .null]
        try db.execute(
            sql: "INSERT INTO \(entity.table.quotedDatabaseIdentifier) (\(names.map(\.quotedDatabaseIdentifier).joined(separator: ", "))) "
                + "VALUES (\(Array(repeating: "?", count: names.count).joined(separator: ", ")))",
            arguments: StatementArguments(values)
        )
        let clock = try tickIfNeeded(db, entity, .create, now: now)
        return try appendOutbox(
            db, entity: entity.name, op: .create, rowId: id,
            content: OutboxContent(payload: .object(normalized.filter { $0.value != .null }), base: nil), baseVersion: nil, hlc: clock,
            occurredAt: nil, hash: nil, schemaVersion: entity.currentVersion, now: now
        )
    }

    /// Deletes a row and queues its delete, inside the caller's transaction.
    func deleteRow(_ db: Database, _ entity: EntityDescriptor, id: String, now: Int64) throws -> QueuedWrite {
        guard let row = try fetchRow(db, entity, id: id) else { throw OfflineStoreError.rowNotFound(contract: entity.name, id: id) }
        let current = try codec.wireObject(row, fields: entity.fields, table: entity.table, id: id)
        try db.execute(
            sql: "DELETE FROM \(entity.table.quotedDatabaseIdentifier) WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = ?",
            arguments: [id]
        )
        let clock = try tickIfNeeded(db, entity, .delete, now: now)
        return try appendOutbox(
            db, entity: entity.name, op: .delete, rowId: id, content: OutboxContent(payload: nil, base: current),
            baseVersion: row["_server_version"], hlc: clock, occurredAt: nil, hash: nil,
            schemaVersion: entity.currentVersion, now: now
        )
    }

    /// Sets a row's client-only columns, inside the caller's transaction.
    func writeLocalState(_ db: Database, _ entity: EntityDescriptor, id: String, wire: [String: JSONValue]) throws {
        let columns = try codec.columns(
            contract: entity.name, table: entity.table, id: id, fields: entity.localFields, wire: wire, mode: .write,
            missing: .defaults
        )
        guard !columns.isEmpty else { return }
        try Self.updateColumns(db, entity, id: id, columns)
        guard db.changesCount > 0 else { throw OfflineStoreError.rowNotFound(contract: entity.name, id: id) }
    }

    /// `UPDATE` of some columns of one row.
    static func updateColumns(_ db: Database, _ entity: EntityDescriptor, id: String, _ columns: [(name: String, value: DatabaseValue)]) throws {
        try db.execute(
            sql: "UPDATE \(entity.table.quotedDatabaseIdentifier) SET "
                + columns.map { "\($0.name.quotedDatabaseIdentifier) = ?" }.joined(separator: ", ")
                + " WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = ?",
            arguments: StatementArguments(columns.map(\.value) + [id.databaseValue])
        )
    }

    /// Refuses a queued write while the store is read-only (``RetentionPolicy/readOnlyAfter``).
    func requireNotReadOnly(_ db: Database, now: Int64) throws {
        if case .readOnly(let since) = try Self.retentionState(db, now: now, policy: configuration.retention) {
            throw OfflineStoreError.readOnlyUntilSync(since: since)
        }
    }

    /// Runs a queued write: refuses it in read-only mode, then runs `body` in one transaction.
    func writeChange<T>(_ body: (Database, Int64) throws -> T) throws(OfflineStoreError) -> T {
        let now = now().millisecondsSince1970
        return try write { db in
            try requireNotReadOnly(db, now: now)
            return try body(db, now)
        }
    }

    /// Update or patch: writes the changed columns and queues what the policy needs.
    private func change(
        _ entity: EntityDescriptor, id: String, newValues: [String: JSONValue], wholeRow: Bool
    ) throws(OfflineStoreError) -> QueuedWrite? {
        try writeChange { db, now in try changeRow(db, entity, id: id, newValues: newValues, wholeRow: wholeRow, now: now) }
    }

    /// Update or patch inside the caller's transaction.
    func changeRow(
        _ db: Database, _ entity: EntityDescriptor, id: String, newValues: [String: JSONValue], wholeRow: Bool, now: Int64
    ) throws -> QueuedWrite? {
        guard let row = try fetchRow(db, entity, id: id) else { throw OfflineStoreError.rowNotFound(contract: entity.name, id: id) }
        let current = try codec.wireObject(row, fields: entity.fields, table: entity.table, id: id)
        let (columns, normalized) = try encode(entity, id: id, wire: newValues, missing: wholeRow ? .defaults : .skip)
        try recordNamedFiles(db, in: normalized, fields: entity.fields, now: now)
        let changedColumns = columns.filter { normalized[$0.name] != current[$0.name] && $0.name != entity.primaryKey }
        guard !changedColumns.isEmpty else { return nil }
        try db.execute(
            sql: "UPDATE \(entity.table.quotedDatabaseIdentifier) SET "
                + changedColumns.map { "\($0.name.quotedDatabaseIdentifier) = ?" }.joined(separator: ", ")
                + " WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = ?",
            arguments: StatementArguments(changedColumns.map(\.value) + [id.databaseValue])
        )
        let changedNames = changedColumns.map(\.name)
        let base = current.filter { changedNames.contains($0.key) }
        let changed = normalized.filter { changedNames.contains($0.key) }
        // field_merge carries only the changed fields with their base values, even for an update.
        let asPatch = !wholeRow || entity.conflict == .fieldMerge
        let op: MutationOperation = asPatch ? .patch : .update
        // A whole row leaves out null fields, as the generated types encode it; a patch names them.
        var payload = asPatch ? changed : current.merging(normalized) { _, new in new }.filter { $0.value != .null }
        payload[entity.primaryKey] = current[entity.primaryKey]
        let clock = try tickIfNeeded(db, entity, op, now: now)
        return try appendOutbox(
            db, entity: entity.name, op: op, rowId: id, content: OutboxContent(payload: .object(payload), base: base),
            baseVersion: row["_server_version"], hlc: clock, occurredAt: nil, hash: nil,
            schemaVersion: entity.currentVersion, now: now
        )
    }

    /// Column values and the normalized wire values of the contract fields in `wire`.
    func encode(
        _ entity: EntityDescriptor, id: String, wire: [String: JSONValue], missing: RowCodec.MissingFields
    ) throws(OfflineStoreError) -> (columns: [(name: String, value: DatabaseValue)], normalized: [String: JSONValue]) {
        // The files the row names, imported in this run, are settled after the transaction.
        noteFilesNamed(in: wire, fields: entity.fields)
        for name in wire.keys where entity.fields.first(where: { $0.name == name }) == nil {
            throw .unknownField(contract: entity.name, field: name)
        }
        var columns: [(name: String, value: DatabaseValue)] = []
        var normalized: [String: JSONValue] = [:]
        for field in entity.fields {
            let value: JSONValue
            if let given = wire[field.name] {
                value = given
            } else if missing == .skip {
                continue
            } else {
                value = field.defaultValue ?? .null
            }
            let stored: DatabaseValue
            do {
                stored = try codec.columns.columnValue(value, for: field, mode: .write)
            } catch {
                throw .refusal(error, field: field, value: value, contract: entity.name)
            }
            normalized[field.name] = codec.columns.wireValue(stored, for: field)
            columns.append(
                (field.name, try codec.columnValue(value, for: field, contract: entity.name, table: entity.table, id: id, mode: .write))
            )
        }
        return (columns, normalized)
    }

    func rowExists(_ db: Database, _ entity: EntityDescriptor, id: String) throws -> Bool {
        try Bool.fetchOne(
            db,
            sql: "SELECT EXISTS (SELECT 1 FROM \(entity.table.quotedDatabaseIdentifier) WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = ?)",
            arguments: [id]
        ) ?? false
    }

    func fetchRow(_ db: Database, _ entity: EntityDescriptor, id: String) throws -> Row? {
        try Row.fetchOne(
            db,
            sql: "SELECT * FROM \(entity.table.quotedDatabaseIdentifier) WHERE \(entity.primaryKey.quotedDatabaseIdentifier) = ?",
            arguments: [id]
        )
    }

    /// The next hybrid logical clock reading when the policy orders writes by clock.
    func tickIfNeeded(_ db: Database, _ entity: EntityDescriptor, _ op: MutationOperation, now: Int64) throws -> String? {
        switch entity.conflict {
        case .lastWriterWins, .fieldMerge: return try tickClock(db, now: now).description
        case .versionCheck, .appendOnly, .serverAuthoritative: return nil
        }
    }

    /// Ticks the persisted hybrid logical clock.
    func tickClock(_ db: Database, now: Int64) throws -> HybridLogicalClock {
        let stored =
            try Metadata.get(db, .hlc).flatMap(HybridLogicalClock.init)
            ?? HybridLogicalClock(milliseconds: 0, counter: 0, node: identity.clientId)
        let next = stored.tick(now: Timestamp(millisecondsSince1970: now))
        try Metadata.set(db, .hlc, next.description)
        return next
    }

    /// The device's signature of a write of a contract with `signed: true`, over exactly what
    /// the push will send (``DeviceSignature``); `nil` for other contracts.
    func signature(of mutation: Mutation, schemaVersion: Int) throws(OfflineStoreError) -> String? {
        guard contracts.signedContracts.contains(mutation.entity) else { return nil }
        guard let key = configuration.deviceSigningKey else {
            throw .notWritable(
                contract: mutation.entity,
                reason: "its contract is signed: true, and the store has no device signing key (OfflineStoreConfiguration.deviceSigningKey)")
        }
        let signer = DeviceSignature.Signer(
            tenant: identity.tenantId, userID: identity.userId, deviceID: identity.deviceId, clientID: identity.clientId)
        do {
            return try key.signature(for: DeviceSignature.signedBytes(of: mutation, schemaVersion: schemaVersion, signer: signer))
                .base64EncodedString()
        } catch {
            throw .notWritable(contract: mutation.entity, reason: "the device signing key could not sign: \(error)")
        }
    }

    /// Appends a sealed, signed entry with the next `seq`.
    func appendOutbox(
        _ db: Database, entity: String, op: MutationOperation, rowId: String, content: OutboxContent, baseVersion: Int64?,
        hlc: String?, occurredAt: Int64?, hash: String?, schemaVersion: Int, now: Int64
    ) throws -> QueuedWrite {
        let seq = try Metadata.integer(db, .nextSeq) ?? 1
        try Metadata.set(db, .nextSeq, String(seq + 1))
        let clientMutationId = ulids.nextString()
        var content = content
        content.signature = try signature(
            of: Mutation(
                seq: seq, clientMutationId: clientMutationId, entity: entity, op: op, id: rowId, payload: content.payload,
                baseVersion: baseVersion, hlc: hlc, base: op == .patch ? content.base : nil,
                occurredAt: occurredAt.map { Timestamp(millisecondsSince1970: $0) }, hash: hash
            ), schemaVersion: schemaVersion)
        let sealed = try crypto.sealRecord(
            Data(CanonicalJSON.text(content.json).utf8), context: OutboxRecord.sealContext(clientMutationId)
        )
        let mac = crypto.mac(
            OutboxRecord.macFields(
                seq: seq, clientMutationId: clientMutationId, entity: entity, op: op.rawValue, rowId: rowId,
                schemaVersion: schemaVersion, baseVersion: baseVersion, hlc: hlc, occurredAt: occurredAt, hash: hash,
                payload: sealed
            )
        )
        try db.execute(
            sql: """
                INSERT INTO "outbox" ("seq", "client_mutation_id", "entity", "op", "row_id", "payload", "hmac", "status",
                    "base_version", "hlc", "occurred_at", "hash", "schema_version", "created_at", "updated_at")
                VALUES (?, ?, ?, ?, ?, ?, ?, \(OutboxStatus.pending.sql), ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                seq, clientMutationId, entity, op.rawValue, rowId, sealed, mac, baseVersion, hlc, occurredAt, hash, schemaVersion,
                now, now,
            ]
        )
        return QueuedWrite(seq: seq, clientMutationId: clientMutationId, entity: entity, op: op, rowId: rowId)
    }
}
