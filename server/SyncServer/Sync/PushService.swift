import ContractRuntime
import Foundation
import Logging
package import SyncProtocol

/// Applies devices' pushes (`POST /sync/v1/push`, docs/openapi.yaml): exactly once, in `seq` order,
/// every mutation validated against its contract before anything is written, conflicts
/// settled by the contract's policy, events folded by the
/// reducers, and every outcome audited.
///
/// One push is one storage write transaction. Inside it, for each mutation in `seq` order:
/// a `seq` already done is answered from its stored result; otherwise the mutation is applied
/// (or refused), its result recorded as done, and its audit entry appended, all together. A
/// mutation refused for good (`rejected`) is still done, so it never blocks the ones behind it.
/// When the transaction fails nothing of the push is written, and a resend applies it once.
/// A `seq` already done is answered with what was answered then, whatever the resent mutation
/// holds (the answer carries the original `client_mutation_id`, so a device that reused a
/// `client_id` can tell).
///
/// What needs no storage (the contract, the policy's requirements, the payload against the
/// contract, an event's scope and hash) is checked before the write
/// transaction starts, so concurrent pushes queue only for the storage-dependent part.
///
/// ```swift
/// let service = PushService(storage: storage)
/// let response = try await service.push(request, identity: identity)
/// for result in response.results where result.status == .conflicted { … }
/// ```
package struct PushService: Sendable {
    /// Where the causes of failed pushes go (the answer says nothing of them).
    static let logger = Logger(label: "outpost.push")

    /// The most mutations one push may carry.
    package static let maximumMutations = 1000
    /// The largest `seq` a client stream reaches: 2^53, the largest integer every JSON reader
    /// keeps exact, and far from where `Int64` arithmetic could overflow.
    package static let maximumSequence: Int64 = 1 << 53
    /// The longest `client_id`, `client_mutation_id`, contract name or `hlc`, in UTF-8 bytes.
    package static let maximumNameBytes = 128

    /// How far ahead of the server's clock a mutation's hybrid clock may be: 5 minutes.
    package static let defaultMaximumClockSkew: Duration = .seconds(300)

    let storage: any SyncStorage
    let contracts: ServerContracts
    let clock: any ServerClock
    let maximumClockSkew: Duration

    /// - Parameters:
    ///   - storage: where pushes are applied; its contracts are the ones pushes are checked against.
    ///   - clock: the server's time (`recorded_at`, `_updated_at`, the clock-skew bound).
    ///   - maximumClockSkew: a mutation whose `hlc` is further ahead of `clock` is
    ///     rejected with `clock_skew` (nothing written; the mutations behind it go on).
    ///   - reducers: the apps' reducers, which fold events and created rows of the
    ///     contracts they name into server-computed rows (``ServerApp/reducers``).
    package init(
        storage: any ServerStorage, clock: any ServerClock = SystemClock(), maximumClockSkew: Duration = defaultMaximumClockSkew,
        reducers: [any Reducer] = []
    ) {
        self.storage = storage.engine
        contracts = ServerContracts(storage.contracts, reducers: reducers)
        self.clock = clock
        self.maximumClockSkew = maximumClockSkew
    }

    /// Applies a push exactly once. Whole-request refusals throw ServiceError:
    /// 400 malformed (empty client_id, seqs not consecutive within the request or out of range, more than 1000 mutations),
    /// 403 .clientNotOwned when another identity owns the client_id's stream,
    /// 403 .signatureInvalid when a new mutation of a `signed: true` contract carries no signature, or any new
    /// mutation's signature does not hold under the key its device registered (`SignatureVerifier`),
    /// 409 .sequenceGap with details {"last_seq": N} when the first new seq is beyond last_seq+1,
    /// 426 .schemaTooOld with details {"entity": name, "oldest_supported": n, "current": m, "last_seq": l} when request.schema names a version below a contract's oldest_supported.
    /// Mutations of a contract the server does not know (`unknown_entity`) or at a version above
    /// its own (`schema_too_new`) are rejected one by one; the others apply.
    ///
    /// Refusals write nothing. A storage failure is a 500 (`internal_error`) and writes nothing either.
    package func push(_ request: PushRequest, identity: DeviceIdentity) async throws(ServiceError) -> PushResponse {
        try Self.checkShape(request)
        do {
            // 426 for a version below the oldest supported. Contracts the server does not know,
            // and versions above its own, refuse only the mutations that use them (each with its
            // own result), so a device built with newer contracts still pushes everything else.
            try RowShaping.requireSupported(request.schema, contracts: contracts.catalog)
        } catch  where error.status == 426 {
            throw await withLastSequence(error, identity: identity, clientID: request.clientId)
        }
        // Everything that needs no storage happens here, outside the write lock.
        let now = clock.now()
        let skew = maximumClockSkew.components
        let clockLimit = now.millisecondsSince1970 + skew.seconds * 1000 + skew.attoseconds / 1_000_000_000_000_000
        let prepared = request.mutations.map {
            PreparedMutation.prepare($0, schema: request.schema, identity: identity, clockLimit: clockLimit, contracts: contracts)
        }
        do {
            // Device signatures are checked here, beside other pushes; the transaction checks the
            // key is still the one they were checked under.
            let preverified = try await SignatureVerifier(
                identity: identity, clientID: request.clientId, schema: request.schema, catalog: contracts.catalog
            ).preverify(request.mutations, in: storage)
            return try await storage.write { transaction in
                try await PushSession(
                    writer: PushWriter(transaction: transaction, identity: identity, contracts: contracts, now: now, clockSkew: maximumClockSkew),
                    clientID: request.clientId,
                    schema: request.schema,
                    preverified: preverified
                ).run(request.mutations, prepared: prepared)
            }
        } catch let error as ServiceError {
            throw error
        } catch {
            // Unavailable: a connection dropped at the commit may have stored it; sent again, it
            // is answered from what was stored.
            if StorageAvailability.isUnavailable(error) { throw .storageUnavailable }
            Self.logger.error("push failed: \(String(reflecting: error))")
            throw ServiceError(status: 500, .internalError, "the push could not be stored; nothing of it was written, send it again")
        }
    }

    /// 400 for a request whose shape is wrong, before storage is touched.
    static func checkShape(_ request: PushRequest) throws(ServiceError) {
        guard !request.clientId.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw .malformed("client_id must not be empty")
        }
        guard request.clientId.utf8.count <= maximumNameBytes else {
            throw .malformed("client_id is longer than \(maximumNameBytes) bytes")
        }
        try Identifier.require(request.clientId, as: "client_id")
        guard request.mutations.count <= maximumMutations else {
            throw .malformed("a push carries at most \(maximumMutations) mutations; this one has \(request.mutations.count), split it")
        }
        guard let first = request.mutations.first else { return }
        guard first.seq >= 1 else { throw .malformed("seq starts at 1; the first mutation has seq \(first.seq)") }
        // Range-checked before any arithmetic: a seq near Int64.max would overflow `first + offset`.
        guard first.seq <= maximumSequence - Int64(maximumMutations) else {
            throw .malformed("seq \(first.seq) is beyond the largest seq this server takes (\(maximumSequence - Int64(maximumMutations)))")
        }
        for (offset, mutation) in request.mutations.enumerated() {
            guard mutation.seq == first.seq + Int64(offset) else {
                throw .malformed(
                    "seqs must be consecutive within a push: mutation \(offset) has seq \(mutation.seq), expected \(first.seq + Int64(offset))"
                )
            }
            guard !mutation.clientMutationId.isEmpty else {
                throw .malformed("mutation with seq \(mutation.seq) has an empty client_mutation_id")
            }
            // Every id is stored, indexed and sent to every device that reads its row: bounded.
            for (name, text) in [("client_mutation_id", mutation.clientMutationId), ("entity", mutation.entity), ("hlc", mutation.hlc ?? "")]
            where text.utf8.count > maximumNameBytes {
                throw .malformed("mutation with seq \(mutation.seq) has a \(name) longer than \(maximumNameBytes) bytes")
            }
            try Identifier.require(mutation.clientMutationId, as: "client_mutation_id")
            guard mutation.id.utf8.count <= RowCodec.maximumIDBytes else {
                throw .malformed("mutation with seq \(mutation.seq) has an id longer than \(RowCodec.maximumIDBytes) bytes")
            }
        }
    }

    /// A 426 names the client's last applied seq too (`last_seq`), so the device knows which
    /// of the refused seqs the server never took and may number them again without the
    /// contract it must update.
    /// Only the stream's owner learns where it is: another identity naming the `client_id` gets
    /// 403 `client_not_owned` instead.
    private func withLastSequence(_ refusal: ServiceError, identity: DeviceIdentity, clientID: String) async -> ServiceError {
        let tenant = identity.tenant
        let read = try? await storage.read { reader in
            (try await reader.clientOwner(tenant: tenant, clientID: clientID), try await reader.lastSequence(tenant: tenant, clientID: clientID))
        }
        guard let (owner, last) = read else { return refusal }
        if let owner, owner != identity.clientOwner { return .clientNotOwned() }
        guard case .object(var details)? = refusal.detail.details else { return refusal }
        details["last_seq"] = .int(last)
        var refusal = refusal
        refusal.detail.details = .object(details)
        return refusal
    }
}

