package import ContractRuntime
import Foundation

/// Where the server keeps everything. The sync logic (push, conflict policies, reducers, pull,
/// audit) is written against ``StorageReader`` and ``StorageTransaction`` only, so the two
/// implementations, ``SQLiteStorage`` (embedded, the default) and ``PostgresStorage`` (several
/// server processes on one database), run the same logic and pass the same conformance suite.
///
/// Transactions are `async` closures: the logic reads and writes step by step inside one atomic
/// unit, and each implementation runs it its own way without ever blocking an event loop:
/// PostgreSQL sends each step over a pooled connection and suspends until it answers; SQLite
/// runs the closure on the connection's own thread (GRDB's writer queue), where each step
/// completes at once.
///
/// What a write transaction may rely on, whatever the implementation (see docs/scaling.md):
/// - ``StorageTransaction/lockClient(tenant:clientID:owner:)`` serializes the pushes of one client,
///   so a `seq` is applied once however many processes receive it;
/// - ``StorageTransaction/lockScope(tenant:scopeKey:)`` serializes the writes of one scope from
///   the moment it returns to the commit, so what the logic read in that scope stays true, and
///   the scope's sequence numbers become visible in the order they were handed out;
/// - audit entries chain in commit order.
///
/// An implementation may run a write closure more than once (PostgreSQL does when the database
/// reports a deadlock or a write conflict and rolls the attempt back): the closure must do nothing
/// but storage work and pure computation.
package protocol SyncStorage: ServerStorage {
    /// Runs `body` in one write transaction: everything it writes commits together, or nothing
    /// does when it throws.
    func write<T: Sendable>(_ body: @escaping @Sendable (any StorageTransaction) async throws -> T) async throws -> T

    /// Runs `body` against one consistent snapshot.
    func read<T: Sendable>(_ body: @escaping @Sendable (any StorageReader) async throws -> T) async throws -> T

    /// Runs `body`, which reads with one statement (``StorageReader/identityState(tenant:userID:deviceID:)``),
    /// without a transaction around it where that saves round trips: one statement sees one
    /// snapshot anyway. A body that runs more than one statement must use ``read(_:)``.
    func readOneStatement<T: Sendable>(_ body: @escaping @Sendable (any StorageReader) async throws -> T) async throws -> T

    /// Calls `observer` after each commit that moved a scope's sequence, with those scopes at
    /// their sequence after the commit (what the live channel pokes devices about): commits of
    /// this process on SQLite; on PostgreSQL, commits of every process on the database (each
    /// commit notifies, each storage listens), and ``CommitNotice/mayHaveMissed`` whenever the
    /// storage (re)starts listening, since commits meanwhile notified nobody here. Called on no
    /// particular thread, never for a rolled-back attempt; an observer must return quickly.
    func observeCommits(_ observer: @escaping @Sendable (CommitNotice) -> Void)

    /// Where the bytes of files live unless the server is given another blob store: the data
    /// folder's `files` folder with SQLite, chunks in the database with PostgreSQL.
    var defaultBlobStore: any BlobStore { get }
}

