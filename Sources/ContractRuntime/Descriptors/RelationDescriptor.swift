/// A relation between two entities.
public struct RelationDescriptor: Hashable, Sendable {
    public enum Kind: String, Hashable, Sendable, CaseIterable {
        /// The target's `foreign_key` field holds this entity's primary key.
        case hasMany = "has_many"
        /// This entity's `foreign_key` field holds the target's primary key.
        case belongsTo = "belongs_to"
    }

    public var name: String
    public var kind: Kind
    public var target: String
    public var foreignKey: String

    public init(name: String, kind: Kind, target: String, foreignKey: String) {
        self.name = name
        self.kind = kind
        self.target = target
        self.foreignKey = foreignKey
    }
}
