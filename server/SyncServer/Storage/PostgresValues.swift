import ContractRuntime
import Foundation
import PostgresNIO
import SyncProtocol

/// How ``ColumnValue`` (SQLite's five storage classes, which the sync logic and `FieldCodec` speak)
/// maps onto PostgreSQL's column types, in both directions. The column's declared type decides:
/// the generated PostgreSQL migrations use real types (`BOOLEAN`, `TIMESTAMPTZ`, `DATE`, `UUID`,
/// `JSONB`, `BYTEA`), and the storage reads each table's column types from the catalog once, at
/// open, so the logic above never sees a difference between the two storages.
///
/// | column type | `ColumnValue` |
/// | --- | --- |
/// | `BIGINT`, `INTEGER`, `SMALLINT` | `.integer` |
/// | `DOUBLE PRECISION`, `REAL` | `.real` |
/// | `BOOLEAN` | `.integer(0 or 1)` |
/// | `TIMESTAMPTZ` | `.integer`, milliseconds since 1970 |
/// | `DATE` | `.text`, `2026-01-31` |
/// | `UUID` | `.text`, lowercase |
/// | `JSONB`, `JSON` | `.text`, canonical JSON (PostgreSQL re-spaces and reorders `jsonb`) |
/// | `BYTEA` | `.blob` |
/// | `TEXT` | `.text` |
enum PostgresValues {
    /// Microseconds between 1970-01-01 and PostgreSQL's epoch, 2000-01-01.
    private static let epochOffsetMilliseconds: Int64 = 946_684_800_000
    private static let epochOffsetDays = 10_957

    /// Appends `value` as a parameter for a column of type `type`.
    static func bind(_ value: ColumnValue, as type: PostgresDataType, into bindings: inout PostgresBindings) throws(PostgresStorageError) {
        guard let parameter = try parameter(value, as: type) else {
            bindings.appendNull()
            return
        }
        bindings.append(parameter)
    }

    private static func parameter(_ value: ColumnValue, as type: PostgresDataType) throws(PostgresStorageError) -> Parameter? {
        func mismatch() -> PostgresStorageError {
            .unsupportedValue("a \(value.kindName) value cannot be stored in a column of type \(type)")
        }
        switch (type, value) {
        case (_, .null): return nil
        case (.int8, .integer(let number)), (.int4, .integer(let number)), (.int2, .integer(let number)): return .int8(number)
        case (.float8, .real(let number)), (.float4, .real(let number)): return .float8(number)
        case (.float8, .integer(let number)), (.float4, .integer(let number)): return .float8(Double(number))
        case (.bool, .integer(let number)): return .bool(number != 0)
        case (.timestamptz, .integer(let millis)): return .timestamptz(microseconds: (millis - epochOffsetMilliseconds) * 1000)
        case (.date, .text(let text)), (.uuid, .text(let text)), (.jsonb, .text(let text)), (.json, .text(let text)):
            return .typedText(type, text)
        case (.bytea, .blob(let data)): return .bytea(data)
        case (.text, .text(let text)), (.varchar, .text(let text)): return .text(text)
        case (.text, .integer(let number)): return .text(String(number))
        default: throw mismatch()
        }
    }

    /// A cell of a result row, as the logic reads it.
    static func value(of cell: PostgresCell) throws(PostgresStorageError) -> ColumnValue {
        guard var bytes = cell.bytes else { return .null }
        guard cell.format == .binary else {
            return .text(bytes.readString(length: bytes.readableBytes) ?? "")
        }
        func unreadable() -> PostgresStorageError {
            .unsupportedValue("column '\(cell.columnName)' of type \(cell.dataType) holds a value this server cannot read")
        }
        switch cell.dataType {
        case .int8:
            guard let number = bytes.readInteger(as: Int64.self) else { throw unreadable() }
            return .integer(number)
        case .int4:
            guard let number = bytes.readInteger(as: Int32.self) else { throw unreadable() }
            return .integer(Int64(number))
        case .int2:
            guard let number = bytes.readInteger(as: Int16.self) else { throw unreadable() }
            return .integer(Int64(number))
        case .float8:
            guard let bits = bytes.readInteger(as: UInt64.self) else { throw unreadable() }
            return .real(Double(bitPattern: bits))
        case .float4:
            guard let bits = bytes.readInteger(as: UInt32.self) else { throw unreadable() }
            return .real(Double(Float(bitPattern: bits)))
        case .bool:
            guard let flag = bytes.readInteger(as: UInt8.self) else { throw unreadable() }
            return .integer(flag == 0 ? 0 : 1)
        case .timestamptz, .timestamp:
            guard let micros = bytes.readInteger(as: Int64.self) else { throw unreadable() }
            // Floor division: instants before 2000 round down, as they were written.
            let millis = micros >= 0 ? micros / 1000 : (micros - 999) / 1000
            return .integer(millis + epochOffsetMilliseconds)
        case .date:
            guard let days = bytes.readInteger(as: Int32.self) else { throw unreadable() }
            return .text(CalendarDate(daysSince1970: Int(days) + epochOffsetDays).description)
        case .uuid:
            guard bytes.readableBytes == 16 else { throw unreadable() }
            return .text(lowercaseUUID(bytes.readableBytesView))
        case .jsonb:
            guard bytes.readInteger(as: UInt8.self) == 1, let text = bytes.readString(length: bytes.readableBytes) else { throw unreadable() }
            return .text(canonical(text))
        case .json:
            return .text(canonical(bytes.readString(length: bytes.readableBytes) ?? "null"))
        case .bytea:
            return .blob(Data(bytes.readableBytesView))
        case .text, .varchar, .name, .bpchar:
            return .text(bytes.readString(length: bytes.readableBytes) ?? "")
        default:
            throw .unsupportedValue("column '\(cell.columnName)' has type \(cell.dataType), which the storage does not map")
        }
    }

