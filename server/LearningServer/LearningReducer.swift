import ContractRuntime
import Contracts
import SyncProtocol
import SyncServer

/// Folds a learner's facts into the server-authoritative `Attempt` and `CompletionRecord`.
///
/// **Attempt.** Recomputed from every stored fact of the attempt in the learner's scope each
/// time one arrives, so the order facts arrive in and replays do not matter:
///
/// - Facts: `AnswerRecorded` and `AttemptSubmitted` events and `Statement` rows whose
///   `attempt_id` is the attempt.
/// - `assessment_id`: from a submission, the stored attempt, an `attempted` statement's
///   `object_id`, or the learner's `AssessmentResponse` rows. Until one of them names the
///   assessment the facts are stored but no attempt row exists.
/// - `answered_count`: the questions answered (the latest answer per question counts), or the
///   count a submission or the `answered` statements report, whichever is larger.
/// - `score` / `max_score`: computed by the server only. The assessment's `answer_key` (a
///   `server_only` field devices never receive: `[{"id": "q1", "correct": <answer>, "points":
///   1}]`, `points` defaulting to 1) grades the latest answer to each question, from the
///   learner's `AnswerRecorded` events and `AssessmentResponse` rows. What a device says of its
///   own result (a statement's `score`, `success`, or a `passed`/`failed` verb) is recorded and
///   audited but never scores or decides anything.
/// - Submission: an `AttemptSubmitted` event, or a statement with verb `passed`, `failed` or
///   `completed`. The outcome is `score / max_score` against the assessment's `pass_score`;
///   `incomplete` when the assessment has no answer key. A submitted attempt with a final
///   outcome is `closed` (it changes no more); an `incomplete` one stays `submitted`.
/// - Revisions: a submission names the assessment `revision` the attempt was taken on. An
///   earlier one than the server's is answered `conflicted` with the current assessment row
///   (nothing stored), unless the learner chose `submit_anyway`: then the attempt is graded by
///   the answer key, pass score and time limit of the revision taken, kept by the server in
///   `answer_key_history` (``AssessmentRevisions``). A submission that names no revision (an
///   older app) is graded against the current one. The attempt records the revision it was
///   graded against (`assessment_revision`).
/// - Refusals: an answer to an attempt that is no longer `open` is `rejected`
///   (`invalid_transition`: a late answer does not count); a second submission is a
///   `duplicate`; a fact about another learner's attempt is `rejected` (`not_writable`). A
///   submission after the assessment's `available_until` day (UTC, by the device's time of
///   submission) is `rejected` (`assessment_closed`); an answer or a submission later than the
///   attempt's start plus the assessment's `time_limit_seconds` is `rejected`
///   (`time_limit_exceeded`), and no answer after that point is graded (responses included).
///   A submission for a deleted assessment is `conflicted` with no server row and resolution
///   `deleted`: the answers stay stored, and the device keeps them for the app.
///
/// **CompletionRecord.** One per closed attempt (`attempt:<attempt id>`, `passed` from the
/// outcome, `score` as a share of `max_score`) when the assessment belongs to a unit; one per
/// learner and lesson (`lesson:<user id>:<lesson id>`) on the first `LessonProgressed` with
/// `completed` (or `progress` ≥ 1) or `Statement` `completed`/`passed` about a lesson. The first
/// completion stands; `completed_on` is the UTC day of the device's time.
struct LearningReducer: Reducer {
    var sources: Set<String> {
        [AnswerRecorded.descriptor.name, AttemptSubmitted.descriptor.name, LessonProgressed.descriptor.name, Statement.descriptor.name]
    }

