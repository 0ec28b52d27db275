import ContractRuntime
public import Foundation

/// Keeps the server's data bounded over years by applying its two data horizons
/// (docs/server.md, "Data horizons"):
///
/// - **stored push results** (a record per push) are deleted once their client acknowledged
///   every `seq` of the record (it sent a push starting after them) and they were recorded more than
///   ``Horizons/pushResultRetention`` ago. A resend of a pruned `seq` is answered `duplicate`
///   and applies nothing (the client's `last_seq` still says it is done);
/// - **tombstones** (`_deleted = 1`) last written more than ``Horizons/tombstoneHorizon`` ago are
///   deleted, and each scope records the highest `_seq` it compacted: a pull whose cursor is
///   below it is answered 410 `cursor_expired` (the device pulls the scope again from scratch).
///
/// Each horizon runs in batches of ``batchSize`` rows, one short write transaction per batch,
/// never one long one. Batches are idempotent: several processes on one PostgreSQL database may
/// run housekeeping at once (a batch deletes only what is still there, and raises a scope's
/// compacted sequence under the scope's lock, in the same transaction as its deletes).
///
/// ```swift
/// let housekeeping = ServerHousekeeping(storage: storage)
/// let counts = try await housekeeping.run(now: Date())
/// print(counts.pushResults, counts.tombstones)
/// ```
public struct ServerHousekeeping: Sendable {
    /// How long data is kept; `nil` turns a horizon off.
    public struct Horizons: Sendable, Hashable {
        /// 7 days.
        public static let defaultPushResultRetention: Duration = .seconds(7 * 24 * 3600)
        /// 90 days.
        public static let defaultTombstoneHorizon: Duration = .seconds(90 * 24 * 3600)

        /// How long an acknowledged push result is kept after it was recorded.
        public var pushResultRetention: Duration?
        /// How long a tombstone is kept after its row was deleted.
        public var tombstoneHorizon: Duration?

        /// Horizons with the given durations; 7 days and 90 days by default.
        public init(
            pushResultRetention: Duration? = Horizons.defaultPushResultRetention,
            tombstoneHorizon: Duration? = Horizons.defaultTombstoneHorizon
        ) {
            self.pushResultRetention = pushResultRetention
            self.tombstoneHorizon = tombstoneHorizon
        }

        /// Both horizons off: housekeeping deletes nothing.
        public static let off = Horizons(pushResultRetention: nil, tombstoneHorizon: nil)
    }

    /// What one run deleted.
    public struct Counts: Sendable, Hashable, CustomStringConvertible {
        /// Stored push result records pruned (one per push).
        public var pushResults = 0
        /// Tombstones deleted.
        public var tombstones = 0
        /// Scopes whose compacted sequence moved.
        public var scopes = 0
        /// Urgent marks older than the tombstone horizon removed (their changes still come with the pages).
        public var urgentMarks = 0
        /// Write transactions run.
        public var transactions = 0
        /// File uploads dropped, nothing sent to them for a day (``FileLimits/abandonedUploadSeconds``).
        public var abandonedUploads = 0
        /// Stored files no row named for the whole tombstone horizon, deleted.
        public var unreferencedFiles = 0

        /// Counts from the given numbers.
        public init(pushResults: Int = 0, tombstones: Int = 0, scopes: Int = 0, urgentMarks: Int = 0, transactions: Int = 0) {
            self.pushResults = pushResults
            self.tombstones = tombstones
            self.scopes = scopes
            self.urgentMarks = urgentMarks
            self.transactions = transactions
        }

        /// The counts in a line, for the log and the `housekeeping` command.
        public var description: String {
            "push results pruned: \(pushResults), tombstones compacted: \(tombstones) in \(scopes) scope(s), "
                + "uploads abandoned: \(abandonedUploads), unreferenced files deleted: \(unreferencedFiles), transactions: \(transactions)"
        }
    }

    let storage: any SyncStorage
    /// How long data is kept before housekeeping deletes it.
    public let horizons: Horizons
    /// Rows per transaction at most.
    public let batchSize: Int
    let metrics: ServerMetrics?
    /// The file store whose abandoned uploads and unreferenced files go too; `nil`: none.
    package var files: FileService?

    /// Housekeeping of `storage` with the given horizons and batch size.
    public init(storage: any ServerStorage, horizons: Horizons = Horizons(), batchSize: Int = 500, metrics: ServerMetrics? = nil) {
        self.storage = storage.engine
        self.horizons = horizons
        self.batchSize = max(1, batchSize)
        self.metrics = metrics
    }

