package import ContractRuntime

extension PushRequest {
    /// Why a JSON document is not a push body; the message names the member at fault.
    package struct ShapeError: Error, Hashable, Sendable {
        package var message: String
    }

    /// The push a JSON document holds, read member by member from an already parsed tree (see
    /// ``BoundedJSON``) instead of through `JSONDecoder`, which tries every type of a `json`
    /// value in turn and costs far more than the parse. Reads what the `Decodable`
    /// conformance reads; members it does not know are left alone.
    package init(json: JSONValue) throws(ShapeError) {
        guard case .object(let members) = json else { throw ShapeError(message: "the body must be a JSON object") }
        clientId = try Self.string(members["client_id"], "client_id")
        var schema: [String: Int] = [:]
        switch members["schema"] {
        case nil: throw ShapeError(message: "`schema` is required")
        case .object(let versions)?:
            for (name, version) in versions {
                guard case .int(let number) = version, let value = Int(exactly: number), value >= 0, value <= Int(Int32.max) else {
                    throw ShapeError(message: "schema.\(name) must be a version number")
                }
                schema[name] = value
            }
        default: throw ShapeError(message: "schema must be an object of contract versions")
        }
        self.schema = schema
        guard let list = members["mutations"] else { throw ShapeError(message: "`mutations` is required") }
        guard case .array(let items) = list else { throw ShapeError(message: "mutations must be a list") }
        var mutations: [Mutation] = []
        mutations.reserveCapacity(items.count)
        for (offset, item) in items.enumerated() {
            mutations.append(try Mutation(json: item, at: "mutations[\(offset)]"))
        }
        self.mutations = mutations
    }

    static func string(_ value: JSONValue?, _ path: String) throws(ShapeError) -> String {
        guard let value else { throw ShapeError(message: "`\(path)` is required") }
        guard case .string(let text) = value else { throw ShapeError(message: "\(path) must be a string") }
        return text
    }

    static func optionalString(_ value: JSONValue?, _ path: String) throws(ShapeError) -> String? {
        switch value {
        case nil, .null?: return nil
        case .string(let text)?: return text
        default: throw ShapeError(message: "\(path) must be a string")
        }
    }

    static func optionalInteger(_ value: JSONValue?, _ path: String) throws(ShapeError) -> Int64? {
        switch value {
        case nil, .null?: return nil
        case .int(let number)?: return number
        default: throw ShapeError(message: "\(path) must be a whole number within 64 bits")
        }
    }
}

extension Mutation {
    init(json: JSONValue, at path: String) throws(PushRequest.ShapeError) {
        guard case .object(let members) = json else { throw .init(message: "\(path) must be an object") }
        guard let seq = try PushRequest.optionalInteger(members["seq"], "\(path).seq") else {
            throw .init(message: "\(path).seq is required")
        }
        let opText = try PushRequest.string(members["op"], "\(path).op")
        guard let op = MutationOperation(rawValue: opText) else {
            throw .init(message: "\(path).op must be one of \(MutationOperation.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        var base: [String: JSONValue]?
        switch members["base"] {
        case nil, .null?: base = nil
        case .object(let values)?: base = values
        default: throw .init(message: "\(path).base must be an object")
        }
        var occurredAt: Timestamp?
        if let text = try PushRequest.optionalString(members["occurred_at"], "\(path).occurred_at") {
            guard let time = Timestamp(iso8601: text) else {
                throw .init(message: "\(path).occurred_at must be an ISO-8601 timestamp such as 2026-01-31T08:00:00.000Z")
            }
            occurredAt = time
        }
        let payload: JSONValue? = if case .null? = members["payload"] { nil } else { members["payload"] }
        self.init(
            seq: seq, clientMutationId: try PushRequest.string(members["client_mutation_id"], "\(path).client_mutation_id"),
            entity: try PushRequest.string(members["entity"], "\(path).entity"), op: op, id: try PushRequest.string(members["id"], "\(path).id"),
            payload: payload, baseVersion: try PushRequest.optionalInteger(members["base_version"], "\(path).base_version"),
            hlc: try PushRequest.optionalString(members["hlc"], "\(path).hlc"), base: base, occurredAt: occurredAt,
            hash: try PushRequest.optionalString(members["hash"], "\(path).hash"),
            signature: try PushRequest.optionalString(members["signature"], "\(path).signature")
        )
    }
}
