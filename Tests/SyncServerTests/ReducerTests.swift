import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import FieldOpsServer
@testable import SyncServer

@Suite("Events and reducers", .blockingWork)
struct ReducerTests {
    static let unit = "unit-1"
    static let t0 = Timestamp(millisecondsSince1970: 1_767_220_000_000)

    static func time(_ seconds: Int64) -> Timestamp { Timestamp(millisecondsSince1970: t0.millisecondsSince1970 + seconds * 1000) }

    /// An assessment of three questions (four points) with a server-only answer key, passing at 60 %.
    private func seedAssessment(_ h: PushHarness) async throws {
        let questions: JSONValue = .array(["q1", "q2", "q3"].map { .object(["id": .string($0)]) })
        let answerKey: JSONValue = .array([
            .object(["id": .string("q1"), "correct": .string("b")]),
            .object(["id": .string("q2"), "correct": .int(42)]),
            .object(["id": .string("q3"), "correct": .array([.string("x"), .string("y")]), "points": .int(2)]),
        ])
        try await h.seed(
            Assessment(id: "quiz-1", unitId: Self.unit, title: "Quiz", questions: questions, questionCount: 3, passScore: 0.6, updatedAt: Self.t0),
            answerKey: answerKey
        )
    }

    // MARK: - Events

    @Test("an event is stored with its envelope; the same event_id again is a duplicate", arguments: StorageKind.allCases)
    func eventStoredOnce(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        let event = try h.eventMutation(
            1, id: "01JEV0000000000000000000001", LessonProgressed(lessonId: "lesson-1", unitId: Self.unit, sessionId: UUID(), progress: 0.4)
        )
        var again = event
        again.seq = 2
        let response = try await h.push([event, again])
        #expect(response.results.map(\.status) == [.applied, .duplicate])
        let row = try #require(try await h.eventRow(LessonProgressed.descriptor, "01JEV0000000000000000000001"))
        #expect(row.text("user_id") == "alice")
        #expect(row.text("device_id") == "alice-phone")
        #expect(row.integer("occurred_at") == event.occurredAt?.millisecondsSince1970)
        #expect(row.integer("recorded_at") == PushFixedClock().time.millisecondsSince1970)
        #expect(row.text("hash") == event.hash)
        #expect(row.text("_scope_key") == "progress:user:alice")
        #expect(row.integer("_seq") == 1)
    }

    @Test("a hash that does not match the payload, or a replayed event_id with other content, is hash_mismatch", arguments: StorageKind.allCases)
    func hashMismatch(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        var tampered = try h.eventMutation(1, id: "ev-1", LessonProgressed(lessonId: "lesson-1", unitId: Self.unit, sessionId: UUID(), progress: 0.4))
        tampered.payload = try JSONDecoder().decode(
            JSONValue.self, from: JSONEncoder().encode(LessonProgressed(lessonId: "lesson-1", unitId: Self.unit, sessionId: UUID(), progress: 1))
        )
        let stored = try h.eventMutation(2, id: "ev-2", LessonProgressed(lessonId: "lesson-1", unitId: Self.unit, sessionId: UUID(), progress: 0.5))
        let replay = try h.eventMutation(3, id: "ev-2", LessonProgressed(lessonId: "lesson-1", unitId: Self.unit, sessionId: UUID(), progress: 0.9))
        var missing = stored
        missing.seq = 4
        missing.hash = nil
        let response = try await h.push([tampered, stored, replay, missing])
        #expect(response.results.map(\.status) == [.rejected, .applied, .rejected, .rejected])
        #expect(response.results.map(\.error?.code) == [.hashMismatch, nil, .hashMismatch, .missingPolicyData])
        #expect(try await h.eventRow(LessonProgressed.descriptor, "ev-1") == nil)
    }

    @Test("a team event needs a team the token grants", arguments: StorageKind.allCases)
    func eventScope(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        let event = try h.eventMutation(1, id: "ev-1", TaskStarted(teamId: "blue", taskId: "task-1"))
        let response = try await h.push([event])
        #expect(response.results.first?.error?.code == .notWritable)
    }

