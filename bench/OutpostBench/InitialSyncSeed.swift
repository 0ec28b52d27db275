import ContractRuntime
import Contracts
import Foundation
import SyncProtocol
import SyncServer

/// A learner's history in the `user` scope, as the server stores it after years of use: for
/// each attempt at an assessment, the learner's answers (`AssessmentResponse`, last-writer-wins,
/// pushed by the device), the attempt as the server scored it (`Attempt`) and, when passed, a
/// `CompletionRecord`. Written straight into a server data folder through ``SQLiteStorage`` (the
/// rows and the sync metadata a push would have written: scope key, Lamport `_seq`, version,
/// HLC for the pushed rows, tombstones), so seeding a million rows takes seconds, not the
/// minutes the push path would.
enum InitialSyncSeed {
    static let tenant = "bench-tenant"
    static let learner = DeviceIdentity(tenant: tenant, userID: "learner-1", deviceID: "phone-1", expiresAt: 4_102_444_800)
    static let questionsPerAttempt = 20
    /// One answer in this many is a tombstone (the learner cleared it before submitting).
    static let tombstoneEvery = 250
    /// Rows per write transaction while seeding.
    static let batchSize = 10_000

    /// What was written, by contract.
    struct Composition: Sendable {
        var rows: [String: Int] = [:]
        var tombstones: [String: Int] = [:]

        var total: Int { rows.values.reduce(0, +) }
        var tombstoneTotal: Int { tombstones.values.reduce(0, +) }
        /// Rows a device holds after syncing everything (tombstones are deletes).
        func live(_ contract: String) -> Int { (rows[contract] ?? 0) - (tombstones[contract] ?? 0) }

        var description: String {
            rows.keys.sorted().map { name in
                "\(name) \(Format.grouped(rows[name]!))" + ((tombstones[name] ?? 0) > 0 ? " (\(Format.grouped(tombstones[name]!)) tombstones)" : "")
            }.joined(separator: ", ")
        }
    }

    /// The learner's scope key (`progress:user:learner-1`).
    static let scopeKey = ContractRegistry.scope(named: "user")!.key(["user_id": learner.userID])!

    /// Writes `count` rows of the learner's scope into `storage`, in `_seq` order.
    static func seed(_ count: Int, into storage: SQLiteStorage, seed: UInt64) throws -> Composition {
        var generator = Generator(seed: seed)
        var composition = Composition()
        var written = 0
        while written < count {
            var batch: [(ContractTable, StoredRow)] = []
            batch.reserveCapacity(min(batchSize, count - written) + questionsPerAttempt + 2)
            while batch.count < batchSize, written + batch.count < count {
                for (entity, row) in try generator.attempt() where written + batch.count < count {
                    batch.append((ContractTable(entity), row))
                    composition.rows[entity.name, default: 0] += 1
                    if row.integer("_deleted") == 1 { composition.tombstones[entity.name, default: 0] += 1 }
                }
            }
            let rows = batch
            let key = scopeKey
            try runBlocking {
                try await storage.write { transaction in
                    for (table, row) in rows {
                        var stored = row
                        stored["_seq"] = .integer(try await transaction.nextScopeSequence(tenant: tenant, scopeKey: key))
                        try await transaction.upsert(stored, in: table)
                    }
                }
            }
            written += rows.count
        }
        return composition
    }

    /// Makes the rows of one attempt after another, with times that move forward.
    struct Generator {
        var ids: ULIDMaker
        var clock: Int64 = Timestamp(iso8601: "2023-09-04T07:30:00.000Z")!.millisecondsSince1970
        let assessments: [String]
        let units: [String]
        var attempts = 0
        var answers = 0

        init(seed: UInt64) {
            let start = clock
            var made = ULIDMaker(seed: seed)
            assessments = (0..<40).map { _ in "assessment-" + made.make(milliseconds: start - 86_400_000 * 30) }
            units = (0..<60).map { _ in "unit-" + made.make(milliseconds: start - 86_400_000 * 60) }
            ids = made
        }

