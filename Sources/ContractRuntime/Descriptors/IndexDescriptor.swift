/// An index of an entity's table.
public struct IndexDescriptor: Hashable, Sendable {
    public var name: String
    public var fields: [String]
    public var isUnique: Bool

    public init(name: String, fields: [String], isUnique: Bool) {
        self.name = name
        self.fields = fields
        self.isUnique = isUnique
    }
}
