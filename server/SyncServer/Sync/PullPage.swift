import ContractRuntime
import SyncProtocol

/// One pull page as ``PullService`` reads it: the rows still as storage holds them, each
/// contract's with the shaping for the device's schema version. ``json()`` writes the page's
/// JSON straight from the stored rows, with no tree of values in between (most of a page's cost
/// used to be building that tree and running `JSONEncoder` over it); it is the only form a page
/// leaves the server in.
package struct PullPage: Sendable {
    /// How a contract's rows become wire rows.
    enum Shaping: Sendable {
        case entity(RowShaping.Plan)
        case event(EventDescriptor, version: Int, plan: RowShaping.Plan)
    }

    /// A contract's upserted rows, in page order.
    struct Upserts: Sendable {
        var shaping: Shaping
        var rows: [StoredRow] = []
        /// For each of ``rows``, what a device gets of it when it goes with only its changed
        /// fields (``FieldSeqs``); `nil` for a whole row. Empty when every row goes whole.
        var changes: [Changes?] = []

        /// Adds a row, whole or with only its changed fields.
        mutating func append(_ row: StoredRow, changes rowChanges: Changes?) {
            if rowChanges != nil, changes.count < rows.count {
                changes.append(contentsOf: repeatElement(nil, count: rows.count - changes.count))
            }
            rows.append(row)
            if !changes.isEmpty || rowChanges != nil { changes.append(rowChanges) }
        }
    }

    /// What a row sent with only its changed fields carries besides them.
    struct Changes: Sendable {
        /// The row's version at the device's cursor: the version the fields change.
        var baseVersion: Int64
        /// The fields (current names) that changed after the cursor.
        var fields: Set<String>
        /// The primary key's column, always written.
        var primaryKey: String
    }

    package var cursor: String
    package var hasMore: Bool
    package var lastSeq: Int64
    /// By contract name.
    var upserts: [String: Upserts] = [:]
    /// Primary keys of tombstones, by contract name.
    var deletes: [String: [String]] = [:]

    /// Upserts and deletes.
    package var rowCount: Int {
        upserts.values.reduce(0) { $0 + $1.rows.count } + deletes.values.reduce(0) { $0 + $1.count }
    }

    /// The page's JSON document (a ``PullResponse``), keys sorted as the server's encoder sorts them.
    package func json() -> [UInt8] {
        var json = JSONWriter(capacity: 64 * 1024 + 400 * rowCount)
        json.append(Self.cursorKey)
        json.string(cursor)
        json.append(0x2C)
        json.append(Self.deletesKey)
        json.object(deletes.keys) { name, json in
            json.array(deletes[name]!) { id, json in json.string(id) }
        }
        json.append(0x2C)
        json.append(Self.hasMoreKey)
        json.bool(hasMore)
        json.append(0x2C)
        json.append(Self.lastSeqKey)
        json.int(lastSeq)
        json.append(0x2C)
        json.append(Self.upsertsKey)
        json.object(upserts.keys) { name, json in
            let group = upserts[name]!
            var layout: StoredRow.Layout?
            var positions: [Int?] = []
            var index = 0
            json.array(group.rows) { row, json in
                defer { index += 1 }
                switch group.shaping {
                case .entity(let plan):
                    if row.layout !== layout {
                        layout = row.layout
                        positions = plan.positions(in: row.layout)
                    }
                    if index < group.changes.count, let changes = group.changes[index] {
                        plan.writeChanges(row, changes, positions: positions, into: &json)
                    } else {
                        plan.write(row, positions: positions, into: &json)
                    }
                case .event(let event, let version, let plan):
                    if row.layout !== layout {
                        layout = row.layout
                        positions = plan.positions(in: row.layout)
                    }
                    RowShaping.writeEvent(row, event: event, version: version, plan: plan, positions: positions, into: &json)
                }
            }
        }
        json.append(0x7D)
        return json.bytes
    }

    // The members of a PullResponse, written in this (sorted) order; `{` opens the first.
    private static let cursorKey = [0x7B] + JSONWriter.key("cursor")
    private static let deletesKey = JSONWriter.key("deletes")
    private static let hasMoreKey = JSONWriter.key("has_more")
    private static let lastSeqKey = JSONWriter.key("last_seq")
    private static let upsertsKey = JSONWriter.key("upserts")
}
