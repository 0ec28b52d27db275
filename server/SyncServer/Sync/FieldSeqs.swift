package import ContractRuntime
import Foundation

/// When each field of a stored entity row last changed, in its scope's sequence: what lets a
/// pull send a device only the fields that changed since its cursor (`fields=changed`).
///
/// Kept in the row's `_field_seqs` column (text, compact JSON) and written with every write of
/// the row (``PushWriter``, ``ContentWriter``):
///
/// ```json
/// {"a": 57, "t": 12, "f": {"title": 57}, "w": [[12, 1], [40, 2], [57, 3]]}
/// ```
///
/// - `a`: the row's `_seq` the record was written with. A row whose `_seq` is not `a` was
///   written by something that did not keep the record: it is not trusted (whole rows).
/// - `t`: the sequence from which the record is complete: every field not named in `f` last
///   changed at or before it (the row's creation, or the first write after an upgrade).
/// - `f`: the fields that changed after `t`, each with the sequence of its last change.
/// - `w`: the row's last writes as `[seq, version]`, oldest first (at most
///   ``historyLength``): the version the row had at a cursor, which a device checks against
///   the version it holds before it merges the changed fields into its copy.
///
/// `NULL` (a table upgraded in place, a tombstone) means "unknown": such a row goes whole
/// until its next write starts a record.
package struct FieldSeqs: Equatable, Sendable {
    /// The column the record is kept in.
    package static let column = "_field_seqs"
    /// How many of a row's writes the record remembers.
    static let historyLength = 8

    var at: Int64
    var trackedFrom: Int64
    var fields: [String: Int64]
    var writes: [(seq: Int64, version: Int64)]

    package static func == (left: FieldSeqs, right: FieldSeqs) -> Bool {
        left.at == right.at && left.trackedFrom == right.trackedFrom && left.fields == right.fields
            && left.writes.map(\.seq) == right.writes.map(\.seq) && left.writes.map(\.version) == right.writes.map(\.version)
    }

    /// The record kept in a stored row, when it has one it can trust (written with the row's
    /// current `_seq`); `nil` otherwise.
    package init?(of row: StoredRow) {
        guard case .text(let text) = row[Self.column], let sequence = row.integer("_seq") else { return nil }
        self.init(text: text)
        guard at == sequence else { return nil }
    }

    init?(text: String) {
        guard case .object(let object)? = JSONParser.parse(text), case .int(let at)? = object["a"], case .int(let trackedFrom)? = object["t"],
            case .object(let fieldObject)? = object["f"], case .array(let writeArray)? = object["w"]
        else { return nil }
        var fields: [String: Int64] = [:]
        for (name, value) in fieldObject {
            guard case .int(let seq) = value else { return nil }
            fields[name] = seq
        }
        var writes: [(seq: Int64, version: Int64)] = []
        for write in writeArray {
            guard case .array(let pair) = write, pair.count == 2, case .int(let seq) = pair[0], case .int(let version) = pair[1] else {
                return nil
            }
            writes.append((seq, version))
        }
        self.init(at: at, trackedFrom: trackedFrom, fields: fields, writes: writes)
    }

    init(at: Int64, trackedFrom: Int64, fields: [String: Int64], writes: [(seq: Int64, version: Int64)]) {
        self.at = at
        self.trackedFrom = trackedFrom
        self.fields = fields
        self.writes = writes
    }

    /// The record's text (compact JSON, keys sorted).
    var text: String {
        CanonicalJSON.text(
            .object([
                "a": .int(at), "t": .int(trackedFrom), "f": .object(fields.mapValues { .int($0) }),
                "w": .array(writes.map { .array([.int($0.seq), .int($0.version)]) }),
            ])
        )
    }

    /// The record of a row written at `sequence` with `version`, from the row before the write
    /// (`nil` for a new row): a field whose column changed takes `sequence`. A row the record
    /// of which was unknown starts one at `sequence`; a tombstone keeps none.
    package static func column(
        writing row: StoredRow, previous: StoredRow?, fields: [FieldDescriptor], sequence: Int64, version: Int64, deleted: Bool
    ) -> ColumnValue {
        guard !deleted else { return .null }
        guard let previous, !previous.isDeleted, previous["_scope_key"] == row["_scope_key"], var record = FieldSeqs(of: previous) else {
            return .text(FieldSeqs(at: sequence, trackedFrom: sequence, fields: [:], writes: [(sequence, version)]).text)
        }
        for field in fields where row[field.name] != previous[field.name] {
            record.fields[field.name] = sequence
        }
        record.at = sequence
        record.writes.append((sequence, version))
        if record.writes.count > historyLength { record.writes.removeFirst(record.writes.count - historyLength) }
        return .text(record.text)
    }

    /// What a device holding the row as of cursor `after` needs: the row's version then and the
    /// fields that changed since; `nil` when the record cannot say (the row was not complete in
    /// the record at `after`, or its writes before `after` are past the record's memory).
    func changes(after: Int64) -> (baseVersion: Int64, fields: Set<String>)? {
        guard trackedFrom <= after, at > after, let base = writes.last(where: { $0.seq <= after }) else { return nil }
        var changed: Set<String> = []
        for (name, seq) in fields where seq > after { changed.insert(name) }
        return (base.version, changed)
    }
}

extension FieldSeqs {
    /// The statements adding the record's column to the entity tables of `contracts` that lack
    /// it (tables made before it existed, or by a contract migration that rebuilt them): run by
    /// each storage when it opens, after the migrations. PostgreSQL's `IF NOT EXISTS` makes them
    /// safe to run again; for SQLite, `existing` lists the tables that have the column already.
    static func addColumnStatements(contracts: ContractCatalog, dialect: Dialect, existing: Set<String> = []) -> [String] {
        contracts.entities.map(\.table).filter { !existing.contains($0) }.map { table in
            switch dialect {
            case .sqlite: "ALTER TABLE \"\(table)\" ADD COLUMN \"\(column)\" TEXT"
            case .postgres: "ALTER TABLE \"\(table)\" ADD COLUMN IF NOT EXISTS \"\(column)\" TEXT"
            }
        }
    }

    enum Dialect {
        case sqlite, postgres
    }
}
