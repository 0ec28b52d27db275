import ContractRuntime
import Contracts
import Foundation
import GRDB
import LearningClient
import SyncClient
import SyncProtocol

/// The client store's figures, on real SQLite files in a temporary folder.
enum ClientStoreBenchmarks {
    static let seed: UInt64 = 0x636c_6965_6e74_2d62

    /// A device's store in `folder`, with its key material beside it.
    static func openStore(_ folder: URL, tenantId: String = "bench") throws -> OfflineStore {
        try OfflineStore(
            OfflineStoreConfiguration(
                databaseURL: folder.appendingPathComponent("store.sqlite"), tenantId: tenantId, userId: "learner-1",
                deviceId: "bench-device", keyProvider: FileKeyProvider(directory: folder.appendingPathComponent("keys", isDirectory: true))
            ), contracts: ContractRegistry.self, extensions: [LearningStore()]
        )
    }

    /// `unitCount` units, each with `lessonsPerUnit` lessons and one asset per lesson, as the
    /// server's content pages carry them (wire JSON), in pages of at most `pageSize` rows.
    static func contentPages(unitCount: Int, lessonsPerUnit: Int, pageSize: Int) -> [ServerChanges] {
        var random = SeededGenerator(seed: seed)
        let updated = Timestamp(millisecondsSince1970: 1_790_000_000_000)
        var rows: [(String, JSONValue)] = []
        rows.reserveCapacity(unitCount * (1 + 2 * lessonsPerUnit))
        for unitIndex in 0..<unitCount {
            let unitID = "unit-\(unitIndex)"
            let unit = Unit(
                id: unitID, title: "Unit \(unitIndex): \(random.pick(["Fractions", "Reading", "Safety", "Batteries", "Routes"]))",
                description: random.chance(70) ? "What this unit covers, in a sentence or two (\(unitIndex))." : nil,
                learnerLevel: random.pick(Unit.LearnerLevel.allCases), sortIndex: Int64(unitIndex),
                estimatedMinutes: Int64(random.int(in: 5...90)), tags: random.chance(50) ? ["core", "grade-\(unitIndex % 12)"] : [],
                updatedAt: updated
            )
            rows.append(("Unit", try! JSONValue(encoding: unit)))
            for lessonIndex in 0..<lessonsPerUnit {
                let lessonID = "\(unitID)-lesson-\(lessonIndex)"
                let lesson = Lesson(
                    id: lessonID, unitId: unitID, title: "Lesson \(lessonIndex) of unit \(unitIndex)", sortIndex: Int64(lessonIndex),
                    lessonKind: random.pick(Lesson.LessonKind.allCases),
                    body: .object(["blocks": .array([.string("Paragraph \(lessonIndex)"), .string("Example")])]),
                    durationSeconds: Int64(random.int(in: 60...900)), updatedAt: updated
                )
                rows.append(("Lesson", try! JSONValue(encoding: lesson)))
                let asset = Asset(
                    id: "\(lessonID)-asset", lessonId: lessonID, assetKind: .audio, contentType: "audio/mpeg",
                    sizeBytes: Int64(random.int(in: 10_000...5_000_000)), checksum: String(repeating: "ab", count: 32),
                    storageKey: "units/\(unitID)/\(lessonID).mp3", updatedAt: updated
                )
                rows.append(("Asset", try! JSONValue(encoding: asset)))
            }
        }
        var pages: [ServerChanges] = []
        var start = 0
        while start < rows.count {
            let slice = rows[start..<min(start + pageSize, rows.count)]
            var upserts: [String: [JSONValue]] = [:]
            for (name, row) in slice { upserts[name, default: []].append(row) }
            pages.append(ServerChanges(upserts: upserts, scopeKey: "content", cursor: "page-\(pages.count)"))
            start += pageSize
        }
        return pages
    }

    /// Every contract row of `tables` in `db`, as stored (local and sync columns included).
    static func storedRows(_ db: Database, tables: [String]) throws -> [(table: String, columns: [String], values: [[DatabaseValue]])] {
        try tables.map { table in
            let rows = try Row.fetchAll(db, sql: "SELECT * FROM \(table.quotedDatabaseIdentifier)")
            let columns = rows.first.map { Array($0.columnNames) } ?? []
            return (table, columns, rows.map { row in columns.map { row[$0] as DatabaseValue } })
        }
    }
}

/// "Applying pulled pages must reach at least 0.8 of the rate of a raw-SQLite upsert of the
/// same rows measured in the same run."
///
/// 2 000 units × 4 lessons × 1 asset (18 000 rows of three contracts) in pages of 500, applied
/// with ``OfflineStore/applyServerChanges(_:)`` into a fresh store per run: each page and its
/// cursor in one transaction, wire JSON converted to columns by the contracts, unsynced-write
/// checks, version columns. Baseline: the same rows exactly as the store wrote them (every
/// column), upserted with raw GRDB (`INSERT … ON CONFLICT DO UPDATE`, one cached statement per
/// table, one transaction per 500) into the same tables of another fresh store.
enum ClientApplyBenchmark {
    static let unitCount = 2_000
    static let lessonsPerUnit = 4
    static let pageSize = 500
    static let runs = 5
    static let bar = 0.8