/// One push inside its transaction.
struct PushSession {
    /// `410 user_erased` for a push stream of an erased user that last moved before the erasure:
    /// the store it comes from held what the erasure removed, and must be wiped, whatever token
    /// (renewed after the erasure) it now sends. A stream begun after the erasure goes on.
    ///
    /// The erasure is dated in whole seconds and a stream in milliseconds: a stream that moved
    /// within the erasure's second counts as before it. No token accepted after the erasure can
    /// have moved it then: one must be dated past the erasure by the issuers' leeway
    /// (``IdentityState``), and the server takes such a token from the next second on.
    static func refuseErasedStream(_ clientID: String, identity: DeviceIdentity, in reader: any StorageReader) async throws {
        guard let erasedAt = identity.userErasedAt,
            let stream = try await reader.clients(tenant: identity.tenant, ownedBy: identity.userID).first(where: { $0.clientID == clientID }),
            stream.lastSeq > 0, stream.updatedAt < (erasedAt + 1) * 1000
        else { return }
        throw ServiceError(
            status: 410, .userErased,
            "this device's store predates the erasure of this user's data on the server; wipe it and sync again from scratch"
        )
    }

    let writer: PushWriter
    let clientID: String
    let schema: [String: Int]
    /// Signatures checked before the transaction (``PushService/push(_:identity:)``).
    var preverified: SignatureVerifier.Preverified? = nil

