public import Foundation

/// The size of a row as stored, and the limits on it (a contract's `max_bytes`,
/// ``EntityDescriptor/maxBytes``, ``EventDescriptor/maxBytes``). Server and devices measure a
/// row the same way, from the column values `FieldCodec` made of it:
///
/// ```swift
/// let columns = try fields.map { try codec.columnValue(payload[$0.name] ?? .null, for: $0) }
/// if RowSize.storedBytes(of: columns) > entity.maxBytes { /* refuse: row_too_large */ }
/// ```
package enum RowSize {
    /// The row limit of a contract that writes no `max_bytes` and has no field allowed more
    /// than half of it: 1 MB (1,000,000 bytes).
    package static let defaultMaximumBytes = 1_000_000

    /// The most a contract's `max_bytes` (and a field's) may be: 4 MB (4,000,000 bytes). A row
    /// travels whole in one push, whose request body the server takes up to 5 MiB (5,242,880
    /// bytes); the rest is for the push's envelope and JSON's quoting. `bytes` travel as base64,
    /// a third larger than stored, so a row of mostly `bytes` fits a push up to about 3.9 MB.
    package static let ceilingBytes = 4_000_000

    /// The row limit of a contract that writes no `max_bytes`, given its largest field limit
    /// (``FieldDescriptor/maxBytes``): twice that field's limit (room for it and as much again
    /// for the others), at least ``defaultMaximumBytes`` and at most ``ceilingBytes``.
    package static func defaultMaximumBytes(largestFieldBytes: Int) -> Int {
        let twice = largestFieldBytes > ceilingBytes ? ceilingBytes : 2 * largestFieldBytes
        return max(defaultMaximumBytes, min(ceilingBytes, twice))
    }

    /// The row limit of a contract that writes no `max_bytes`, from its fields' limits.
    package static func defaultMaximumBytes(fields: [FieldDescriptor]) -> Int {
        // A file's limit is its file's size; the row holds only the reference.
        defaultMaximumBytes(largestFieldBytes: fields.filter { $0.kind != .file }.compactMap(\.maxBytes).max() ?? 0)
    }

    /// The bytes a row's column values take as stored: the sum of their
    /// ``ColumnValue/storedBytes``.
    /// Inlinable: a pull page measures every row it reads, and an unspecialized generic walk
    /// of each row's values costs more than the measuring.
    @inlinable
    package static func storedBytes<Columns: Sequence<ColumnValue>>(of columns: Columns) -> Int {
        var total = 0
        for column in columns { total &+= column.storedBytes }
        return total
    }
}

extension ColumnValue {
    /// The bytes the value takes as stored, the measure of byte limits (`max_bytes`): the UTF-8
    /// bytes of text, the length of a blob, 8 for an integer or a real, 0 for null. Storage
    /// overhead (headers, indexes) is not counted, so every storage measures a row alike.
    @inlinable
    package var storedBytes: Int {
        switch self {
        case .null: return 0
        case .integer, .real: return 8
        case .text(let text): return text.utf8.count
        case .blob(let data): return data.count
        }
    }
}
