import ContractRuntime
import ContractRuntimeGRDB
import Contracts
import Foundation
import GRDB

/// The device's binding of the contract runtime's ``FieldCodec`` to this project's contracts
/// and to GRDB: the same rules as the server's, so a value the device stores is one the server
/// accepts. Encrypted fields are sealed on top of this by ``RowCodec``; this type never sees
/// them sealed.
enum ColumnCodec {
    typealias Mode = FieldCodec.Mode

    /// The codec for every contract of the generated registry.
    static let codec = FieldCodec(ContractRegistry.self)

    /// The column value of a field's wire value.
    static func columnValue(_ value: JSONValue, for field: FieldDescriptor, mode: Mode) throws(FieldValueError) -> DatabaseValue {
        try codec.columnValue(value, for: field, mode: mode).databaseValue
    }

    /// The wire value of a stored column.
    static func wireValue(_ value: DatabaseValue, for field: FieldDescriptor) -> JSONValue {
        codec.wireValue(ColumnValue(value), for: field)
    }

    static func wireValue(_ value: DatabaseValue, kind: FieldKind) -> JSONValue {
        codec.wireValue(ColumnValue(value), kind: kind)
    }

    /// Parses any JSON text, fragments included.
    static func parseJSON(_ data: Data) -> JSONValue? {
        JSONParser.parse(data)
    }

    /// The text form of a primary key, the same as the generated `contractPrimaryKey`.
    static func keyText(_ value: JSONValue, kind: FieldKind) -> String? {
        codec.keyText(value, kind: kind)
    }
}