    var transaction: any StorageTransaction { writer.transaction }
    var identity: DeviceIdentity { writer.identity }

    func run(_ mutations: [Mutation], prepared: [PreparedMutation]) async throws -> PushResponse {
        // Held to the commit: a resend of this push to another process waits here, then sees it done.
        guard case .owned(let last) = try await transaction.lockClient(tenant: identity.tenant, clientID: clientID, owner: identity.clientOwner)
        else { throw ServiceError.clientNotOwned() }
        try await Self.refuseErasedStream(clientID, identity: identity, in: transaction)
        guard let first = mutations.first else { return PushResponse(results: [], lastSeq: last) }
        if first.seq > last + 1 {
            throw ServiceError(
                status: 409, .sequenceGap,
                "the push starts at seq \(first.seq) but the last seq done is \(last); send from seq \(last + 1)",
                details: .object(["last_seq": .int(last)])
            )
        }
        // The client resends from its oldest unanswered mutation: every seq below the first it
        // sends was answered, so its stored result may be pruned (ServerHousekeeping).
        let acknowledged = min(first.seq - 1, last)
        if acknowledged > 0 {
            try await transaction.acknowledgePushResults(tenant: identity.tenant, clientID: clientID, through: acknowledged)
        }
        // Signatures hold for every new mutation, or nothing of the push is applied.
        let signatures = try await SignatureVerifier(identity: identity, clientID: clientID, schema: schema, catalog: writer.contracts.catalog)
            .verify(mutations.filter { $0.seq > last }, in: transaction, preverified: preverified)
        // Every file the new mutations name is stored and this identity's to name, or nothing is applied.
        try await FileService.requireNamable(
            mutations.filter { $0.seq > last }, identity: identity, contracts: writer.contracts, in: transaction)
        try await readAhead(mutations, prepared, after: last)
        var results: [MutationResult] = []
        results.reserveCapacity(mutations.count)
        var done = PushResultRecord(firstSeq: last + 1, results: [])
        var trail = AuditTrail()
        var answered: PushResultRecord?
        for (mutation, preparation) in zip(mutations, prepared) {
            if mutation.seq <= last {
                results.append(try await storedResult(of: mutation, from: &answered))
                continue
            }
            let outcome = try await apply(mutation, preparation)
            done.results.append(Self.storedText(outcome.result))
            record(mutation, preparation, outcome, signature: signatures[mutation.clientMutationId], in: &trail)
            results.append(outcome.result)
        }
        try await transaction.recordPushResults(tenant: identity.tenant, clientID: clientID, done, recordedAt: writer.now.millisecondsSince1970)
        if !done.results.isEmpty {
            try await writer.audit(
                entity: trail.entities.sorted().joined(separator: ","), rowID: "\(clientID):\(done.firstSeq)-\(done.lastSeq)",
                operation: .push, outcome: AuditOutcome(combining: trail.outcomes), detail: trail.detail(clientID: clientID)
            )
        }
        return PushResponse(results: results, lastSeq: max(last, mutations.last!.seq))
    }

