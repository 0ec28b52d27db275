import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SampleServerApps
import SyncProtocol
import Testing

@testable import LearningServer
@testable import SyncServer

/// An assessment's revisions, its deletion, its last day and its time limit, as publishing and
/// the learning reducer handle them: published through the admin content service, taken through
/// pushes, on both storages.
@Suite("Assessment revisions, deletion, availability and time limits")
struct AssessmentRevisionTests {
    static let t0 = Timestamp(millisecondsSince1970: 1_767_220_000_000)  // 2025-12-31T22:26:40Z

    static func time(_ seconds: Int64) -> Timestamp { Timestamp(millisecondsSince1970: t0.millisecondsSince1970 + seconds * 1000) }

    /// One entry of a refusal's `details`.
    static func detail(_ result: MutationResult, _ key: String) -> JSONValue? {
        guard case .object(let details)? = result.error?.details else { return nil }
        return details[key]
    }

    /// A harness with the admin's content service on the same storage.
    struct Harness {
        let push: PushHarness
        let content: SampleContentService

        init(_ kind: StorageKind) async throws {
            push = try await PushHarness(kind)
            // Assessments are published a day before the attempts the tests date at t0: a learner
            // cannot answer before the server has the assessment (occurred_at_out_of_range).
            content = SampleContentService(
                storage: push.storage, clock: PushFixedClock(time: AssessmentRevisionTests.time(-86_400))
            )
        }

        /// Publishes quiz-1: two questions, `key` their right answers (one point each).
        @discardableResult
        func publish(
            key: [String: String], title: String = "Quiz", passScore: Double = 0.5, timeLimit: Int64? = nil, availableUntil: String? = nil,
            extra: [String: JSONValue] = [:]
        ) async throws -> [String: JSONValue] {
            var row: [String: JSONValue] = [
                "id": .string("quiz-1"), "unit_id": .string("unit-1"), "title": .string(title),
                "questions": .array(key.keys.sorted().map { .object(["id": .string($0)]) }),
                "answer_key": .array(key.keys.sorted().map { .object(["id": .string($0), "correct": .string(key[$0]!)]) }),
                "question_count": .int(Int64(key.count)), "pass_score": .double(passScore),
            ]
            if let timeLimit { row["time_limit_seconds"] = .int(timeLimit) }
            if let availableUntil { row["available_until"] = .string(availableUntil) }
            row.merge(extra) { _, new in new }
            guard case .object(let stored) = try await content.publish(entity: "Assessment", row: .object(row), identity: PushHarness.admin)
            else { throw CancellationError() }
            return stored
        }

        func answer(_ seq: Int64, _ attempt: String, _ question: String, _ answer: String, at seconds: Int64) throws -> Mutation {
            try push.eventMutation(
                seq, id: "ev-\(attempt)-\(seq)", AnswerRecorded(attemptId: attempt, questionId: question, answer: .string(answer), timeSpentMs: 1),
                at: AssessmentRevisionTests.time(seconds)
            )
        }

        func submit(_ seq: Int64, _ attempt: String, revision: Int64?, anyway: Bool = false, at seconds: Int64) throws -> Mutation {
            try push.eventMutation(
                seq, id: "ev-\(attempt)-\(seq)",
                AttemptSubmitted(attemptId: attempt, assessmentId: "quiz-1", answeredCount: 2, assessmentRevision: revision, submitAnyway: anyway),
                at: AssessmentRevisionTests.time(seconds)
            )
        }
    }

    @Test(
        "publishing other questions or another answer key raises the revision and keeps the earlier grading; other edits keep it",
        arguments: StorageKind.allCases)
    func publishingRevisions(_ kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.push.remove() }
        #expect(try await h.publish(key: ["q1": "a", "q2": "b"])["revision"] == .int(1))
        // The same row again writes nothing; a new title is not a new revision.
        try await h.publish(key: ["q1": "a", "q2": "b"])
        #expect(try await h.push.row(Assessment.descriptor, "quiz-1")?.integer("_version") == 1)
        #expect(try await h.publish(key: ["q1": "a", "q2": "b"], title: "Quiz, renamed")["revision"] == .int(1))
        #expect(try await h.push.row(Assessment.descriptor, "quiz-1")?.integer("_version") == 2)

