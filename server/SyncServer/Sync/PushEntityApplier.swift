import ContractRuntime
import SyncProtocol

/// Applies one `create`, `update`, `patch` or `delete` of an entity, inside a push, once
/// ``PreparedMutation`` has checked what needs no storage (the policy's requirements, the id,
/// the payload against the contract).
///
/// Order: the scope's lock (see ``lockScope()``), the stored row and its scope, the new row's
/// scope (the identity must be allowed to write it, and a row never moves to another scope), the policy's decision, unique indexes,
/// and the reducers' verdict — all before the first write. Every refusal is thrown as an
/// ``ErrorDetail`` and becomes a `rejected` result.
struct PushEntityApplier {
    let session: PushSession
    let mutation: Mutation
    let prepared: PreparedMutation.Entity

    private var entity: EntityDescriptor { prepared.entity }
    private var identity: DeviceIdentity { session.identity }
    private var transaction: any StorageTransaction { session.transaction }

    func apply() async throws -> PushSession.Outcome {
        let id = prepared.id
        let scope = prepared.scope
        let version = prepared.schemaVersion
        let payloadScopeKey = try await lockScope()
        let existing = try await transaction.row(in: ContractTable(entity), tenant: identity.tenant, id: id)
        if let existing, let key = existing.text("_scope_key"), !ScopeAccess.canWrite(key, in: scope, identity: identity) {
            // The same refusal as for a scope the device names but may not write: it says
            // nothing of the other scope or of the row there.
            throw ErrorDetail(code: .notWritable, message: "this device may not write \(entity.name) '\(id)'")
        }

        // An edit of a row the server does not have: the device holds it, so it was deleted and
        // its tombstone compacted past the data horizon (or its create was refused). Answered
        // as a deletion is (a `deleted` conflict for the app to settle, a second delete a
        // duplicate), not refused: a refusal left the row on the device for good, apart from
        // the server (the simulation's seed 65).
        if existing == nil, mutation.op != .create {
            var detail = PushSession.AuditNote(policy: entity.conflict.rawValue, schemaVersion: version)
            detail.reason = "\(entity.name) '\(id)' is not on the server: deleted"
            let outcome =
                mutation.op == .delete ? result(.duplicate, version: nil) : result(.conflicted, version: nil, resolution: ConflictResolution.deleted)
            return PushSession.Outcome(result: outcome, detail: detail)
        }

        // The changes in the current version's names, and the wire value of each field of the
        // row they leave: only the scope key's fields are looked up, and only when the payload
        // does not name the scope (a patch or delete), so a stored row is not turned into wire
        // values whole for one or two of its fields.
        var changes: [String: ColumnValue] = [:]
        let wireField: (String) -> JSONValue?
        func storedWireValue(_ row: StoredRow, _ name: String) -> JSONValue? {
            entity.fields.first { $0.name == name }.map { RowCodec.wireValue(row[name], for: $0) }
        }
        switch (mutation.op, prepared.payload) {
        case (.create, let payload?), (.update, let payload?):
            if mutation.op == .update, existing == nil { throw rowNotFound(id) }
            changes = payload.columns
            wireField = { payload.wire[$0] }
        case (.patch, let payload?):
            guard let existing else { throw rowNotFound(id) }
            changes = payload.columns.filter { $0.key != entity.versionField && $0.key != entity.primaryKey }
            wireField = { name in payload.wire[name] ?? storedWireValue(existing, name) }
        default:
            guard let existing else { throw rowNotFound(id) }
            wireField = { storedWireValue(existing, $0) }
        }

        guard let scopeKey = payloadScopeKey ?? ScopeAccess.key(for: scope, identity: identity, field: wireField) else {
            throw ErrorDetail(
                code: .invalidPayload, message: "\(entity.name) '\(id)' lacks the fields that make its scope key (\(scope.keyTemplate))"
            )
        }
        let writable = payloadScopeKey != nil ? prepared.payloadScopeWritable : ScopeAccess.canWrite(scopeKey, in: scope, identity: identity)
        guard writable else {
            throw ErrorDetail(code: .notWritable, message: "this device may not write \(entity.name) '\(id)'")
        }
        if let existing, let key = existing.text("_scope_key"), key != scopeKey {
            throw ErrorDetail(code: .notWritable, message: "\(entity.name) '\(id)' is in \(key); a row cannot move to another scope")
        }

        let decision = ConflictResolution.decide(
            ConflictResolution.Input(
                entity: entity, operation: mutation.op, existing: existing, changes: changes,
                base: prepared.base,
                baseVersion: mutation.baseVersion, hlc: mutation.hlc.flatMap(HybridLogicalClock.init)
            )
        )
        var detail = PushSession.AuditNote(policy: entity.conflict.rawValue, schemaVersion: version)

        switch decision {
        case .duplicate(let message):
            detail.reason = message
            return PushSession.Outcome(result: result(.duplicate, version: existing?.integer("_version")), detail: detail)
        case .conflicted(let resolution):
            let shown = existing.flatMap { $0.isDeleted ? nil : JSONValue.object(RowShaping.wireRow($0, entity: entity, version: version)) }
            return PushSession.Outcome(
                result: result(.conflicted, version: existing?.integer("_version"), row: shown, resolution: resolution), detail: detail
            )
        case .write(let write):
            // A patch merged with the stored row may outgrow what each of its values allowed.
            if !write.deleted, mutation.op == .patch { try PayloadValidator.requireRowSize(write.columns, contract: prepared.contract) }
            if !write.deleted, let problem = try await session.writer.uniquenessProblem(write.columns, id: id, entity: entity, scopeKey: scopeKey) {
                throw problem
            }
            let context = ReducerContext(writer: session.writer)
            let fact =
                session.writer.contracts.reducers.folds(entity.name) && mutation.op == .create
                ? fact(id: id, columns: write.columns, scopeKey: scopeKey) : nil
            if let fact {
                switch try await session.writer.contracts.reducers.verdict(for: fact, in: context) {
                case .proceed: break
                case .duplicate(let message):
                    detail.reason = message
                    return PushSession.Outcome(result: result(.duplicate, version: existing?.integer("_version")), detail: detail)
                case .conflicted(let target, let row):
                    return PushSession.Outcome(result: targetConflict(target, row), detail: detail)
                case .rejected(let error):
                    throw error
                }
            }
            let stored = try await session.writer.write(
                PushWriter.RowWrite(
                    entity: entity, id: id, columns: write.columns, scopeKey: scopeKey, previous: existing, schemaVersion: version,
                    hlc: write.hlc, fieldClocks: write.fieldClocks, deleted: write.deleted, updatedBy: identity.deviceID
                )
            )
            if !write.appliedFields.isEmpty || !write.keptFields.isEmpty {
                detail.mergedFields = (write.appliedFields, write.keptFields)
            }
            detail.tombstone = write.deleted
            let effects = if let fact { try await session.writer.contracts.reducers.fold(fact, in: context) } else { [ReducerEffect]() }
            let shown: JSONValue? =
                write.resolution == ConflictResolution.merged ? .object(RowShaping.wireRow(stored, entity: entity, version: version)) : nil
            return PushSession.Outcome(
                result: result(.applied, version: stored.integer("_version"), row: shown, resolution: write.resolution), detail: detail,
                effects: effects
            )
        }
    }