    func verdict(for fact: ReducerFact, in context: ReducerContext) async throws -> ReducerVerdict {
        switch fact.contract {
        case AnswerRecorded.descriptor.name:
            let answer = try fact.decode(AnswerRecorded.self)
            guard let (attempt, row) = try await context.entity(Attempt.self, id: answer.attemptId) else { return .proceed }
            if row.text("_scope_key") != fact.scopeKey { return .rejected(Self.foreign(answer.attemptId)) }
            if attempt.state != .open {
                return .rejected(
                    ErrorDetail(
                        code: .invalidTransition,
                        message: "attempt '\(attempt.id)' was already submitted; the answer to '\(answer.questionId)' does not count"
                    )
                )
            }
            if let assessment = try await context.entity(Assessment.self, id: attempt.assessmentId) {
                // An open attempt does not know its revision yet (its submission names it).
                if let refusal = Self.beforePublication(
                    fact.occurredAt, of: assessment.row, revision: nil, what: "the answer to '\(answer.questionId)'", in: context
                ) {
                    return .rejected(refusal)
                }
                if let refusal = Self.timeLimitRefusal(
                    startedAt: attempt.startedAt, at: fact.occurredAt, limit: assessment.value.timeLimitSeconds,
                    what: "the answer to '\(answer.questionId)'"
                ) {
                    return .rejected(refusal)
                }
            }
        case AttemptSubmitted.descriptor.name:
            let submission = try fact.decode(AttemptSubmitted.self)
            let stored = try await context.entity(Attempt.self, id: submission.attemptId)
            if let (attempt, row) = stored {
                if row.text("_scope_key") != fact.scopeKey { return .rejected(Self.foreign(submission.attemptId)) }
                if attempt.state != .open { return .duplicate("attempt '\(attempt.id)' was already submitted") }
            }
            return try await submissionVerdict(submission, attempt: stored?.value, fact: fact, in: context)
        default:
            break
        }
        return .proceed
    }

    /// What the assessment says of a submission: deleted (a conflict without a server row, so the
    /// device keeps the learner's answers for the app to export or discard), closed
    /// (`assessment_closed`), over its time limit (`time_limit_exceeded`), or taken on an earlier
    /// revision than the server's and not submitted anyway (a conflict with the current row).
    private func submissionVerdict(
        _ submission: AttemptSubmitted, attempt: Attempt?, fact: ReducerFact, in context: ReducerContext
    ) async throws -> ReducerVerdict {
        guard let row = try await context.row(of: Assessment.descriptor, id: submission.assessmentId) else {
            return .proceed  // never published: stored, and scored as incomplete
        }
        if row.isDeleted { return .conflicted(entity: Assessment.descriptor, row: row) }
        let assessment = try ReducerContext.decode(Assessment.self, row: row)
        let what = "the submission of attempt '\(submission.attemptId)'"
        if let refusal = Self.beforePublication(fact.occurredAt, of: row, revision: submission.assessmentRevision, what: what, in: context) {
            return .rejected(refusal)
        }

        if let lastDay = assessment.availableUntil, ReducerContext.utcDay(fact.occurredAt) > lastDay {
            return .rejected(
                ErrorDetail(
                    code: .assessmentClosed,
                    message: "\(assessment.id) took submissions until \(lastDay) (UTC); attempt '\(submission.attemptId)' was submitted on "
                        + "\(ReducerContext.utcDay(fact.occurredAt))",
                    details: .object(["available_until": .string(lastDay.description)])
                )
            )
        }
        let grading = AssessmentRevisions.grading(of: row, revision: submission.assessmentRevision)
        var startedAt = attempt?.startedAt
        if startedAt == nil {
            let conditions: [String: ColumnValue] = ["attempt_id": .text(submission.attemptId), "_scope_key": .text(fact.scopeKey)]
            startedAt = try await context.events(AnswerRecorded.self, where: conditions).map(\.occurredAt).min()
                .map { Timestamp(millisecondsSince1970: $0) }
        }
        // A submission before the attempt's first fact, as the server holds them, ends nothing.
        if let startedAt, fact.occurredAt.millisecondsSince1970 < startedAt.millisecondsSince1970 - context.clockSkewMilliseconds {
            return .rejected(
                ErrorDetail(
                    code: .occurredAtOutOfRange,
                    message: "\(what) is dated \(fact.occurredAt.iso8601), before the attempt began (\(startedAt.iso8601))",
                    details: .object(["earliest_accepted": .string(startedAt.iso8601)])
                )
            )
        }
        if let startedAt,
            let refusal = Self.timeLimitRefusal(
                startedAt: startedAt, at: fact.occurredAt, limit: grading?.timeLimitSeconds ?? assessment.timeLimitSeconds,
                what: "the submission of attempt '\(submission.attemptId)'"
            )
        {
            return .rejected(refusal)
        }
        if let taken = submission.assessmentRevision, taken < assessment.revision, !submission.submitAnyway {
            return .conflicted(entity: Assessment.descriptor, row: row)
        }
        return .proceed
    }

