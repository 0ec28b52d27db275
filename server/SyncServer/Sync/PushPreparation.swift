import ContractRuntime
import Foundation
import SyncProtocol

/// What can be known about a mutation without storage: its contract, the policy's requirements,
/// the payload validated against the contract, an event's scope and hash. Worked out for every
/// mutation of a push *before* the push takes the storage's write lock, so concurrent pushes
/// spend only the storage-dependent part of their work one at a time.
///
/// A refusal found here is not an answer yet: it becomes the mutation's `rejected` result only
/// when its `seq` is new (a `seq` already done is answered from its stored result).
struct PreparedMutation: Sendable {
    var target: Result<Target, ErrorDetail>
    /// SHA-256 of the payload's canonical JSON, for the audit detail (and an event's hash check).
    var payloadHash: String?
    /// The names of an object payload's members, sorted: the audit detail lists them.
    var payloadFieldNames: [String]?

    enum Target: Sendable {
        case entity(Entity)
        case event(Event)
    }

    struct Entity: Sendable {
        var entity: EntityDescriptor
        var contract: PayloadContract
        var scope: ScopeDescriptor
        var schemaVersion: Int
        /// The mutation's id as the primary-key column holds it.
        var id: String
        /// Whole row (create, update) or changed fields (patch); `nil` for a delete.
        var payload: ValidatedPayload?
        /// `field_merge`: the base values in column form.
        var base: [String: ColumnValue]?
        /// The scope key a create or update names in its payload, and whether the identity may
        /// write it: worked out here, outside the write lock.
        var payloadScopeKey: String?
        var payloadScopeWritable = false
    }

    struct Event: Sendable {
        var event: EventDescriptor
        var schemaVersion: Int
        var payload: ValidatedPayload
        var scopeKey: String
        /// The hash as sent, lowercased, once it has matched the payload.
        var hash: String
        var occurredAt: Timestamp
    }

    /// - Parameter clockLimit: the latest hybrid clock the server takes (its own time plus the
    ///   allowed skew, milliseconds since 1970); a later one would win every later edit.
    static func prepare(
        _ mutation: Mutation, schema: [String: Int], identity: DeviceIdentity, clockLimit: Int64, contracts: ServerContracts
    ) -> PreparedMutation {
        let payloadHash = mutation.payload.map(PushWriter.sha256)
        var names: [String]?
        if case .object(let fields)? = mutation.payload { names = fields.keys.sorted() }
        do throws(ErrorDetail) {
            if let text = mutation.hlc, let clock = HybridLogicalClock(text), clock.milliseconds > clockLimit {
                throw ErrorDetail(
                    code: .clockSkew,
                    message: "hlc \(text) is ahead of the server's clock by more than it allows; set the device's clock right and edit again",
                    details: .object(["latest_accepted_ms": .int(clockLimit)])
                )
            }
            if let entity = contracts.catalog.entity(named: mutation.entity) {
                let version = schema[entity.name] ?? entity.currentVersion
                try requireKnown(version, of: entity.name, current: entity.currentVersion)
                let prepared = try prepareEntity(mutation, entity, version, identity: identity, names: names, contracts: contracts)
                return PreparedMutation(target: .success(.entity(prepared)), payloadHash: payloadHash, payloadFieldNames: names)
            }
            if let event = contracts.catalog.event(named: mutation.entity) {
                let version = schema[event.name] ?? event.currentVersion
                try requireKnown(version, of: event.name, current: event.currentVersion)
                let prepared = try prepareEvent(
                    mutation, event, version, identity: identity, payloadHash: payloadHash, names: names, clockLimit: clockLimit,
                    contracts: contracts
                )
                return PreparedMutation(target: .success(.event(prepared)), payloadHash: payloadHash, payloadFieldNames: names)
            }
            throw ErrorDetail(code: .unknownEntity, message: "'\(mutation.entity)' is not a contract of this server")
        } catch {
            return PreparedMutation(target: .failure(error), payloadHash: payloadHash, payloadFieldNames: names)
        }
    }

    /// A payload of a version above the server's may carry fields it cannot read; refusing the
    /// mutation is the one answer that neither drops them nor guesses.
    private static func requireKnown(_ version: Int, of name: String, current: Int) throws(ErrorDetail) {
        guard version > current else { return }
        throw ErrorDetail(
            code: .schemaTooNew,
            message: "\(name) version \(version) is newer than this server's (\(current)); the server must be updated before it takes it",
            details: .object(["entity": .string(name), "current": .int(Int64(current))])
        )
    }

