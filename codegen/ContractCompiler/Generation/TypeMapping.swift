import ContractRuntime
import Foundation

/// How contract types become Swift types, Swift default expressions, SQLite and PostgreSQL columns and SQL literals.
/// The one place that knows these mappings; DTO, registry and migration generators all ask here.
struct TypeMapping {
    let set: ContractSet

    /// The Swift type of a field, without optionality (`[String]`, `Unit.LearnerLevel` is `LearnerLevel`).
    func swiftType(_ field: Field) -> String {
        swiftType(field.type.type, enumName: enumTypeName(field))
    }

    func swiftOptionalType(_ field: Field) -> String {
        swiftType(field) + (field.type.isOptional ? "?" : "")
    }

    private func swiftType(_ type: FieldType, enumName: String) -> String {
        switch type {
        case .id, .string: return "String"
        case .int: return "Int64"
        case .double: return "Double"
        case .bool: return "Bool"
        case .timestamp: return "Timestamp"
        case .date: return "CalendarDate"
        case .uuid: return "UUID"
        case .json: return "JSONValue"
        case .bytes: return "Data"
        case .file: return "FileReference"
        case .enumeration: return enumName
        case .list(let element): return "[" + swiftType(element, enumName: enumName) + "]"
        case .ref(let target): return refKeyType(target).map { swiftType($0, enumName: enumName) } ?? "String"
        }
    }

    /// The type of the referenced entity's primary key.
    func refKeyType(_ target: String) -> FieldType? {
        set.contract(named: target)?.primaryKey?.type.type
    }

    /// The nested enum type generated for an enum field: `learner_level` → `LearnerLevel`.
    func enumTypeName(_ field: Field) -> String { Names.upperCamelCase(field.name) }

    /// A Swift expression for the field's default value.
    func swiftDefault(_ field: Field) -> String? {
        guard let value = field.defaultValue else { return nil }
        return swiftExpression(value, type: field.type.type)
    }

    private func swiftExpression(_ value: DefaultValue, type: FieldType) -> String {
        if case .null = value { return "nil" }
        switch type {
        case .json:
            return jsonExpression(value)
        case .list(let element):
            guard case .array(let items) = value else { return "[]" }
            return "[" + items.map { swiftExpression($0, type: element) }.joined(separator: ", ") + "]"
        case .enumeration:
            guard case .string(let text) = value else { return "nil" }
            return "." + Self.enumCaseName(text)
        case .timestamp:
            guard case .int(let millis) = value else { return "nil" }
            return "Timestamp(millisecondsSince1970: \(millis))"
        case .date:
            guard case .string(let text) = value else { return "nil" }
            let parts = text.split(separator: "-").map { String(Int($0) ?? 0) }
            return "CalendarDate(year: \(parts[0]), month: \(parts[1]), day: \(parts[2]))"
        case .uuid:
            guard case .string(let text) = value else { return "nil" }
            return "UUID(uuidString: \(SwiftLiteral.string(text)))!"
        case .bytes:
            guard case .string(let text) = value else { return "nil" }
            return "Data(base64Encoded: \(SwiftLiteral.string(text)))!"
        case .ref(let target):
            return swiftExpression(value, type: refKeyType(target) ?? .string)
        default:
            return scalarExpression(value)
        }
    }

    private func scalarExpression(_ value: DefaultValue) -> String {
        switch value {
        case .null: return "nil"
        case .bool(let flag): return flag ? "true" : "false"
        case .int(let number): return String(number)
        case .double(let number): return SwiftLiteral.double(number)
        case .string(let text): return SwiftLiteral.string(text)
        case .array(let items): return "[" + items.map(scalarExpression).joined(separator: ", ") + "]"
        case .object: return "nil"
        }
    }

    /// A `JSONValue` expression.
    func jsonExpression(_ value: DefaultValue) -> String {
        switch value {
        case .null: return ".null"
        case .bool(let flag): return ".bool(\(flag))"
        case .int(let number): return ".int(\(number))"
        case .double(let number): return ".double(\(SwiftLiteral.double(number)))"
        case .string(let text): return ".string(\(SwiftLiteral.string(text)))"
        case .array(let items): return ".array([" + items.map(jsonExpression).joined(separator: ", ") + "])"
        case .object(let members):
            if members.isEmpty { return ".object([:])" }
            return ".object(["
                + members.keys.sorted().map { SwiftLiteral.string($0) + ": " + jsonExpression(members[$0]!) }
                .joined(separator: ", ") + "])"
        }
    }

