public import ContractRuntime
import Foundation
public import SyncProtocol

/// A fact the reducers fold into server-authoritative entities: an event, or a created row of
/// an entity a reducer folds (an append-only record), already validated and in its contract's
/// current shape.
public struct ReducerFact: Sendable {
    /// The contract name.
    public var contract: String
    /// The event id, or the row's primary key.
    public var id: String
    /// When it happened: the event's `occurred_at` (device clock), or the row's receipt.
    public var occurredAt: Timestamp
    /// The scope key the fact is filed under; a reducer only touches rows of the same scope.
    public var scopeKey: String
    /// The payload as it came: wire values (an event), or a row's columns, turned into wire
    /// values only when read (most rows a reducer sees, it leaves after a field or two).
    private let values: Values

    private enum Values {
        case wire([String: JSONValue])
        case row([String: ColumnValue], fields: [FieldDescriptor])
    }

    /// An event's fact: current field names → wire values, defaults filled.
    init(contract: String, id: String, payload: [String: JSONValue], occurredAt: Timestamp, scopeKey: String) {
        self.contract = contract
        self.id = id
        self.occurredAt = occurredAt
        self.scopeKey = scopeKey
        values = .wire(payload)
    }

    /// A row's fact: every field of `fields`, from the row's columns (a missing one is null).
    init(contract: String, id: String, row: [String: ColumnValue], fields: [FieldDescriptor], occurredAt: Timestamp, scopeKey: String) {
        self.contract = contract
        self.id = id
        self.occurredAt = occurredAt
        self.scopeKey = scopeKey
        values = .row(row, fields: fields)
    }

    /// Current field names → wire values, defaults filled.
    public var payload: [String: JSONValue] {
        switch values {
        case .wire(let payload): return payload
        case .row(let columns, let fields):
            var payload: [String: JSONValue] = [:]
            payload.reserveCapacity(fields.count)
            for field in fields { payload[field.name] = RowCodec.wireValue(columns[field.name] ?? .null, for: field) }
            return payload
        }
    }

    /// The wire value of one field of the payload; `nil` when the contract has no such field.
    public func value(of name: String) -> JSONValue? {
        switch values {
        case .wire(let payload): return payload[name]
        case .row(let columns, let fields):
            guard let field = fields.first(where: { $0.name == name }) else { return nil }
            return RowCodec.wireValue(columns[name] ?? .null, for: field)
        }
    }

    /// The payload as its generated type.
    public func decode<Value: Decodable>(_ type: Value.Type) throws -> Value {
        try JSONTreeDecoder.decode(Value.self, from: .object(payload))
    }
}

/// What a reducer says about a fact before anything is written.
public enum ReducerVerdict: Sendable {
    /// Store the fact and fold it.
    case proceed
    /// Nothing to do: the target already reflects it (a second completion of a completed task).
    case duplicate(String)
    /// The target moved on since the device saw it; the device gets the target's row (or, for
    /// a deleted row, no row and the resolution `deleted`).
    case conflicted(entity: EntityDescriptor, row: StoredRow)
    /// The fact cannot apply (an impossible transition).
    case rejected(ErrorDetail)
}

/// A row a reducer wrote, for the response's audit trail.
public struct ReducerEffect: Hashable, Sendable {
    /// The entity's contract name.
    public var entity: String
    /// The row's primary key.
    public var rowID: String
    /// The row's `_version` after the write.
    public var version: Int64
    /// What changed, for the audit detail.
    public var summary: [String: JSONValue]

    /// An effect from its parts.
    public init(entity: String, rowID: String, version: Int64, summary: [String: JSONValue]) {
        self.entity = entity
        self.rowID = rowID
        self.version = version
        self.summary = summary
    }
}