    /// Direction, policy requirements, the id, and the payload against the contract.
    private static func prepareEntity(
        _ mutation: Mutation, _ entity: EntityDescriptor, _ version: Int, identity: DeviceIdentity, names: [String]?,
        contracts: ServerContracts
    ) throws(ErrorDetail) -> Entity {
        if mutation.op == .event {
            throw ErrorDetail(
                code: .invalidPayload, message: "\(entity.name) is an entity: push it with create, update, patch or delete, not event"
            )
        }
        if let problem = ConflictResolution.requirements(of: entity, operation: mutation.op, mutation: mutation) { throw problem }
        guard let scope = contracts.catalog.scope(named: entity.scope) else {
            throw ErrorDetail(code: .notWritable, message: "\(entity.name) names scope '\(entity.scope)', which the server does not have")
        }
        let contract = contracts.payload(entity)
        let id = try PayloadValidator.normalizedRowID(mutation.id, contract: contract)
        var payload: ValidatedPayload?
        switch mutation.op {
        case .create, .update:
            payload = try PayloadValidator.validate(
                mutation.payload, contract: contract, schemaVersion: version, mode: .whole, rowID: id
            )
        case .patch:
            payload = try PayloadValidator.validate(
                mutation.payload, contract: contract, schemaVersion: version, mode: .partial, rowID: id
            )
        case .delete, .event:
            payload = nil
        }
        var prepared = Entity(
            entity: entity, contract: contract, scope: scope, schemaVersion: version, id: id, payload: payload,
            base: mutation.base.map { PayloadValidator.baseColumns($0, contract: contract, schemaVersion: version) }
        )
        if mutation.op == .create || mutation.op == .update, let payload {
            prepared.payloadScopeKey = ScopeAccess.key(for: scope, identity: identity, field: payload.wireValue(of:))
            prepared.payloadScopeWritable = prepared.payloadScopeKey.map { ScopeAccess.canWrite($0, in: scope, identity: identity) } ?? false
        }
        return prepared
    }

    /// Direction, envelope data, the payload against the contract, the scope the identity may
    /// write, and the hash.
    ///
    /// The `hash` must be the lowercase hex SHA-256 of the payload's canonical JSON
    /// (`CanonicalJSON`), as ``EventEnvelope/hash(of:)`` computes it on the device. The payload
    /// as sent is hashed; for a device on the current version, the hash of the payload as the
    /// generated type encodes it (defaults filled, nulls left out) is accepted too.
    private static func prepareEvent(
        _ mutation: Mutation, _ event: EventDescriptor, _ version: Int, identity: DeviceIdentity, payloadHash: String?, names: [String]?,
        clockLimit: Int64, contracts: ServerContracts
    ) throws(ErrorDetail) -> Event {
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
        // Nothing happened after it reached the server: a time later than the receipt plus the
        // clock skew allowed is a wrong clock or a forgery, and would order the event after
        // facts that truly came later. (How far back a time may go is the reducers' to say.)
        guard occurredAt.millisecondsSince1970 <= clockLimit else {
            throw ErrorDetail(
                code: .occurredAtOutOfRange,
                message: "occurred_at \(occurredAt.iso8601) is later than the server's clock allows; set the device's clock right",
                details: .object(["latest_accepted": .string(Timestamp(millisecondsSince1970: clockLimit).iso8601)])
            )
        }
        let payload = try PayloadValidator.validate(
            mutation.payload, contract: contracts.payload(event), schemaVersion: version, mode: .whole, rowID: nil
        )
        guard let scope = contracts.catalog.scope(named: event.scope),
            let scopeKey = ScopeAccess.key(for: scope, identity: identity, field: payload.wireValue(of:))
        else {
            throw ErrorDetail(code: .invalidPayload, message: "\(event.name) lacks the fields that make its scope key")
        }
        guard ScopeAccess.canWrite(scopeKey, in: scope, identity: identity) else {
            throw ErrorDetail(code: .notWritable, message: "this device may not write \(event.name) events in \(scopeKey)")
        }
        let computed = payloadHash ?? PushWriter.sha256(.null)
        if hash != computed, hash != (version == event.currentVersion ? typedHash(mutation.payload, event, contracts: contracts.catalog) : nil) {
            throw ErrorDetail(
                code: .hashMismatch,
                message: "hash \(hash) does not match the payload: the SHA-256 of its canonical JSON is \(computed)",
                details: .object(["expected": .string(computed)])
            )
        }
        return Event(event: event, schemaVersion: version, payload: payload, scopeKey: scopeKey, hash: hash, occurredAt: occurredAt)
    }

    /// The hash of the payload as the contract's generated type encodes it, or `nil` when it does not decode.
    private static func typedHash(_ payload: JSONValue?, _ event: EventDescriptor, contracts: ContractCatalog) -> String? {
        guard let payload, let type = contracts.eventType(named: event.name) else {
            return nil
        }
        return hash(type, payload)
    }

    private static func hash<Value: ContractEvent>(_ type: Value.Type, _ payload: JSONValue) -> String? {
        guard let value = try? JSONTreeDecoder.decode(Value.self, from: payload) else { return nil }
        return try? EventEnvelope<Value>.hash(of: value)
    }
}
