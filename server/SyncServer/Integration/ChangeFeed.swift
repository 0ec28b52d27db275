package import ContractRuntime
import Foundation
import SyncProtocol

/// A tenant's applied changes in commit order, for a backend service: every created, updated,
/// patched or deleted row, every event, every row a reducer wrote and every content row an
/// admin, `seed` or an app published or deleted, read from the audit log.
///
/// The audit log is the feed's outbox: its entries are written in the transaction that applies
/// the change, numbered in commit order (every writer chains its entry under the chain head's
/// lock, held to its commit, on SQLite and on PostgreSQL alike, whatever the process), kept
/// across restarts, and bounded by the same horizon (`audit archive`). Nothing is written for
/// the feed, so it costs a push nothing.
///
/// A change carries its row as it is when read: an event as it was recorded; an entity row
/// whose later change the feed has not reached yet is left out at this position and delivered
/// at that later change (its version tells which). A consumer that keeps its cursor therefore
/// sees each row's changes in order, once each, with a row that moved on in between delivered
/// at its latest change only, as a changes feed that compacts by key does.
package struct ChangeFeed: Sendable {
    let storage: any ServerStorage

    package init(storage: any ServerStorage) {
        self.storage = storage
    }

    /// Where a consumer is: the next audit entry to read and how many of its changes were
    /// passed already. Its text is opaque to consumers.
    package struct Cursor: Hashable, Sendable {
        var entry: Int64
        var passed: Int

        init(entry: Int64, passed: Int) {
            self.entry = entry
            self.passed = passed
        }

        /// Parses a cursor's text; `nil` when it is not one this server wrote.
        package init?(text: String) {
            let parts = text.split(separator: "_", omittingEmptySubsequences: false)
            guard parts.count == 3, parts[0] == "c1", let entry = Int64(parts[1]), let passed = Int(parts[2]), entry >= 1, passed >= 0
            else { return nil }
            self.init(entry: entry, passed: passed)
        }

        package var text: String { "c1_\(entry)_\(passed)" }
    }

    /// One page of changes and the cursor after the last change it examined.
    package struct Page: Sendable {
        package var changes: [JSONValue]
        package var cursor: Cursor
        /// Whether more changes may follow right away (the page stopped at its limit or its
        /// byte budget).
        package var hasMore: Bool
        /// The bytes of the rows its changes carry, as stored (``StoredRow/storedBytes``), plus
        /// ``envelopeBytes`` each.
        package var bytes = 0

        package init(changes: [JSONValue], cursor: Cursor, hasMore: Bool, bytes: Int = 0) {
            self.changes = changes
            self.cursor = cursor
            self.hasMore = hasMore
            self.bytes = bytes
        }

        /// `{"changes":[…],"cursor":"…","has_more":…}`.
        package var json: JSONValue {
            .object(["changes": .array(changes), "cursor": .string(cursor.text), "has_more": .bool(hasMore)])
        }
    }

    /// Audit entries read per statement while a page fills (a push's entry lists all its
    /// changes: a few entries may fill a page).
    static let entriesPerRead = 8

    /// What a change weighs in a page besides its row: its ids, times and cursor, generously.
    static let envelopeBytes = 256

    /// Up to `limit` changes of `tenant` after `cursor` (from the oldest kept without one), of
    /// the contracts named in `contracts` (all when `nil`), and no more than `byteBudget` bytes
    /// of rows but for the last change (``ResponsePage``): a page ends with the first change
    /// that takes it past the budget, and a change larger than it comes alone. Rows are read
    /// ahead only as far as the budget may take them (by their contracts' `max_bytes`), so a
    /// page of large rows never holds much more than its budget.
    ///
    /// - Throws: `410 cursor_expired` when the cursor points before the oldest entry kept (the
    ///   log was archived past it).
    /// With `until`, the page ends there: changes at or after it are left for later pages, and
    /// a page that examined everything before it ends with `until` as its cursor (a sink
    /// sending again the batch it was sending, ``SinkDelivery``).
    package func page(
        tenant: String, after cursor: Cursor?, contracts: Set<String>?, limit: Int, byteBudget: Int = .max, until: Cursor? = nil
    ) async throws -> Page {
        let (key, catalog) = (storage.auditKey, storage.contracts)
        return try await storage.engine.read { reader in
            let base = try await reader.auditHead()?.base?.lastID ?? 0
            var position = cursor ?? Cursor(entry: base + 1, passed: 0)
            if position.entry <= base {
                throw ServiceError(
                    status: 410, .cursorExpired,
                    "the change feed no longer holds entry \(position.entry): the audit log was archived through \(base); "
                        + "read again without `after` (from the oldest change kept) and reconcile"
                )
            }
            let details = AuditDetails.Reader(key: key)
            var changes: [JSONValue] = []
            var filled = ResponsePage(byteBudget: byteBudget)
            // Changes of the entries read so far, not examined yet; entries are read and their
            // details parsed only as far as the page needs.
            var pending: [Candidate] = []
            var lastRead = position.entry - 1
            var entriesLeft = true
            while changes.count < limit, filled.hasRoom {
                let needed = limit - changes.count
                while pending.count < needed, entriesLeft {
                    let entries = try await reader.auditEntries(tenant: tenant, after: lastRead, limit: Self.entriesPerRead)
                    entriesLeft = entries.count == Self.entriesPerRead
                    for entry in entries {
                        if let until, entry.id > until.entry || (entry.id == until.entry && until.passed == 0) {
                            entriesLeft = false
                            break
                        }
                        lastRead = entry.id
                        // An erased user's details no longer read: their changes are gone from the feed.
                        guard let detail = try await details.detail(of: entry, in: reader) else { continue }
                        // Only what the page may deliver is kept: its rows are read, and it counts
                        // towards the page's size; the cursor moves past the rest all the same.
                        for (index, change) in try AuditedChange.changes(of: entry, readableDetail: detail).enumerated()
                        where (entry.id > position.entry || index >= position.passed) && Self.isBefore(entry.id, index, until)
                            && Self.mayDeliver(change, contracts: contracts)
                        {
                            pending.append(Candidate(entry: entry, index: index, change: change))
                        }
                    }
                }
                guard !pending.isEmpty else {
                    if let until {
                        position = until
                    } else if lastRead >= position.entry {
                        position = Cursor(entry: lastRead + 1, passed: 0)
                    }
                    return Page(changes: changes, cursor: position, hasMore: false, bytes: filled.bytes)
                }
                // The rows of what the page may still take, read ahead per table, then examined in
                // order: as many as their contracts' largest rows fit in what is left of the budget
                // (at least one), so rows the page will not take are not read.
                var room = filled.remaining
                var count = 0
                while count < min(needed, pending.count) {
                    let largest = Self.largestRowBytes(of: pending[count].change, catalog: catalog)
                    if count > 0, largest > room { break }
                    room -= largest
                    count += 1
                }
                let chunk = pending.prefix(count)
                pending.removeFirst(chunk.count)
                try await Self.readAhead(chunk, catalog: catalog, in: reader)
                for (offset, candidate) in chunk.enumerated() {
                    guard filled.hasRoom else {
                        // Left for the next page, examined there.
                        pending.insert(contentsOf: chunk.dropFirst(offset), at: 0)
                        break
                    }
                    position = Cursor(entry: candidate.entry.id, passed: candidate.index + 1)
                    guard let delivered = try await Self.delivered(candidate.change, of: candidate.entry, catalog: catalog, in: reader)
                    else { continue }
                    changes.append(delivered.adding(cursor: position))
                    filled.take(bytes: delivered.rowBytes + Self.envelopeBytes)
                }
            }
            return Page(changes: changes, cursor: position, hasMore: !pending.isEmpty || entriesLeft, bytes: filled.bytes)
        }
    }

    /// The largest row a change may carry: its contract's `max_bytes` (nothing for an erasure).
    private static func largestRowBytes(of change: AuditedChange, catalog: ContractCatalog) -> Int {
        if change.operation == .erase { return 0 }
        return catalog.entity(named: change.entity)?.maxBytes ?? catalog.event(named: change.entity)?.maxBytes ?? 0
    }

    /// Whether the change at `index` of entry `entry` comes before `until` (always without one).
    private static func isBefore(_ entry: Int64, _ index: Int, _ until: Cursor?) -> Bool {
        guard let until else { return true }
        return entry < until.entry || (entry == until.entry && index < until.passed)
    }

    /// Whether a change is one the feed delivers when its row says so: applied (or merged)
    /// changes and content rows published or deleted (``ContentWriter``), of the contracts asked
    /// for, and every erasure, which concerns every contract (a consumer must drop what it holds
    /// of the user).
    private static func mayDeliver(_ change: AuditedChange, contracts: Set<String>?) -> Bool {
        if change.operation == .erase { return change.outcome == .erased }
        guard contracts?.contains(change.entity) ?? true else { return false }
        switch change.outcome {
        case .applied, .merged, .deleted: return true
        // A content row written with a new version; not a write of `server_only` fields alone
        // (``ContentService/setServerOnlyFields(entity:id:_:identity:operation:)``), which
        // changes nothing the feed's row shows and keeps the row's version.
        case .published: return change.detail["version"] != nil
        default: return false
        }
    }

    /// A change an entry lists, at its index there.
    private struct Candidate {
        var entry: AuditEntry
        var index: Int
        var change: AuditedChange
    }

    /// Reads the candidates' rows in one statement per table (on PostgreSQL), instead of one
    /// round trip per change.
    private static func readAhead(_ candidates: ArraySlice<Candidate>, catalog: ContractCatalog, in reader: any StorageReader) async throws {
        var ids: [ContractTable: (tenant: String, ids: [String])] = [:]
        for candidate in candidates {
            let name = candidate.change.entity
            guard let table = catalog.entity(named: name).map(ContractTable.init) ?? catalog.event(named: name).map(ContractTable.init) else {
                continue
            }
            ids[table, default: (candidate.entry.tenant, [])].ids.append(candidate.change.rowID)
        }
        for (table, wanted) in ids { try await reader.prefetchRows(in: table, tenant: wanted.tenant, ids: wanted.ids) }
    }

    /// The change (one ``mayDeliver(_:contracts:)`` kept) as the feed delivers it, or `nil`
    /// when the feed leaves it out here: a row a later change moved on (delivered there), an
    /// event no longer kept. A user's erasure is delivered as a change of kind `erasure` whose
    /// `id` is the user.
    private static func delivered(
        _ change: AuditedChange, of entry: AuditEntry, catalog: ContractCatalog, in reader: any StorageReader
    ) async throws -> Change? {
        var delivered = Change(entry: entry, change: change)
        if change.operation == .erase {
            delivered.kind = "erasure"
            return delivered
        }
        if let event = catalog.event(named: change.entity) {
            guard let row = try await reader.row(in: ContractTable(event), tenant: entry.tenant, id: change.rowID) else { return nil }
            delivered.kind = "event"
            delivered.rowBytes = row.storedBytes
            delivered.scopeKey = row.text("_scope_key")
            delivered.row = .object(RowShaping.wireEvent(row, event: event, version: event.currentVersion))
            return delivered
        }
        guard let entity = catalog.entity(named: change.entity) else { return nil }
        // The version the change left: a push's mutation and a reducer's row say `server_version`,
        // a content change `version`.
        let version = [change.detail["server_version"], change.detail["version"]].lazy.compactMap { value -> Int64? in
            guard case .int(let number)? = value else { return nil }
            return number
        }.first
        guard let row = try await reader.row(in: ContractTable(entity), tenant: entry.tenant, id: change.rowID) else {
            // Deleted, and its tombstone compacted: only the deletion itself still says so.
            guard change.operation == .delete else { return nil }
            delivered.operation = AuditOperation.delete.rawValue
            return delivered
        }
        let stored = row.integer("_version")
        if let version, let stored, stored > version { return nil }
        delivered.version = stored ?? version
        delivered.rowBytes = row.storedBytes
        delivered.scopeKey = row.text("_scope_key")
        if row.isDeleted {
            delivered.operation = AuditOperation.delete.rawValue
        } else {
            delivered.row = .object(RowShaping.wireRow(row, entity: entity, version: entity.currentVersion))
        }
        return delivered
    }

    /// A change as the feed delivers it.
    struct Change {
        var contract: String
        var kind = "entity"
        var id: String
        var operation: String
        var version: Int64?
        var scopeKey: String?
        var recordedAt: Int64
        var userID: String
        var deviceID: String
        var row: JSONValue = .null
        /// The bytes of the row as stored (0 without one).
        var rowBytes = 0

        init(entry: AuditEntry, change: AuditedChange) {
            contract = change.entity
            id = change.rowID
            operation = change.operation.rawValue
            recordedAt = entry.recordedAt
            userID = entry.userID
            deviceID = entry.deviceID
        }

        func adding(cursor: Cursor) -> JSONValue {
            var object: [String: JSONValue] = [
                "contract": .string(contract), "kind": .string(kind), "id": .string(id), "operation": .string(operation),
                "recorded_at": .string(Timestamp(millisecondsSince1970: recordedAt).iso8601), "user_id": .string(userID),
                "device_id": .string(deviceID), "row": row, "cursor": .string(cursor.text),
            ]
            if let version { object["version"] = .int(version) }
            if let scopeKey { object["scope_key"] = .string(scopeKey) }
            return .object(object)
        }
    }
}
