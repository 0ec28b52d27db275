/// A named subscription from the manifest (`subscriptions:` in `contracts.yaml`): the rows of
/// one entity that match a filter, with the rows that reference them, or that they reference,
/// through declared relations. A device subscribes with values for its parameters and syncs
/// just those rows, with their own cursor, instead of a whole scope.
///
/// The rows all live in the root entity's scope: a device may subscribe only where its token
/// may read that scope, as it may pull it.
public struct SubscriptionDescriptor: Hashable, Sendable {
    /// The subscription's name in the manifest (`incident`, `unit`).
    public var name: String
    /// One line on what it selects.
    public var summary: String
    /// The root entity's name.
    public var entity: String
    /// The parameters a subscriber gives, in declaration order.
    public var parameters: [Parameter]
    /// The conditions on the root entity's fields, all of which a row must meet.
    public var filter: [Condition]
    /// The rows taken along with each selected row, through the root entity's relations.
    public var includes: [Include]
    /// How long a device keeps the rows after it unsubscribes, by default, in seconds.
    public var defaultTTLSeconds: Int
    /// The tier the subscription is pulled at, before lower tiers.
    public var priority: SyncPriority

    /// A descriptor from its parts, as generated code writes it.
    public init(
        name: String, summary: String, entity: String, parameters: [Parameter], filter: [Condition], includes: [Include],
        defaultTTLSeconds: Int, priority: SyncPriority
    ) {
        self.name = name
        self.summary = summary
        self.entity = entity
        self.parameters = parameters
        self.filter = filter
        self.includes = includes
        self.defaultTTLSeconds = defaultTTLSeconds
        self.priority = priority
    }

    /// The parameter called `name`.
    public func parameter(named name: String) -> Parameter? { parameters.first { $0.name == name } }

    /// A typed parameter of a subscription.
    public struct Parameter: Hashable, Sendable {
        /// The parameter's name.
        public var name: String
        /// The value's type: a scalar field type, or `list<T>` for an `in` condition.
        public var kind: FieldKind
        /// The most values a list parameter takes.
        public var maxCount: Int

        /// A parameter of the given type; `maxCount` limits a list's values.
        public init(name: String, kind: FieldKind, maxCount: Int = 1) {
            self.name = name
            self.kind = kind
            self.maxCount = maxCount
        }
    }

    /// One condition of the filter: `field` equals the operand, or is one of its values.
    public struct Condition: Hashable, Sendable {
        /// The entity field compared.
        public var field: String
        /// What the field is compared with.
        public var operand: Operand

        /// A condition on a field.
        public init(field: String, operand: Operand) {
            self.field = field
            self.operand = operand
        }
    }

    /// What a condition compares a field with.
    public enum Operand: Hashable, Sendable {
        /// The value of a parameter (`"{id}"`); a list parameter means "one of".
        case parameter(String)
        /// One of these values, written in the contract (`[new, in_progress]`).
        case values([JSONValue])
        /// A claim of the subscriber's token (`"{token.user_id}"`).
        case token(String)
    }

    /// Rows taken along through one relation of the entity above it.
    public struct Include: Hashable, Sendable {
        /// The relation's name in the entity above (`lessons`).
        public var relation: String
        /// Its kind: `has_many` takes the rows whose `foreignKey` names a row above;
        /// `belongs_to` takes the rows the `foreignKey` of a row above names.
        public var kind: RelationDescriptor.Kind
        /// The related entity's name.
        public var target: String
        /// The relation's foreign key field (in `target` for `has_many`, in the entity above for `belongs_to`).
        public var foreignKey: String
        /// Rows taken along from these in turn.
        public var includes: [Include]

        /// An include from its relation and the includes below it.
        public init(relation: String, kind: RelationDescriptor.Kind, target: String, foreignKey: String, includes: [Include] = []) {
            self.relation = relation
            self.kind = kind
            self.target = target
            self.foreignKey = foreignKey
            self.includes = includes
        }
    }

    /// The deepest nesting of includes the contract language accepts.
    public static let maximumIncludeDepth = 3

    /// Every entity the subscription takes rows of: the root, then the includes depth first.
    public var entities: [String] {
        func walk(_ includes: [Include]) -> [String] { includes.flatMap { [$0.target] + walk($0.includes) } }
        return [entity] + walk(includes)
    }
}

/// A subscription with values for its parameters: what a device subscribes to. Generated code
/// makes them typed (`Subscriptions.incident(id: "inc-1")`); the engine checks the values
/// against the contract's ``SubscriptionDescriptor`` before it stores anything.
public struct SubscriptionRequest: Hashable, Sendable {
    /// The subscription's name in the contracts.
    public var name: String
    /// A value for each parameter, by name: a string, number or boolean, or an array of them.
    public var parameters: [String: JSONValue]
    /// The scope key to read in (`ops:team:t-1`); `nil` for the one the token grants.
    public var scope: String?

    /// A request for the named subscription with the given parameter values.
    public init(name: String, parameters: [String: JSONValue] = [:], scope: String? = nil) {
        self.name = name
        self.parameters = parameters
        self.scope = scope
    }
}