    /// Locks the scopes the push's new creates, updates and events name, in the order they come
    /// (the order the mutations would take them), then those of the rows its patches and deletes
    /// address, then reads the rows they all address, and the rows
    /// holding the values their unique indexes would take, in one go per table (and index): each
    /// mutation then finds its row and checks its uniqueness without a read of its own (on
    /// PostgreSQL, a round trip per mutation).
    private func readAhead(_ mutations: [Mutation], _ prepared: [PreparedMutation], after last: Int64) async throws {
        let tenant = identity.tenant
        var locked: Set<String> = []
        var tables: [ContractTable] = []
        var ids: [ContractTable: [String]] = [:]
        func readAhead(_ id: String, in table: ContractTable) {
            if ids[table] == nil { tables.append(table) }
            ids[table, default: []].append(id)
        }
        // The keys of unique indexes the written rows take, by table and index columns.
        var uniqueKeys: [ContractTable: [[String]: [[ColumnValue]]]] = [:]
        func uniquenessKeys(of entity: EntityDescriptor, scopeKey: String, _ value: (String) -> ColumnValue) {
            for index in entity.indexes where index.isUnique {
                let values = [ColumnValue.text(scopeKey)] + index.fields.map(value)
                uniqueKeys[ContractTable(entity), default: [:]][["_scope_key"] + index.fields, default: []].append(values)
            }
        }
        // Patches and deletes name no scope: their rows' scopes are read (one statement per
        // table) and locked after the others, then their rows read ahead with the rest.
        var unscoped: [ContractTable: [String]] = [:]
        var unscopedTables: [ContractTable] = []
        var patches: [(entity: EntityDescriptor, id: String, payload: ValidatedPayload)] = []
        for (mutation, preparation) in zip(mutations, prepared) where mutation.seq > last {
            let table: ContractTable, scopeKey: String, id: String
            switch preparation.target {
            case .success(.entity(let entity)):
                guard let key = entity.payloadScopeKey else {
                    guard mutation.op == .patch || mutation.op == .delete else { continue }
                    let table = ContractTable(entity.entity)
                    if unscoped[table] == nil { unscopedTables.append(table) }
                    unscoped[table, default: []].append(entity.id)
                    if let payload = entity.payload, entity.entity.indexes.contains(where: \.isUnique) {
                        patches.append((entity.entity, entity.id, payload))
                    }
                    continue
                }
                (table, scopeKey, id) = (ContractTable(entity.entity), key, entity.id)
                if let payload = entity.payload {
                    uniquenessKeys(of: entity.entity, scopeKey: key) { payload.columns[$0] ?? .null }
                }
            case .success(.event(let event)):
                (table, scopeKey, id) = (ContractTable(event.event), event.scopeKey, mutation.id)
            case .failure:
                continue
            }
            if locked.insert(scopeKey).inserted { try await transaction.lockScope(tenant: tenant, scopeKey: scopeKey) }
            readAhead(id, in: table)
        }
        for table in unscopedTables {
            let scopes = try await transaction.scopeKeys(in: table, tenant: tenant, ids: unscoped[table]!)
            for id in unscoped[table]! {
                guard let key = scopes[id] else { continue }
                if locked.insert(key).inserted { try await transaction.lockScope(tenant: tenant, scopeKey: key) }
                readAhead(id, in: table)
            }
        }
        for table in tables { try await transaction.prefetchRows(in: table, tenant: tenant, ids: ids[table]!) }
        // A patch's row keeps the stored values of the fields it does not send.
        for patch in patches {
            guard let existing = try await transaction.row(in: ContractTable(patch.entity), tenant: tenant, id: patch.id), !existing.isDeleted,
                let key = existing.text("_scope_key")
            else { continue }
            uniquenessKeys(of: patch.entity, scopeKey: key) { patch.payload.columns[$0] ?? existing[$0] }
        }
        for table in tables {
            for (columns, keys) in uniqueKeys[table] ?? [:] {
                try await transaction.prefetchMatches(in: table, tenant: tenant, columns: columns, keys: keys)
            }
        }
    }

