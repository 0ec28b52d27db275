public import ContractRuntime
import Foundation
import SyncProtocol

/// The admin operations that publish and delete content (rows of read-only scopes such as
/// `content`), which devices then receive as changes and tombstones, and the same writes for an
/// app's own routes and seeding. The apps compute their server-side fields of every row written
/// (``ServerApp/computeFields(_:of:existing:now:)``).
public struct ContentService: Sendable {
    let storage: any SyncStorage
    let clock: any ServerClock
    let apps: [any ServerApp]

    /// A service writing to `storage`, with the apps that compute their fields.
    public init(storage: any ServerStorage, clock: any ServerClock = SystemClock(), apps: [any ServerApp] = []) {
        self.storage = storage.engine
        self.clock = clock
        self.apps = apps
    }

    // MARK: - Admin

    /// The entity an admin operation names: a contract of a read-only scope.
    private func publishable(_ name: String) throws(ServiceError) -> (EntityDescriptor, ScopeDescriptor) {
        let contracts = storage.contracts
        guard let entity = contracts.entity(named: name) else {
            if contracts.event(named: name) != nil {
                throw ServiceError(status: 422, .notWritable, "\(name) is an event: devices record events, the server does not publish them")
            }
            throw .unknownEntity(name)
        }
        guard let scope = contracts.scope(named: entity.scope), scope.access == .read else {
            throw ServiceError(
                status: 422, .notWritable,
                "\(name) belongs to the scope '\(entity.scope)', which devices write through push; only read-only scopes are published"
            )
        }
        return (entity, scope)
    }

    private static func requireAdmin(_ identity: DeviceIdentity) throws(ServiceError) {
        guard identity.isAdmin else { throw .forbidden("publishing content needs an admin token") }
    }

    private func actor(_ identity: DeviceIdentity) -> ContentWriter.Actor {
        ContentWriter.Actor(tenant: identity.tenant, userID: identity.userID, deviceID: identity.deviceID, now: clock.now())
    }

    /// Creates or replaces a row of a contract in a read-only scope (`Unit`, `Lesson`, `Asset`,
    /// `Assessment`, …), in the contract's current wire form. The row gets the scope's next
    /// sequence number and `_version` + 1, and the write is audited (outcome `published`); a
    /// row left without its version field (`updated_at`) has it set to now, and republishing
    /// such a row unchanged writes nothing. Returns the stored row in wire form.
    ///
    /// - Throws: ``ServiceError``: 403 for a device token, 422 for an unknown contract, a
    ///   contract of a read-write scope, or a row the contract refuses (`details.field`).
    ///
    /// `urgent` marks the change for devices to take before any pull page on their next sync
    /// (a withdrawn licence's terms, a corrected unit), whatever the order of their scopes.
    public func publish(entity name: String, row: JSONValue, identity: DeviceIdentity, urgent: Bool = false) async throws(ServiceError) -> JSONValue {
        try Self.requireAdmin(identity)
        let (entity, scope) = try publishable(name)
        guard case .object(let wire) = row else {
            throw ContentWriter.invalid("the row must be a JSON object of \(name)'s fields", field: entity.primaryKey)
        }
        let writer = ContentWriter(entity, apps: apps)
        let columns = try writer.columns(wire)
        guard let scopeKey = ScopeAccess.key(for: scope, row: wire, identity: identity) else {
            throw ContentWriter.invalid("the row does not name its scope '\(scope.keyTemplate)'", field: entity.primaryKey)
        }
        let actor = actor(identity)
        let stored = try await ServiceError.catchingStorageFailures {
            try await storage.write { transaction in
                let (row, written) = try await writer.put(columns, scopeKey: scopeKey, actor: actor, operation: .publish, in: transaction)
                if urgent, written { try await Self.markUrgent([(writer.table, row)], actor: actor, in: transaction) }
                return row
            }
        }
        return .object(RowShaping.currentWireRow(stored, entity: entity))
    }