    static let benchmark = Benchmark(
        name: "client-apply",
        summary: "a device applies \(Format.grouped(unitCount * (1 + 2 * lessonsPerUnit))) pulled content rows in pages of \(pageSize) "
            + "(bar: at least \(Format.fixed(bar, 1)) of the rate of a raw SQLite upsert of the same rows)",
        run: { try run() }
    )

    static func run() throws -> BenchmarkResult {
        var result = BenchmarkResult()
        let pages = ClientStoreBenchmarks.contentPages(unitCount: unitCount, lessonsPerUnit: lessonsPerUnit, pageSize: pageSize)
        let rowCount = pages.reduce(0) { $0 + $1.upserts.values.reduce(0) { $0 + $1.count } }
        let workspace = try TemporaryFolder("client-apply")
        defer { workspace.remove() }
        #if DEBUG
            result.fact("build", "DEBUG — these figures are not representative; run `make bench` (release)")
        #endif
        result.fact(
            "workload",
            "\(Format.grouped(unitCount)) units × \(lessonsPerUnit) lessons × 1 asset = \(Format.grouped(rowCount)) rows in "
                + "\(pages.count) pages of \(pageSize) (Unit, Lesson, Asset wire JSON as the content scope sends them)"
        )
        result.fact("store", "OfflineStore (GRDB DatabasePool, WAL), a fresh database per run in \(workspace.url.path)")
        result.fact("runs", "\(runs) timed after 1 warm-up")

        var apply = Samples()
        var stored: [(table: String, columns: [String], values: [[DatabaseValue]])] = []
        for run in 0...runs {
            let folder = try workspace.folder("apply-\(run)")
            let store = try ClientStoreBenchmarks.openStore(folder)
            let timed = try Timing.measure {
                for page in pages { try store.applyServerChanges(page) }
            }
            if run > 0 { apply.append(timed.seconds) }
            if run == runs {
                let queue = try DatabaseQueue(path: folder.appendingPathComponent("store.sqlite").path)
                stored = try queue.read { db in try ClientStoreBenchmarks.storedRows(db, tables: ["units", "lessons", "content_assets"]) }
                try queue.close()
            }
            try store.close()
            workspace.remove(folder)
        }
        let storedCount = stored.reduce(0) { $0 + $1.values.count }
        guard storedCount == rowCount else {
            throw BenchmarkError("the store holds \(storedCount) rows after applying \(rowCount)")
        }

        var raw = Samples()
        for run in 0...runs {
            let folder = try workspace.folder("raw-\(run)")
            try ClientStoreBenchmarks.openStore(folder).close()
            let pool = try DatabasePool(path: folder.appendingPathComponent("store.sqlite").path)
            let timed = try Timing.measure { try rawUpsert(stored, into: pool) }
            if run > 0 { raw.append(timed.seconds) }
            try pool.close()
            workspace.remove(folder)
        }

        let total = Double(rowCount)
        let ratio = (total / apply.median) / (total / raw.median)
        result.rows = [
            .init(
                "applyServerChanges: \(pages.count) pages", median: Format.duration(apply.median), min: Format.duration(apply.min),
                note: "each page + cursor one transaction"
            ),
            .init("  rows per second", median: Format.rate(total / apply.median), min: Format.rate(total / apply.min)),
            .init(
                "baseline: raw GRDB upsert of the same rows", median: Format.duration(raw.median), min: Format.duration(raw.min),
                note: "same tables and indexes, cached statements, 1 tx per \(pageSize)"
            ),
            .init("  rows per second", median: Format.rate(total / raw.median), min: Format.rate(total / raw.min)),
            .init(
                "rate ratio apply / raw", median: Format.fixed(ratio, 2), min: Format.fixed((total / apply.min) / (total / raw.min), 2),
                note: "the bar: at least \(Format.fixed(bar, 2))"
            ),
        ]
        result.check(
            "apply rate ≥ \(Format.fixed(bar, 2)) × raw upsert rate", ratio >= bar,
            "\(Format.rate(total / apply.median)) vs \(Format.rate(total / raw.median)) = \(Format.fixed(ratio, 2))"
        )
        return result
    }

    /// `INSERT … ON CONFLICT DO UPDATE` of every column (the first is the primary key): the
    /// raw-SQLite baseline of the device benchmarks.
    static func rawUpsertSQL(table: String, columns: [String]) -> String {
        let quoted = columns.map(\.quotedDatabaseIdentifier)
        return "INSERT INTO \(table.quotedDatabaseIdentifier) (\(quoted.joined(separator: ", "))) VALUES ("
            + Array(repeating: "?", count: columns.count).joined(separator: ", ") + ") ON CONFLICT DO UPDATE SET "
            + quoted.dropFirst().map { "\($0) = excluded.\($0)" }.joined(separator: ", ")
    }

