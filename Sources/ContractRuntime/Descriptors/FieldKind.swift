/// The type of a field, as the contract declares it.
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
    case enumeration(values: [String], fallback: String?)
    case list(FieldKind)
    case ref(String)
}
