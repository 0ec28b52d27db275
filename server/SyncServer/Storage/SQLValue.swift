public import Contracts
public import Foundation
import SyncProtocol

/// A value as storage holds it: the five SQLite storage classes, which PostgreSQL maps too.
public enum SQLValue: Hashable, Sendable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)

    public var isNull: Bool { self == .null }
}

/// A row of a contract table: column name → value, including the sync metadata columns.
///
/// The values are kept by position, with the column names in a ``StoredRow/Layout`` that every
/// row read by the same query shares: reading a page of rows does not hash each column name of
/// each row into a dictionary of its own, and code that reads many rows of one layout (a pull
/// page written as JSON) finds each column's position once, not once per row.
public struct StoredRow: Hashable, Sendable {
    /// Column names by position, and each name's position.
    ///
    /// Immutable once shared: a row that gains a column copies its layout first unless it holds
    /// the only reference (a row being built column by column).
    package final class Layout: @unchecked Sendable {
        package private(set) var names: [String]
        private(set) var positions: [String: Int]

        package init(_ names: [String]) {
            self.names = names
            var positions: [String: Int] = [:]
            positions.reserveCapacity(names.count)
            for (position, name) in names.enumerated() { positions[name] = position }
            self.positions = positions
        }

        package func position(of column: String) -> Int? {
            positions[column]
        }

        fileprivate func append(_ column: String) -> Int {
            names.append(column)
            positions[column] = names.count - 1
            return names.count - 1
        }

        fileprivate func copy() -> Layout {
            Layout(names)
        }
    }

    package private(set) var layout: Layout
    private var values: [SQLValue]

    public init(_ columns: [String: SQLValue] = [:]) {
        let names = Array(columns.keys)
        layout = Layout(names)
        values = names.map { columns[$0]! }
    }

    /// A row read by a query whose columns `layout` names, `values` in the same order.
    package init(layout: Layout, values: [SQLValue]) {
        precondition(values.count == layout.names.count, "a stored row needs one value per column of its layout")
        self.layout = layout
        self.values = values
    }

    /// Every column with its value.
    public var columns: [String: SQLValue] {
        get {
            var columns: [String: SQLValue] = [:]
            columns.reserveCapacity(values.count)
            for (position, name) in layout.names.enumerated() { columns[name] = values[position] }
            return columns
        }
        set { self = StoredRow(newValue) }
    }

    /// The value of `column`; `.null` for a column the row does not have.
    public subscript(_ column: String) -> SQLValue {
        get { layout.position(of: column).map { values[$0] } ?? .null }
        set {
            if let position = layout.position(of: column) {
                values[position] = newValue
                return
            }
            if !isKnownUniquelyReferenced(&layout) { layout = layout.copy() }
            _ = layout.append(column)
            values.append(newValue)
        }
    }

    /// The names of the row's columns, in its layout's order.
    package var columnNames: [String] { layout.names }

    /// The value at `position` of the row's ``layout``.
    package func value(at position: Int) -> SQLValue {
        values[position]
    }

    public func integer(_ column: String) -> Int64? {
        if case .integer(let value) = self[column] { return value }
        return nil
    }

    public func text(_ column: String) -> String? {
        if case .text(let value) = self[column] { return value }
        return nil
    }

    public static func == (left: StoredRow, right: StoredRow) -> Bool {
        if left.layout === right.layout { return left.values == right.values }
        return left.columns == right.columns
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(columns)
    }
}

/// Why a wire value does not fit a field.
public struct FieldValueError: Error, Hashable, Sendable {
    public var field: String
    public var message: String
}

/// Converts between a field's wire form (JSON) and its column value, following the field's
/// contract type. The one place that knows how each type is stored; every storage uses it.
public enum RowCodec {
    /// The column value for a field's wire value; throws when the value does not fit the type.
    /// The longest id (a field of type `id` or `ref`, a mutation's id), in UTF-8 bytes: every
    /// device reading the row stores and indexes it.
    public static let maximumIDBytes = 256

    public static func columnValue(_ value: JSONValue, for field: FieldDescriptor) throws(FieldValueError) -> SQLValue {
        if case .null = value {
            guard field.isOptional else { throw FieldValueError(field: field.name, message: "'\(field.name)' is required") }
            return .null
        }
        return try columnValue(value, kind: field.kind, field: field)
    }

