/// The type of a contract field, as written after `type:` (without the trailing `?`).
public indirect enum FieldType: Hashable, Sendable {
    case id
    case string
    case int
    case double
    case bool
    case timestamp
    case date
    case uuid
    case json
    case bytes
    /// `enum` with its `values` in declaration order and an optional value that unknown values decode to.
    case enumeration(values: [String], fallback: String?)
    /// `list<T>` of a scalar type.
    case list(FieldType)
    /// `ref<Entity>`: the primary key of another entity.
    case ref(String)

    /// The scalar type names the contract language knows, in the order the reference lists them.
    public static let scalarNames = [
        "id", "string", "int", "double", "bool", "timestamp", "date", "uuid", "json", "bytes", "enum",
    ]

    /// The spelling used in contracts and diagnostics.
    public var spelling: String {
        switch self {
        case .id: return "id"
        case .string: return "string"
        case .int: return "int"
        case .double: return "double"
        case .bool: return "bool"
        case .timestamp: return "timestamp"
        case .date: return "date"
        case .uuid: return "uuid"
        case .json: return "json"
        case .bytes: return "bytes"
        case .enumeration: return "enum"
        case .list(let element): return "list<\(element.spelling)>"
        case .ref(let target): return "ref<\(target)>"
        }
    }

    /// Whether a field of this type can carry `max_length`.
    public var acceptsMaxLength: Bool {
        switch self {
        case .id, .string, .bytes, .list: return true
        default: return false
        }
    }

    /// Whether values of this type can be compared and ordered in an index.
    public var isIndexable: Bool {
        switch self {
        case .json, .list, .bytes: return false
        default: return true
        }
    }
}

/// A field's type with its optionality: `string?` is `.string` and optional.
public struct TypeReference: Hashable, Sendable {
    public var type: FieldType
    public var isOptional: Bool

    public init(_ type: FieldType, optional: Bool = false) {
        self.type = type
        self.isOptional = optional
    }

    public var spelling: String { type.spelling + (isOptional ? "?" : "") }
}
