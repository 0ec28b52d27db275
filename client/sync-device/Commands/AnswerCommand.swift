import ArgumentParser
import ContractRuntime
import Contracts
import Foundation
import LearningClient
import SyncClient

struct AnswerCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "answer",
        abstract: "Answer a question of an assessment (an AnswerRecorded event), online or offline.",
        discussion: """
            The first answer starts an attempt: the device makes its id and records an `attempted` \
            Statement naming the assessment, so the server can score the attempt from the answers. \
            Answering a question again replaces the answer. `submit` hands the attempt in; the server \
            computes the outcome, which `attempts` shows after a sync.
            """
    )

    @Argument(help: "The assessment's id.")
    var assessment: String

    @Argument(help: "The question's id (`sync-device open ASSESSMENT` lists them).")
    var question: String

    @Argument(help: "The answer: a choice's number or text, or JSON for a question without choices.")
    var answer: String

    @Option(help: "Seconds spent on the question.")
    var seconds = 0

    @OptionGroup var device: DeviceOptions

    func validate() throws {
        guard seconds >= 0 else { throw ValidationError("--seconds must be 0 or more") }
    }

    func execute() async throws {
        let session = try device.session()
        let store = session.store
        let assessment = try await LearningContent(session: session).assessment(self.assessment)
        let questions = AssessmentQuestion.all(of: assessment)
        guard let question = questions.first(where: { $0.id == self.question }) else {
            throw DeviceFailure.notFound(
                "\(assessment.id) has no question '\(self.question)'", hint: "its questions: " + questions.map(\.id).joined(separator: ", ")
            )
        }
        let value = try question.answer(answer)
        let attempt: AttemptInProgress
        if let open = try store.attemptInProgress(assessmentId: assessment.id) {
            attempt = open
        } else {
            // Taken on the revision the device has now; the submission will say so.
            attempt = try store.startAttempt(assessmentId: assessment.id)
            Console.say("started attempt \(attempt.attemptId) at \(assessment.title) (revision \(assessment.revision))")
        }
        try store.answer(attemptId: attempt.attemptId, questionId: question.id, answer: value, timeSpentMs: Int64(seconds) * 1000)
        let answered = try store.attemptInProgress(assessmentId: assessment.id)?.answers.count ?? 1
        Console.say(
            "answered \(question.id) with \(Wording.value(value)): \(answered) of \(questions.count) answered; \(try session.queuedNote())")
    }
}

struct SubmitCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "submit",
        abstract: "Hand in the attempt at an assessment (an AttemptSubmitted event); the server scores it.",
        discussion: "Exits 2 when no attempt is in progress (answer a question first)."
    )

    @Argument(help: "The assessment's id.")
    var assessment: String

    @OptionGroup var device: DeviceOptions

    func execute() async throws {
        let session = try device.session()
        let assessment = try await LearningContent(session: session).assessment(self.assessment)
        guard let open = try session.store.attemptInProgress(assessmentId: assessment.id) else {
            throw DeviceFailure.badState(
                "no attempt at \(assessment.id) is in progress",
                hint: "answer a question first: sync-device answer \(assessment.id) QUESTION ANSWER"
            )
        }
        try session.store.submitAttempt(attemptId: open.attemptId, submittedOffline: session.home.isOffline)
        let questions = AssessmentQuestion.all(of: assessment).count
        let taken = open.assessmentRevision.map { ", taken on revision \($0)" } ?? ""
        Console.say(
            "submitted attempt \(open.attemptId) (\(open.answers.count) of \(questions) answered\(taken)); "
                + "the server scores it at the next sync")
        Console.say(try session.queuedNote())
    }
}