    /// Upserts every stored row again, table by table, 500 rows per transaction.
    static func rawUpsert(_ tables: [(table: String, columns: [String], values: [[DatabaseValue]])], into pool: DatabasePool) throws {
        for (table, columns, values) in tables {
            let sql = rawUpsertSQL(table: table, columns: columns)
            var start = 0
            while start < values.count {
                let batch = values[start..<min(start + ClientApplyBenchmark.pageSize, values.count)]
                try pool.write { db in
                    let statement = try db.cachedStatement(sql: sql)
                    for row in batch { try statement.execute(arguments: StatementArguments(row)) }
                }
                start += ClientApplyBenchmark.pageSize
            }
        }
    }
}

/// "Reads p99 under 1 ms on a 10 000-unit cache."
///
/// A store holding 10 000 units, 30 000 lessons and 30 000 assets; 2 000 reads of each kind at
/// random units after a warm-up: a unit by id, a unit's detail (unit, lessons, assets, download
/// records), the first catalogue page (50 units by `sort_index`), the number of cached units.
/// Baseline: a raw GRDB `SELECT * FROM units WHERE id = ?` on the same file.
enum ClientReadBenchmark {
    static let unitCount = 10_000
    static let lessonsPerUnit = 3
    static let readsPerKind = 2_000
    static let barSeconds = 0.001

    static let benchmark = Benchmark(
        name: "client-reads",
        summary: "typed reads on a \(Format.grouped(unitCount))-unit cache (bar: p99 under 1 ms)",
        run: { try run() }
    )

    static func run() throws -> BenchmarkResult {
        var result = BenchmarkResult()
        let workspace = try TemporaryFolder("client-reads")
        defer { workspace.remove() }
        let folder = try workspace.folder("store")
        let store = try ClientStoreBenchmarks.openStore(folder)
        defer { try? store.close() }
        for page in ClientStoreBenchmarks.contentPages(unitCount: unitCount, lessonsPerUnit: lessonsPerUnit, pageSize: 1_000) {
            try store.applyServerChanges(page)
        }
        let cached = try store.count(Unit.self)
        guard cached == unitCount else { throw BenchmarkError("the cache holds \(cached) units, expected \(unitCount)") }
        #if DEBUG
            result.fact("build", "DEBUG — these figures are not representative; run `make bench` (release)")
        #endif
        result.fact(
            "cache",
            "\(Format.grouped(unitCount)) units, \(Format.grouped(unitCount * lessonsPerUnit)) lessons, "
                + "\(Format.grouped(unitCount * lessonsPerUnit)) assets in one OfflineStore (WAL) at \(folder.path)"
        )
        result.fact("reads", "\(Format.grouped(readsPerKind)) of each kind at random units, after \(readsPerKind / 10) untimed")

        var random = SeededGenerator(seed: ClientStoreBenchmarks.seed)
        let ids = (0..<(readsPerKind + readsPerKind / 10)).map { _ in "unit-\(random.int(in: 0...(unitCount - 1)))" }
        var checks: [(String, Samples)] = []

        checks.append(("fetch(Unit.self, id:)", try measure(ids) { id in _ = try store.fetch(Unit.self, id: id) }))
        checks.append(("unitDetail(id:) with lessons and assets", try measure(ids) { id in _ = try store.unitDetail(id: id) }))
        checks.append(
            (
                "first catalogue page (50 by sort_index)",
                try measure(ids) { _ in
                    _ = try store.read { (reader: StoreReader) throws(OfflineStoreError) in
                        try reader.all(Unit.self, orderBy: [.ascending("sort_index")], limit: 50)
                    }
                }
            ))
        checks.append(("count(Unit.self)", try measure(ids) { _ in _ = try store.count(Unit.self) }))

        let pool = try DatabasePool(path: folder.appendingPathComponent("store.sqlite").path)
        defer { try? pool.close() }
        let raw = try measure(ids) { id in
            _ = try pool.read { db in try Row.fetchOne(db, sql: #"SELECT * FROM "units" WHERE "id" = ?"#, arguments: [id]) }
        }

        for (name, samples) in checks {
            result.rows.append(
                .init(
                    name, median: Format.duration(samples.median), min: Format.duration(samples.min),
                    note: "p99 \(Format.duration(samples.percentile(0.99))), max \(Format.duration(samples.max)), "
                        + "\(Format.ratio(samples.median / raw.median)) raw median"
                )
            )
        }
        result.rows.append(
            .init(
                "baseline: raw GRDB SELECT of one unit row", median: Format.duration(raw.median), min: Format.duration(raw.min),
                note: "p99 \(Format.duration(raw.percentile(0.99)))"
            )
        )
        for (name, samples) in checks {
            let p99 = samples.percentile(0.99)
            result.check("\(name): p99 under 1 ms", p99 < barSeconds, "p99 \(Format.duration(p99))")
        }
        return result
    }

    /// Times `body` once per id (the first tenth untimed, as a warm-up).
    static func measure(_ ids: [String], _ body: (String) throws -> Void) throws -> Samples {
        var samples = Samples()
        let warmUp = ids.count / 11
        for (index, id) in ids.enumerated() {
            let timed = try Timing.measure { try body(id) }
            if index >= warmUp { samples.append(timed.seconds) }
        }
        return samples
    }
}