    /// A result's stored text: the canonical JSON of `MutationResult`'s `Codable` form (absent
    /// optionals left out), written member by member in sorted order. One is stored for every
    /// mutation, and a tree of JSON values sorted again by the writer would cost more than the
    /// rest of the bookkeeping.
    static func storedText(_ result: MutationResult) -> String {
        var json = JSONWriter(capacity: 128)
        var first = true
        json.append(0x7B)
        json.member(MemberKeys.clientMutationID, first: &first)
        json.string(result.clientMutationId)
        if let error = result.error {
            json.member(MemberKeys.error, first: &first)
            var inner = true
            json.append(0x7B)
            json.member(MemberKeys.code, first: &inner)
            json.string(error.code.rawValue)
            if let details = error.details {
                json.member(MemberKeys.details, first: &inner)
                json.value(details)
            }
            json.member(MemberKeys.message, first: &inner)
            json.string(error.message)
            json.append(0x7D)
        }
        if let resolution = result.resolution {
            json.member(MemberKeys.resolution, first: &first)
            json.string(resolution)
        }
        json.member(MemberKeys.seq, first: &first)
        json.int(result.seq)
        if let row = result.serverRow {
            json.member(MemberKeys.serverRow, first: &first)
            json.value(row)
        }
        if let version = result.serverVersion {
            json.member(MemberKeys.serverVersion, first: &first)
            json.int(version)
        }
        json.member(MemberKeys.status, first: &first)
        json.string(result.status.rawValue)
        json.append(0x7D)
        return String(decoding: json.bytes, as: UTF8.self)
    }

    /// `"name":` of every member a stored result or a mutation's audit detail may have.
    private enum MemberKeys {
        static let appliedFields = JSONWriter.key("applied_fields")
        static let baseVersion = JSONWriter.key("base_version")
        static let changes = JSONWriter.key("changes")
        static let clientID = JSONWriter.key("client_id")
        static let clientMutationID = JSONWriter.key("client_mutation_id")
        static let code = JSONWriter.key("code")
        static let detail = JSONWriter.key("detail")
        static let details = JSONWriter.key("details")
        static let entity = JSONWriter.key("entity")
        static let error = JSONWriter.key("error")
        static let fields = JSONWriter.key("fields")
        static let hash = JSONWriter.key("hash")
        static let hlc = JSONWriter.key("hlc")
        static let id = JSONWriter.key("id")
        static let keptFields = JSONWriter.key("kept_fields")
        static let keyFingerprint = JSONWriter.key("key_fingerprint")
        static let message = JSONWriter.key("message")
        static let operation = JSONWriter.key("operation")
        static let outcome = JSONWriter.key("outcome")
        static let payloadSHA256 = JSONWriter.key("payload_sha256")
        static let policy = JSONWriter.key("policy")
        static let reason = JSONWriter.key("reason")
        static let resolution = JSONWriter.key("resolution")
        static let schemaVersion = JSONWriter.key("schema_version")
        static let seq = JSONWriter.key("seq")
        static let serverRow = JSONWriter.key("server_row")
        static let serverVersion = JSONWriter.key("server_version")
        static let signature = JSONWriter.key("signature")
        static let status = JSONWriter.key("status")
        static let tombstone = JSONWriter.key("tombstone")
    }

    /// The result stored when the mutation was done, exactly as it was answered then. A resend
    /// names consecutive seqs, so the record read for one usually answers the next as well.
    private func storedResult(of mutation: Mutation, from record: inout PushResultRecord?) async throws -> MutationResult {
        if record?.result(of: mutation.seq) == nil {
            record = try await transaction.pushResults(tenant: identity.tenant, clientID: clientID, covering: mutation.seq)
        }
        guard let text = record?.result(of: mutation.seq) else {
            // Done, but its result is no longer kept: it cannot be applied again.
            return MutationResult(seq: mutation.seq, clientMutationId: mutation.clientMutationId, status: .duplicate)
        }
        return try JSONDecoder().decode(MutationResult.self, from: Data(text.utf8))
    }

