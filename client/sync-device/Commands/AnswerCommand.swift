import ArgumentParser
import ContractRuntime
import Contracts
import Foundation
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
        let book = AttemptBook(store: store)
        let attemptId: String
        if let open = try book.open(assessmentId: assessment.id) {
            attemptId = open.attemptId
        } else {
            let ids = ULIDGenerator(clock: session.clock)
            attemptId = ids.nextString()
            try store.create(
                Statement(
                    id: ids.nextString(), verb: .attempted, objectId: assessment.id, attemptId: attemptId,
                    statedAt: Timestamp(session.clock.now()))
            )
            Console.say("started attempt \(attemptId) at \(assessment.title)")
        }
        try store.record(AnswerRecorded(attemptId: attemptId, questionId: question.id, answer: value, timeSpentMs: Int64(seconds) * 1000))
        let answered = try book.open(assessmentId: assessment.id)?.answers.count ?? 1
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
        guard let open = try AttemptBook(store: session.store).open(assessmentId: assessment.id) else {
            throw DeviceFailure.badState(
                "no attempt at \(assessment.id) is in progress",
                hint: "answer a question first: sync-device answer \(assessment.id) QUESTION ANSWER"
            )
        }
        let totalTime = open.answers.values.reduce(Int64(0)) { $0 + $1.payload.timeSpentMs }
        try session.store.record(
            AttemptSubmitted(
                attemptId: open.attemptId, assessmentId: assessment.id, answeredCount: Int64(open.answers.count), totalTimeMs: totalTime,
                submittedOffline: session.home.isOffline
            )
        )
        let questions = AssessmentQuestion.all(of: assessment).count
        Console.say(
            "submitted attempt \(open.attemptId) (\(open.answers.count) of \(questions) answered); the server scores it at the next sync")
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
        let titles = Dictionary(
            try store.all(Assessment.self).map { ($0.id, $0.title) }, uniquingKeysWith: { first, _ in first }
        )
        if output.json {
            Console.json(
                .object([
                    "attempts": .array(scored.map { .object(Wire.object($0)) }),
                    "not_scored_yet": .array(
                        waiting.map { started in
                            .object([
                                "id": .string(started.attemptId), "assessment_id": .string(started.assessmentId),
                                "answered_count": .int(Int64(started.answers.count)), "submitted": .bool(started.submitted != nil),
                                "started_at": .string(started.startedAt.iso8601),
                            ])
                        }),
                ]))
            return
        }
        if scored.isEmpty, waiting.isEmpty { Console.say("no attempts yet") }
        for attempt in scored { Console.say(Self.line(attempt, title: titles[attempt.assessmentId])) }
        for started in waiting {
            Console.say(
                "attempt \(started.attemptId) at \(titles[started.assessmentId] ?? started.assessmentId): "
                    + "\(started.answers.count) answered, "
                    + (started.submitted == nil ? "in progress" : "submitted") + " — not scored by the server yet (sync)"
            )
        }
    }

    /// `attempt 01J… at Battery swap check: passed, score 3/3, closed`.
    static func line(_ attempt: Attempt, title: String?) -> String {
        let score =
            attempt.maxScore.map { "score \(Self.number(attempt.score))/\(Self.number($0))" } ?? "score \(Self.number(attempt.score))"
        let outcome = attempt.outcome?.rawValue ?? "no outcome yet"
        return
            "attempt \(attempt.id) at \(title ?? attempt.assessmentId): \(outcome), \(score), \(attempt.answeredCount) answered, "
            + "\(attempt.state.rawValue) (scored by the server)"
    }

    private static func number(_ value: Double) -> String {
        value == value.rounded() ? String(Int64(value)) : String(value)
    }
}