/// Folds facts of some contracts into server-computed rows: an app's server-side logic (a
/// task's state from its status events, a learner's progress from their statements), given to
/// the server when it is made (``ServerApp/reducers``).
///
/// A reducer is asked twice: ``verdict(for:in:)`` before anything of the mutation is written
/// (it may refuse), then ``fold(_:in:)`` after the fact is stored, in the same transaction.
/// Facts are events, and created rows of the entities a reducer names in ``sources``. Reducers
/// are typed against the generated DTOs and name contracts through their types' descriptors
/// (`TaskStarted.descriptor.name`), never as string literals. A reducer must do nothing but
/// storage work through its context and pure computation: a transaction may run more than once.
public protocol Reducer: Sendable {
    /// The contracts whose facts this reducer folds.
    var sources: Set<String> { get }
    /// Whether the fact may apply: `proceed`, or why not (nothing of the mutation is written then).
    func verdict(for fact: ReducerFact, in context: ReducerContext) async throws -> ReducerVerdict
    /// Folds the stored fact into rows; returns the rows written.
    func fold(_ fact: ReducerFact, in context: ReducerContext) async throws -> [ReducerEffect]
}

/// The reducers of a server, by the contracts they fold, and how a push consults them.
struct Reducers: Sendable {
    /// Every reducer, in the order given.
    let all: [any Reducer]
    /// The reducers of each source contract, in the order of ``all``.
    private let bySource: [String: [any Reducer]]

    init(_ reducers: [any Reducer]) {
        all = reducers
        var index: [String: [any Reducer]] = [:]
        for reducer in reducers {
            for source in reducer.sources { index[source, default: []].append(reducer) }
        }
        bySource = index
    }

    /// Whether any reducer folds facts of `contract`.
    func folds(_ contract: String) -> Bool { bySource[contract] != nil }

    /// The first verdict that is not `proceed`, or `proceed`.
    func verdict(for fact: ReducerFact, in context: ReducerContext) async throws -> ReducerVerdict {
        for reducer in bySource[fact.contract] ?? [] {
            let verdict = try await reducer.verdict(for: fact, in: context)
            if case .proceed = verdict { continue }
            return verdict
        }
        return .proceed
    }

    /// Runs every reducer of the fact's contract; returns the rows they wrote.
    func fold(_ fact: ReducerFact, in context: ReducerContext) async throws -> [ReducerEffect] {
        var effects: [ReducerEffect] = []
        for reducer in bySource[fact.contract] ?? [] {
            effects += try await reducer.fold(fact, in: context)
        }
        return effects
    }
}

/// Typed access to storage for reducers, inside the push's transaction.
public struct ReducerContext {
    let writer: PushWriter

    /// The push's transaction.
    package var transaction: any StorageTransaction { writer.transaction }
    /// Who pushed.
    public var identity: DeviceIdentity { writer.identity }
    /// The server's time of the push.
    public var now: Timestamp { writer.now }
    /// The tolerance of a device's clock against the server's, in milliseconds.
    public var clockSkewMilliseconds: Int64 {
        let parts = writer.clockSkew.components
        return parts.seconds * 1000 + parts.attoseconds / 1_000_000_000_000_000
    }

    /// The stored row of `entity` with this primary key in the pusher's tenant, as stored:
    /// tombstones included, with its sync metadata (`_scope_key`, `_version`, `_deleted`, …);
    /// `nil` when there is none.
    public func row(of entity: EntityDescriptor, id: String) async throws -> StoredRow? {
        try await transaction.row(in: ContractTable(entity), tenant: identity.tenant, id: id)
    }

    /// A stored entity row with its generated value; `nil` when absent or deleted.
    public func entity<Value: ContractEntity>(_ type: Value.Type, id: String) async throws -> (value: Value, row: StoredRow)? {
        guard let row = try await transaction.row(in: ContractTable(Value.descriptor), tenant: identity.tenant, id: id),
            !row.isDeleted
        else { return nil }
        return (try Self.decode(Value.self, row: row), row)
    }

    /// Live entity rows matching equality conditions (at most `limit`).
    public func entities<Value: ContractEntity>(
        _ type: Value.Type, where conditions: [String: ColumnValue], limit: Int = 10_000
    ) async throws -> [(value: Value, row: StoredRow)] {
        try await transaction.rows(in: ContractTable(Value.descriptor), tenant: identity.tenant, where: conditions, limit: limit)
            .filter { !$0.isDeleted }
            .map { (try Self.decode(Value.self, row: $0), $0) }
    }

