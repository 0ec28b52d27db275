import ContractRuntime
import ContractRuntimeGRDB
import Contracts
import Foundation
import GRDB
import Logging
import PostgresNIO
import SampleServerApps
import SyncProtocol
import SyncServer

/// Entity writes of every conflict policy that takes them, on tables that already hold rows:
/// creates, then updates of what was created, of `last_writer_wins` (`AssessmentResponse`, a
/// unique index), `field_merge` (`Incident`, a unique index) and `version_check` (`Task`) rows,
/// pushed 500 at a time by one device through ``PushService``, into tables preloaded with
/// 1 000 and with 1 000 000 rows (spread over 100 scopes, the pushing device's among them).
///
/// What it shows: a push's cost does not grow with the table (each push's median at 1 000 000
/// rows against the same at 1 000), and on PostgreSQL how the push compares with writing the
/// same rows straight through postgres-nio (the rows the pushes stored, read back, written by
/// multi-row `INSERT`, then `INSERT … ON CONFLICT DO UPDATE`, one transaction per 500, into a
/// copy of the tables as the preload left them).
enum EntityWriteWorkload {
    /// Rows in each table before the pushes; `OUTPOST_BENCH_ENTITY_ROWS` (comma-separated) for a
    /// quick run.
    static var sizes: [Int] {
        let configured = ProcessInfo.processInfo.environment["OUTPOST_BENCH_ENTITY_ROWS"]?.split(separator: ",").compactMap { Int($0) }
        return configured.flatMap { $0.count == 2 ? $0 : nil } ?? [1_000, 1_000_000]
    }
    static let pushes = 10
    static let batch = 500
    static let scopes = 100
    static let tenant = "bench-tenant"
    /// A push's median in the large table at most this many times the small table's.
    static let flatBar = 1.2
    /// PostgreSQL's push at most this many times the raw writes of the same rows.
    static let rawBar = 3.0

    enum Phase: String, CaseIterable { case create, update }

    /// One policy's contract and how its rows and mutations are made.
    struct Policy: Sendable {
        var policy: String
        var entity: EntityDescriptor
        var identity: @Sendable (_ scope: Int) -> DeviceIdentity
        var scopeKey: @Sendable (_ scope: Int) -> String
        var id: @Sendable (_ set: Int, _ number: Int) -> String
        /// Every field of a new row (`set` 0: preloaded, 1: pushed).
        var row: @Sendable (_ set: Int, _ number: Int, _ scope: Int) -> [String: JSONValue]
        /// The operation, fields and base version of an update of pushed row `number`.
        var update: @Sendable (_ number: Int) -> Update

        var label: String { "\(policy) (\(entity.name))" }
    }

    /// An update of a pushed row: the operation, the fields sent, and what the policy asks for
    /// besides (`version_check`'s base version, a `field_merge` patch's values before the edit).
    struct Update {
        var op: MutationOperation
        var payload: [String: JSONValue]
        var baseVersion: Int64? = nil
        var base: [String: JSONValue]? = nil
    }

    static let start = Timestamp(iso8601: "2026-02-02T08:00:00.000Z")!.millisecondsSince1970
    static func time(_ number: Int) -> JSONValue { .string(Timestamp(millisecondsSince1970: start + Int64(number) * 1000).iso8601) }