struct AttemptsCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "attempts",
        abstract: "The learner's attempts: as the server scored them, and those not scored yet."
    )

    @Argument(help: "Only the attempts at this assessment.")
    var assessment: String?

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    func execute() async throws {
        let session = try device.session()
        let store = session.store
        let scored = try store.attempts(assessmentId: assessment)
        let scoredIds = Set(scored.map(\.id))
        let waiting = try AttemptBook(store: store).started(assessmentId: assessment).filter { !scoredIds.contains($0.attemptId) }
        // Submissions the server answered with a conflict, by attempt: open, or how they were settled.
        let conflicts = Dictionary(try store.attemptConflicts(includeResolved: true).map { ($0.attemptId, $0) }) { _, later in later }
        let titles = Dictionary(
            try store.all(Assessment.self).map { ($0.id, $0.title) }, uniquingKeysWith: { first, _ in first }
        )
        if output.json {
            Console.json(
                .object([
                    "attempts": .array(
                        scored.map { attempt in
                            var object = Wire.object(attempt)
                            // An attempt the server has but never graded: its submission in conflict.
                            if attempt.state == .open, let conflict = conflicts[attempt.id] {
                                object["conflict"] = .string(Self.conflictState(conflict))
                            }
                            return .object(object)
                        }),
                    "not_scored_yet": .array(
                        waiting.map { started in
                            .object([
                                "id": .string(started.attemptId), "assessment_id": .string(started.assessmentId),
                                "answered_count": .int(Int64(started.answers.count)), "submitted": .bool(started.submitted != nil),
                                "started_at": .string(started.startedAt.iso8601),
                                "conflict": conflicts[started.attemptId].map { .string(Self.conflictState($0)) } ?? .null,
                            ])
                        }),
                ]))
            return
        }
        if scored.isEmpty, waiting.isEmpty { Console.say("no attempts yet") }
        for attempt in scored {
            let conflict = attempt.state == .open ? conflicts[attempt.id].map { " — " + Self.conflictState($0) } ?? "" : ""
            Console.say(Self.line(attempt, title: titles[attempt.assessmentId]) + conflict)
        }
        for started in waiting {
            let state =
                conflicts[started.attemptId].map(Self.conflictState)
                ?? ((started.submitted == nil ? "in progress" : "submitted") + " — not scored by the server yet (sync)")
            Console.say(
                "attempt \(started.attemptId) at \(titles[started.assessmentId] ?? started.assessmentId): "
                    + "\(started.answers.count) answered, \(state)"
            )
        }
    }

    /// Where a submission the server answered with a conflict stands.
    static func conflictState(_ conflict: AttemptConflict) -> String {
        switch (conflict.resolution, conflict.kind) {
        case (nil, .newRevision(let current)):
            return "submitted on revision \(conflict.takenRevision.map(String.init) ?? "?"), but the assessment is at revision "
                + "\(current.revision) — conflict \(conflict.id) waits (submit-anyway or retake)"
        case (nil, .assessmentDeleted):
            return "the assessment was deleted — conflict \(conflict.id) waits (export and discard)"
        case (.keepMine?, _): return "submitted anyway — not scored by the server yet (sync)"
        case (.takeTheirs?, _): return "given up for a retake on the new revision"
        case (_?, _): return "given up"
        }
    }

    /// `attempt 01J… at Battery swap check: passed, score 3/3, closed`.
    static func line(_ attempt: Attempt, title: String?) -> String {
        let score =
            attempt.maxScore.map { "score \(Self.number(attempt.score))/\(Self.number($0))" } ?? "score \(Self.number(attempt.score))"
        let outcome = attempt.outcome?.rawValue ?? "no outcome yet"
        let revision = attempt.assessmentRevision.map { ", graded against revision \($0)" } ?? ""
        return
            "attempt \(attempt.id) at \(title ?? attempt.assessmentId): \(outcome), \(score), \(attempt.answeredCount) answered, "
            + "\(attempt.state.rawValue)\(revision) (scored by the server)"
    }

    private static func number(_ value: Double) -> String {
        value == value.rounded() ? String(Int64(value)) : String(value)
    }
}
