public import ContractRuntime
public import Contracts
import Foundation
import GRDB
public import SyncClient
import SyncProtocol

/// Taking an assessment offline, and the conflicts of a submitted attempt.
///
/// ```swift
/// guard let shown = try store.assessmentAvailability(id: "quiz-1"), shown.isOpen else { return }
/// let attempt = try store.startAttempt(assessmentId: "quiz-1")      // taken on shown.revision
/// try store.answer(attemptId: attempt.attemptId, questionId: "q1", answer: .int(0))
/// try store.submitAttempt(attemptId: attempt.attemptId)           // queued; the server grades it
/// ```
///
/// An attempt remembers the assessment revision it was started on, and its submission
/// (``Contracts/AttemptSubmitted``) says so. When the server's assessment has moved to a newer
/// revision by then, or was deleted, the submission comes back as a conflict, listed by
/// ``attemptConflicts(includeResolved:)`` with the learner's answers, which stay on the device
/// until the app resolves it (``resolveAttemptConflict(_:with:)``).
extension OfflineStore {
    // MARK: Before starting

    /// The assessment as a learner should see it before starting: its revision, last day, time
    /// limit and whether it is still open by the device's clock, and the attempt in progress;
    /// `nil` when the device does not have it.
    public func assessmentAvailability(id: String) throws(OfflineStoreError) -> AssessmentAvailability? {
        guard let assessment = try fetch(Assessment.self, id: id) else { return nil }
        return AssessmentAvailability(
            assessment: assessment, today: Self.utcDay(now()), attemptInProgress: try attemptInProgress(assessmentId: id)
        )
    }

    /// The attempt this device is taking at an assessment: started here, neither handed in nor
    /// given up, and not closed by the server.
    public func attemptInProgress(assessmentId: String) throws(OfflineStoreError) -> AttemptInProgress? {
        try readTables(withReader: { reader, db in try inProgress(reader, db, assessmentId: assessmentId, attemptId: nil) })
    }

    // MARK: Taking it

    /// Starts an attempt on the assessment's current revision: records the `attempted`
    /// `Statement` (queued) and remembers the revision and time limit on the device,
    /// in one transaction.
    ///
    /// - Throws: ``AssessmentError/unknownAssessment(id:)``, ``AssessmentError/closed(assessmentId:lastDay:)``
    ///   after its last day, ``AssessmentError/attemptInProgress(attemptId:)``, ``AssessmentError/store(_:)``.
    @discardableResult
    public func startAttempt(assessmentId: String) throws(AssessmentError) -> AttemptInProgress {
        let found: AssessmentAvailability?
        do {
            found = try assessmentAvailability(id: assessmentId)
        } catch {
            throw .store(error)
        }
        guard let availability = found else { throw .unknownAssessment(id: assessmentId) }
        if let lastDay = availability.availableUntil, !availability.isOpen {
            throw .closed(assessmentId: assessmentId, lastDay: lastDay)
        }
        if let open = availability.attemptInProgress { throw .attemptInProgress(attemptId: open.attemptId) }
        let assessment = availability.assessment
        let attemptId = newIdentifier()
        let started = now()
        let statement = Statement(
            id: newIdentifier(), verb: .attempted, objectId: assessmentId, attemptId: attemptId, statedAt: started
        )
        do {
            try writeTables(withTransaction: { transaction, db in
                try db.execute(
                    sql: """
                        INSERT INTO "learning_attempts" ("attempt_id", "assessment_id", "assessment_revision", "time_limit_seconds", "started_at")
                        VALUES (?, ?, ?, ?, ?)
                        """,
                    arguments: [attemptId, assessmentId, assessment.revision, assessment.timeLimitSeconds, started.millisecondsSince1970]
                )
                try transaction.create(statement)
                // Taken: neither retention nor the row limit may drop it until it is handed in.
                try transaction.pin(Assessment.self, id: assessmentId)
                try transaction.markAccessed(Assessment.self, id: assessmentId)
            })
        } catch {
            throw .store(error)
        }
        return AttemptInProgress(
            attemptId: attemptId, assessmentId: assessmentId, assessmentRevision: assessment.revision, startedAt: started.date,
            deadline: Self.deadline(started, limit: assessment.timeLimitSeconds).map(\.date), answers: [:]
        )
    }