/// Reads, inside a transaction or a snapshot.
package protocol StorageReader {
    /// The row with this primary key in a tenant, tombstones included.
    func row(in table: ContractTable, tenant: String, id: String) async throws -> StoredRow?

    /// Rows of the tables whose `_scope_key` is `scopeKey` and `_seq` is above `after`, in `_seq`
    /// order, tombstones included: at most `limit`, and once the rows hold more than `byteBudget`
    /// bytes (as stored) no more,
    /// so the last row may take them past it and a row larger than the budget comes alone.
    /// Rows left out by the budget are never read into memory whole.
    ///
    /// With `pageColumnsOnly`, a row may hold only what a pull page writes (the contract's
    /// columns, `_seq`, `_version` and `_deleted`): a storage whose every column costs a decode
    /// leaves the others out. Its ``StoredRow/storedBytes`` still counts the whole row.
    func changes(
        in tables: [ContractTable], tenant: String, scopeKey: String, after: Int64, limit: Int, byteBudget: Int, pageColumnsOnly: Bool
    ) async throws -> [(table: ContractTable, row: StoredRow)]

    /// Rows of one table in a tenant matching equality conditions on columns (`.null` matches
    /// NULL), in primary-key order.
    func rows(in table: ContractTable, tenant: String, where conditions: [String: ColumnValue], limit: Int) async throws -> [StoredRow]

    /// The last `seq` done for a client (0 when it never pushed).
    func lastSequence(tenant: String, clientID: String) async throws -> Int64

    /// The identity a client's push stream belongs to (the first to push with it); `nil` when
    /// no one pushed with it yet, or for a stream recorded before owners were (and never since).
    func clientOwner(tenant: String, clientID: String) async throws -> ClientOwner?

    /// The stored results of the client's push that answered `seq`; `nil` when none is kept
    /// (never done, or pruned after the client acknowledged it, or erased).
    func pushResults(tenant: String, clientID: String, covering seq: Int64) async throws -> PushResultRecord?

    /// The scope's current Lamport sequence (0 when nothing was written).
    func scopeSequence(tenant: String, scopeKey: String) async throws -> Int64

    /// The highest `_seq` of the scope whose tombstones were compacted (0 when none were): a
    /// pull cursor below it may have skipped a delete that no longer exists (see
    /// ``ServerHousekeeping``). Read in the same snapshot as the rows a pull returns.
    func compactedSequence(tenant: String, scopeKey: String) async throws -> Int64

    /// The scope's compacted sequence, and the push stream's owner and last `seq` when
    /// `clientID` is given (a pull's state besides its rows).
    func pullState(tenant: String, scopeKey: String, clientID: String?) async throws -> PullState

    /// Audit entries in order, starting after `afterID`, at most `limit`.
    func auditEntries(after afterID: Int64, limit: Int) async throws -> [AuditEntry]

    /// The audit chain's head; `nil` only before the migrations ran.
    func auditHead() async throws -> AuditHead?

    /// Reads ahead the rows of `table` with these primary keys (tombstones included), in a few
    /// statements, so that ``row(in:tenant:id:)`` answers each of them, present or absent,
    /// without a query of its own (in a write transaction, until it writes the row). A writer
    /// holds the locks of the scopes the rows are decided in
    /// (``StorageTransaction/lockScope(tenant:scopeKey:)``).
    func prefetchRows(in table: ContractTable, tenant: String, ids: [String]) async throws

    /// A tenant's audit entries in order, starting after `afterID`, at most `limit` (details as
    /// stored): what the change feed reads (``ChangeFeed``).
    func auditEntries(tenant: String, after afterID: Int64, limit: Int) async throws -> [AuditEntry]

    /// One user's audit entries in a tenant, in order, starting after `afterID`, at most `limit`
    /// (details as stored: read them with ``AuditChain/readableDetail(of:in:key:)``).
    func auditEntries(tenant: String, userID: String, after afterID: Int64, limit: Int) async throws -> [AuditEntry]

    /// The user's audit data key, wrapped under the audit key (``AuditDetails``); `nil` when the
    /// user was never audited with encrypted details, or was erased.
    func wrappedAuditUserKey(tenant: String, userID: String) async throws -> String?

    // MARK: Identity held by the server

    /// What the server holds about an identity: the latest revocation of its device or user, and
    /// its user's teams. Read on every authenticated request.
    func identityState(tenant: String, userID: String, deviceID: String) async throws -> IdentityState

    /// Every membership of a tenant's teams, as (team, user), sorted.
    func teamMemberships(tenant: String) async throws -> [(team: String, user: String)]

    /// Every revocation of a tenant, sorted by kind and subject.
    func revocations(tenant: String) async throws -> [Revocation]

    // MARK: A user's data

    /// The push streams a user's devices own, by `client_id`.
    func clients(tenant: String, ownedBy userID: String) async throws -> [ClientRecord]

    // MARK: The server's own small tables

    /// Runs one statement on a table of the server's own whose SQL both storages speak alike (the
    /// sinks' tables, ``SinkStore``), `?` for each bound value, and returns the rows it yields (a
    /// write says what it changed with `RETURNING`). Never for contract tables: those go through
    /// the methods above, which keep the transaction's pending writes in order.
    func serverTableQuery(_ sql: String, _ arguments: [ColumnValue]) async throws -> [StoredRow]

    // MARK: Urgent changes

    /// The rows marked urgent in a scope after `after` (by the scope sequence their change had),
    /// in sequence order, at most `limit`; a row marked twice is named once, at its last mark.
    func urgentChanges(tenant: String, scopeKey: String, after: Int64, limit: Int) async throws -> [UrgentChange]
}

