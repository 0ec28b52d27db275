/// A relation between two entities.
public struct RelationDescriptor: Hashable, Sendable {
    /// Which side of a one-to-many relation an entity is on.
    public enum Kind: String, Hashable, Sendable, CaseIterable {
        /// The target's `foreign_key` field holds this entity's primary key.
        case hasMany = "has_many"
        /// This entity's `foreign_key` field holds the target's primary key.
        case belongsTo = "belongs_to"
    }

    /// The relation's name.
    public var name: String
    /// Whether the entity has many of the target or belongs to one.
    public var kind: Kind
    /// The entity the relation points to.
    public var target: String
    /// The field holding the key that joins the two.
    public var foreignKey: String

    /// A relation from its parts, as generated code writes it.
    public init(name: String, kind: Kind, target: String, foreignKey: String) {
        self.name = name
        self.kind = kind
        self.target = target
        self.foreignKey = foreignKey
    }
}
