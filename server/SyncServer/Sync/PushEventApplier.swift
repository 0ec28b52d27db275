import Contracts
import Foundation
import SyncProtocol

/// Applies one event (`op: event`) inside a push: validation, scope, hash, deduplication by
/// `event_id`, the reducers' verdict, then the event row and the reducers' folds.
///
/// The `hash` must be the lowercase hex SHA-256 of the payload's canonical JSON
/// (``CanonicalJSON``), as ``EventEnvelope/hash(of:)`` computes it on the device. The payload
/// as sent is hashed; for a device on the current version, the hash of the payload as the
/// generated type encodes it (defaults filled, nulls left out) is accepted too.
///
/// An `event_id` already stored with the same hash is a `duplicate`; with another hash it is
/// `rejected` (`hash_mismatch`): a replay with other content. An event a reducer refuses
/// (`duplicate`, `conflicted`, `rejected`) is not stored.
struct PushEventApplier {
    let session: PushSession
    let mutation: Mutation
    let event: EventDescriptor

    private var identity: DeviceIdentity { session.identity }
    private var transaction: any StorageTransaction { session.transaction }

    func apply() throws -> PushSession.Outcome {
        if event.direction == .down {
            throw ErrorDetail(code: .notWritable, message: "\(event.name) travels from the server to devices only (direction down)")
        }
        guard mutation.op == .event else {
            throw ErrorDetail(code: .invalidPayload, message: "\(event.name) is an event: push it with op event, not \(mutation.op.rawValue)")
        }
        guard !mutation.id.isEmpty else { throw ErrorDetail(code: .invalidPayload, message: "an event needs its event_id in id") }
        guard let hash = mutation.hash?.lowercased() else {
            throw ErrorDetail(code: .missingPolicyData, message: "an event needs hash, the SHA-256 of its canonical payload")
        }
        guard let occurredAt = mutation.occurredAt else {
            throw ErrorDetail(code: .missingPolicyData, message: "an event needs occurred_at, when it happened by the device's clock")
        }

        let contract = PayloadContract(event)
        let version = session.schemaVersion(of: event.name, current: event.currentVersion)
        let payload = try PayloadValidator.validate(mutation.payload, contract: contract, schemaVersion: version, mode: .whole, rowID: nil)

        guard let scope = ContractRegistry.scope(named: event.scope),
            let scopeKey = ScopeAccess.key(for: scope, row: payload.wire, identity: identity)
        else {
            throw ErrorDetail(code: .invalidPayload, message: "\(event.name) lacks the fields that make its scope key")
        }
        guard ScopeAccess.canWrite(scopeKey, in: scope, identity: identity) else {
            throw ErrorDetail(code: .notWritable, message: "this device may not write \(event.name) events in \(scopeKey)")
        }

        let computed = PushWriter.sha256(mutation.payload ?? .null)
        if hash != computed, hash != (version == event.currentVersion ? typedHash() : nil) {
            throw ErrorDetail(
                code: .hashMismatch,
                message: "hash \(hash) does not match the payload: the SHA-256 of its canonical JSON is \(computed)",
                details: .object(["expected": .string(computed)])
            )
        }

        var detail: [String: JSONValue] = [
            "policy": .string("event"), "schema_version": .int(Int64(version)), "hash": .string(hash),
        ]
        if !payload.ignoredFields.isEmpty { detail["ignored_fields"] = .array(payload.ignoredFields.map(JSONValue.string)) }

        let table = ContractTable(event)
        if let stored = try transaction.row(in: table, tenant: identity.tenant, id: mutation.id) {
            guard stored.text("hash") == hash else {
                throw ErrorDetail(
                    code: .hashMismatch, message: "event '\(mutation.id)' is already recorded with other content (hash \(stored.text("hash") ?? "?"))"
                )
            }
            detail["reason"] = .string("event '\(mutation.id)' is already recorded")
            return PushSession.Outcome(result: result(.duplicate), detail: detail)
        }

        let context = ReducerContext(writer: session.writer)
        let fact = ReducerFact(contract: event.name, id: mutation.id, payload: payload.wire, occurredAt: occurredAt, scopeKey: scopeKey)
        switch try Reducers.verdict(for: fact, in: context) {
        case .proceed:
            break
        case .duplicate(let message):
            detail["reason"] = .string(message)
            return PushSession.Outcome(result: result(.duplicate), detail: detail)
        case .conflicted(let target, let row):
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
        row["_seq"] = .integer(try transaction.nextScopeSequence(tenant: identity.tenant, scopeKey: scopeKey))
        guard try transaction.insertIfAbsent(row, in: table) else {
            detail["reason"] = .string("event '\(mutation.id)' is already recorded")
            return PushSession.Outcome(result: result(.duplicate), detail: detail)
        }
        let effects = try Reducers.fold(fact, in: context)
        return PushSession.Outcome(result: result(.applied), detail: detail, effects: effects)
    }

    /// The hash of the payload as the contract's generated type encodes it, or `nil` when it does not decode.
    private func typedHash() -> String? {
        guard let payload = mutation.payload, let data = try? JSONEncoder().encode(payload),
            let type = ContractRegistry.eventTypes.first(where: { $0.descriptor.name == event.name })
        else { return nil }
        return Self.hash(type, data)
    }

    private static func hash<Event: ContractEvent>(_ type: Event.Type, _ data: Data) -> String? {
        guard let value = try? JSONDecoder().decode(Event.self, from: data) else { return nil }
        return try? EventEnvelope<Event>.hash(of: value)
    }

    private func result(_ status: MutationStatus, version: Int64? = nil, row: JSONValue? = nil) -> MutationResult {
        MutationResult(seq: mutation.seq, clientMutationId: mutation.clientMutationId, status: status, serverVersion: version, serverRow: row)
    }
}