    /// `occurred_at_out_of_range` when a learner's fact is dated before the assessment revision
    /// it is about was published (by the server's clock, less the clock skew allowed): no one
    /// answers a question before it exists, and a date ten years back would otherwise pass any
    /// `available_until`. `revision` is the one the attempt was taken on; when it is not named
    /// (an open attempt, an older app), the first revision the server knows the publication of
    /// bounds it. A revision published before the server kept publication times sets no bound.
    private static func beforePublication(
        _ time: Timestamp, of row: StoredRow, revision: Int64?, what: String, in context: ReducerContext
    ) -> ErrorDetail? {
        guard let (taken, published) = AssessmentRevisions.publication(of: row, revision: revision),
            time.millisecondsSince1970 < published.millisecondsSince1970 - context.clockSkewMilliseconds
        else { return nil }
        return ErrorDetail(
            code: .occurredAtOutOfRange,
            message: "\(what) is dated \(time.iso8601), before revision \(taken) of the assessment was published (\(published.iso8601))",
            details: .object(["earliest_accepted": .string(published.iso8601), "revision": .int(taken)])
        )
    }

    /// `time_limit_exceeded` when `time` is later than `startedAt` plus the limit.
    private static func timeLimitRefusal(startedAt: Timestamp, at time: Timestamp, limit: Int64?, what: String) -> ErrorDetail? {
        guard let limit, let deadline = deadline(startedAt: startedAt, limit: limit), time > deadline else { return nil }
        return ErrorDetail(
            code: .timeLimitExceeded,
            message: "\(what) came \((time.millisecondsSince1970 - startedAt.millisecondsSince1970) / 1000) s after the attempt started; "
                + "the time limit is \(limit) s",
            details: .object(["time_limit_seconds": .int(limit), "deadline": .string(deadline.iso8601)])
        )
    }

    /// When an attempt started at `startedAt` runs out of time.
    static func deadline(startedAt: Timestamp, limit: Int64?) -> Timestamp? {
        guard let limit, limit >= 0 else { return nil }
        let (millis, overflow) = limit.multipliedReportingOverflow(by: 1000)
        guard !overflow else { return nil }
        let (end, past) = startedAt.millisecondsSince1970.addingReportingOverflow(millis)
        return past ? nil : Timestamp(millisecondsSince1970: end)
    }

    func fold(_ fact: ReducerFact, in context: ReducerContext) async throws -> [ReducerEffect] {
        switch fact.contract {
        case AnswerRecorded.descriptor.name:
            return try await refoldAttempt(try fact.decode(AnswerRecorded.self).attemptId, fact: fact, in: context)
        case AttemptSubmitted.descriptor.name:
            return try await refoldAttempt(try fact.decode(AttemptSubmitted.self).attemptId, fact: fact, in: context)
        case Statement.descriptor.name:
            // Most statements (experienced, progressed, …) name no attempt and complete nothing:
            // leave them without decoding, which is most of the cost of ingesting them.
            let verb = fact.value(of: "verb")
            let namesAttempt = fact.value(of: "attempt_id").map { $0 != .null } ?? false
            guard namesAttempt || verb == .string(Statement.Verb.completed.rawValue) || verb == .string(Statement.Verb.passed.rawValue)
            else { return [] }
            let statement = try fact.decode(Statement.self)
            if let attemptID = statement.attemptId { return try await refoldAttempt(attemptID, fact: fact, in: context) }
            guard statement.verb == .completed || statement.verb == .passed,
                let (lesson, _) = try await context.entity(Lesson.self, id: statement.objectId)
            else { return [] }
            return try await completeLesson(lesson.id, unitID: lesson.unitId, at: statement.statedAt, score: statement.score, fact: fact, in: context)
        case LessonProgressed.descriptor.name:
            let progress = try fact.decode(LessonProgressed.self)
            guard progress.completed || progress.progress >= 1 else { return [] }
            return try await completeLesson(progress.lessonId, unitID: progress.unitId, at: fact.occurredAt, score: nil, fact: fact, in: context)
        default:
            return []
        }
    }

    private static func foreign(_ attemptID: String) -> ErrorDetail {
        ErrorDetail(code: .notWritable, message: "attempt '\(attemptID)' belongs to another learner")
    }

    // MARK: - Attempt