    private static func columnValue(_ value: JSONValue, kind: FieldKind, field: FieldDescriptor) throws(FieldValueError) -> SQLValue {
        func fail(_ expected: String) -> FieldValueError {
            FieldValueError(field: field.name, message: "'\(field.name)' must be \(expected)")
        }
        switch kind {
        case .id, .string:
            guard case .string(let text) = value else { throw fail("text") }
            if let limit = field.maxLength, text.count > limit {
                throw FieldValueError(field: field.name, message: "'\(field.name)' is longer than \(limit) characters")
            }
            if case .id = kind, text.utf8.count > maximumIDBytes {
                throw FieldValueError(field: field.name, message: "'\(field.name)' is longer than \(maximumIDBytes) bytes, the most an id may have")
            }
            return .text(text)
        case .int:
            guard case .int(let number) = value else { throw fail("a whole number") }
            return .integer(number)
        case .double:
            switch value {
            case .int(let number): return .real(Double(number))
            case .double(let number): return .real(number)
            default: throw fail("a number")
            }
        case .bool:
            guard case .bool(let flag) = value else { throw fail("true or false") }
            return .integer(flag ? 1 : 0)
        case .timestamp:
            guard case .string(let text) = value, let timestamp = Timestamp(iso8601: text) else {
                throw fail("an ISO-8601 timestamp such as 2026-01-31T08:00:00.000Z")
            }
            return .integer(timestamp.millisecondsSince1970)
        case .date:
            guard case .string(let text) = value, let date = CalendarDate(text) else { throw fail("a date such as 2026-01-31") }
            return .text(date.description)
        case .uuid:
            guard case .string(let text) = value, let uuid = UUID(uuidString: text) else { throw fail("a UUID") }
            return .text(uuid.uuidString.lowercased())
        case .json:
            return .text(CanonicalJSON.text(value))
        case .bytes:
            guard case .string(let text) = value, let data = Data(base64Encoded: text) else { throw fail("base64 text") }
            if let limit = field.maxLength, data.count > limit {
                throw FieldValueError(field: field.name, message: "'\(field.name)' is longer than \(limit) bytes")
            }
            return .blob(data)
        case .enumeration(let values, _):
            guard case .string(let text) = value else { throw fail("one of \(values.joined(separator: ", "))") }
            // The contract's fallback is for reading a value this version does not know; a write
            // of an unknown value is refused rather than stored as something it did not say.
            guard values.contains(text) else { throw fail("one of \(values.joined(separator: ", "))") }
            return .text(text)
        case .list(let element):
            guard case .array(let items) = value else { throw fail("a list") }
            if let limit = field.maxLength, items.count > limit {
                throw FieldValueError(field: field.name, message: "'\(field.name)' has more than \(limit) items")
            }
            var normalized: [JSONValue] = []
            for item in items {
                let stored = try columnValue(item, kind: element, field: field)
                normalized.append(wireValue(stored, kind: element))
            }
            return .text(CanonicalJSON.text(.array(normalized)))
        case .ref:
            return try columnValue(value, kind: columnKind(kind), field: field)
        }
    }

    /// The kind a field's column holds: its own, or for a `ref` the kind of its target's
    /// primary key (`id` when the target is unknown).
    static func columnKind(_ kind: FieldKind) -> FieldKind {
        guard case .ref(let target) = kind else { return kind }
        return ContractRegistry.entity(named: target).flatMap { entity in
            entity.fields.first { $0.name == entity.primaryKey }?.kind
        } ?? .id
    }

    /// The wire value of a stored column.
    public static func wireValue(_ value: SQLValue, for field: FieldDescriptor) -> JSONValue {
        if value.isNull { return .null }
        return wireValue(value, kind: field.kind)
    }

    static func wireValue(_ value: SQLValue, kind: FieldKind) -> JSONValue {
        switch (kind, value) {
        case (_, .null): return .null
        case (.int, .integer(let number)): return .int(number)
        case (.double, .real(let number)): return .double(number)
        case (.double, .integer(let number)): return .double(Double(number))
        case (.bool, .integer(let number)): return .bool(number != 0)
        case (.timestamp, .integer(let millis)): return .string(Timestamp(millisecondsSince1970: millis).iso8601)
        case (.json, .text(let text)), (.list, .text(let text)):
            return StoredJSON.parse(text) ?? .null
        case (.bytes, .blob(let data)): return .string(data.base64EncodedString())
        case (.ref, _):
            return wireValue(value, kind: columnKind(kind))
        case (_, .text(let text)): return .string(text)
        case (_, .integer(let number)): return .int(number)
        case (_, .real(let number)): return .double(number)
        case (_, .blob(let data)): return .string(data.base64EncodedString())
        }
    }
}
