public import ContractRuntime

/// A condition on the rows of one entity, by field name (checked against the contract) or by
/// typed change (`.equals(.priority(.high))`). Values are wire values; the store converts them
/// to column values the way it stores them (a timestamp given as ISO-8601 text compares as
/// milliseconds).
///
/// ```swift
/// let urgent = try store.all(Incident.self,
///     where: .equals(.teamId("t-1")) && .oneOf([.priority(.critical), .priority(.high)]),
///     orderBy: [.descending("opened_at")])
/// ```
///
/// Encrypted fields are stored sealed and cannot be filtered or sorted on
/// (``OfflineStoreError/fieldNotQueryable(contract:field:reason:)``).
public struct RowFilter<Entity: ContractEntity>: Sendable {
    indirect enum Node: Sendable {
        case compare(field: String, comparison: FieldComparison, value: JSONValue)
        case isNull(field: String, negated: Bool)
        case oneOf(field: String, values: [JSONValue])
        case all([Node])
        case any([Node])
        case not(Node)
    }

    let node: Node

    init(_ node: Node) {
        self.node = node
    }

    /// `field <comparison> value`.
    public static func field(_ name: String, _ comparison: FieldComparison, _ value: JSONValue) -> Self {
        Self(.compare(field: name, comparison: comparison, value: value))
    }

    /// `field = value`.
    public static func equals(_ name: String, _ value: JSONValue) -> Self {
        field(name, .equals, value)
    }

    /// The field is one of `values`.
    public static func oneOf(_ name: String, _ values: [JSONValue]) -> Self {
        Self(.oneOf(field: name, values: values))
    }

    /// The field is NULL.
    public static func isNull(_ name: String) -> Self { Self(.isNull(field: name, negated: false)) }

    /// The field is not NULL.
    public static func isNotNull(_ name: String) -> Self { Self(.isNull(field: name, negated: true)) }

    /// The row with this primary key.
    public static func id(_ id: String) -> Self { equals(Entity.descriptor.primaryKey, .string(id)) }

    /// Rows that match both filters.
    public static func && (lhs: Self, rhs: Self) -> Self { Self(.all([lhs.node, rhs.node])) }

    /// Rows that match either filter.
    public static func || (lhs: Self, rhs: Self) -> Self { Self(.any([lhs.node, rhs.node])) }

    /// Rows that do not match the filter.
    public static prefix func ! (filter: Self) -> Self { Self(.not(filter.node)) }

    /// All of the filters (true when empty).
    public static func all(_ filters: [Self]) -> Self { Self(.all(filters.map(\.node))) }

    /// Any of the filters (false when empty).
    public static func any(_ filters: [Self]) -> Self { Self(.any(filters.map(\.node))) }
}

extension RowFilter where Entity: PatchableEntity {
    /// The field of `change` equals its value: `.equals(.state(.inProgress))`.
    public static func equals(_ change: Entity.Change) -> Self {
        equals(change.fieldName, (try? change.wireValue()) ?? .null)
    }

    /// The field compares with the value of `change`: `.field(.openedAt(since), .greaterThanOrEqual)`.
    public static func field(_ change: Entity.Change, _ comparison: FieldComparison) -> Self {
        field(change.fieldName, comparison, (try? change.wireValue()) ?? .null)
    }

    /// Any of `changes` holds: `.oneOf([.priority(.critical), .priority(.high)])`. Changes of
    /// one field become `field IN (…)`.
    public static func oneOf(_ changes: [Entity.Change]) -> Self {
        guard let name = changes.first?.fieldName else { return any([]) }
        guard changes.allSatisfy({ $0.fieldName == name }) else { return any(changes.map { equals($0) }) }
        return Self(.oneOf(field: name, values: changes.map { (try? $0.wireValue()) ?? .null }))
    }
}

/// How a field is compared in a ``RowFilter``.
public enum FieldComparison: String, Hashable, Sendable {
    case equals = "="
    case notEquals = "<>"
    case lessThan = "<"
    case lessThanOrEqual = "<="
    case greaterThan = ">"
    case greaterThanOrEqual = ">="
}

/// One sort key of a read.
public struct RowOrder: Hashable, Sendable {
    enum Kind: Hashable, Sendable {
        case value
        /// By the position of the value in the contract's enum (`critical` before `high`…).
        case declaredOrder
    }

    /// The field sorted by.
    public var field: String
    /// Whether the order is from the largest value down.
    public var descending: Bool
    var kind: Kind

    /// Ascending by the field's stored value.
    public static func ascending(_ field: String) -> Self { Self(field: field, descending: false, kind: .value) }

    /// Descending by the field's stored value.
    public static func descending(_ field: String) -> Self { Self(field: field, descending: true, kind: .value) }

    /// By the order in which the contract lists an enum field's values (`descending` reverses it).
    /// Values the contract does not list come last.
    public static func declaredOrder(_ field: String, descending: Bool = false) -> Self {
        Self(field: field, descending: descending, kind: .declaredOrder)
    }
}