    private func refoldAttempt(_ attemptID: String, fact: ReducerFact, in context: ReducerContext) async throws -> [ReducerEffect] {
        let stored = try await context.entity(Attempt.self, id: attemptID)
        if let stored, stored.row.text("_scope_key") != fact.scopeKey || stored.value.state == .closed { return [] }

        let conditions: [String: ColumnValue] = ["attempt_id": .text(attemptID), "_scope_key": .text(fact.scopeKey)]
        let answers = try await context.events(AnswerRecorded.self, where: conditions)
        let submissions = try await context.events(AttemptSubmitted.self, where: conditions).sorted { $0.occurredAt < $1.occurredAt }
        let statements = try await context.entities(Statement.self, where: conditions).map(\.value).sorted {
            ($0.statedAt, $0.id) < ($1.statedAt, $1.id)
        }

        var assessmentID =
            submissions.first?.value.assessmentId ?? stored?.value.assessmentId
            ?? statements.first { $0.verb == .attempted }?.objectId
        if assessmentID == nil {
            assessmentID = try await context.entities(AssessmentResponse.self, where: conditions, limit: 1).first?.value.assessmentId
        }
        guard let assessmentID else { return [] }
        let storedAssessment = try await context.entity(Assessment.self, id: assessmentID)
        let assessment = storedAssessment?.value
        // Graded against the revision the attempt was taken on, as its submission says (the
        // current one when it does not, or when that revision's grading was never kept). The
        // answer key is server-only: read from the stored row, never from what devices see.
        let takenRevision = submissions.first?.value.assessmentRevision
        let grading = storedAssessment.flatMap {
            AssessmentRevisions.grading(of: $0.row, revision: takenRevision) ?? AssessmentRevisions.grading(of: $0.row, revision: nil)
        }
        let key = grading?.answerKey ?? AssessmentAnswerKey(.null)
        // Facts dated before the revision taken was published cannot be: an answer of an attempt
        // the server did not know yet was kept, but never counts (nor moves the start back).
        let earliest =
            storedAssessment.flatMap { AssessmentRevisions.publication(of: $0.row, revision: takenRevision) }
            .map { $0.at.millisecondsSince1970 - context.clockSkewMilliseconds } ?? .min
        let times =
            (answers.map { Timestamp(millisecondsSince1970: $0.occurredAt) }
            + submissions.map { Timestamp(millisecondsSince1970: $0.occurredAt) } + statements.map(\.statedAt))
            .filter { $0.millisecondsSince1970 >= earliest }
        let startedAt = stored?.value.startedAt ?? times.min() ?? fact.occurredAt
        // Answers after the time limit do not count (late events are refused; responses are rows).
        let deadline = Self.deadline(startedAt: startedAt, limit: grading?.timeLimitSeconds)

        // The latest answer per question: events, and the learner's editable responses.
        var latest: [String: (answer: JSONValue, at: Int64, id: String)] = [:]
        func consider(_ question: String, _ answer: JSONValue, at time: Int64, id: String) {
            if let deadline, time > deadline.millisecondsSince1970 { return }
            if time < earliest { return }
            if let current = latest[question], (current.at, current.id) > (time, id) { return }
            latest[question] = (answer, time, id)
        }
        for answer in answers {
            consider(answer.value.questionId, answer.value.answer, at: answer.occurredAt, id: answer.eventID)
        }
        for response in try await context.entities(AssessmentResponse.self, where: conditions) {
            guard let answer = response.value.answer, answer != .null else { continue }
            consider(
                response.value.questionId, answer, at: response.value.updatedAt.millisecondsSince1970, id: response.value.id.uuidString.lowercased())
        }
        let answeredStatements = statements.filter { $0.verb == .answered }
        let answeredCount = max(
            Int64(latest.count), submissions.map(\.value.answeredCount).max() ?? 0, Int64(Set(answeredStatements.map(\.objectId)).count)
        )

        // Score: the server's answer key against the stored answers, nothing a device claims.
        var score = 0.0
        var maxScore: Double?
        if !key.entries.isEmpty {
            maxScore = key.total
            for (question, answer) in latest {
                guard let entry = key.entries[question] else { continue }
                if CanonicalJSON.text(entry.correct) == CanonicalJSON.text(answer.answer) { score += entry.points }
            }
        }

        // Submission and outcome.
        let terminal = statements.last { Self.terminalVerbs.contains($0.verb) }
        let submittedAt = submissions.first.map { Timestamp(millisecondsSince1970: $0.occurredAt) } ?? terminal?.statedAt
        var outcome: Attempt.Outcome?
        if submittedAt != nil {
            if let maxScore, maxScore > 0, let grading {
                outcome = score / maxScore >= grading.passScore ? .passed : .failed
            } else {
                outcome = .incomplete
            }
        }
        let state: Attempt.State = submittedAt == nil ? .open : outcome == .incomplete ? .submitted : .closed

        let attempt = Attempt(
            id: attemptID, assessmentId: assessmentID, enrollmentId: stored?.value.enrollmentId, state: state, outcome: outcome,
            score: score, maxScore: maxScore, answeredCount: answeredCount,
            assessmentRevision: submittedAt == nil ? nil : takenRevision ?? assessment?.revision,
            startedAt: startedAt, endedAt: submittedAt, updatedAt: context.now
        )
        let previous = try await context.row(of: Attempt.descriptor, id: attemptID)
        var effects: [ReducerEffect] = []
        let summary: [String: JSONValue] = [
            "state": .string(state.rawValue), "outcome": outcome.map { .string($0.rawValue) } ?? .null, "score": .double(score),
            "answered_count": .int(answeredCount),
        ]
        if let effect = try await context.store(attempt, previous: previous, scopeKey: fact.scopeKey, summary: summary) {
            effects.append(effect)
        }

        if state == .closed, let outcome, let endedAt = submittedAt, let unitID = assessment?.unitId {
            let id = "attempt:\(attemptID)"
            let existing = try await context.row(of: CompletionRecord.descriptor, id: id)
            if existing == nil || existing?.isDeleted == true {
                let share = maxScore.flatMap { $0 > 0 ? score / $0 : nil }
                let record = CompletionRecord(
                    id: id, unitId: unitID, lessonId: nil, attemptId: attemptID, passed: outcome == .passed, score: share,
                    completedAt: endedAt, completedOn: ReducerContext.utcDay(endedAt), updatedAt: context.now
                )
                let scopeKey = try context.scopeKey(for: record, fallback: fact.scopeKey)
                let recordSummary: [String: JSONValue] = ["passed": .bool(outcome == .passed), "attempt_id": .string(attemptID)]
                if let effect = try await context.store(record, previous: existing, scopeKey: scopeKey, summary: recordSummary) {
                    effects.append(effect)
                }
            }
        }
        return effects
    }

