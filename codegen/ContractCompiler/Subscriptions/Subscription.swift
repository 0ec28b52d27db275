public import ContractRuntime

/// A subscription of the manifest (`subscriptions:` in `contracts.yaml`): the rows of one entity
/// that meet a filter, with the rows its includes reach, that a device syncs instead of a whole
/// scope. Compiled into the runtime's `SubscriptionDescriptor` and a typed constructor.
public struct Subscription: Hashable, Sendable {
    /// A typed parameter: a scalar for an equality, `list<T>` for `in`.
    public struct Parameter: Hashable, Sendable {
        /// The parameter's name, as the filter and the generated constructor use it.
        public var name: String
        /// The parameter's type: the compared field's, or a list of it.
        public var type: FieldType
        /// For a list, the most values a device may pass (`max_count`).
        public var maxCount: Int
        /// Where the parameter is written.
        public var location: SourceLocation
    }

    /// What a condition compares its field with.
    public enum Operand: Hashable, Sendable {
        case parameter(String)
        case token(String)
        case values([String])
    }

    /// `field` equals the operand (or is one of its values).
    public struct Condition: Hashable, Sendable {
        /// The entity field compared.
        public var field: String
        /// What the field is compared with.
        public var operand: Operand
        /// Written as `{ in: … }`.
        public var isIn: Bool
        /// The field's key in `where`.
        public var location: SourceLocation
        /// What it is compared with (`"{id}"`, or the value of `in`).
        public var valueLocation: SourceLocation
    }

    /// A relation of the entity above, with what it takes along in turn.
    public struct Include: Hashable, Sendable {
        /// The relation's name on the entity above.
        public var relation: String
        /// The relations of the related entity that come along in turn.
        public var includes: [Include]
        /// Where the include is written.
        public var location: SourceLocation
    }

    /// The subscription's name, unique in the manifest.
    public var name: String
    /// The subscription's documentation.
    public var doc: String
    /// The entity whose rows it selects.
    public var entity: String
    /// Where the entity is written.
    public var entityLocation: SourceLocation
    /// The parameters a device passes when subscribing, in the order written.
    public var parameters: [Parameter]
    /// Parameters declared with a type the decoder refused (reported already): conditions may
    /// name them without being reported again.
    public var refusedParameters: Set<String> = []
    /// The conditions a row must meet, all of them.
    public var conditions: [Condition]
    /// Where the `where:` block is written.
    public var whereLocation: SourceLocation
    /// The related rows synced along with each selected row.
    public var includes: [Include]
    /// How long a device keeps the rows after it unsubscribes, in seconds (`ttl`).
    public var ttlSeconds: Int
    /// How early its rows sync against other data.
    public var priority: SyncPriority
    /// Where the subscription's name is written.
    public var location: SourceLocation

    /// The claims of the subscriber's token a condition may name (`"{token.user_id}"`).
    public static let tokenClaims = ["user_id", "device_id"]
    /// The most values a list parameter may take.
    public static let maximumListCount = 1_000
    /// The longest TTL: a year.
    public static let maximumTTLSeconds = 365 * 86_400

    /// The subscription's shape as compatibility sees it (parameters, filter, includes), in a
    /// canonical one-line form: the lock records it, and a changed shape is a changed contract.
    /// Order does not count (parameters travel by name, conditions all hold), so each part is
    /// sorted: reordering the YAML changes nothing.
    public var shape: String {
        let parameters = self.parameters.sorted { $0.name < $1.name }.map {
            "\($0.name): \($0.type.spelling)" + ($0.maxCount > 1 ? " ≤\($0.maxCount)" : "")
        }
        let conditions = self.conditions.sorted { $0.field < $1.field }.map { condition -> String in
            let operand: String
            switch condition.operand {
            case .parameter(let name): operand = "{\(name)}"
            case .token(let claim): operand = "{token.\(claim)}"
            case .values(let values): operand = "[" + values.sorted().joined(separator: ", ") + "]"
            }
            return "\(condition.field) \(condition.isIn ? "in" : "=") \(operand)"
        }
        func includes(_ list: [Include]) -> String {
            list.sorted { $0.relation < $1.relation }
                .map { $0.includes.isEmpty ? $0.relation : "\($0.relation)(\(includes($0.includes)))" }
                .joined(separator: ", ")
        }
        return "\(entity)(\(parameters.joined(separator: ", "))) where \(conditions.joined(separator: " and "))"
            + (self.includes.isEmpty ? "" : " include \(includes(self.includes))")
    }
}