    // MARK: - Attempt and CompletionRecord

    @Test("answers and a submission fold into the attempt's outcome and a completion record", arguments: StorageKind.allCases)
    func attemptOutcome(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        try await seedAssessment(h)
        let response = try await h.push([
            try h.eventMutation(
                1, id: "ev-1", AnswerRecorded(attemptId: "att-1", questionId: "q1", answer: .string("a"), timeSpentMs: 900), at: Self.time(1)
            )
        ])
        #expect(response.results.map(\.status) == [.applied])
        // One answer without an assessment named yet: the fact is stored, no attempt exists.
        #expect(try await h.value(Attempt.self, "att-1") == nil)

        let rest = try await h.push([
            try h.eventMutation(
                2, id: "ev-2", AnswerRecorded(attemptId: "att-1", questionId: "q2", answer: .int(42), timeSpentMs: 800), at: Self.time(3)),
            try h.eventMutation(
                3, id: "ev-3", AnswerRecorded(attemptId: "att-1", questionId: "q3", answer: .array([.string("x"), .string("y")]), timeSpentMs: 700),
                at: Self.time(4)
            ),
            // The learner changes the first answer to the right one.
            try h.eventMutation(
                4, id: "ev-4", AnswerRecorded(attemptId: "att-1", questionId: "q1", answer: .string("b"), timeSpentMs: 100), at: Self.time(5)),
            try h.eventMutation(5, id: "ev-5", AttemptSubmitted(attemptId: "att-1", assessmentId: "quiz-1", answeredCount: 3), at: Self.time(6)),
        ])
        #expect(rest.results.map(\.status) == [.applied, .applied, .applied, .applied])

        let attempt = try #require(try await h.value(Attempt.self, "att-1"))
        #expect(attempt.state == .closed)
        #expect(attempt.outcome == .passed)
        #expect(attempt.score == 4)
        #expect(attempt.maxScore == 4)
        #expect(attempt.answeredCount == 3)
        #expect(attempt.startedAt == Self.time(1))
        #expect(attempt.endedAt == Self.time(6))
        let attemptRow = try #require(try await h.row(Attempt.descriptor, "att-1"))
        #expect(attemptRow.text("_scope_key") == "progress:user:alice")
        #expect(attemptRow.text("_updated_by") == "server")

        let record = try #require(try await h.value(CompletionRecord.self, "attempt:att-1"))
        #expect(record.passed)
        #expect(record.unitId == Self.unit)
        #expect(record.attemptId == "att-1")
        #expect(record.score == 1)
        #expect(record.completedAt == Self.time(6))

        // Reducer writes are audited after the mutation that caused them, and the chain holds.
        let audit = try await h.auditedChanges()
        #expect(audit.contains { $0.entity == "Attempt" && $0.operation == .fold })
        #expect(audit.last?.entity == "CompletionRecord")
        if case .intact = try await AuditChain.verify(h.storage) {} else { Issue.record("the audit chain is broken") }
    }

    @Test("a failing score fails; a late answer is rejected; a second submission is a duplicate", arguments: StorageKind.allCases)
    func attemptRefusals(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        try await seedAssessment(h)
        let response = try await h.push([
            try h.eventMutation(1, id: "ev-1", AnswerRecorded(attemptId: "att-1", questionId: "q1", answer: .string("b"), timeSpentMs: 900)),
            try h.eventMutation(2, id: "ev-2", AttemptSubmitted(attemptId: "att-1", assessmentId: "quiz-1", answeredCount: 1)),
            try h.eventMutation(3, id: "ev-3", AnswerRecorded(attemptId: "att-1", questionId: "q2", answer: .int(42), timeSpentMs: 900)),
            try h.eventMutation(4, id: "ev-4", AttemptSubmitted(attemptId: "att-1", assessmentId: "quiz-1", answeredCount: 2)),
        ])
        #expect(response.results.map(\.status) == [.applied, .applied, .rejected, .duplicate])
        #expect(response.results[2].error?.code == .invalidTransition)
        let attempt = try #require(try await h.value(Attempt.self, "att-1"))
        #expect(attempt.outcome == .failed)
        #expect(attempt.score == 1)
        #expect(try await h.value(CompletionRecord.self, "attempt:att-1")?.passed == false)
        #expect(try await h.eventRow(AnswerRecorded.descriptor, "ev-3") == nil)
    }

