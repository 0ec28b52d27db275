import ContractRuntime
import Contracts
import Foundation
import LearningClient
import OutpostTestSupport
import SyncClient
import SyncProtocol
import SyncServer
import Testing

/// Assessments taken offline against the real server on loopback: the revision an attempt was
/// taken on, the conflict when the server's assessment moved on (submit anyway, retake), a
/// deleted assessment's answers (export, discard), and the last day and time limit shown before
/// starting and enforced by the server.
@Suite struct AssessmentFlowTests {
    /// A learner's device syncing its own scope and the content.
    struct Learner {
        /// Held as long as the store: the folder is deleted when it is released.
        let folder: TemporaryDirectory
        let store: OfflineStore
        let engine: SyncEngine

        init(_ server: LiveServer, clock: any DeviceClock = SystemClock()) throws {
            folder = try TemporaryDirectory()
            store = try makeDeviceStore(folder, device: "phone-1", clock: clock)
            engine = SyncEngine(store: store, transport: server.transport("phone-1"), configuration: .init(scopes: ["user", "content"]))
        }

        func sync(sourceLocation: SourceLocation = #_sourceLocation) async {
            guard case .succeeded = await engine.syncNow() else {
                Issue.record("the sync failed", sourceLocation: sourceLocation)
                return
            }
        }
    }

