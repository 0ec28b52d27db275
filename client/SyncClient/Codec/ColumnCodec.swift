import ContractRuntime
import ContractRuntimeGRDB
import Foundation
import GRDB

/// The device's binding of the contract runtime's `FieldCodec` of the store's contracts to
/// GRDB: the same rules as the server's, so a value the device stores is one the server
/// accepts. Encrypted fields are sealed on top of this by ``RowCodec``; this type never sees
/// them sealed.
struct ColumnCodec: Sendable {
    typealias Mode = FieldCodec.Mode

    /// The codec of the store's contracts.
    let codec: FieldCodec

    /// The column value of a field's wire value.
    func columnValue(_ value: JSONValue, for field: FieldDescriptor, mode: Mode) throws(FieldValueError) -> DatabaseValue {
        try codec.columnValue(value, for: field, mode: mode).databaseValue
    }

    /// The wire value of a stored column.
    func wireValue(_ value: DatabaseValue, for field: FieldDescriptor) -> JSONValue {
        codec.wireValue(ColumnValue(value), for: field)
    }

    func wireValue(_ value: DatabaseValue, kind: FieldKind) -> JSONValue {
        codec.wireValue(ColumnValue(value), kind: kind)
    }

    /// Parses any JSON text, fragments included.
    static func parseJSON(_ data: Data) -> JSONValue? {
        JSONParser.parse(data)
    }

    /// The text form of a primary key, the same as the generated `contractPrimaryKey`.
    func keyText(_ value: JSONValue, kind: FieldKind) -> String? {
        codec.keyText(value, kind: kind)
    }
}