    /// Answers a question of an attempt in progress (an `AnswerRecorded` event,
    /// queued); answering again replaces the answer.
    ///
    /// - Throws: ``AssessmentError/attemptNotInProgress(attemptId:)``,
    ///   ``AssessmentError/timeLimitReached(attemptId:deadline:)`` once its time ran out by the
    ///   device's clock (the server would not count it), ``AssessmentError/store(_:)``.
    @discardableResult
    public func answer(
        attemptId: String, questionId: String, answer: JSONValue, timeSpentMs: Int64 = 0
    ) throws(AssessmentError) -> EventEnvelope<AnswerRecorded> {
        _ = try requireInProgress(attemptId)
        do {
            return try record(AnswerRecorded(attemptId: attemptId, questionId: questionId, answer: answer, timeSpentMs: timeSpentMs))
        } catch {
            throw .store(error)
        }
    }

    /// Hands an attempt in (an `AttemptSubmitted` event naming the revision it was
    /// taken on, queued); the server grades it. A submission after the assessment was deleted
    /// on the device too is still queued: the server answers it with a conflict that keeps the
    /// answers.
    ///
    /// - Parameters:
    ///   - attemptId: the attempt, as ``startAttempt(assessmentId:)`` returned it.
    ///   - submittedOffline: whether the device has no connection now (recorded for reports).
    /// - Throws: ``AssessmentError/attemptNotInProgress(attemptId:)``,
    ///   ``AssessmentError/timeLimitReached(attemptId:deadline:)``,
    ///   ``AssessmentError/closed(assessmentId:lastDay:)`` after the assessment's last day, by
    ///   the device's clock, ``AssessmentError/store(_:)``.
    @discardableResult
    public func submitAttempt(attemptId: String, submittedOffline: Bool = false) throws(AssessmentError) -> EventEnvelope<AttemptSubmitted> {
        let attempt = try requireInProgress(attemptId)
        do {
            if let lastDay = try fetch(Assessment.self, id: attempt.assessmentId)?.availableUntil, Self.utcDay(now()) > lastDay {
                throw AssessmentError.closed(assessmentId: attempt.assessmentId, lastDay: lastDay)
            }
            let submitted = try record(
                AttemptSubmitted(
                    attemptId: attemptId, assessmentId: attempt.assessmentId, answeredCount: Int64(attempt.answers.count),
                    totalTimeMs: attempt.answers.values.reduce(0) { $0 + $1.timeSpentMs }, submittedOffline: submittedOffline,
                    assessmentRevision: attempt.assessmentRevision
                )
            )
            // Handed in: the assessment may go again, completed ones first over the row limit.
            try? unpin(Assessment.self, id: attempt.assessmentId)
            try? markCompleted(Assessment.self, id: attempt.assessmentId)
            return submitted
        } catch let error as AssessmentError {
            throw error
        } catch {
            throw .store(error as? OfflineStoreError ?? .invalidResolution(reason: "\(error)"))
        }
    }

    // MARK: Conflicts

    /// The attempts the server answered with a conflict (a newer revision, or a deleted
    /// assessment), oldest first, each with the learner's answers: the open ones, or all.
    public func attemptConflicts(includeResolved: Bool = false) throws(OfflineStoreError) -> [AttemptConflict] {
        let name = AttemptSubmitted.descriptor.name
        let records = try conflicts(includeResolved: includeResolved).filter { $0.entity == name }
        guard !records.isEmpty else { return [] }
        var result: [AttemptConflict] = []
        for record in records {
            let found = try read { reader throws(OfflineStoreError) in try reader.event(AttemptSubmitted.self, id: record.rowId) }
            // The submission is in the device's event log, which keeps every event it recorded.
            guard let submission = found else { continue }
            let local = try fetch(Assessment.self, id: submission.payload.assessmentId)
            var kind = AttemptConflict.Kind.assessmentDeleted
            if record.serverResolution != ConflictResolutionText.deleted, let theirs = try? record.server(as: Assessment.self) {
                // The newer of the conflict's row and the one the device pulled since.
                kind = .newRevision(current: local.map { $0.revision >= theirs.revision ? $0 : theirs } ?? theirs)
            }
            let answers = try read { reader throws(OfflineStoreError) in try latestAnswers(reader, attemptId: submission.payload.attemptId) }
            result.append(
                AttemptConflict(
                    id: record.id, attemptId: submission.payload.attemptId, assessmentId: submission.payload.assessmentId,
                    assessmentTitle: local?.title, takenRevision: submission.payload.assessmentRevision, kind: kind,
                    answers: answers.values.sorted { $0.questionId < $1.questionId }, submittedAt: submission.occurredAt.date,
                    detectedAt: record.detectedAt, resolution: record.resolution
                )
            )
        }
        return result
    }