    @Test func anAttemptTakenOnAnEarlierRevisionIsAConflictAndSubmittedAnywayIsGradedAsTaken() async throws {
        try await LiveServer.run { server in
            try await server.publishQuiz(key: ["q1": "a", "q2": "b"])
            let learner = try Learner(server)
            await learner.sync()
            let shown = try #require(try learner.store.assessmentAvailability(id: "quiz-1"))
            #expect(shown.revision == 1)
            #expect(shown.isOpen)
            #expect(shown.timeLimitSeconds == 600)
            #expect(shown.attemptInProgress == nil)

            // Offline, the learner takes revision 1; meanwhile the editor publishes revision 2.
            let attempt = try learner.store.startAttempt(assessmentId: "quiz-1")
            #expect(attempt.assessmentRevision == 1)
            try learner.store.answer(attemptId: attempt.attemptId, questionId: "q1", answer: .string("a"))
            try learner.store.answer(attemptId: attempt.attemptId, questionId: "q2", answer: .string("b"))
            #expect(try learner.store.attemptInProgress(assessmentId: "quiz-1")?.answers.count == 2)
            let submitted = try learner.store.submitAttempt(attemptId: attempt.attemptId)
            #expect(submitted.payload.assessmentRevision == 1)
            #expect(try learner.store.attemptInProgress(assessmentId: "quiz-1") == nil)
            try await server.publishQuiz(key: ["q1": "x", "q2": "y"])

            await learner.sync()
            let conflict = try #require(try learner.store.attemptConflicts().first)
            #expect(conflict.attemptId == attempt.attemptId)
            #expect(conflict.takenRevision == 1)
            guard case .newRevision(let current) = conflict.kind else { Issue.record("\(conflict.kind)"); return }
            #expect(current.revision == 2)
            #expect(conflict.choices == [.submitAnyway, .retake])
            #expect(conflict.answers.map(\.questionId) == ["q1", "q2"])
            #expect(await learner.engine.currentStatus.conflicts == 1)
            // Nothing graded it yet: the server did not take the submission.
            #expect(try learner.store.fetch(Attempt.self, id: attempt.attemptId)?.state != .closed)

            let again = try #require(try learner.store.resolveAttemptConflict(conflict.id, with: .submitAnyway))
            #expect(again.payload.submitAnyway)
            #expect(again.payload.assessmentRevision == 1)
            #expect(again.occurredAt == submitted.occurredAt, "handed in when it first was")
            await learner.sync()
            let graded = try #require(try learner.store.fetch(Attempt.self, id: attempt.attemptId))
            #expect(graded.state == .closed)
            #expect(graded.outcome == .passed)
            #expect(graded.score == 2)
            #expect(graded.assessmentRevision == 1)
            #expect(try learner.store.attemptConflicts().isEmpty)
            #expect(try learner.store.attemptConflicts(includeResolved: true).first?.resolution == .keepMine)
            // A resolved conflict cannot be resolved again.
            #expect(throws: AssessmentError.store(.conflictNotFound(id: conflict.id))) {
                try learner.store.resolveAttemptConflict(conflict.id, with: .retake)
            }
        }
    }

    @Test func retakingGivesTheAttemptUpAndStartsAgainOnTheNewRevision() async throws {
        try await LiveServer.run { server in
            try await server.publishQuiz(key: ["q1": "a", "q2": "b"])
            let learner = try Learner(server)
            await learner.sync()
            let first = try learner.store.startAttempt(assessmentId: "quiz-1")
            try learner.store.answer(attemptId: first.attemptId, questionId: "q1", answer: .string("a"))
            try learner.store.submitAttempt(attemptId: first.attemptId)
            try await server.publishQuiz(key: ["q1": "x", "q2": "y"], title: "Quiz, second edition")
            // Only the learner's own scope: the new revision comes with the conflict, not a pull.
            let ownScope = SyncEngine(store: learner.store, transport: server.transport("phone-1"), configuration: .init(scopes: ["user"]))
            #expect(await ownScope.syncNow().isSuccess)
            #expect(try learner.store.fetch(Assessment.self, id: "quiz-1")?.revision == 1)
            let conflict = try #require(try learner.store.attemptConflicts().first)

            #expect(try learner.store.resolveAttemptConflict(conflict.id, with: .retake) == nil)
            // The new revision is on the device at once, before any pull.
            let stored = try #require(try learner.store.fetch(Assessment.self, id: "quiz-1"))
            #expect(stored.revision == 2)
            #expect(stored.title == "Quiz, second edition")
            #expect(try learner.store.attemptConflicts(includeResolved: true).first?.resolution == .takeTheirs)

            let second = try learner.store.startAttempt(assessmentId: "quiz-1")
            #expect(second.attemptId != first.attemptId)
            #expect(second.assessmentRevision == 2)
            try learner.store.answer(attemptId: second.attemptId, questionId: "q1", answer: .string("x"))
            try learner.store.answer(attemptId: second.attemptId, questionId: "q2", answer: .string("y"))
            try learner.store.submitAttempt(attemptId: second.attemptId)
            await learner.sync()
            let graded = try #require(try learner.store.fetch(Attempt.self, id: second.attemptId))
            #expect(graded.outcome == .passed)
            #expect(graded.score == 2)
            #expect(graded.assessmentRevision == 2)
            #expect(try learner.store.attemptConflicts().isEmpty)
            // The first attempt was never graded.
            #expect(try learner.store.fetch(Attempt.self, id: first.attemptId)?.state != .closed)
        }
    }

    @Test func aDeletedAssessmentKeepsTheAnswersForTheAppToExportOrDiscard() async throws {
        try await LiveServer.run { server in
            try await server.publishQuiz(key: ["q1": "a", "q2": "b"])
            let learner = try Learner(server)
            await learner.sync()
            let attempt = try learner.store.startAttempt(assessmentId: "quiz-1")
            try learner.store.answer(attemptId: attempt.attemptId, questionId: "q2", answer: .string("b"), timeSpentMs: 4_000)
            try learner.store.answer(attemptId: attempt.attemptId, questionId: "q1", answer: .string("a"), timeSpentMs: 2_000)
            try learner.store.submitAttempt(attemptId: attempt.attemptId)
            try await server.content.delete(entity: "Assessment", id: "quiz-1", identity: LiveServer.admin)

            await learner.sync()
            #expect(try learner.store.fetch(Assessment.self, id: "quiz-1") == nil, "the deletion was pulled")
            let conflict = try #require(try learner.store.attemptConflicts().first)
            #expect(conflict.kind == .assessmentDeleted)
            #expect(conflict.choices == [.discard])
            #expect(throws: AssessmentError.self) { try learner.store.resolveAttemptConflict(conflict.id, with: .submitAnyway) }

            let exported = try #require(JSONParser.parse(conflict.exportedAnswers()))
            guard case .object(let object) = exported, case .array(let answers)? = object["answers"] else {
                Issue.record("not an object with answers: \(exported)")
                return
            }
            #expect(object["attempt_id"] == .string(attempt.attemptId))
            #expect(object["assessment_id"] == .string("quiz-1"))
            #expect(object["assessment_revision"] == .int(1))
            #expect(answers.count == 2)
            guard case .object(let firstAnswer)? = answers.first else { Issue.record("\(answers)"); return }
            #expect(firstAnswer["question_id"] == .string("q1"))
            #expect(firstAnswer["answer"] == .string("a"))
            #expect(firstAnswer["time_spent_ms"] == .int(2_000))

            try learner.store.resolveAttemptConflict(conflict.id, with: .discard)
            #expect(try learner.store.attemptConflicts().isEmpty)
            #expect(try learner.store.attemptConflicts(includeResolved: true).first?.resolution == .discarded)
            #expect(await learner.engine.syncNow().isSuccess)
            #expect(await learner.engine.currentStatus.conflicts == 0)
            // Discarded, never dropped behind the learner's back: the answers stay in the event log.
            #expect(try learner.store.events(AnswerRecorded.self).filter { $0.payload.attemptId == attempt.attemptId }.count == 2)
        }
    }

    @Test func theLastDayAndTheTimeLimitAreShownFirstAndEnforcedByTheServer() async throws {
        // The device's clock, and the server's with it: 2026-01-31T12:00:00Z, the assessment's
        // last day (the server bounds a device's times by its own).
        let clock = ManualClock(Date(timeIntervalSince1970: 1_769_860_800))
        try await LiveServer.run(clock: DeviceFollowingClock(device: clock)) { server in
            try await server.publishQuiz(key: ["q1": "a", "q2": "b"], timeLimit: 60, availableUntil: "2026-01-31")
            let learner = try Learner(server, clock: clock)
            await learner.sync()
            let shown = try #require(try learner.store.assessmentAvailability(id: "quiz-1"))
            #expect(shown.isOpen)
            #expect(shown.daysLeft == 1)
            #expect(shown.availableUntil == CalendarDate("2026-01-31"))
            #expect(shown.timeLimitSeconds == 60)

            let attempt = try learner.store.startAttempt(assessmentId: "quiz-1")
            #expect(attempt.deadline == clock.now().addingTimeInterval(60))
            try learner.store.answer(attemptId: attempt.attemptId, questionId: "q1", answer: .string("a"))
            clock.advance(by: 61)
            #expect(throws: AssessmentError.timeLimitReached(attemptId: attempt.attemptId, deadline: try #require(attempt.deadline))) {
                try learner.store.answer(attemptId: attempt.attemptId, questionId: "q2", answer: .string("b"))
            }
            #expect(throws: AssessmentError.timeLimitReached(attemptId: attempt.attemptId, deadline: try #require(attempt.deadline))) {
                try learner.store.submitAttempt(attemptId: attempt.attemptId)
            }
            // The server enforces it whatever a device sends: a late answer is refused with its code.
            try learner.store.record(AnswerRecorded(attemptId: attempt.attemptId, questionId: "q2", answer: .string("b"), timeSpentMs: 0))
            _ = await learner.engine.syncNow()
            let late = try #require(try learner.store.outboxEntries(statuses: [.failed]).first)
            #expect(late.entity == AnswerRecorded.descriptor.name)
            #expect(late.lastError?.code == .timeLimitExceeded)
            try learner.store.discardFailed(seq: late.seq)

            // The next day it is closed: shown so, not started, and refused by the server.
            clock.advance(by: 86_400)
            let closed = try #require(try learner.store.assessmentAvailability(id: "quiz-1"))
            #expect(!closed.isOpen)
            #expect(closed.daysLeft == 0)
            #expect(throws: AssessmentError.closed(assessmentId: "quiz-1", lastDay: CalendarDate(year: 2026, month: 1, day: 31))) {
                try learner.store.startAttempt(assessmentId: "quiz-1")
            }
            try learner.store.record(
                AttemptSubmitted(attemptId: "att-late", assessmentId: "quiz-1", answeredCount: 0, assessmentRevision: 1)
            )
            _ = await learner.engine.syncNow()
            let refused = try #require(try learner.store.outboxEntries(statuses: [.failed]).first)
            #expect(refused.entity == AttemptSubmitted.descriptor.name)
            #expect(refused.lastError?.code == .assessmentClosed)
        }
    }
}

extension SyncResult {
    var isSuccess: Bool {
        if case .succeeded = self { return true }
        return false
    }
}

extension LiveServer {
    /// Publishes an assessment: one question per key entry (one point each), passing at half.
    func publishQuiz(
        _ id: String = "quiz-1", key: [String: String], title: String = "Quiz", timeLimit: Int64 = 600, availableUntil: String = "2099-12-31"
    ) async throws {
        let questions = key.keys.sorted()
        _ = try await content.publish(
            entity: "Assessment",
            row: .object([
                "id": .string(id), "title": .string(title), "questions": .array(questions.map { .object(["id": .string($0)]) }),
                "answer_key": .array(questions.map { .object(["id": .string($0), "correct": .string(key[$0]!)]) }),
                "question_count": .int(Int64(questions.count)), "pass_score": .double(0.5), "time_limit_seconds": .int(timeLimit),
                "available_until": .string(availableUntil),
            ]),
            identity: Self.admin
        )
    }
}