        /// The answers of one attempt, then the attempt, then its completion record when passed.
        mutating func attempt() throws -> [(EntityDescriptor, StoredRow)] {
            attempts += 1
            clock += Int64(ids.random.int(in: 600_000...86_400_000))
            let started = clock
            let assessment = ids.random.pick(assessments)
            let attemptID = ids.make(milliseconds: started)
            var rows: [(EntityDescriptor, StoredRow)] = []
            var answered = 0
            var score = 0.0
            for question in 1...InitialSyncSeed.questionsPerAttempt {
                clock += Int64(ids.random.int(in: 4_000...90_000))
                answers += 1
                let answer: JSONValue
                switch ids.random.int(in: 0...9) {
                case 0: answer = .null
                case 1...6: answer = .object(["choice": .int(Int64(ids.random.int(in: 0...3)))])
                case 7, 8: answer = .object(["choices": .array((0..<ids.random.int(in: 1...3)).map { _ in .int(Int64(ids.random.int(in: 0...4))) })])
                default: answer = .object(["text": .string(PullCompressionBenchmark.sentence(&ids.random, 3...12))])
                }
                if answer != .null {
                    answered += 1
                    if ids.random.chance(70) { score += 1 }
                }
                var wire: [String: JSONValue] = [
                    "id": .string(PullCompressionBenchmark.uuid(&ids.random)), "assessment_id": .string(assessment),
                    "attempt_id": .string(attemptID), "question_id": .string("q\(question)"), "answer": answer,
                    "time_spent_ms": .int(Int64(ids.random.int(in: 2_000...120_000))), "flagged_for_review": .bool(ids.random.chance(8)),
                    "updated_at": .string(Timestamp(millisecondsSince1970: clock).iso8601),
                ]
                if answer != .null { wire["answered_at"] = .string(Timestamp(millisecondsSince1970: clock).iso8601) }
                let hlc = HybridLogicalClock(milliseconds: clock, counter: 0, node: learner.deviceID).description
                rows.append(
                    (
                        ContractRegistry.assessmentResponse,
                        try stored(
                            ContractRegistry.assessmentResponse, wire, at: clock, hlc: hlc, deleted: answers % InitialSyncSeed.tombstoneEvery == 0)
                    ))
            }
            clock += Int64(ids.random.int(in: 1_000...30_000))
            let maxScore = Double(InitialSyncSeed.questionsPerAttempt)
            let passed = score / maxScore >= 0.6
            let attempt: [String: JSONValue] = [
                "id": .string(attemptID), "assessment_id": .string(assessment),
                "enrollment_id": ids.random.chance(50) ? .string("enrollment-\(attempts % 7)") : .null,
                "state": .string(ids.random.chance(90) ? "submitted" : "closed"), "outcome": .string(passed ? "passed" : "failed"),
                "score": .double(score), "max_score": .double(maxScore), "answered_count": .int(Int64(answered)),
                "started_at": .string(Timestamp(millisecondsSince1970: started).iso8601),
                "ended_at": .string(Timestamp(millisecondsSince1970: clock).iso8601),
                "updated_at": .string(Timestamp(millisecondsSince1970: clock).iso8601),
            ]
            rows.append((ContractRegistry.attempt, try stored(ContractRegistry.attempt, attempt, at: clock, hlc: nil, deleted: false)))
            if passed {
                let completed = Timestamp(millisecondsSince1970: clock)
                let record: [String: JSONValue] = [
                    "id": .string("completion-" + ids.make(milliseconds: clock)), "unit_id": .string(ids.random.pick(units)),
                    "lesson_id": ids.random.chance(60) ? .string("lesson-" + ids.make(milliseconds: clock)) : .null,
                    "attempt_id": .string(attemptID), "passed": .bool(true), "score": .double(score / maxScore),
                    "completed_at": .string(completed.iso8601), "completed_on": .string(String(completed.iso8601.prefix(10))),
                    "updated_at": .string(completed.iso8601),
                ]
                rows.append(
                    (ContractRegistry.completionRecord, try stored(ContractRegistry.completionRecord, record, at: clock, hlc: nil, deleted: false)))
            }
            return rows
        }

        /// The row as the server stores it: contract columns converted by the server's own
        /// ``RowCodec``, and the sync metadata a write leaves (`_seq` is set when written).
        func stored(_ entity: EntityDescriptor, _ wire: [String: JSONValue], at millis: Int64, hlc: String?, deleted: Bool) throws -> StoredRow {
            var row = StoredRow()
            for field in entity.fields {
                do {
                    row[field.name] = try RowCodec.columnValue(wire[field.name] ?? field.defaultValue ?? .null, for: field)
                } catch {
                    throw BenchmarkError("seeding \(entity.name).\(field.name): \(error.message)")
                }
            }
            row["_tenant_id"] = .text(InitialSyncSeed.tenant)
            row["_scope_key"] = .text(InitialSyncSeed.scopeKey)
            row["_version"] = .integer(deleted ? 2 : 1)
            row["_schema_version"] = .integer(Int64(entity.currentVersion))
            row["_hlc"] = hlc.map(ColumnValue.text) ?? .null
            row["_field_clocks"] = .null
            row["_deleted"] = .integer(deleted ? 1 : 0)
            row["_updated_at"] = .integer(millis)
            row["_updated_by"] = .text(hlc == nil ? "server" : InitialSyncSeed.learner.deviceID)
            return row
        }
    }
}