    /// Stored events matching equality conditions, with their ids and device times.
    public func events<Value: ContractEvent>(
        _ type: Value.Type, where conditions: [String: ColumnValue], limit: Int = 10_000
    ) async throws -> [(value: Value, eventID: String, occurredAt: Int64)] {
        let descriptor = Value.descriptor
        return try await transaction.rows(
            in: ContractTable(descriptor), tenant: identity.tenant, where: conditions, limit: limit
        ).map { row in
            var wire: [String: JSONValue] = [:]
            for field in descriptor.fields { wire[field.name] = RowCodec.wireValue(row[field.name], for: field) }
            let value = try JSONTreeDecoder.decode(Value.self, from: .object(wire))
            return (value, row.text("event_id") ?? "", row.integer("occurred_at") ?? 0)
        }
    }

    /// Stores a value computed by a reducer: a new scope sequence, `_version` + 1, `_updated_by`
    /// `server`; the row's clocks (`_hlc`, `_field_clocks`) stay as they were. Returns `nil`
    /// without writing when nothing but the version field would change.
    public func store<Value: ContractEntity>(
        _ value: Value, previous: StoredRow?, scopeKey: String, summary: [String: JSONValue]
    ) async throws -> ReducerEffect? {
        let entity = Value.descriptor
        let columns = try Self.columns(of: value)
        if let previous, !previous.isDeleted,
            entity.fields.allSatisfy({ $0.isVersionField || previous[$0.name] == columns[$0.name] })
        {
            return nil
        }
        let row = try await writer.write(
            PushWriter.RowWrite(
                entity: entity, id: value.contractPrimaryKey, columns: columns, scopeKey: scopeKey, previous: previous,
                schemaVersion: entity.currentVersion, hlc: previous?.text("_hlc"), fieldClocks: previous?.text("_field_clocks"),
                updatedBy: Self.serverWriter
            )
        )
        return ReducerEffect(entity: entity.name, rowID: value.contractPrimaryKey, version: row.integer("_version") ?? 0, summary: summary)
    }

    /// The scope key a new row of `Value` takes: its scope's key filled from the token and the row.
    public func scopeKey<Value: ContractEntity>(for value: Value, fallback: String) throws -> String {
        guard let scope = writer.contracts.catalog.scope(named: Value.descriptor.scope) else { return fallback }
        let wire = try Self.wireObject(of: value)
        return ScopeAccess.key(for: scope, row: wire, identity: identity) ?? fallback
    }

    /// `_updated_by` of rows the server computed.
    static let serverWriter = "server"

    /// A stored row as its generated type (current version).
    public static func decode<Value: ContractEntity>(_ type: Value.Type, row: StoredRow) throws -> Value {
        let wire = RowShaping.currentWireRow(row, entity: Value.descriptor)
        return try JSONTreeDecoder.decode(Value.self, from: .object(wire))
    }

    /// The wire fields of a value a reducer computed, straight from its `Encodable` form.
    static func wireObject<Value: ContractEntity>(of value: Value) throws -> [String: JSONValue] {
        guard case .object(let wire) = try JSONTreeEncoder.encode(value) else { return [:] }
        return wire
    }

    static func columns<Value: ContractEntity>(of value: Value) throws -> [String: ColumnValue] {
        let wire = try Self.wireObject(of: value)
        var columns: [String: ColumnValue] = [:]
        for field in Value.descriptor.fields {
            columns[field.name] = try RowCodec.columnValue(wire[field.name] ?? .null, for: field)
        }
        return columns
    }
}

extension ReducerContext {
    /// The UTC calendar day of a timestamp.
    public static func utcDay(_ timestamp: Timestamp) -> CalendarDate {
        let millis = timestamp.millisecondsSince1970
        let days = millis >= 0 ? millis / 86_400_000 : (millis - 86_399_999) / 86_400_000
        return CalendarDate(daysSince1970: Int(days))
    }
}
