public import ContractRuntime

/// The type of a contract field, as written after `type:`: the runtime's `FieldKind`, with the
/// rules only the compiler applies.
public typealias FieldType = FieldKind

extension FieldKind {
    /// Whether a field of this type can carry `max_length`.
    public var acceptsMaxLength: Bool {
        switch self {
        case .id, .string, .bytes, .list: return true
        default: return false
        }
    }

    /// Whether values of this type can be compared and ordered in an index. A file reference
    /// is a JSON object: rows are never looked up by one.
    public var isIndexable: Bool {
        switch self {
        case .json, .list, .bytes, .file: return false
        default: return true
        }
    }
}

/// A field's type with its optionality: `string?` is `.string` and optional.
public struct TypeReference: Hashable, Sendable {
    /// The type without its optionality.
    public var type: FieldType
    /// Whether the type was written with a trailing `?`.
    public var isOptional: Bool

    /// A reference to a type, required unless `optional` is `true`.
    public init(_ type: FieldType, optional: Bool = false) {
        self.type = type
        self.isOptional = optional
    }

    /// The type as a contract writes it, `?` included.
    public var spelling: String { type.spelling + (isOptional ? "?" : "") }
}
