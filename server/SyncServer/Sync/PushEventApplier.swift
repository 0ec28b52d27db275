import ContractRuntime
import SyncProtocol

/// Applies one event (`op: event`) inside a push, once ``PreparedMutation`` has checked its
/// payload, scope and hash: deduplication by `event_id`, the reducers' verdict, then the event
/// row and the reducers' folds.
///
/// An `event_id` already stored with the same hash is a `duplicate`; with another hash it is
/// `rejected` (`hash_mismatch`): a replay with other content. An event a reducer refuses
/// (`duplicate`, `conflicted`, `rejected`) is not stored.
struct PushEventApplier {
    let session: PushSession
    let mutation: Mutation
    let prepared: PreparedMutation.Event

    private var event: EventDescriptor { prepared.event }
    private var identity: DeviceIdentity { session.identity }
    private var transaction: any StorageTransaction { session.transaction }

    func apply() async throws -> PushSession.Outcome {
        let payload = prepared.payload
        let version = prepared.schemaVersion
        let hash = prepared.hash
        let scopeKey = prepared.scopeKey
        let occurredAt = prepared.occurredAt
        var detail = PushSession.AuditNote(policy: "event", schemaVersion: version, hash: hash)

        let table = ContractTable(event)
        // Everything below reads and writes this scope only: lock it before the first read.
        try await transaction.lockScope(tenant: identity.tenant, scopeKey: scopeKey)
        if let stored = try await transaction.row(in: table, tenant: identity.tenant, id: mutation.id) {
            guard stored.text("hash") == hash else {
                throw ErrorDetail(
                    code: .hashMismatch, message: "event '\(mutation.id)' is already recorded with other content (hash \(stored.text("hash") ?? "?"))"
                )
            }
            detail.reason = "event '\(mutation.id)' is already recorded"
            return PushSession.Outcome(result: result(.duplicate), detail: detail)
        }

        let context = ReducerContext(writer: session.writer)
        let fact = ReducerFact(contract: event.name, id: mutation.id, payload: payload.wire, occurredAt: occurredAt, scopeKey: scopeKey)
        switch try await session.writer.contracts.reducers.verdict(for: fact, in: context) {
        case .proceed:
            break
        case .duplicate(let message):
            detail.reason = message
            return PushSession.Outcome(result: result(.duplicate), detail: detail)
        case .conflicted(let target, let row):
            // A deleted target is a conflict without a server row, `resolution: deleted`.
            if row.isDeleted {
                detail.reason = "\(target.name) '\(row.text(target.primaryKey) ?? "")' was deleted"
                return PushSession.Outcome(
                    result: result(.conflicted, version: row.integer("_version"), resolution: ConflictResolution.deleted), detail: detail
                )
            }
            let targetVersion = session.schemaVersion(of: target.name, current: target.currentVersion)
            let shown = JSONValue.object(RowShaping.wireRow(row, entity: target, version: targetVersion))
            return PushSession.Outcome(result: result(.conflicted, version: row.integer("_version"), row: shown), detail: detail)
        case .rejected(let error):
            throw error
        }

        var row = StoredRow(payload.columns)
        row["_tenant_id"] = .text(identity.tenant)
        row["event_id"] = .text(mutation.id)
        row["schema_version"] = .integer(Int64(version))
        row["user_id"] = .text(identity.userID)
        row["device_id"] = .text(identity.deviceID)
        row["occurred_at"] = .integer(occurredAt.millisecondsSince1970)
        row["recorded_at"] = .integer(session.writer.now.millisecondsSince1970)
        row["hash"] = .text(hash)
        row["_scope_key"] = .text(scopeKey)
        row["_seq"] = .integer(try await transaction.nextScopeSequence(tenant: identity.tenant, scopeKey: scopeKey))
        guard try await transaction.insertIfAbsent(row, in: table) else {
            detail.reason = "event '\(mutation.id)' is already recorded"
            return PushSession.Outcome(result: result(.duplicate), detail: detail)
        }
        let effects = try await session.writer.contracts.reducers.fold(fact, in: context)
        return PushSession.Outcome(result: result(.applied), detail: detail, effects: effects)
    }

    private func result(_ status: MutationStatus, version: Int64? = nil, row: JSONValue? = nil, resolution: String? = nil) -> MutationResult {
        MutationResult(
            seq: mutation.seq, clientMutationId: mutation.clientMutationId, status: status, serverVersion: version, serverRow: row,
            resolution: resolution
        )
    }
}