    // MARK: - One mutation

    /// How one mutation went: its result, and what the audit log records.
    struct Outcome {
        var result: MutationResult
        var detail = AuditNote()
        var effects: [ReducerEffect] = []
    }

    /// What an applier adds to the mutation's audit detail (the rest comes from the mutation and
    /// its result); each is left out of the detail when absent.
    struct AuditNote {
        var policy: String?
        var schemaVersion: Int?
        /// An event's hash as sent.
        var hash: String?
        var reason: String?
        /// `field_merge`: the fields taken from the mutation and those where the server's value was kept.
        var mergedFields: (applied: [String], kept: [String])?
        var tombstone = false
    }

    func apply(_ mutation: Mutation, _ prepared: PreparedMutation) async throws -> Outcome {
        do {
            switch prepared.target {
            case .failure(let refusal):
                throw refusal
            case .success(.entity(let entity)):
                return try await PushEntityApplier(session: self, mutation: mutation, prepared: entity).apply()
            case .success(.event(let event)):
                return try await PushEventApplier(session: self, mutation: mutation, prepared: event).apply()
            }
        } catch let refusal as ErrorDetail {
            return Outcome(result: rejected(mutation, refusal))
        } catch is DecodingError {
            // A validated payload its generated type cannot read: refuse it rather than fail the push.
            return Outcome(
                result: rejected(
                    mutation, ErrorDetail(code: .invalidPayload, message: "\(mutation.entity): the payload does not decode as the contract's type"))
            )
        }
    }

    func rejected(_ mutation: Mutation, _ error: ErrorDetail) -> MutationResult {
        MutationResult(seq: mutation.seq, clientMutationId: mutation.clientMutationId, status: .rejected, error: error)
    }

    /// The schema version the device runs for a contract (the current one when it did not say).
    func schemaVersion(of name: String, current: Int) -> Int { schema[name] ?? current }

    /// What a push's audit entry records (``AuditedChange``): each mutation done, then each row
    /// the reducers wrote for it, as members of the detail's `changes`. One entry per push, not
    /// per mutation: the push is one transaction by one identity, and an entry per mutation cost
    /// as much to write and seal as the pushed row itself.
    struct AuditTrail {
        /// The `changes` array's elements, comma separated, as canonical JSON.
        var changes = JSONWriter(capacity: 64 * 1024)
        var count = 0
        /// The entities the push changed and the outcomes it had, for the entry's own columns.
        var entities: Set<String> = []
        var outcomes: Set<AuditOutcome> = []

        /// Appends `{"detail":{…},"entity":…,"id":…,"operation":…,"outcome":…}`, its detail
        /// written by `detail` (a JSON object).
        mutating func add(
            entity: String, id: String, operation: AuditOperation, outcome: AuditOutcome, detail: (inout JSONWriter) -> Void
        ) {
            if count > 0 { changes.append(0x2C) }
            count += 1
            var first = true
            changes.append(0x7B)
            changes.member(MemberKeys.detail, first: &first)
            detail(&changes)
            changes.member(MemberKeys.entity, first: &first)
            changes.string(entity)
            changes.member(MemberKeys.id, first: &first)
            changes.string(id)
            changes.member(MemberKeys.operation, first: &first)
            changes.string(operation.rawValue)
            changes.member(MemberKeys.outcome, first: &first)
            changes.string(outcome.rawValue)
            changes.append(0x7D)
        }

        /// `{"changes":[…],"client_id":"…"}`, canonical.
        func detail(clientID: String) -> String {
            var json = JSONWriter(capacity: changes.bytes.count + 64)
            var first = true
            json.append(0x7B)
            json.member(MemberKeys.changes, first: &first)
            json.append(0x5B)
            json.append(changes.bytes)
            json.append(0x5D)
            json.member(MemberKeys.clientID, first: &first)
            json.string(clientID)
            json.append(0x7D)
            return String(decoding: json.bytes, as: UTF8.self)
        }
    }

