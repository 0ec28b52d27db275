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
            json.array(group.rows) { row, json in
                switch group.shaping {
                case .entity(let plan):
                    if row.layout !== layout {
                        layout = row.layout
                        positions = plan.positions(in: row.layout)
                    }
                    plan.write(row, positions: positions, into: &json)
                case .event(let event, let version, let plan):
                    json.value(.object(RowShaping.wireEvent(row, event: event, version: version, plan: plan)))
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