    /// Deletes a row of a read-only scope: a tombstone devices receive, audited (outcome
    /// `deleted`). Deleting a row deletes its `has_many` rows in the same scope too (a unit's
    /// lessons, their assets). 404 when the row is absent or already deleted.
    /// `urgent` marks the deletion (a withdrawn unit) for devices to take before any pull page.
    public func delete(entity name: String, id: String, identity: DeviceIdentity, urgent: Bool = false) async throws(ServiceError) {
        try Self.requireAdmin(identity)
        let (entity, _) = try publishable(name)
        let writer = ContentWriter(entity, apps: apps)
        let actor = actor(identity)
        let contracts = storage.contracts
        let deleted = try await ServiceError.catchingStorageFailures {
            try await storage.write { transaction in
                guard let rows = try await writer.tombstone(id: id, actor: actor, contracts: contracts, in: transaction) else { return false }
                if urgent { try await Self.markUrgent(rows, actor: actor, in: transaction) }
                return true
            }
        }
        guard deleted else { throw .notFound("no \(name) '\(id)'") }
    }

    /// A row to publish: its contract and its fields in the contract's current wire form.
    public struct ContentRow: Sendable {
        /// The contract the row belongs to.
        public var entity: EntityDescriptor
        /// The row's fields in the contract's current wire form, by name.
        public var fields: [String: JSONValue]

        /// A row of `entity` with its fields.
        public init(entity: EntityDescriptor, fields: [String: JSONValue]) {
            self.entity = entity
            self.fields = fields
        }
    }

    /// Publishes `rows` in one transaction, as ``publish(entity:row:identity:urgent:)`` publishes
    /// one (each filed under its scope's key from the row and `identity`, which may name any
    /// scope's contracts: seeding writes team rows too); rows already stored as given are left
    /// alone. Returns how many were written. Nothing is written when one row is refused.
    public func publish(rows: [ContentRow], identity: DeviceIdentity, operation: AuditOperation = .seed) async throws(ServiceError) -> Int {
        try Self.requireAdmin(identity)
        let contracts = storage.contracts
        var prepared: [(writer: ContentWriter, columns: ContentWriter.Columns, scopeKey: String)] = []
        for row in rows {
            let writer = ContentWriter(row.entity, apps: apps)
            guard let scope = contracts.scope(named: row.entity.scope),
                let scopeKey = ScopeAccess.key(for: scope, row: row.fields, identity: identity)
            else {
                throw ContentWriter.invalid("the \(row.entity.name) row does not name its scope", field: row.entity.primaryKey)
            }
            prepared.append((writer, try writer.columns(row.fields), scopeKey))
        }
        let actor = actor(identity)
        let batch = prepared
        return try await ServiceError.catchingStorageFailures {
            try await storage.write { transaction in
                var written = 0
                for item in batch
                where try await item.writer.put(item.columns, scopeKey: item.scopeKey, actor: actor, operation: operation, in: transaction).written {
                    written += 1
                }
                return written
            }
        }
    }

    /// Changes a live published row: `change` gets its fields in wire form (server-only ones
    /// included, the version field left out so the server stamps it) and edits them; the row is
    /// then written as ``publish(entity:row:identity:urgent:)`` writes one, under the same scope
    /// key. Returns the stored row in wire form.
    ///
    /// - Throws: ``ServiceError``: 403 for a device token, 404 when the row is absent or
    ///   deleted, 422 for a contract that is not published or an edit the contract refuses.
    public func update(
        entity name: String, id: String, identity: DeviceIdentity, operation: AuditOperation,
        change: @escaping @Sendable (inout [String: JSONValue]) throws(ServiceError) -> Void
    ) async throws(ServiceError) -> JSONValue {
        try Self.requireAdmin(identity)
        let (entity, scope) = try publishable(name)
        let writer = ContentWriter(entity, apps: apps)
        let actor = actor(identity)
        let stored = try await ServiceError.catchingStorageFailures {
            try await storage.write { transaction -> StoredRow in
                guard let existing = try await writer.lockedRow(id: id, tenant: actor.tenant, in: transaction), existing.integer("_deleted") == 0
                else { throw ServiceError.notFound("no \(name) '\(id)'") }
                var wire = RowShaping.currentWireRow(existing, entity: entity)
                for field in entity.serverOnlyFields { wire[field.name] = RowCodec.wireValue(existing[field.name], for: field) }
                if let versionField = entity.versionField { wire[versionField] = nil }
                try change(&wire)
                let columns = try writer.columns(wire)
                let key = existing.text("_scope_key") ?? scope.keyTemplate
                return try await writer.put(columns, scopeKey: key, actor: actor, operation: operation, in: transaction).row
            }
        }
        return .object(RowShaping.currentWireRow(stored, entity: entity))
    }