/// Writes, inside one transaction.
package protocol StorageTransaction: StorageReader {
    /// Takes the client's push lock until the transaction ends and returns its last `seq` done
    /// (0 when it never pushed). A second push of the same client, in this process or another,
    /// waits here until this one commits or rolls back, then sees its `seq`s as done.
    ///
    /// The first identity to lock a client owns its stream from then on (a stream without an
    /// owner is claimed by the identity locking it); a client owned by another identity is
    /// ``ClientLock/ownedByOther``, and nothing is written for it.
    func lockClient(tenant: String, clientID: String, owner: ClientOwner) async throws -> ClientLock

    /// Takes the scope's write lock until the transaction ends. Taken before reading the rows a
    /// decision rests on: no other transaction writes the scope until this one ends.
    func lockScope(tenant: String, scopeKey: String) async throws

    /// Increments and returns the scope's Lamport sequence (taking the scope's lock if needed).
    func nextScopeSequence(tenant: String, scopeKey: String) async throws -> Int64

    /// The scope key of each stored row of `table` with these primary keys (tombstones included;
    /// an id with no row is absent from the answer), read without the scopes' locks: a row never
    /// moves to another scope, so the caller locks what it learns here, then reads the rows.
    func scopeKeys(in table: ContractTable, tenant: String, ids: [String]) async throws -> [String: String]

    /// Reads ahead the rows of `table` in a tenant whose `columns`, those of a unique index, hold
    /// one of `keys` (a value per column, in order; a key holding `.null` is left out), in a few
    /// statements (none for a key a row read ahead already holds), so that
    /// ``StorageReader/rows(in:tenant:where:limit:)`` with exactly those columns as conditions
    /// answers each of them without a query of its own: a push's uniqueness checks. The caller
    /// holds the locks of the scopes the keys name (`_scope_key` among the columns).
    func prefetchMatches(in table: ContractTable, tenant: String, columns: [String], keys: [[ColumnValue]]) async throws

    /// Inserts or replaces a row (all its columns, sync metadata included). The logic never moves
    /// a row to another scope; should a concurrent transaction have stored the same id in another
    /// scope meanwhile, PostgreSQL fails the attempt (and runs the transaction again).
    func upsert(_ row: StoredRow, in table: ContractTable) async throws

    /// Inserts an event row; returns `false` when the event id is already stored (a duplicate).
    func insertIfAbsent(_ row: StoredRow, in table: ContractTable) async throws -> Bool

    /// Records the mutations of a push as done with their results, in one record, and moves the
    /// client's last `seq` to the record's last. `recordedAt` (server clock, milliseconds) is
    /// when its retention starts.
    func recordPushResults(tenant: String, clientID: String, _ record: PushResultRecord, recordedAt: Int64) async throws

    /// Records that a client acknowledged its results up to `seq` (it sent a push starting
    /// after it): they may be pruned once old enough. Never moves the acknowledgement back.
    func acknowledgePushResults(tenant: String, clientID: String, through seq: Int64) async throws

    // MARK: Data horizons (``ServerHousekeeping``)

    /// Deletes at most `limit` stored push result records whose every seq their client
    /// acknowledged and that were recorded before `recordedBefore` (milliseconds since 1970);
    /// returns how many records it deleted.
    func prunePushResults(recordedBefore: Int64, limit: Int) async throws -> Int

    /// At most `limit` tombstones (`_deleted = 1`) of an entity table last written before
    /// `updatedBefore` (milliseconds since 1970), any tenant, in no particular order.
    func tombstones(in table: ContractTable, updatedBefore: Int64, limit: Int) async throws -> [Tombstone]

    /// Deletes those of `tombstones` that are still tombstones at the same `_seq`, last written
    /// before `updatedBefore` (a row written again since is kept); returns the ones deleted.
    /// The caller holds their scopes' locks.
    func deleteTombstones(_ tombstones: [Tombstone], in table: ContractTable, updatedBefore: Int64) async throws -> [Tombstone]

    /// Moves the scope's compacted sequence up to `seq` (never down).
    func raiseCompactedSequence(tenant: String, scopeKey: String, to seq: Int64) async throws

    /// Revokes every token of a device or a user issued at or before `at` (seconds since 1970).
    func revoke(tenant: String, kind: RevocationKind, subject: String, at: Int64) async throws

    /// Adds a user to a team (`isMember`) or removes them; whether that changed anything (false
    /// when the user already was, or was not, a member).
    @discardableResult
    func setTeamMembership(tenant: String, team: String, userID: String, isMember: Bool) async throws -> Bool

    /// Removes a row for good (no tombstone): only for what must not be kept at all.
    func deleteRow(in table: ContractTable, tenant: String, id: String) async throws

    /// Deletes the stored push result records of every stream a user's devices own; returns how many.
    func deletePushResults(tenant: String, ownedBy userID: String) async throws -> Int

    /// Records that a user's data was erased at `at` (seconds since 1970): a token of theirs
    /// issued at or before it is told `user_erased`. Removes the user from every team, and
    /// marks the user's push streams as last moved at the erasure (one that has not moved since
    /// comes from a store the erasure wiped, and its pushes are refused).
    func recordErasure(tenant: String, userID: String, at: Int64) async throws

    /// Marks a row's change urgent: devices take it before any pull page.
    func markUrgent(_ change: UrgentChange, tenant: String, scopeKey: String, at: Int64) async throws

    /// Deletes at most `limit` urgent marks made before `markedBefore` (milliseconds); returns how many.
    func pruneUrgentChanges(markedBefore: Int64, limit: Int) async throws -> Int

    /// Appends to the audit log. The entry's id and seals are assigned when it is chained (with
    /// the storage's ``AuditKey``): at once, or just before the transaction commits, in commit
    /// order; the chain's sealed head moves in the same transaction.
    func appendAudit(_ entry: AuditEntry) async throws

    /// Deletes the user's audit data key: the details of the user's entries (``AuditDetails``)
    /// become unreadable for good, while every seal still verifies. Returns how many entries'
    /// details became unreadable (0 when the user had no key). Entries in clear (written before
    /// the upgrade, or by the server's own actor) are not touched.
    func eraseAuditDetails(tenant: String, userID: String) async throws -> Int

    /// Moves the audit log's archive base (``AuditBase``) from `previous` to `base`, deleting the
    /// entries up to `base.lastID` (they are in an archive file already); fails with
    /// ``AuditArchiveError/baseMoved`` when the base is no longer `previous` or the entry at
    /// `base.lastID` is not the one archived. Returns how many entries were deleted.
    func moveAuditBase(from previous: AuditBase, to base: AuditBase) async throws -> Int
}

