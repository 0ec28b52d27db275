public import Foundation

/// A value as a database column holds it: SQLite's five storage classes, which the PostgreSQL
/// storage maps onto its own column types. Every storage on both sides speaks this; the
/// `FieldCodec` is the one place that turns a field's wire value into one and back.
public enum ColumnValue: Hashable, Sendable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)

    /// Whether the value is SQL `NULL`.
    public var isNull: Bool { self == .null }

    /// The storage class's name, for messages.
    public var kindName: String {
        switch self {
        case .null: return "null"
        case .integer: return "integer"
        case .real: return "real"
        case .text: return "text"
        case .blob: return "blob"
        }
    }
}