    @Test("another learner's attempt is not theirs to answer", arguments: StorageKind.allCases)
    func foreignAttempt(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        try await seedAssessment(h)
        try await h.push([try h.eventMutation(1, id: "ev-1", AttemptSubmitted(attemptId: "att-1", assessmentId: "quiz-1", answeredCount: 0))])
        let bob = try await h.push(
            [try h.eventMutation(1, id: "ev-2", AnswerRecorded(attemptId: "att-1", questionId: "q1", answer: .string("b"), timeSpentMs: 1))],
            as: PushHarness.bob
        )
        #expect(bob.results.first?.error?.code == .notWritable)
    }

    @Test("a device stating `passed` with a score, after wrong answers, gets `failed`: the server grades", arguments: StorageKind.allCases)
    func selfGradedPassIsIgnored(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        try await seedAssessment(h)
        let response = try await h.push([
            try h.eventMutation(1, id: "ev-1", AnswerRecorded(attemptId: "att-9", questionId: "q1", answer: .string("a"), timeSpentMs: 1)),
            h.mutation(2, "Statement", .create, "st-9", h.statementPayload("st-9", verb: "passed", object: "quiz-1", attempt: "att-9", score: 1.0)),
            try h.eventMutation(3, id: "ev-3", AttemptSubmitted(attemptId: "att-9", assessmentId: "quiz-1", answeredCount: 3)),
        ])
        #expect(response.results.map(\.status) == [.applied, .applied, .applied])
        let attempt = try #require(try await h.value(Attempt.self, "att-9"))
        #expect(attempt.outcome == .failed)
        #expect(attempt.score == 0)
        #expect(attempt.maxScore == 4)
        #expect(try await h.value(CompletionRecord.self, "attempt:att-9")?.passed == false)
    }

    @Test(
        "statements fold into the attempt: attempted names the assessment; a device's own `passed` and score decide nothing",
        arguments: StorageKind.allCases)
    func statements(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        try await h.seed(Assessment(id: "quiz-2", unitId: Self.unit, title: "Open quiz", questions: .array([]), questionCount: 5, updatedAt: Self.t0))
        let response = try await h.push([
            h.mutation(1, "Statement", .create, "st-1", h.statementPayload("st-1", verb: "attempted", object: "quiz-2", attempt: "att-2")),
            h.mutation(2, "Statement", .create, "st-2", h.statementPayload("st-2", verb: "passed", object: "quiz-2", attempt: "att-2", score: 0.8)),
        ])
        #expect(response.results.map(\.status) == [.applied, .applied])
        let attempt = try #require(try await h.value(Attempt.self, "att-2"))
        #expect(attempt.assessmentId == "quiz-2")
        // No answer key: submitted, and nothing graded it.
        #expect(attempt.state == .submitted)
        #expect(attempt.outcome == .incomplete)
        #expect(attempt.score == 0)
        #expect(attempt.maxScore == nil)
        #expect(try await h.value(CompletionRecord.self, "attempt:att-2") == nil)
    }

