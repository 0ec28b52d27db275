public import ContractRuntime
public import GRDB

/// A column value is what GRDB binds and reads as it is: the device's store and the server's
/// SQLite storage pass ``ColumnValue``s to SQLite without a conversion of their own.
extension ColumnValue: DatabaseValueConvertible {
    public var databaseValue: DatabaseValue {
        switch self {
        case .null: return .null
        case .integer(let number): return number.databaseValue
        case .real(let number): return number.databaseValue
        case .text(let text): return text.databaseValue
        case .blob(let data): return data.databaseValue
        }
    }

    public static func fromDatabaseValue(_ dbValue: DatabaseValue) -> ColumnValue? {
        ColumnValue(dbValue)
    }

    /// The column value of a `DatabaseValue`.
    public init(_ value: DatabaseValue) {
        switch value.storage {
        case .null: self = .null
        case .int64(let number): self = .integer(number)
        case .double(let number): self = .real(number)
        case .string(let text): self = .text(text)
        case .blob(let data): self = .blob(data)
        }
    }
}
