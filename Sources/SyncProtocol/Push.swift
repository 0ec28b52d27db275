public import ContractRuntime

/// `POST /sync/v1/push`: a device's queued writes, oldest first.
public struct PushRequest: Codable, Sendable, Hashable {
    /// The device's stable identity for sequencing (one per installation).
    public var clientId: String
    /// The schema version the device runs, per contract name (`{"Unit": 3}`).
    public var schema: [String: Int]
    /// Mutations with consecutive `seq` numbers.
    public var mutations: [Mutation]

    /// A push of queued mutations.
    public init(clientId: String, schema: [String: Int], mutations: [Mutation]) {
        self.clientId = clientId
        self.schema = schema
        self.mutations = mutations
    }

    enum CodingKeys: String, CodingKey {
        case clientId = "client_id"
        case schema
        case mutations
    }
}

/// What a mutation does.
public enum MutationOperation: String, Codable, Sendable, Hashable, CaseIterable {
    /// A new row (the whole row in `payload`).
    case create
    /// A whole-row replacement.
    case update
    /// Some fields (`payload` holds only the changed ones; `base` their values before the edit).
    case patch
    /// A deletion (a tombstone where the contract keeps them).
    case delete
    /// An event (`payload` is the event, `id` its `event_id`).
    case event
}

/// One queued write of a device.
public struct Mutation: Codable, Sendable, Hashable {
    /// Per client, 1, 2, 3, … with no gaps.
    public var seq: Int64
    /// A ULID made on the device; also the idempotency key.
    public var clientMutationId: String
    /// The contract name (`Incident`, `AnswerRecorded`).
    public var entity: String
    /// What the mutation does: create, update, patch or delete a row, or record an event.
    public var op: MutationOperation
    /// The row's primary key, or the event's `event_id`.
    public var id: String
    /// The row or event in its wire form; `nil` for a delete.
    public var payload: JSONValue?
    /// `version_check`: the server version the edit was based on.
    public var baseVersion: Int64?
    /// `last_writer_wins` and `field_merge`: the device's hybrid logical clock at the edit.
    public var hlc: String?
    /// `field_merge`: the value each changed field had before the edit.
    public var base: [String: JSONValue]?
    /// Events: when it happened, by the device's clock.
    public var occurredAt: Timestamp?
    /// Events: SHA-256 of the canonical payload.
    public var hash: String?
    /// The device's ES256 signature of ``DeviceSignature/signedBytes(of:schemaVersion:signer:)``,
    /// base64 of its 64-byte raw form (r then s). Required for a contract with `signed: true`;
    /// checked whenever it is present.
    public var signature: String?

    /// A mutation from its parts; those its operation does not use stay `nil`.
    public init(
        seq: Int64, clientMutationId: String, entity: String, op: MutationOperation, id: String, payload: JSONValue? = nil,
        baseVersion: Int64? = nil, hlc: String? = nil, base: [String: JSONValue]? = nil, occurredAt: Timestamp? = nil,
        hash: String? = nil, signature: String? = nil
    ) {
        self.seq = seq
        self.clientMutationId = clientMutationId
        self.entity = entity
        self.op = op
        self.id = id
        self.payload = payload
        self.baseVersion = baseVersion
        self.hlc = hlc
        self.base = base
        self.occurredAt = occurredAt
        self.hash = hash
        self.signature = signature
    }

    enum CodingKeys: String, CodingKey {
        case seq
        case clientMutationId = "client_mutation_id"
        case entity
        case op
        case id
        case payload
        case baseVersion = "base_version"
        case hlc
        case base
        case occurredAt = "occurred_at"
        case hash
        case signature
    }
}

/// How the server answered one mutation.
public enum MutationStatus: String, Codable, Sendable, Hashable, CaseIterable {
    /// Written (or merged).
    case applied
    /// Already there: the same id or event again; nothing changed.
    case duplicate
    /// Not written: the server's row moved on since the device's base; `serverRow` holds it.
    case conflicted
    /// Refused for good (invalid, not allowed); counted as done so the queue moves on.
    case rejected
}

/// The answer to one mutation, in request order.
public struct MutationResult: Codable, Sendable, Hashable {
    /// The mutation's `seq`, echoed.
    public var seq: Int64
    /// The mutation's `client_mutation_id`, echoed.
    public var clientMutationId: String
    /// What the server did with it.
    public var status: MutationStatus
    /// The row's server version after this mutation (or the current one when not applied).
    public var serverVersion: Int64?
    /// The server's row: for `conflicted`, what the device must resolve against; for a
    /// last-writer-wins loss or a merge, the row that now stands.
    public var serverRow: JSONValue?
    /// How a conflict was settled when it was: `merged`, `won`, `lost`.
    public var resolution: String?
    /// Why it was rejected.
    public var error: ErrorDetail?

    /// A result from its parts.
    public init(
        seq: Int64, clientMutationId: String, status: MutationStatus, serverVersion: Int64? = nil,
        serverRow: JSONValue? = nil, resolution: String? = nil, error: ErrorDetail? = nil
    ) {
        self.seq = seq
        self.clientMutationId = clientMutationId
        self.status = status
        self.serverVersion = serverVersion
        self.serverRow = serverRow
        self.resolution = resolution
        self.error = error
    }

    enum CodingKeys: String, CodingKey {
        case seq
        case clientMutationId = "client_mutation_id"
        case status
        case serverVersion = "server_version"
        case serverRow = "server_row"
        case resolution
        case error
    }
}

/// The answer to a push: one result per mutation, and the last `seq` the server has done.
public struct PushResponse: Codable, Sendable, Hashable {
    /// One result per mutation, in request order.
    public var results: [MutationResult]
    /// The last `seq` the server has done for this device.
    public var lastSeq: Int64

    /// A response from its results and last `seq`.
    public init(results: [MutationResult], lastSeq: Int64) {
        self.results = results
        self.lastSeq = lastSeq
    }

    enum CodingKeys: String, CodingKey {
        case results
        case lastSeq = "last_seq"
    }
}
