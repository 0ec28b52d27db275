/// A field as a device at some schema version knows it.
public struct KnownField: Hashable, Sendable {
    /// The key that version uses on the wire (the old name before a rename).
    public var wireName: String
    /// The field's name in the current version, or `nil` when it no longer exists.
    public var currentName: String?

    /// A wire name with the current name it maps to, if any.
    public init(wireName: String, currentName: String?) {
        self.wireName = wireName
        self.currentName = currentName
    }
}