    /// Adds the mutation to the push's audit trail, then each row the reducers wrote for it.
    private func record(
        _ mutation: Mutation, _ preparation: PreparedMutation, _ outcome: Outcome, signature: SignatureVerifier.Verified?,
        in trail: inout AuditTrail
    ) {
        let result = outcome.result
        let auditOutcome = result.resolution == ConflictResolution.merged ? AuditOutcome.merged : AuditOutcome(result.status)
        trail.entities.insert(mutation.entity)
        trail.outcomes.insert(auditOutcome)
        trail.add(entity: mutation.entity, id: mutation.id, operation: AuditOperation(mutation.op), outcome: auditOutcome) { json in
            writeDetail(mutation, preparation, outcome, signature: signature, into: &json)
        }
        for effect in outcome.effects {
            var effectDetail = effect.summary
            effectDetail["source"] = .string(mutation.entity)
            effectDetail["source_id"] = .string(mutation.id)
            effectDetail["seq"] = .int(mutation.seq)
            effectDetail["server_version"] = .int(effect.version)
            trail.entities.insert(effect.entity)
            trail.add(entity: effect.entity, id: effect.rowID, operation: .fold, outcome: .applied) { json in
                json.value(.object(effectDetail))
            }
        }
    }

    /// The detail of a mutation in its push's audit entry, canonical JSON written member by
    /// member in sorted order: the applier's note, the mutation (seq, ids, clocks, the payload's
    /// field names and hash, never its values), its verified device signature with the key's
    /// fingerprint (sealed with the rest of the entry, so the chain covers them), and how it
    /// went. The client stream is the entry's.
    private func writeDetail(
        _ mutation: Mutation, _ preparation: PreparedMutation, _ outcome: Outcome, signature: SignatureVerifier.Verified?,
        into json: inout JSONWriter
    ) {
        typealias Keys = MemberKeys
        let note = outcome.detail, result = outcome.result
        var first = true
        json.append(0x7B)
        if let merged = note.mergedFields {
            json.member(Keys.appliedFields, first: &first)
            json.strings(merged.applied)
        }
        if let base = mutation.baseVersion {
            json.member(Keys.baseVersion, first: &first)
            json.int(base)
        }
        json.member(Keys.clientMutationID, first: &first)
        json.string(mutation.clientMutationId)
        if let error = result.error {
            json.member(Keys.error, first: &first)
            var inner = true
            json.append(0x7B)
            json.member(Keys.code, first: &inner)
            json.string(error.code.rawValue)
            json.member(Keys.message, first: &inner)
            json.string(error.message)
            json.append(0x7D)
        }
        if let names = preparation.payloadFieldNames {
            json.member(Keys.fields, first: &first)
            json.strings(names)
        }
        if let hash = note.hash {
            json.member(Keys.hash, first: &first)
            json.string(hash)
        }
        if let hlc = mutation.hlc {
            json.member(Keys.hlc, first: &first)
            json.string(hlc)
        }
        if let merged = note.mergedFields {
            json.member(Keys.keptFields, first: &first)
            json.strings(merged.kept)
        }
        if let signature {
            json.member(Keys.keyFingerprint, first: &first)
            json.string(signature.fingerprint)
        }
        if mutation.payload != nil, let hash = preparation.payloadHash {
            json.member(Keys.payloadSHA256, first: &first)
            json.string(hash)
        }
        if let policy = note.policy {
            json.member(Keys.policy, first: &first)
            json.string(policy)
        }
        if let reason = note.reason {
            json.member(Keys.reason, first: &first)
            json.string(reason)
        }
        if let resolution = result.resolution {
            json.member(Keys.resolution, first: &first)
            json.string(resolution)
        }
        if let version = note.schemaVersion {
            json.member(Keys.schemaVersion, first: &first)
            json.int(Int64(version))
        }
        json.member(Keys.seq, first: &first)
        json.int(mutation.seq)
        if let version = result.serverVersion {
            json.member(Keys.serverVersion, first: &first)
            json.int(version)
        }
        if let signature {
            json.member(Keys.signature, first: &first)
            json.string(signature.signature)
        }
        json.member(Keys.status, first: &first)
        json.string(result.status.rawValue)
        if note.tombstone {
            json.member(Keys.tombstone, first: &first)
            json.bool(true)
        }
        json.append(0x7D)
    }
}