    /// Writes `server_only` fields of a live row of any entity (an office's review notes on an
    /// inspection), from wire values (`null` clears a field). No device ever receives these
    /// fields, so the write changes nothing a device holds: the row keeps its scope sequence and
    /// `_version` (a pull has nothing new to send). The row is read again under its scope's lock,
    /// so a push to the same row is neither lost nor overwritten, and the write is audited
    /// (`operation`, outcome `published`, the fields named in the detail). Writing the values a
    /// row already holds writes nothing. Returns the row's server-only fields in wire form.
    ///
    /// - Throws: ``ServiceError``: 403 for a device token, 404 when the row is absent or
    ///   deleted, 422 for an unknown entity, a field that is not one of its `server_only` fields
    ///   (`not_writable`), or a value the contract refuses (`invalid_payload`, `value_too_large`;
    ///   `details.field`).
    @discardableResult
    public func setServerOnlyFields(
        entity name: String, id: String, _ values: [String: JSONValue], identity: DeviceIdentity, operation: AuditOperation
    ) async throws(ServiceError) -> [String: JSONValue] {
        try Self.requireAdmin(identity)
        guard let entity = storage.contracts.entity(named: name) else { throw .unknownEntity(name) }
        var columns: [String: ColumnValue] = [:]
        for (fieldName, value) in values {
            guard let field = entity.serverOnlyFields.first(where: { $0.name == fieldName }) else {
                throw ServiceError(
                    status: 422, .notWritable, "\(fieldName) is not a server_only field of \(name)",
                    details: .object(["field": .string(fieldName)])
                )
            }
            do {
                columns[fieldName] = try RowCodec.columnValue(value, for: field)
            } catch {
                throw ServiceError(
                    status: 422, error.isTooLarge ? .valueTooLarge : .invalidPayload, "\(fieldName) \(error.reason)",
                    details: .object(["field": .string(fieldName)])
                )
            }
        }
        let table = ContractTable(entity)
        let actor = actor(identity)
        let changedFields = values.keys.sorted()
        let validated = columns
        let stored = try await ServiceError.catchingStorageFailures {
            try await storage.write { transaction -> StoredRow in
                guard let scopeKey = try await transaction.row(in: table, tenant: actor.tenant, id: id)?.text("_scope_key") else {
                    throw ServiceError.notFound("no \(name) '\(id)'")
                }
                // Read again under the lock: no push changes the row between this read and the write.
                try await transaction.lockScope(tenant: actor.tenant, scopeKey: scopeKey)
                guard var row = try await transaction.row(in: table, tenant: actor.tenant, id: id), !row.isDeleted else {
                    throw ServiceError.notFound("no \(name) '\(id)'")
                }
                guard validated.contains(where: { row[$0.key] != $0.value }) else { return row }
                for (column, value) in validated { row[column] = value }
                try await transaction.upsert(row, in: table)
                try await transaction.appendAudit(
                    AuditEntry(
                        tenant: actor.tenant, recordedAt: actor.now.millisecondsSince1970, userID: actor.userID,
                        deviceID: actor.deviceID, entity: name, rowID: id, operation: operation, outcome: .published,
                        detail: CanonicalJSON.text(
                            .object(["scope_key": .string(scopeKey), "server_only_fields": .array(changedFields.map(JSONValue.string))])
                        )
                    )
                )
                return row
            }
        }
        var wire: [String: JSONValue] = [:]
        for field in entity.serverOnlyFields { wire[field.name] = RowCodec.wireValue(stored[field.name], for: field) }
        return wire
    }

    /// Records written rows as urgent changes of their scope, each at the sequence it was written with.
    private static func markUrgent(
        _ rows: [(table: ContractTable, row: StoredRow)], actor: ContentWriter.Actor, in transaction: any StorageTransaction
    ) async throws {
        for (table, row) in rows {
            guard case .text(let scopeKey) = row["_scope_key"], let sequence = row.integer("_seq"), let id = row.text(table.primaryKey) else {
                continue
            }
            try await transaction.markUrgent(
                UrgentChange(table: table.name, rowID: id, sequence: sequence), tenant: actor.tenant, scopeKey: scopeKey,
                at: actor.now.millisecondsSince1970
            )
        }
    }

}