    /// Applies both horizons as of `now`, batch after batch until nothing past them is left.
    public func run(now: Date = Date()) async throws -> Counts {
        var counts = Counts()
        let nowMilliseconds = Int64(now.timeIntervalSince1970 * 1000)
        if let retention = horizons.pushResultRetention {
            let before = nowMilliseconds - Self.milliseconds(retention)
            while true {
                try Task.checkCancellation()
                let limit = batchSize
                let pruned = try await storage.write { try await $0.prunePushResults(recordedBefore: before, limit: limit) }
                counts.transactions += 1
                counts.pushResults += pruned
                if pruned < limit { break }
            }
        }
        if let horizon = horizons.tombstoneHorizon {
            let before = nowMilliseconds - Self.milliseconds(horizon)
            var scopes: Set<Tombstone.Scope> = []
            for entity in storage.contracts.entities {
                let table = ContractTable(entity)
                // Devices never pull `up` contracts: their tombstones go without expiring a cursor.
                let pulled = entity.direction != .up
                while true {
                    try Task.checkCancellation()
                    let (found, deleted) = try await compactBatch(table, before: before, raising: pulled)
                    counts.transactions += 1
                    counts.tombstones += deleted.count
                    if pulled { scopes.formUnion(deleted.map(\.scope)) }
                    // Fewer than a batch left, or a batch another process took meanwhile.
                    if found < batchSize || deleted.isEmpty { break }
                }
            }
            counts.scopes = scopes.count
            while true {
                try Task.checkCancellation()
                let limit = batchSize
                let pruned = try await storage.write { try await $0.pruneUrgentChanges(markedBefore: before, limit: limit) }
                counts.transactions += 1
                counts.urgentMarks += pruned
                if pruned < limit { break }
            }
        }
        if let files {
            // Files no row names go after the tombstone horizon (a row naming one may be pushed
            // that long after its upload); with the horizon off, never.
            let unreferenced = horizons.tombstoneHorizon.map { nowMilliseconds - Self.milliseconds($0) }
            let collected = try await files.collect(
                abandonedBefore: nowMilliseconds - files.limits.abandonedUploadSeconds * 1000,
                unreferencedBefore: unreferenced ?? .min, limit: batchSize)
            counts.abandonedUploads = collected.uploads
            counts.unreferencedFiles = collected.files
        }
        metrics?.recordHousekeeping(counts)
        return counts
    }

    /// One batch of a table's tombstones past the horizon, in one transaction: the scopes they
    /// are in are locked first (in one order, as pushes lock them before their rows), then the
    /// ones still tombstones at the same `_seq` are deleted and each scope's compacted sequence
    /// is raised to the highest `_seq` deleted in it.
    private func compactBatch(_ table: ContractTable, before: Int64, raising: Bool) async throws -> (found: Int, deleted: [Tombstone]) {
        let limit = batchSize
        return try await storage.write { transaction in
            let found = try await transaction.tombstones(in: table, updatedBefore: before, limit: limit)
            guard !found.isEmpty else { return (0, []) }
            let scopes = Set(found.map(\.scope)).sorted { ($0.tenant, $0.key) < ($1.tenant, $1.key) }
            for scope in scopes {
                try await transaction.lockScope(tenant: scope.tenant, scopeKey: scope.key)
            }
            let deleted = try await transaction.deleteTombstones(found, in: table, updatedBefore: before)
            if raising {
                var highest: [Tombstone.Scope: Int64] = [:]
                for tombstone in deleted { highest[tombstone.scope] = max(highest[tombstone.scope] ?? 0, tombstone.seq) }
                for (scope, seq) in highest.sorted(by: { ($0.key.tenant, $0.key.key) < ($1.key.tenant, $1.key.key) }) {
                    try await transaction.raiseCompactedSequence(tenant: scope.tenant, scopeKey: scope.key, to: seq)
                    // Moves below the horizon: a subscription cursor there is expired anyway.
                    _ = try await transaction.serverTableQuery(
                        "DELETE FROM \"\(RowMoves.table)\" WHERE \"tenant\" = ? AND \"scope_key\" = ? AND \"seq\" <= ?",
                        [.text(scope.tenant), .text(scope.key), .integer(seq)])
                }
            }
            return (found.count, deleted)
        }
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        let parts = duration.components
        return parts.seconds * 1000 + parts.attoseconds / 1_000_000_000_000_000
    }
}

extension Tombstone {
    struct Scope: Hashable {
        var tenant: String
        var key: String
    }

    var scope: Scope { Scope(tenant: tenant, key: scopeKey) }
}

extension ServerHousekeeping {
    /// Runs housekeeping now and then every `interval` until the task is cancelled (`serve` runs
    /// it beside the routes). A failed run is reported to `report` and tried again at the next
    /// interval; every process on one database may run this at once.
    public func runPeriodically(every interval: Duration, report: @escaping @Sendable (Result<Counts, any Error>) -> Void) async {
        await repeatEvery(interval, startingNow: true) {
            do {
                report(.success(try await run(now: Date())))
            } catch is CancellationError {
                return
            } catch {
                report(.failure(error))
            }
        }
    }

    /// Reads a horizon or interval: `off` or `0` (none), or a number with a unit, `s`, `m`, `h`
    /// or `d` (`90d`, `36h`); a bare number is in `bareUnit` seconds (a day for the horizons).
    /// `nil` when the text is none of these.
    package static func parseDuration(_ text: String, bareUnit: Int64) -> Duration?? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        if trimmed == "off" || trimmed == "0" { return .some(nil) }
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        var number = Substring(trimmed)
        var unit = bareUnit
        if let last = trimmed.last, let seconds = units[last] {
            unit = seconds
            number = number.dropLast()
        }
        guard let value = Double(number), value.isFinite, value >= 0, value * Double(unit) < Double(Int64.max / 1_000_000) else { return nil }
        let milliseconds = Int64((value * Double(unit) * 1000).rounded())
        return .some(milliseconds == 0 ? nil : .milliseconds(milliseconds))
    }
}
