/// An index of an entity's table.
public struct IndexDescriptor: Hashable, Sendable {
    /// The index's name in SQL.
    public var name: String
    /// The indexed columns, in order.
    public var fields: [String]
    /// Whether two rows may not share the indexed values.
    public var isUnique: Bool

    /// An index from its name, columns and uniqueness.
    public init(name: String, fields: [String], isUnique: Bool) {
        self.name = name
        self.fields = fields
        self.isUnique = isUnique
    }
}