    @Test("a completed lesson becomes one completion record; the first completion stands", arguments: StorageKind.allCases)
    func lessonCompletion(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        let session = UUID()
        let response = try await h.push([
            try h.eventMutation(
                1, id: "ev-1", LessonProgressed(lessonId: "lesson-1", unitId: Self.unit, sessionId: session, progress: 0.5), at: Self.time(10)
            ),
            try h.eventMutation(
                2, id: "ev-2", LessonProgressed(lessonId: "lesson-1", unitId: Self.unit, sessionId: session, progress: 1, completed: true),
                at: Self.time(20)
            ),
            try h.eventMutation(
                3, id: "ev-3", LessonProgressed(lessonId: "lesson-1", unitId: Self.unit, sessionId: UUID(), progress: 1, completed: true),
                at: Self.time(30)
            ),
        ])
        #expect(response.results.map(\.status) == [.applied, .applied, .applied])
        let record = try #require(try await h.value(CompletionRecord.self, "lesson:alice:lesson-1"))
        #expect(record.lessonId == "lesson-1")
        #expect(record.passed)
        #expect(record.completedAt == Self.time(20))
        #expect(record.completedOn == CalendarDate(year: 2025, month: 12, day: 31))
        #expect(try await h.row(CompletionRecord.descriptor, "lesson:alice:lesson-1")?.integer("_version") == 1)
        #expect(try await h.auditedChanges().filter { $0.entity == "CompletionRecord" }.count == 1)
    }

    // MARK: - Task