    static let policies: [Policy] = [
        Policy(
            policy: "last_writer_wins", entity: ContractRegistry.entity(named: "AssessmentResponse")!,
            identity: { DeviceIdentity(tenant: tenant, userID: "learner-\($0)", deviceID: "phone-\($0)", teams: [], expiresAt: 4_102_444_800) },
            scopeKey: { "progress:user:learner-\($0)" },
            id: { set, number in String(format: "%08x-0000-4000-8000-%012x", set + 1, number) },
            row: { set, number, scope in
                [
                    "id": .string(String(format: "%08x-0000-4000-8000-%012x", set + 1, number)),
                    "assessment_id": .string("assessment-\(number / 1000)"),
                    "attempt_id": .string("s\(set)-attempt-\(number / 10)"), "question_id": .string("q-\(number % 10)"),
                    "answer": .object(["choice": .int(Int64(number % 4))]), "time_spent_ms": .int(Int64(1000 + number % 9000)),
                    "flagged_for_review": .bool(false), "answered_at": time(number), "updated_at": time(number),
                ]
            },
            update: { number in
                Update(
                    op: .update,
                    payload: [
                        "id": .string(String(format: "%08x-0000-4000-8000-%012x", 2, number)),
                        "assessment_id": .string("assessment-\(number / 1000)"),
                        "attempt_id": .string("s1-attempt-\(number / 10)"), "question_id": .string("q-\(number % 10)"),
                        "answer": .object(["choice": .int(Int64((number + 1) % 4))]), "time_spent_ms": .int(Int64(2000 + number % 9000)),
                        "flagged_for_review": .bool(true), "answered_at": time(number + 60), "updated_at": time(number + 60),
                    ]
                )
            }
        ),
        Policy(
            policy: "field_merge", entity: ContractRegistry.entity(named: "Incident")!,
            identity: {
                DeviceIdentity(tenant: tenant, userID: "tech-\($0)", deviceID: "tablet-\($0)", teams: ["team-\($0)"], expiresAt: 4_102_444_800)
            },
            scopeKey: { "ops:team:team-\($0)" },
            id: { set, number in "s\(set)-incident-\(number)" },
            row: { set, number, scope in
                [
                    "id": .string("s\(set)-incident-\(number)"), "team_id": .string("team-\(scope)"), "number": .string("INC\(set)-\(number)"),
                    "short_description": .string("Scooter \(number) does not start"), "state": .string("new"), "priority": .string("moderate"),
                    "tags": .array([.string("battery")]), "opened_at": time(number), "updated_at": time(number),
                ]
            },
            update: { number in
                Update(
                    op: .patch, payload: ["state": .string("in_progress"), "assignee_id": .string("tech-0"), "updated_at": time(number + 60)],
                    base: ["state": .string("new"), "assignee_id": .null, "updated_at": time(number)]
                )
            }
        ),
        Policy(
            policy: "version_check", entity: ContractRegistry.entity(named: "Task")!,
            identity: {
                DeviceIdentity(tenant: tenant, userID: "dispatcher-\($0)", deviceID: "tablet-\($0)", teams: ["team-\($0)"], expiresAt: 4_102_444_800)
            },
            scopeKey: { "ops:team:team-\($0)" },
            id: { set, number in "s\(set)-task-\(number)" },
            row: { set, number, scope in
                [
                    "id": .string("s\(set)-task-\(number)"), "team_id": .string("team-\(scope)"),
                    "title": .string("Swap the battery of scooter \(number)"),
                    "task_kind": .string("battery_swap"), "status": .string("assigned"), "sort_index": .int(Int64(number % 100)),
                    "estimated_minutes": .int(Int64(10 + number % 50)), "checklist": .array([.string("helmet"), .string("gloves")]),
                    "revision": .int(1),
                ]
            },
            update: { _ in Update(op: .patch, payload: ["status": .string("in_progress"), "notes": .string("On the way")], baseVersion: 1) }
        ),
    ]

    /// The names of each (policy, phase)'s figures.
    enum Figures {
        static func key(_ policy: Policy, _ phase: Phase) -> String { "\(policy.label) \(phase.rawValue)" }
    }

    /// Fills each table with `rows` rows over ``scopes`` scopes, each row sequenced in its scope.
    static func preload(_ storage: any SyncStorage, rows: Int) async throws {
        let chunk = 5_000
        for policy in policies {
            let table = ContractTable(policy.entity)
            var next = 0
            while next < rows {
                let numbers = next..<min(rows, next + chunk)
                next = numbers.upperBound
                let built = try numbers.map { number in (number % scopes, try columns(policy.row(0, number, number % scopes), of: policy.entity)) }
                let ids = numbers.map { policy.id(0, $0) }
                try await storage.write { transaction in
                    // Read ahead and found absent: PostgreSQL takes them with `COPY`.
                    try await transaction.prefetchRows(in: table, tenant: tenant, ids: ids)
                    for (scope, var row) in built {
                        let key = policy.scopeKey(scope)
                        row["_tenant_id"] = .text(tenant)
                        row["_scope_key"] = .text(key)
                        row["_seq"] = .integer(try await transaction.nextScopeSequence(tenant: tenant, scopeKey: key))
                        row["_version"] = .integer(1)
                        row["_schema_version"] = .integer(Int64(policy.entity.currentVersion))
                        row["_hlc"] = .null
                        row["_field_clocks"] = .null
                        row["_deleted"] = .integer(0)
                        row["_updated_at"] = .integer(start)
                        row["_updated_by"] = .text("preload")
                        try await transaction.upsert(row, in: table)
                    }
                }
            }
        }
    }

    /// Checkpoints a preloaded SQLite server database's WAL into it and truncates the WAL.
    static func settleSQLite(in folder: URL) throws {
        let queue = try DatabaseQueue(path: folder.appendingPathComponent("server.sqlite").path)
        try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
    }