extension SyncStorage {
    /// A snapshot costs nothing more than a statement here.
    package func readOneStatement<T: Sendable>(_ body: @escaping @Sendable (any StorageReader) async throws -> T) async throws -> T {
        try await read(body)
    }
}

/// What a pull reads besides its rows (``StorageReader/pullState(tenant:scopeKey:clientID:)``).
package struct PullState: Sendable, Equatable {
    /// The scope's compacted sequence: a cursor below it has expired.
    package var compactedSequence: Int64
    /// Who owns the device's push stream; `nil` without a client id or a stream.
    package var owner: ClientOwner?
    /// The stream's last applied `seq`; 0 without one.
    package var lastSequence: Int64
}

extension StorageReader {
    /// Three reads: a storage whose reads cost nothing more than a statement needs no better.
    package func pullState(tenant: String, scopeKey: String, clientID: String?) async throws -> PullState {
        let compacted = try await compactedSequence(tenant: tenant, scopeKey: scopeKey)
        guard let clientID else { return PullState(compactedSequence: compacted, owner: nil, lastSequence: 0) }
        return PullState(
            compactedSequence: compacted, owner: try await clientOwner(tenant: tenant, clientID: clientID),
            lastSequence: try await lastSequence(tenant: tenant, clientID: clientID)
        )
    }

    /// The stored result (canonical JSON) of one of a client's mutations; `nil` when none is kept.
    package func pushResult(tenant: String, clientID: String, seq: Int64) async throws -> String? {
        try await pushResults(tenant: tenant, clientID: clientID, covering: seq)?.result(of: seq)
    }
}

extension StorageReader {
    /// Reading ahead only saves queries: a reader without it reads each row when asked.
    package func prefetchRows(in table: ContractTable, tenant: String, ids: [String]) async throws {}
}

extension StorageTransaction {

    /// One row at a time: a storage whose reads cost no round trip needs nothing better.
    package func scopeKeys(in table: ContractTable, tenant: String, ids: [String]) async throws -> [String: String] {
        var keys: [String: String] = [:]
        for id in ids {
            if let key = try await row(in: table, tenant: tenant, id: id)?.text("_scope_key") { keys[id] = key }
        }
        return keys
    }

    /// Reading ahead only saves queries: a transaction without it looks each key up when asked.
    package func prefetchMatches(in table: ContractTable, tenant: String, columns: [String], keys: [[ColumnValue]]) async throws {}
}

/// A deleted row, as compaction addresses it: its scope and its `_seq` (unique in its scope).
package struct Tombstone: Hashable, Sendable {
    package var tenant: String
    package var scopeKey: String
    package var seq: Int64

    package init(tenant: String, scopeKey: String, seq: Int64) {
        self.tenant = tenant
        self.scopeKey = scopeKey
        self.seq = seq
    }
}
