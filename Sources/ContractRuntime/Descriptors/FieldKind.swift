/// The type of a field, as the contract declares it after `type:` (without the trailing `?`).
/// The contract compiler reads contracts into it and generated code describes fields with it.
public indirect enum FieldKind: Hashable, Sendable {
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
    /// A file the row names by its content (``FileReference``); the bytes travel apart.
    case file
    /// `enum` with its `values` in declaration order and an optional value that unknown values decode to.
    case enumeration(values: [String], fallback: String?)
    /// `list<T>` of a scalar type.
    case list(FieldKind)
    /// `ref<Entity>`: the primary key of another entity.
    case ref(String)

    /// The scalar type names the contract language knows, in the order the reference lists them.
    public static let scalarNames = [
        "id", "string", "int", "double", "bool", "timestamp", "date", "uuid", "json", "bytes", "file", "enum",
    ]

    /// The spelling used in contracts and diagnostics (`list<string>`, `ref<Unit>`, `enum`).
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
        case .file: return "file"
        case .enumeration: return "enum"
        case .list(let element): return "list<\(element.spelling)>"
        case .ref(let target): return "ref<\(target)>"
        }
    }
}

extension FieldKind {
    /// Whether a field of this type has a byte limit (`max_bytes`): text, JSON, bytes and
    /// lists, whose values have no size of their own, and files, whose limit is the size of the
    /// file the reference names. Ids are bounded by `FieldCodec/maximumIDBytes`; the other types
    /// have a fixed size.
    public var acceptsMaxBytes: Bool {
        switch self {
        case .string, .json, .bytes, .list, .file: return true
        default: return false
        }
    }
}