    @Test("task events fold into the task's status; a second completion is a duplicate, not an error", arguments: StorageKind.allCases)
    func taskStatus(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "Task", .create, "task-1", h.taskPayload("task-1"))])
        let response = try await h.push([
            try h.eventMutation(2, id: "ev-1", TaskStarted(teamId: "red", taskId: "task-1"), at: Self.time(1)),
            try h.eventMutation(
                3, id: "ev-2", TaskStatusChanged(teamId: "red", taskId: "task-1", fromStatus: .inProgress, toStatus: .completed, baseRevision: 2),
                at: Self.time(2)
            ),
        ])
        #expect(response.results.map(\.status) == [.applied, .applied])
        let task = try #require(try await h.value(FieldTask.self, "task-1"))
        #expect(task.status == .completed)
        #expect(task.startedAt == Self.time(1))
        #expect(task.completedAt == Self.time(2))
        #expect(task.revision == 3)

        // Bob completes it too, by status change and by a battery swap: duplicates.
        let bob = try await h.push(
            [
                try h.eventMutation(
                    1, id: "ev-3", TaskStatusChanged(teamId: "red", taskId: "task-1", fromStatus: .inProgress, toStatus: .completed, baseRevision: 2)
                ),
                try h.eventMutation(
                    2, id: "ev-4",
                    BatterySwapCompleted(
                        teamId: "red", serviceAssetId: "van-7", taskId: "task-1", removedBatterySerial: "B1", installedBatterySerial: "B2",
                        chargeBefore: 0.1, chargeAfter: 1, durationSeconds: 300
                    )
                ),
            ], as: PushHarness.bob
        )
        #expect(bob.results.map(\.status) == [.duplicate, .duplicate])
        #expect(try await h.value(FieldTask.self, "task-1")?.revision == 3)
        #expect(try await h.eventRow(TaskStatusChanged.descriptor, "ev-3") == nil)
    }

    @Test("an impossible transition is rejected; a task that moved on answers conflicted with its row", arguments: StorageKind.allCases)
    func taskTransitions(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "Task", .create, "task-1", h.taskPayload("task-1"))])
        let response = try await h.push([
            try h.eventMutation(
                2, id: "ev-1", TaskStatusChanged(teamId: "red", taskId: "task-1", fromStatus: .assigned, toStatus: .completed, baseRevision: 1)
            ),
            try h.eventMutation(
                3, id: "ev-2", TaskStatusChanged(teamId: "red", taskId: "task-1", fromStatus: .inProgress, toStatus: .blocked, baseRevision: 1)
            ),
            try h.eventMutation(4, id: "ev-3", TaskStarted(teamId: "red", taskId: "task-404")),
        ])
        #expect(response.results.map(\.status) == [.rejected, .conflicted, .rejected])
        #expect(response.results[0].error?.code == .invalidTransition)
        #expect(response.results[2].error?.code == .rowNotFound)
        guard case .object(let row)? = response.results[1].serverRow else { Issue.record("no task row"); return }
        #expect(row["status"] == .string("assigned"))
        #expect(response.results[1].serverVersion == 1)
        #expect(try await h.value(FieldTask.self, "task-1")?.status == .assigned)
    }

    @Test("a task of another team cannot be moved by an event filed under this team", arguments: StorageKind.allCases)
    func taskOfAnotherTeam(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "Task", .create, "task-b", h.taskPayload("task-b", team: "blue"))], as: PushHarness.bob)
        let response = try await h.push([try h.eventMutation(1, id: "ev-1", TaskStarted(teamId: "red", taskId: "task-b"))])
        #expect(response.results.first?.error?.code == .rowNotFound)
    }

    @Test("a battery swap completes its task and updates the vehicle", arguments: StorageKind.allCases)
    func batterySwap(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        var van = h.assetPayload("van-7")
        van["status"] = .string("needs_service")
        van["battery_level"] = .double(0.05)
        try await h.push([
            h.mutation(1, "ServiceAsset", .create, "van-7", van, hlc: h.hlc(1000, "alice")),
            h.mutation(2, "Task", .create, "task-1", h.taskPayload("task-1", status: "en_route")),
        ])
        let swap = BatterySwapCompleted(
            teamId: "red", serviceAssetId: "van-7", taskId: "task-1", removedBatterySerial: "B1", installedBatterySerial: "B2",
            chargeBefore: 0.05, chargeAfter: 0.98, durationSeconds: 420
        )
        let response = try await h.push([try h.eventMutation(3, id: "ev-1", swap, at: Self.time(5))])
        #expect(response.results.first?.status == .applied)
        let task = try #require(try await h.value(FieldTask.self, "task-1"))
        #expect(task.status == .completed)
        #expect(task.completedAt == Self.time(5))
        let asset = try #require(try await h.value(ServiceAsset.self, "van-7"))
        #expect(asset.batteryLevel == 0.98)
        #expect(asset.status == .inService)
        #expect(asset.lastSeenAt == Self.time(5))
        // The vehicle keeps its clock: a later device edit still wins.
        #expect(try await h.row(ServiceAsset.descriptor, "van-7")?.text("_hlc") == h.hlc(1000, "alice"))
    }

    @Test("an event from an older schema (BatterySwapCompleted v1) folds like a current one", arguments: StorageKind.allCases)
    func oldBatterySwap(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        try await h.push([h.mutation(1, "Task", .create, "task-1", h.taskPayload("task-1", status: "in_progress"))])
        let payload: JSONValue = .object([
            "team_id": .string("red"), "service_asset_id": .string("van-7"), "task_id": .string("task-1"),
            "removed_battery_serial": .string("B1"), "installed_battery_serial": .string("B2"), "charge_before": .double(0.2),
            "charge_after": .int(1), "duration_seconds": .int(300),
        ])
        let event = Mutation(
            seq: 2, clientMutationId: "cm-2", entity: "BatterySwapCompleted", op: .event, id: "ev-1", payload: payload,
            occurredAt: Self.time(9), hash: PushWriter.sha256(payload)
        )
        let response = try await h.push([event], schema: ["BatterySwapCompleted": 1])
        #expect(response.results.first?.status == .applied)
        #expect(try await h.value(FieldTask.self, "task-1")?.status == .completed)
        #expect(try await h.eventRow(BatterySwapCompleted.descriptor, "ev-1")?["swap_station_id"] == .null)
    }

    @Test("the transition table")
    func transitionTable() {
        #expect(FieldTaskReducer.allows(.assigned, .inProgress))
        #expect(FieldTaskReducer.allows(.inProgress, .completed))
        #expect(!FieldTaskReducer.allows(.assigned, .completed))
        #expect(!FieldTaskReducer.allows(.completed, .inProgress))
        #expect(!FieldTaskReducer.allows(.cancelled, .assigned))
        for status in FieldTask.Status.allCases { #expect(FieldTaskReducer.transitions[status] != nil) }
    }
}
