package import ContractRuntime

/// The server's use of the contract runtime's `FieldCodec`: values pushed to the server are
/// checked as writes (every rule of the contract), and stored columns become wire values for
/// pull pages, reducers and conflict answers.
package enum RowCodec {
    /// A codec of no contract in particular: a `ref` field's column kind is the one the
    /// compiler resolved into its descriptor (``FieldDescriptor/referencedKey``).
    static let codec = FieldCodec(entities: [])

    /// The longest id, in UTF-8 bytes (`FieldCodec.maximumIDBytes`).
    package static let maximumIDBytes = FieldCodec.maximumIDBytes

    /// The column value for a field's wire value, checked as a write; throws when the value
    /// does not fit the field.
    package static func columnValue(_ value: JSONValue, for field: FieldDescriptor) throws(FieldValueError) -> ColumnValue {
        try codec.columnValue(value, for: field, mode: .write)
    }

    /// The wire value of a stored column.
    package static func wireValue(_ value: ColumnValue, for field: FieldDescriptor) -> JSONValue {
        codec.wireValue(value, for: field)
    }

    static func wireValue(_ value: ColumnValue, kind: FieldKind) -> JSONValue {
        codec.wireValue(value, kind: kind)
    }

    /// ``wireValue(_:kind:)`` written into `json` without building it (`FieldCodec/writeWire(_:kind:into:)`).
    static func writeWire(_ value: ColumnValue, kind: FieldKind, into json: inout JSONWriter) {
        codec.writeWire(value, kind: kind, into: &json)
    }

    /// The kind a field's column holds (a `ref`'s target's primary key's).
    static func columnKind(of field: FieldDescriptor) -> FieldKind {
        codec.columnKind(of: field)
    }
}