    static func columns(_ wire: [String: JSONValue], of entity: EntityDescriptor) throws -> StoredRow {
        var row = StoredRow()
        for field in entity.fields {
            do {
                row[field.name] = try RowCodec.columnValue(wire[field.name] ?? .null, for: field)
            } catch {
                throw BenchmarkError("a preloaded \(entity.name) does not fit its contract: \(error.message)")
            }
        }
        return row
    }

    /// The pushes of one policy: ``pushes`` of creates, then as many of updates of those rows.
    static func requests(_ policy: Policy) -> [Phase: [PushRequest]] {
        let device = policy.identity(0).deviceID + "-" + policy.policy
        var seq: Int64 = 0
        func mutation(
            _ op: MutationOperation, _ number: Int, _ payload: [String: JSONValue], baseVersion: Int64? = nil, base: [String: JSONValue]? = nil,
            offset: Int
        ) -> Mutation {
            seq += 1
            let hlc =
                policy.entity.conflict == .lastWriterWins || policy.entity.conflict == .fieldMerge
                ? HybridLogicalClock(milliseconds: start + Int64(offset) * 1000 + Int64(number), counter: 0, node: device).description : nil
            return Mutation(
                seq: seq, clientMutationId: "cm-\(seq)", entity: policy.entity.name, op: op, id: policy.id(1, number), payload: .object(payload),
                baseVersion: baseVersion, hlc: hlc, base: base
            )
        }
        var phases: [Phase: [PushRequest]] = [:]
        phases[.create] = (0..<pushes).map { push in
            PushRequest(
                clientId: device, schema: [:],
                mutations: (0..<batch).map { index in
                    let number = push * batch + index
                    return mutation(.create, number, policy.row(1, number, 0), baseVersion: nil, offset: 0)
                })
        }
        phases[.update] = (0..<pushes).map { push in
            PushRequest(
                clientId: device, schema: [:],
                mutations: (0..<batch).map { index in
                    let number = push * batch + index
                    let update = policy.update(number)
                    return mutation(update.op, number, update.payload, baseVersion: update.baseVersion, base: update.base, offset: 3_600)
                })
        }
        return phases
    }

    /// The tables of one size a run pushes into: a storage preloaded with `size` rows per table.
    struct Target {
        var size: Int
        var storage: any SyncStorage
    }

    /// What the pushes into one target took and stored.
    struct Pushed {
        /// Each phase's push times, by ``Figures/key(_:_:)``.
        var times: [String: Samples] = [:]
        /// The rows the pushes stored, by policy and phase, read back (for the raw baseline).
        var stored: [String: [Phase: [[StoredRow]]]] = [:]
    }

    /// Pushes each policy's creates then updates into every target, alternating: push *i* into
    /// the first target, then push *i* into the next, so the sizes compared meet the same machine
    /// in the same seconds (run one after the other, a size's figures took whatever load the
    /// machine had in its minutes, and that moved the ratio by more than the bar's margin).
    /// `warm` runs before each policy's pushes into each target (on PostgreSQL: its table's
    /// indexes read into the buffer cache, see ``PostgresRawInsert/prewarmIndexes(of:in:base:)``).
    static func push(_ targets: [Target], warm: (Policy, Target) async throws -> Void = { _, _ in }) async throws -> [Int: Pushed] {
        let services = targets.map { PushService(storage: $0.storage, reducers: SampleServerApps.reducers) }
        var pushed: [Int: Pushed] = [:]
        for policy in policies {
            for target in targets { try await warm(policy, target) }
            let phases = requests(policy)
            let identity = policy.identity(0)
            let table = ContractTable(policy.entity)
            for phase in Phase.allCases {
                for request in phases[phase]! {
                    for (target, service) in zip(targets, services) {
                        let started = ContinuousClock.now
                        let response: PushResponse
                        do throws(ServiceError) {
                            response = try await service.push(request, identity: identity)
                        } catch {
                            throw BenchmarkError(
                                "\(policy.label): push refused (\(error.status) \(error.detail.code.rawValue)): \(error.detail.message)")
                        }
                        pushed[target.size, default: Pushed()].times[Figures.key(policy, phase), default: Samples()]
                            .append(Timing.seconds(ContinuousClock.now - started))
                        let applied = response.results.filter { $0.status == .applied }
                        guard applied.count == request.mutations.count else {
                            let other = response.results.first { $0.status != .applied }
                            throw BenchmarkError(
                                "\(policy.label) \(phase): \(applied.count) of \(request.mutations.count) applied; first other: "
                                    + "\(other.map { "\($0.status) \($0.error?.message ?? $0.resolution ?? "")" } ?? "none")")
                        }
                        let ids = request.mutations.map(\.id)
                        let rows = try await target.storage.read { reader in
                            var rows: [StoredRow] = []
                            for id in ids { if let row = try await reader.row(in: table, tenant: tenant, id: id) { rows.append(row) } }
                            return rows
                        }
                        pushed[target.size, default: Pushed()].stored[policy.label, default: [:]][phase, default: []].append(rows)
                    }
                }
            }
        }
        return pushed
    }
}