    /// Resolves an open attempt conflict with the learner's choice, in one transaction:
    ///
    /// - ``AttemptConflictChoice/submitAnyway``: the attempt is handed in again, as it was taken
    ///   and at the time it was first handed in, with `submit_anyway`; the server grades it
    ///   against the revision it was taken on. Returns the new submission.
    /// - ``AttemptConflictChoice/retake``: the attempt is given up, and the new revision is
    ///   stored on the device (unless a newer one is already there); start a new attempt.
    /// - ``AttemptConflictChoice/discard``: the attempt and its answers are given up. The
    ///   answers stay in the device's event log; ``AttemptConflict/exportedAnswers()`` first
    ///   keeps them for the learner.
    ///
    /// - Throws: ``AssessmentError/invalidChoice(conflictId:reason:)`` for a choice the conflict
    ///   does not offer (``AttemptConflict/choices``), ``AssessmentError/store(_:)`` with
    ///   ``OfflineStoreError/conflictNotFound(id:)`` when it is not an open attempt conflict.
    @discardableResult
    public func resolveAttemptConflict(_ id: Int64, with choice: AttemptConflictChoice) throws(AssessmentError) -> EventEnvelope<AttemptSubmitted>? {
        let conflict: AttemptConflict
        let record: ConflictRecord
        do {
            guard let found = try attemptConflicts().first(where: { $0.id == id }), let stored = try self.conflict(id: id) else {
                throw OfflineStoreError.conflictNotFound(id: id)
            }
            conflict = found
            record = stored
        } catch {
            throw .store(error as? OfflineStoreError ?? .conflictNotFound(id: id))
        }
        guard conflict.choices.contains(choice) else {
            throw .invalidChoice(
                conflictId: id,
                reason: "\(conflict.assessmentId) was deleted on the server: export the answers and discard, nothing can be submitted"
            )
        }
        do {
            switch choice {
            case .submitAnyway:
                let original = try read { reader throws(OfflineStoreError) in try reader.event(AttemptSubmitted.self, id: record.rowId) }
                guard let original else { throw OfflineStoreError.conflictNotFound(id: id) }
                var payload = original.payload
                payload.submitAnyway = true
                return try transaction { transaction throws(OfflineStoreError) in
                    try transaction.settleConflict(id, as: .keepMine)
                    // Handed in when it first was: the deadline and the time limit are judged by that.
                    return try transaction.record(payload, occurredAt: original.occurredAt.date)
                }
            case .retake:
                guard case .newRevision = conflict.kind else { return nil }
                try writeTables(withTransaction: { transaction, db in
                    try transaction.settleConflict(id, as: .takeTheirs)
                    try abandon(db, conflict.attemptId, now: transaction.now)
                    // Download the new revision now: the conflict brought it.
                    try transaction.storeServerRow(Assessment.self, of: record)
                })
                return nil
            case .discard:
                try writeTables(withTransaction: { transaction, db in
                    try transaction.settleConflict(id, as: .discarded)
                    try abandon(db, conflict.attemptId, now: transaction.now)
                })
                return nil
            }
        } catch {
            throw .store(error as? OfflineStoreError ?? .invalidResolution(reason: "\(error)"))
        }
    }

    // MARK: - Internals

    /// The UTC day of a timestamp.
    static func utcDay(_ time: Timestamp) -> CalendarDate {
        let millis = time.millisecondsSince1970
        let days = millis >= 0 ? millis / 86_400_000 : (millis - 86_399_999) / 86_400_000
        return CalendarDate(daysSince1970: Int(days))
    }

    static func deadline(_ started: Timestamp, limit: Int64?) -> Timestamp? {
        guard let limit, limit >= 0, limit < Int64.max / 1000 - started.millisecondsSince1970 / 1000 else { return nil }
        return Timestamp(millisecondsSince1970: started.millisecondsSince1970 + limit * 1000)
    }

    /// The attempt in progress with that id, after checking its time by the device's clock.
    private func requireInProgress(_ attemptId: String) throws(AssessmentError) -> AttemptInProgress {
        let found: AttemptInProgress?
        do {
            found = try readTables(withReader: { reader, db in try inProgress(reader, db, assessmentId: nil, attemptId: attemptId) })
        } catch {
            throw .store(error)
        }
        guard let attempt = found else { throw .attemptNotInProgress(attemptId: attemptId) }
        if let deadline = attempt.deadline, now().date > deadline { throw .timeLimitReached(attemptId: attemptId, deadline: deadline) }
        return attempt
    }