    /// Locks the scope the mutation's decision rests on before the row is read, so no other
    /// transaction changes it until this one ends: a create or update names its scope in the
    /// payload; a patch or delete lives where the stored row is (rows never change scope, so the
    /// key read before the lock stays right). Without a key there is nothing to lock: the
    /// mutation is refused further on. Returns the key a create or update names (the new row's).
    private func lockScope() async throws -> String? {
        switch (mutation.op, prepared.payload) {
        case (.create, _?), (.update, _?):
            let key = prepared.payloadScopeKey
            if let key { try await transaction.lockScope(tenant: identity.tenant, scopeKey: key) }
            return key
        default:
            let stored = try await transaction.row(in: ContractTable(entity), tenant: identity.tenant, id: prepared.id)
            if let key = stored?.text("_scope_key") { try await transaction.lockScope(tenant: identity.tenant, scopeKey: key) }
            return nil
        }
    }

    private func fact(id: String, columns: [String: ColumnValue], scopeKey: String) -> ReducerFact {
        ReducerFact(contract: entity.name, id: id, row: columns, fields: entity.fields, occurredAt: session.writer.now, scopeKey: scopeKey)
    }

    private func targetConflict(_ target: EntityDescriptor, _ row: StoredRow) -> MutationResult {
        let version = session.schemaVersion(of: target.name, current: target.currentVersion)
        return result(.conflicted, version: row.integer("_version"), row: .object(RowShaping.wireRow(row, entity: target, version: version)))
    }

    private func result(
        _ status: MutationStatus, version: Int64?, row: JSONValue? = nil, resolution: String? = nil
    ) -> MutationResult {
        MutationResult(
            seq: mutation.seq, clientMutationId: mutation.clientMutationId, status: status, serverVersion: version, serverRow: row,
            resolution: resolution
        )
    }

    private func rowNotFound(_ id: String) -> ErrorDetail {
        ErrorDetail(code: .rowNotFound, message: "\(entity.name) '\(id)' does not exist; \(mutation.op.rawValue) needs an existing row")
    }
}