extension PostgresRawInsert {
    /// Copies `tables` of schema `source`, their rows, columns, defaults, constraints and
    /// indexes, into a new schema `target`, then brings them to rest (``settle(_:in:base:)``): the raw baseline then writes
    /// into tables in the state the pushes met. Done inside PostgreSQL (`INSERT … SELECT`),
    /// far faster than loading them again through the client.
    static func copyTables(_ tables: [String], from source: String, into target: String, base: PostgresStorage.Configuration) async throws {
        try await withConnection(base) { connection, logger in
            try await connection.query("CREATE SCHEMA \(unescaped: target)", logger: logger)
            for table in tables {
                let (from, to) = ("\(source).\"\(table)\"", "\(target).\"\(table)\"")
                try await connection.query("CREATE TABLE \(unescaped: to) (LIKE \(unescaped: from) INCLUDING ALL)", logger: logger)
                try await connection.query("INSERT INTO \(unescaped: to) SELECT * FROM \(unescaped: from)", logger: logger)
            }
        }
        try await settle(tables, in: target, base: base)
    }

    /// Brings freshly loaded tables to rest, as a long-lived table is: vacuumed (the visibility
    /// map set, as autovacuum leaves a table after a bulk insert), analyzed, and the load's WAL
    /// checkpointed. Without it, autovacuum's pass over a million fresh rows and the checkpoint
    /// of the load land inside the pushes timed right after, on the same two cores, and a
    /// push's cost in the large table measures the preload's aftermath, not the table's size.
    static func settle(_ tables: [String], in schema: String, base: PostgresStorage.Configuration) async throws {
        try await withConnection(base) { connection, logger in
            for table in tables {
                try await connection.query("VACUUM (ANALYZE) \(unescaped: schema).\"\(unescaped: table)\"", logger: logger)
            }
        }
        try await checkpoint(base: base)
    }

    /// Writes out what the WAL holds (`CHECKPOINT`), so no checkpoint begins inside a timed run.
    static func checkpoint(base: PostgresStorage.Configuration) async throws {
        try await withConnection(base) { connection, logger in _ = try await connection.query("CHECKPOINT", logger: logger) }
    }

    /// Reads `table`'s indexes in `schema` into PostgreSQL's buffer cache (`pg_prewarm`). With a
    /// million rows in each of three tables, twice (the pushes' and the raw baseline's copy),
    /// they do not all fit in `shared_buffers`: whichever side ran last would find its indexes
    /// cached and the other would read them from the OS. Each side warms its own table's indexes
    /// before it is timed, so both meet the same cache.
    static func prewarmIndexes(of table: String, in schema: String, base: PostgresStorage.Configuration) async throws {
        try await withConnection(base) { connection, logger in
            try await connection.query("CREATE EXTENSION IF NOT EXISTS pg_prewarm", logger: logger)
            let qualified = "\(schema).\"\(table)\""
            try await connection.query("SELECT pg_prewarm(indexrelid) FROM pg_index WHERE indrelid = \(qualified)::regclass", logger: logger)
        }
    }

    /// The baseline of entity writes: `batches` of rows written straight through postgres-nio into
    /// the contract's table in `schema` (a copy made by ``copyTables(_:from:into:base:)``), one transaction and one
    /// multi-row statement per batch: `INSERT` for `.create`, `INSERT … ON CONFLICT DO UPDATE`
    /// of every column for `.update` (the rows must be there). Returns each batch's time.
    static func write(
        _ batches: [[StoredRow]], entity: EntityDescriptor, upserting: Bool, schema: String, base: PostgresStorage.Configuration
    ) async throws -> Samples {
        try await withConnection(base) { connection, logger in
            try await write(batches, entity: entity, upserting: upserting, schema: schema, connection: connection, logger: logger)
        }
    }

