/// A YAML node as the contract compiler sees it: scalars, sequences and mappings in document
/// order, each carrying the position where it starts.
public struct YAMLNode: Hashable, Sendable {
    /// How a scalar was written. A quoted `"true"` is a string; a plain `true` may be a boolean.
    public enum ScalarStyle: Hashable, Sendable {
        case plain
        case quoted
        case block
    }

    /// One `key: value` pair of a mapping, in the order of the document.
    public struct Entry: Hashable, Sendable {
        /// The key node, a scalar in a contract.
        public var key: YAMLNode
        /// The value node.
        public var value: YAMLNode

        /// An entry from its key and value nodes.
        public init(key: YAMLNode, value: YAMLNode) {
            self.key = key
            self.value = value
        }
    }

    /// A node's content: a scalar with its style, a sequence or a mapping.
    public indirect enum Content: Hashable, Sendable {
        case scalar(String, ScalarStyle)
        case sequence([YAMLNode])
        case mapping([Entry])
    }

    /// What the node holds.
    public var content: Content
    /// Where the node starts in its file.
    public var location: SourceLocation

    /// A node with its content and starting position.
    public init(_ content: Content, at location: SourceLocation) {
        self.content = content
        self.location = location
    }

    /// The scalar text, or `nil` for a sequence or mapping.
    public var scalar: String? {
        if case .scalar(let text, _) = content { return text }
        return nil
    }

    /// `true` for a plain `null`, `~` or empty scalar.
    public var isNull: Bool {
        if case .scalar(let text, .plain) = content {
            return text.isEmpty || text == "~" || text == "null" || text == "Null" || text == "NULL"
        }
        return false
    }

    /// The items, or `nil` for a scalar or mapping.
    public var sequence: [YAMLNode]? {
        if case .sequence(let items) = content { return items }
        return nil
    }

    /// The entries in document order, or `nil` for a scalar or sequence.
    public var mapping: [Entry]? {
        if case .mapping(let entries) = content { return entries }
        return nil
    }

    /// A word for the node's kind, for diagnostics ("expected a mapping, found a sequence").
    public var kindDescription: String {
        switch content {
        case .scalar: return isNull ? "an empty value" : "a scalar"
        case .sequence: return "a sequence"
        case .mapping: return "a mapping"
        }
    }
}