    /// The attempts in progress, newest first: those started here (`learning_attempts`), then
    /// those an older build started with an `attempted` statement alone.
    private func inProgress(_ reader: StoreReader, _ db: Database, assessmentId: String?, attemptId: String?) throws -> AttemptInProgress? {
        var candidates: [(attemptId: String, assessmentId: String, revision: Int64?, started: Int64, limit: Int64?)] = []
        let filter = attemptId != nil ? #""attempt_id" = ?"# : #""assessment_id" = ?"#
        let key = attemptId ?? assessmentId ?? ""
        for row in try Row.fetchAll(
            db, sql: #"SELECT * FROM "learning_attempts" WHERE "# + filter + #" AND "abandoned_at" IS NULL ORDER BY "started_at" DESC"#,
            arguments: [key]
        ) {
            candidates.append(
                (
                    row["attempt_id"] as String, row["assessment_id"] as String, row["assessment_revision"] as Int64?, row["started_at"] as Int64,
                    row["time_limit_seconds"] as Int64?
                )
            )
        }
        let statements = Statement.descriptor.table.quotedDatabaseIdentifier
        let legacyFilter = attemptId != nil ? #""attempt_id" = ?"# : #""object_id" = ?"#
        for row in try Row.fetchAll(
            db,
            sql: "SELECT \"attempt_id\", \"object_id\", \"stated_at\" FROM \(statements) WHERE \"verb\" = 'attempted' AND \(legacyFilter) "
                + #"AND "attempt_id" IS NOT NULL AND "attempt_id" NOT IN (SELECT "attempt_id" FROM "learning_attempts") "#
                + #"ORDER BY "stated_at" DESC"#,
            arguments: [key]
        ) {
            candidates.append((row["attempt_id"] as String, row["object_id"] as String, nil, row["stated_at"] as Int64, nil))
        }
        let submissions = AttemptSubmitted.descriptor.table.quotedDatabaseIdentifier
        let attempts = Attempt.descriptor.table.quotedDatabaseIdentifier
        for candidate in candidates {
            let submitted =
                try Bool.fetchOne(
                    db, sql: "SELECT EXISTS (SELECT 1 FROM \(submissions) WHERE \"attempt_id\" = ?)", arguments: [candidate.attemptId]
                ) ?? false
            if submitted { continue }
            let state = try String.fetchOne(db, sql: "SELECT \"state\" FROM \(attempts) WHERE \"id\" = ?", arguments: [candidate.attemptId])
            if let state, state != Attempt.State.open.rawValue { continue }
            let started = Timestamp(millisecondsSince1970: candidate.started)
            return AttemptInProgress(
                attemptId: candidate.attemptId, assessmentId: candidate.assessmentId, assessmentRevision: candidate.revision,
                startedAt: started.date, deadline: Self.deadline(started, limit: candidate.limit).map(\.date),
                answers: try latestAnswers(reader, attemptId: candidate.attemptId)
            )
        }
        return nil
    }

    /// The latest answer to each question of an attempt, from the device's event log.
    private func latestAnswers(_ reader: StoreReader, attemptId: String) throws(OfflineStoreError) -> [String: RecordedAnswer] {
        var latest: [String: RecordedAnswer] = [:]
        for envelope in try reader.events(AnswerRecorded.self, where: "attempt_id", equals: attemptId) {
            latest[envelope.payload.questionId] = RecordedAnswer(
                questionId: envelope.payload.questionId, answer: envelope.payload.answer, timeSpentMs: envelope.payload.timeSpentMs,
                answeredAt: envelope.occurredAt.date
            )
        }
        return latest
    }

    private func abandon(_ db: Database, _ attemptId: String, now: Int64) throws {
        try db.execute(
            sql: #"UPDATE "learning_attempts" SET "abandoned_at" = ? WHERE "attempt_id" = ? AND "abandoned_at" IS NULL"#,
            arguments: [now, attemptId]
        )
        if db.changesCount == 0 {
            // An attempt an older build started: remembered as given up from now on.
            try db.execute(
                sql: """
                    INSERT OR IGNORE INTO "learning_attempts" ("attempt_id", "assessment_id", "assessment_revision", "started_at", "abandoned_at")
                    SELECT "attempt_id", "object_id", 0, "stated_at", ? FROM \(Statement.descriptor.table.quotedDatabaseIdentifier)
                    WHERE "verb" = 'attempted' AND "attempt_id" = ? LIMIT 1
                    """,
                arguments: [now, attemptId]
            )
        }
    }
}

/// How the server names a conflict about a deleted row (`resolution`).
enum ConflictResolutionText {
    static let deleted = "deleted"
}