    /// JSON as the SQLite storage keeps it, so values compare equal whichever storage read them.
    /// `8-4-4-4-12` lowercase hex digits of a UUID's 16 bytes, written at once (Foundation's
    /// `uuidString` and `lowercased()` cost two strings more, once per row of a pull).
    private static func lowercaseUUID(_ bytes: ByteBufferView) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(unsafeUninitializedCapacity: 36) { text in
            var position = 0
            for (index, byte) in bytes.enumerated() {
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    text[position] = UInt8(ascii: "-")
                    position += 1
                }
                text[position] = digits[Int(byte >> 4)]
                text[position + 1] = digits[Int(byte & 0x0F)]
                position += 2
            }
            return position
        }
    }

    private static func canonical(_ text: String) -> String {
        JSONParser.parse(text).map(CanonicalJSON.text) ?? text
    }

    /// One bound parameter, in PostgreSQL's binary format except where the text form is the
    /// natural input (`DATE`, `UUID`, `JSONB`).
    enum Parameter: PostgresDynamicTypeEncodable {
        case int8(Int64)
        case float8(Double)
        case bool(Bool)
        case text(String)
        case bytea(Data)
        case timestamptz(microseconds: Int64)
        case typedText(PostgresDataType, String)

        var psqlType: PostgresDataType {
            switch self {
            case .int8: return .int8
            case .float8: return .float8
            case .bool: return .bool
            case .text: return .text
            case .bytea: return .bytea
            case .timestamptz: return .timestamptz
            case .typedText(let type, _): return type
            }
        }

        var psqlFormat: PostgresFormat {
            if case .typedText = self { return .text }
            return .binary
        }

        func encode<JSONEncoder: PostgresJSONEncoder>(into buffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
            switch self {
            case .int8(let number): buffer.writeInteger(number)
            case .float8(let number): buffer.writeInteger(number.bitPattern)
            case .bool(let flag): buffer.writeInteger(UInt8(flag ? 1 : 0))
            case .text(let text), .typedText(_, let text): buffer.writeString(text)
            case .bytea(let data): buffer.writeBytes(data)
            case .timestamptz(let micros): buffer.writeInteger(micros)
            }
        }
    }
}

/// Why the PostgreSQL storage could not do what was asked. Messages name tables and columns,
/// never values (they may be personal data).
enum PostgresStorageError: Error, CustomStringConvertible {
    /// A value of a kind the column's type cannot hold, or a column type the storage does not map.
    case unsupportedValue(String)
    /// The table is not in the database (its migration has not run).
    case unknownTable(String)
    /// A concurrent transaction stored the same id in another scope; the attempt is rolled back and run again.
    case rowInAnotherScope(table: String)
    /// A released migration was changed since the database applied it.
    case migrationChanged(String)
    /// The transaction kept failing on conflicts after every retry.
    case tooManyConflicts(attempts: Int)
    /// A statement answered rows of another shape than it asks for.
    case unexpectedAnswer(String)
    /// The database cannot be reached now (no connection within the configured wait).
    case unavailable(String)

    var description: String {
        switch self {
        case .unsupportedValue(let message): return message
        case .unknownTable(let table): return "the table '\(table)' does not exist; the database's migrations have not run"
        case .rowInAnotherScope(let table): return "a row of '\(table)' was stored in another scope meanwhile"
        case .migrationChanged(let identifier):
            return "migration '\(identifier)' was applied to this database with other statements; released migrations never change"
        case .tooManyConflicts(let attempts): return "the transaction met a conflict on each of \(attempts) attempts"
        case .unexpectedAnswer(let table): return "a statement on '\(table)' answered rows of an unexpected shape"
        case .unavailable(let reason): return "the database cannot be reached: \(reason)"
        }
    }
}