    private static let terminalVerbs: Set<Statement.Verb> = [.passed, .failed, .completed]

    // MARK: - Lessons

    private func completeLesson(
        _ lessonID: String, unitID: String, at time: Timestamp, score: Double?, fact: ReducerFact, in context: ReducerContext
    ) async throws -> [ReducerEffect] {
        let id = "lesson:\(context.identity.userID):\(lessonID)"
        let existing = try await context.row(of: CompletionRecord.descriptor, id: id)
        if let existing, !existing.isDeleted { return [] }  // the first completion stands
        let record = CompletionRecord(
            id: id, unitId: unitID, lessonId: lessonID, attemptId: nil, passed: true, score: score, completedAt: time,
            completedOn: ReducerContext.utcDay(time), updatedAt: context.now
        )
        let scopeKey = try context.scopeKey(for: record, fallback: fact.scopeKey)
        let summary: [String: JSONValue] = ["lesson_id": .string(lessonID), "unit_id": .string(unitID)]
        return try await context.store(record, previous: existing, scopeKey: scopeKey, summary: summary).map { [$0] } ?? []
    }
}

/// An assessment's server-only `answer_key`: an array (or `{"questions": [...]}`) of objects
/// with `id`, `correct` (the right answer, any JSON) and optional `points` (default 1).
/// Questions without `correct` are not graded.
struct AssessmentAnswerKey: Sendable {
    var entries: [String: (correct: JSONValue, points: Double)] = [:]
    var total: Double = 0

    init(_ questions: JSONValue) {
        var items: [JSONValue] = []
        if case .array(let list) = questions {
            items = list
        } else if case .object(let object) = questions, case .array(let list)? = object["questions"] {
            items = list
        }
        for item in items {
            guard case .object(let question) = item, case .string(let id)? = question["id"], let correct = question["correct"] else {
                continue
            }
            var points = 1.0
            switch question["points"] {
            case .int(let value)?: points = Double(value)
            case .double(let value)?: points = value
            default: break
            }
            entries[id] = (correct, points)
            total += points
        }
    }
}