    /// The default as it appears on the wire, as a `JSONValue` expression (for the registry).
    func wireDefaultExpression(_ field: Field) -> String? {
        guard let value = field.defaultValue else { return nil }
        return jsonExpression(wireValue(value, type: field.type.type))
    }

    private func wireValue(_ value: DefaultValue, type: FieldType) -> DefaultValue {
        switch (type, value) {
        case (.timestamp, .int(let millis)): return .string(Self.iso8601(millis))
        case (.list(let element), .array(let items)): return .array(items.map { wireValue($0, type: element) })
        default: return value
        }
    }

    // MARK: SQLite

    /// The SQLite column type of a field on the client (encrypted fields hold sealed bytes).
    func clientSQLType(_ field: Field) -> String {
        field.isEncrypted ? "BLOB" : sqlType(field.type.type)
    }

    func sqlType(_ type: FieldType, dialect: SQLDialect = .sqlite) -> String {
        switch dialect {
        case .sqlite:
            switch type {
            case .id, .string, .date, .uuid, .enumeration, .json, .list, .file: return "TEXT"
            case .int, .bool, .timestamp: return "INTEGER"
            case .double: return "REAL"
            case .bytes: return "BLOB"
            case .ref(let target): return refKeyType(target).map { sqlType($0) } ?? "TEXT"
            }
        case .postgres:
            switch type {
            case .id, .string, .enumeration: return "TEXT"
            case .int: return "BIGINT"
            case .double: return "DOUBLE PRECISION"
            case .bool: return "BOOLEAN"
            case .timestamp: return "TIMESTAMPTZ"
            case .date: return "DATE"
            case .uuid: return "UUID"
            case .json, .list: return "JSONB"
            // A file reference is canonical JSON text that the server writes and reads whole:
            // TEXT keeps it byte for byte, as SQLite does.
            case .file: return "TEXT"
            case .bytes: return "BYTEA"
            case .ref(let target): return refKeyType(target).map { sqlType($0, dialect: .postgres) } ?? "TEXT"
            }
        }
    }

    /// The SQL literal for the field's default, or `nil` when it has none (or it cannot be stored, as when encrypted).
    func sqlDefault(_ field: Field, encryptedColumn: Bool, dialect: SQLDialect = .sqlite) -> String? {
        guard let value = field.defaultValue, !encryptedColumn else { return nil }
        if case .null = value { return nil }
        return sqlLiteral(value, type: field.type.type, dialect: dialect)
    }

    private func sqlLiteral(_ value: DefaultValue, type: FieldType, dialect: SQLDialect) -> String {
        switch type {
        case .json, .list, .file:
            return Self.sqlString(CanonicalJSON.text(wireValue(value, type: type)))
        case .bytes:
            guard case .string(let base64) = value, let data = Data(base64Encoded: base64) else { return "NULL" }
            let hex = data.map { String(format: "%02X", $0) }.joined()
            return dialect == .postgres ? "'\\x" + hex + "'" : "X'" + hex + "'"
        case .ref(let target):
            return sqlLiteral(value, type: refKeyType(target) ?? .string, dialect: dialect)
        case .timestamp where dialect == .postgres:
            guard case .int(let millis) = value else { return "NULL" }
            return Self.sqlString(Self.iso8601(millis))
        default:
            switch value {
            case .null: return "NULL"
            case .bool(let flag) where dialect == .postgres: return flag ? "true" : "false"
            case .bool(let flag): return flag ? "1" : "0"
            case .int(let number): return String(number)
            case .double(let number): return "\(number)"
            case .string(let text): return Self.sqlString(text)
            case .array, .object: return Self.sqlString(CanonicalJSON.text(value))
            }
        }
    }

    static func sqlString(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
    }

    static func quoted(_ identifier: String) -> String { "\"" + identifier + "\"" }

    /// Swift enum case name for an enum value: `in_progress` → `inProgress`, keywords in backticks.
    static func enumCaseName(_ value: String) -> String {
        let name = Names.camelCase(value)
        return Names.swiftKeywords.contains(name) ? "`\(name)`" : name
    }

    static func iso8601(_ millis: Int64) -> String {
        Timestamp(millisecondsSince1970: millis).iso8601
    }
}
