public import ContractRuntime

/// A row of a contract table: column name → value, including the sync metadata columns.
///
/// The values are kept by position, with the column names in a layout that every
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
    private var values: [ColumnValue]
    /// The whole row's ``storedBytes`` as the storage measured it, for a row read with only
    /// some of its columns; `nil` to count the values held.
    private var measuredBytes: Int?

    /// A row holding the given columns.
    public init(_ columns: [String: ColumnValue] = [:]) {
        let names = Array(columns.keys)
        layout = Layout(names)
        values = names.map { columns[$0]! }
    }

    /// A row read by a query whose columns `layout` names, `values` in the same order.
    package init(layout: Layout, values: [ColumnValue], measuredBytes: Int? = nil) {
        precondition(values.count == layout.names.count, "a stored row needs one value per column of its layout")
        self.layout = layout
        self.values = values
        self.measuredBytes = measuredBytes
    }

    /// Every column with its value.
    public var columns: [String: ColumnValue] {
        get {
            var columns: [String: ColumnValue] = [:]
            columns.reserveCapacity(values.count)
            for (position, name) in layout.names.enumerated() { columns[name] = values[position] }
            return columns
        }
        set { self = StoredRow(newValue) }
    }

    /// Whether the row is a tombstone (`_deleted`).
    public var isDeleted: Bool { (integer("_deleted") ?? 0) != 0 }

    /// The value of `column`; `.null` for a column the row does not have.
    public subscript(_ column: String) -> ColumnValue {
        get { layout.position(of: column).map { values[$0] } ?? .null }
        set {
            measuredBytes = nil
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
    package func value(at position: Int) -> ColumnValue {
        values[position]
    }

    /// The value of `column` when it is an integer.
    public func integer(_ column: String) -> Int64? {
        if case .integer(let value) = self[column] { return value }
        return nil
    }

    /// The value of `column` when it is text.
    public func text(_ column: String) -> String? {
        if case .text(let value) = self[column] { return value }
        return nil
    }

    /// Whether two rows hold the same columns with the same values.
    public static func == (left: StoredRow, right: StoredRow) -> Bool {
        if left.layout === right.layout { return left.values == right.values }
        return left.columns == right.columns
    }

    /// Hashes the row's columns and values.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(columns)
    }
}

extension StoredRow {
    /// The row's size as a pull page budgets it (`RowSize`, as a contract's `max_bytes` counts
    /// it): close to what the row weighs in memory and on the wire, the same on both storages.
    package var storedBytes: Int {
        measuredBytes ?? RowSize.storedBytes(of: values)
    }

    /// The first of `rows` (in page order) as a page takes them: at most `limit`, and once they
    /// hold more than `byteBudget` bytes (``storedBytes``) no more, so a row larger than the
    /// budget comes alone and the rows before a large one fit the budget but for it.
    static func withinBudget(
        _ rows: some Sequence<(table: ContractTable, row: StoredRow)>, limit: Int, byteBudget: Int
    ) -> [(table: ContractTable, row: StoredRow)] {
        var taken: [(table: ContractTable, row: StoredRow)] = []
        var bytes = 0
        for entry in rows {
            guard taken.count < limit, bytes <= byteBudget else { break }
            taken.append(entry)
            bytes += entry.row.storedBytes
        }
        return taken
    }
}

/// A contract row as a write transaction keeps track of it (rows read ahead, rows kept back
/// until the flush): its table, tenant and primary key.
struct StoredRowKey: Hashable {
    var table: ContractTable
    var tenant: String
    var id: String

    // A table's name decides its primary key: hashing that too would only cost.
    func hash(into hasher: inout Hasher) {
        hasher.combine(table.name)
        hasher.combine(tenant)
        hasher.combine(id)
    }
}