        // Another answer key: revision 2, and revision 1's grading kept server-side. What the
        // publisher says of the revision and the history is not taken.
        let published = try await h.publish(
            key: ["q1": "x", "q2": "b"], passScore: 1, timeLimit: 90,
            extra: ["revision": .int(9), "answer_key_history": .object(["9": .string("forged")])]
        )
        #expect(published["revision"] == .int(2))
        #expect(published["answer_key_history"] == nil, "server-only: never in what the server hands out")
        let row = try #require(try await h.push.row(Assessment.descriptor, "quiz-1"))
        #expect(row.integer("revision") == 2)
        let history = try #require(row.text("answer_key_history").flatMap(JSONParser.parse))
        #expect(
            history
                == .object([
                    "1": .object([
                        "answer_key": .array([
                            .object(["id": .string("q1"), "correct": .string("a")]), .object(["id": .string("q2"), "correct": .string("b")]),
                        ]),
                        "pass_score": .double(0.5), "question_count": .int(2), "time_limit_seconds": .null,
                    ]),
                    // When each revision was published, by the server's clock.
                    "published_at": .object([
                        "1": .int(Self.time(-86_400).millisecondsSince1970), "2": .int(Self.time(-86_400).millisecondsSince1970),
                    ]),
                ])
        )
        let first = try #require(AssessmentRevisions.grading(of: row, revision: 1))
        #expect(first.answerKey.entries["q1"]?.correct == .string("a"))
        #expect(first.passScore == 0.5)
        #expect(first.timeLimitSeconds == nil)
        let current = try #require(AssessmentRevisions.grading(of: row, revision: nil))
        #expect(current.answerKey.entries["q1"]?.correct == .string("x"))
        #expect(current.timeLimitSeconds == 90)
        #expect(AssessmentRevisions.grading(of: row, revision: 0) == nil, "a revision the history never held")

        // A device never receives the history: not in a pull page's row, not in a conflict's.
        let wire = RowShaping.wireRow(row, entity: Assessment.descriptor, version: Assessment.descriptor.currentVersion)
        #expect(wire["answer_key_history"] == nil && wire["answer_key"] == nil)
        #expect(wire["revision"] == .int(2))
    }

    @Test(
        "a submission taken on an earlier revision is conflicted with the current assessment; submitted anyway, it is graded against the revision taken",
        arguments: StorageKind.allCases)
    func revisionConflict(_ kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.push.remove() }
        try await h.publish(key: ["q1": "a", "q2": "b"])
        // The learner answers revision 1 right, offline; meanwhile revision 2 changes the key.
        try await h.push.push([try h.answer(1, "att-1", "q1", "a", at: 1), try h.answer(2, "att-1", "q2", "b", at: 2)])
        try await h.publish(key: ["q1": "x", "q2": "y"])

        let conflicted = try await h.push.push([try h.submit(3, "att-1", revision: 1, at: 3)])
        let result = try #require(conflicted.results.first)
        #expect(result.status == .conflicted)
        #expect(result.resolution == nil)
        guard case .object(let current)? = result.serverRow else { Issue.record("no server row: \(result)"); return }
        #expect(current["id"] == .string("quiz-1"))
        #expect(current["revision"] == .int(2))
        #expect(current["answer_key"] == nil && current["answer_key_history"] == nil)
        #expect(result.serverVersion == 2)
        #expect(try await h.push.eventRow(AttemptSubmitted.descriptor, "ev-att-1-3") == nil, "a conflicted submission is not stored")
        #expect(try await h.push.value(Attempt.self, "att-1")?.state != .closed)

        // Submit anyway: graded by revision 1's key, and the attempt says so.
        let anyway = try await h.push.push([try h.submit(4, "att-1", revision: 1, anyway: true, at: 4)])
        #expect(anyway.results.map(\.status) == [.applied])
        let graded = try #require(try await h.push.value(Attempt.self, "att-1"))
        #expect(graded.state == .closed)
        #expect(graded.outcome == .passed)
        #expect(graded.score == 2)
        #expect(graded.assessmentRevision == 1)

        // The same answers taken on revision 2 are graded by its key.
        try await h.push.push([
            try h.answer(5, "att-2", "q1", "a", at: 5), try h.answer(6, "att-2", "q2", "b", at: 6), try h.submit(7, "att-2", revision: 2, at: 7),
        ])
        let retaken = try #require(try await h.push.value(Attempt.self, "att-2"))
        #expect(retaken.outcome == .failed)
        #expect(retaken.score == 0)
        #expect(retaken.assessmentRevision == 2)

        // An older app names no revision: graded against the current one, never conflicted.
        let old = try await h.push.push([
            try h.answer(8, "att-3", "q1", "x", at: 8),
            try h.push.eventMutation(
                9, id: "ev-att-3-9", AttemptSubmitted(attemptId: "att-3", assessmentId: "quiz-1", answeredCount: 1), at: Self.time(9)),
        ])
        #expect(old.results.map(\.status) == [.applied, .applied])
        let unnamed = try #require(try await h.push.value(Attempt.self, "att-3"))
        #expect(unnamed.score == 1)
        #expect(unnamed.assessmentRevision == 2)
    }

    @Test("a submission for a deleted assessment is conflicted without a row, and its answers are kept", arguments: StorageKind.allCases)
    func deletedAssessment(_ kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.push.remove() }
        try await h.publish(key: ["q1": "a", "q2": "b"])
        try await h.push.push([try h.answer(1, "att-1", "q1", "a", at: 1)])
        try await h.content.delete(entity: "Assessment", id: "quiz-1", identity: PushHarness.admin)

        let response = try await h.push.push([try h.answer(2, "att-1", "q2", "b", at: 2), try h.submit(3, "att-1", revision: 1, at: 3)])
        #expect(response.results.map(\.status) == [.applied, .conflicted])
        let result = response.results[1]
        #expect(result.resolution == "deleted")
        #expect(result.serverRow == nil)
        #expect(result.serverVersion == 2)
        // Both answers are on the server; the submission is not.
        #expect(try await h.push.eventRow(AnswerRecorded.descriptor, "ev-att-1-1") != nil)
        #expect(try await h.push.eventRow(AnswerRecorded.descriptor, "ev-att-1-2") != nil)
        #expect(try await h.push.eventRow(AttemptSubmitted.descriptor, "ev-att-1-3") == nil)
        // Submitting anyway does not bring a deleted assessment back.
        let again = try await h.push.push([try h.submit(4, "att-1", revision: 1, anyway: true, at: 4)])
        #expect(again.results.first?.status == .conflicted)
        #expect(again.results.first?.resolution == "deleted")
    }

    @Test(
        "a submission after available_until is assessment_closed; an answer or submission past the time limit is time_limit_exceeded",
        arguments: StorageKind.allCases)
    func availabilityAndTimeLimit(_ kind: StorageKind) async throws {
        let h = try await Harness(kind)
        defer { h.push.remove() }
        // t0 is 2025-12-31 (UTC): the last day.
        try await h.publish(key: ["q1": "a", "q2": "b"], timeLimit: 60, availableUntil: "2025-12-31")

        // The attempt starts with its `attempted` statement, as a device sends it.
        var started = h.push.statementPayload("st-1", verb: "attempted", object: "quiz-1", attempt: "att-1")
        started["stated_at"] = .string(Self.time(0).iso8601)
        let inTime = try await h.push.push([
            h.push.mutation(1, "Statement", .create, "st-1", started),
            try h.answer(2, "att-1", "q1", "a", at: 1),
            try h.answer(3, "att-1", "q2", "b", at: 61),  // one second late
            try h.submit(4, "att-1", revision: 1, at: 60),
        ])
        #expect(inTime.results.map(\.status) == [.applied, .applied, .rejected, .applied])
        #expect(inTime.results[2].error?.code == .timeLimitExceeded)
        #expect(Self.detail(inTime.results[2], "time_limit_seconds") == .int(60))
        #expect(try await h.push.eventRow(AnswerRecorded.descriptor, "ev-att-1-3") == nil)
        let graded = try #require(try await h.push.value(Attempt.self, "att-1"))
        #expect(graded.score == 1, "the late answer does not count")
        #expect(graded.state == .closed)

        // Without a statement, the attempt starts at its first answer.
        let late = try await h.push.push([try h.answer(5, "att-2", "q1", "a", at: 0), try h.submit(6, "att-2", revision: 1, at: 600)])
        #expect(late.results.map(\.status) == [.applied, .rejected])
        #expect(late.results[1].error?.code == .timeLimitExceeded)
        #expect(try await h.push.value(Attempt.self, "att-2")?.state != .closed)

        // The next day (UTC) the assessment takes no submission, whatever the attempt's time.
        let closed = try await h.push.push([
            try h.answer(7, "att-3", "q1", "a", at: 5_700), try h.submit(8, "att-3", revision: 1, anyway: true, at: 5_710),
        ])
        #expect(closed.results.map(\.status) == [.applied, .rejected])
        #expect(closed.results[1].error?.code == .assessmentClosed)
        #expect(Self.detail(closed.results[1], "available_until") == .string("2025-12-31"))
    }
}