    private static func write(
        _ batches: [[StoredRow]], entity: EntityDescriptor, upserting: Bool, schema: String, connection: PostgresConnection, logger: Logger
    ) async throws -> Samples {
        try await connection.query("SET search_path TO \(unescaped: schema)", logger: logger)
        var types: [String: String] = [:]
        for try await (name, type) in try await connection.query(
            "SELECT column_name::TEXT, data_type::TEXT FROM information_schema.columns WHERE table_schema = \(schema) AND table_name = \(entity.table)",
            logger: logger
        ).decode((String, String).self) {
            types[name] = type
        }
        var samples = Samples()
        for batch in batches {
            guard let first = batch.first else { continue }
            let names = first.columnNames.sorted()
            let casts = try names.map { name -> String in
                guard let type = types[name] else { throw BenchmarkError("\(entity.table) has no column \(name) in PostgreSQL") }
                switch type {
                case "jsonb": return "::jsonb"
                case "uuid": return "::uuid"
                case "date": return "::date"
                default: return ""
                }
            }
            let values = (0..<batch.count).map { row in
                "(" + names.indices.map { column in "$\(row * names.count + column + 1)\(casts[column])" }.joined(separator: ", ") + ")"
            }.joined(separator: ", ")
            var sql = "INSERT INTO \"\(entity.table)\" (" + names.map { "\"\($0)\"" }.joined(separator: ", ") + ") VALUES " + values
            if upserting {
                sql +=
                    " ON CONFLICT (\"_tenant_id\", \"\(entity.primaryKey)\") DO UPDATE SET "
                    + names.map { "\"\($0)\" = EXCLUDED.\"\($0)\"" }.joined(separator: ", ")
            }
            var bindings = PostgresBindings(capacity: batch.count * names.count)
            for row in batch {
                for name in names { bind(row[name], type: types[name]!, into: &bindings) }
            }
            let started = ContinuousClock.now
            try await connection.query("BEGIN", logger: logger)
            try await connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger)
            try await connection.query("COMMIT", logger: logger)
            samples.append(Timing.seconds(ContinuousClock.now - started))
        }
        return samples
    }
}

/// The SQLite side's baseline of entity writes: the rows the SQLite pushes stored, written
/// straight through GRDB into a copy of the server database as the preload left it, one
/// transaction and one multi-row statement per 500 (`INSERT`, then `INSERT OR REPLACE`, as the
/// server's own write), the sizes alternating batch by batch. It shows what SQLite's own B-trees
/// cost as a table grows, apart from the push.
enum SQLiteRawEntityWrites {
    /// Copies a preloaded server database whose WAL was checkpointed (``EntityWriteWorkload/settleSQLite(in:)``).
    static func copy(in folder: URL) throws -> URL {
        let copy = folder.appendingPathComponent("raw.sqlite")
        try FileManager.default.copyItem(at: folder.appendingPathComponent("server.sqlite"), to: copy)
        return copy
    }

    /// Each (policy, phase)'s batch times by table size.
    static func write(_ pushed: [Int: EntityWriteWorkload.Pushed], copies: [Int: URL]) throws -> [String: [Int: Samples]] {
        var configuration = Configuration()
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
        let sizes = copies.keys.sorted()
        let queues = try sizes.map { try DatabaseQueue(path: copies[$0]!.path, configuration: configuration) }
        var samples: [String: [Int: Samples]] = [:]
        for policy in EntityWriteWorkload.policies {
            for phase in EntityWriteWorkload.Phase.allCases {
                let key = EntityWriteWorkload.Figures.key(policy, phase)
                let batches = sizes.map { pushed[$0]?.stored[policy.label]?[phase] ?? [] }
                for index in 0..<(batches.map(\.count).min() ?? 0) {
                    for (position, size) in sizes.enumerated() {
                        let rows = batches[position][index]
                        guard let first = rows.first else { continue }
                        let names = first.columnNames
                        let tuple = "(" + Array(repeating: "?", count: names.count).joined(separator: ", ") + ")"
                        let sql =
                            (phase == .create ? "INSERT" : "INSERT OR REPLACE") + " INTO \"\(policy.entity.table)\" ("
                            + names.map { "\"\($0)\"" }.joined(separator: ", ") + ") VALUES "
                            + Array(repeating: tuple, count: rows.count).joined(separator: ", ")
                        let arguments = StatementArguments(rows.flatMap { row in names.map { row[$0].databaseValue } })
                        let started = ContinuousClock.now
                        try queues[position].write { db in try db.execute(sql: sql, arguments: arguments) }
                        samples[key, default: [:]][size, default: Samples()].append(Timing.seconds(ContinuousClock.now - started))
                    }
                }
            }
        }
        return samples
    }
}
