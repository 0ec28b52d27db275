import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// A device's clock is its own: the times it puts on events are bounded by what the server
/// knows (docs/security.md, "Times a device states").
@Suite("Event times a hostile device states")
struct EventTimeBoundsTests {
    /// The server's time in these tests (`PushFixedClock`): 2026-01-01T00:00:00Z.
    static let serverNow = PushFixedClock().now()
    static func ago(days: Int64) -> Int64 { -days * 86_400 }

    /// Seconds from ``AssessmentRevisionTests/t0`` (2025-12-31T22:26:40Z) to the server's now.
    static func atServer(_ offset: Int64) -> Int64 {
        (serverNow.millisecondsSince1970 - AssessmentRevisionTests.t0.millisecondsSince1970) / 1000 + offset
    }

    @Test(
        "answers and a submission backdated ten years, for an assessment closed yesterday: rejected occurred_at_out_of_range, not graded",
        arguments: StorageKind.allCases)
    func backdatedSubmission(_ kind: StorageKind) async throws {
        let h = try await AssessmentRevisionTests.Harness(kind)
        defer { h.push.remove() }
        // Published a day before t0 (the harness's content clock); its last day was yesterday.
        try await h.publish(key: ["q1": "a", "q2": "b"], availableUntil: "2025-12-30")
        let tenYears = Self.ago(days: 3_653)
        let backdated = try await h.push.push([
            try h.answer(1, "att-1", "q1", "a", at: tenYears),
            try h.answer(2, "att-1", "q2", "b", at: tenYears + 10),
            try h.submit(3, "att-1", revision: 1, at: tenYears + 20),
        ])
        // The answers of an attempt the server does not know yet name no assessment: they are
        // kept, but never count; the submission names it, and is refused.
        #expect(backdated.results.map(\.status) == [.applied, .applied, .rejected])
        #expect(backdated.results[2].error?.code == .occurredAtOutOfRange)
        #expect(AssessmentRevisionTests.detail(backdated.results[2], "earliest_accepted") == .string(AssessmentRevisionTests.time(-86_400).iso8601))
        #expect(try await h.push.value(Attempt.self, "att-1") == nil, "nothing was graded")
        // Once the attempt is known (its `attempted` statement names the assessment), a
        // backdated answer is refused outright.
        var started = h.push.statementPayload("st-5", verb: "attempted", object: "quiz-1", attempt: "att-5")
        started["stated_at"] = .string(AssessmentRevisionTests.time(0).iso8601)
        let known = try await h.push.push([
            h.push.mutation(4, "Statement", .create, "st-5", started), try h.answer(5, "att-5", "q1", "a", at: tenYears),
        ])
        #expect(known.results.map(\.status) == [.applied, .rejected])
        #expect(known.results[1].error?.code == .occurredAtOutOfRange)
        #expect(try await h.push.value(Attempt.self, "att-5")?.startedAt == AssessmentRevisionTests.time(0))

        // The same attempt dated where it could have been taken (before the last day, after
        // publication) and synced late, offline: taken, and judged by the last day as before.
        let offline = try await h.push.push([
            try h.answer(6, "att-2", "q1", "a", at: Self.ago(days: 1) / 2),
            try h.submit(7, "att-2", revision: 1, at: Self.ago(days: 1) / 2 + 30),
        ])
        #expect(offline.results.map(\.status) == [.applied, .rejected])
        #expect(offline.results[1].error?.code == .assessmentClosed, "t0 - 12 h is 2025-12-31, past the last day")
    }

    @Test("a submission dated before its own attempt began is refused", arguments: StorageKind.allCases)
    func submissionBeforeTheAttempt(_ kind: StorageKind) async throws {
        let h = try await AssessmentRevisionTests.Harness(kind)
        defer { h.push.remove() }
        try await h.publish(key: ["q1": "a", "q2": "b"])
        let pushed = try await h.push.push([
            try h.answer(1, "att-1", "q1", "a", at: 0), try h.answer(2, "att-1", "q2", "b", at: 10),
            try h.submit(3, "att-1", revision: 1, at: -3_600),
        ])
        #expect(pushed.results.map(\.status) == [.applied, .applied, .rejected])
        #expect(pushed.results[2].error?.code == .occurredAtOutOfRange)
        #expect(try await h.push.value(Attempt.self, "att-1")?.state != .closed)
    }

    @Test("an event dated later than its receipt plus the clock skew allowed is rejected, any contract", arguments: StorageKind.allCases)
    func futureDated(_ kind: StorageKind) async throws {
        let h = try await AssessmentRevisionTests.Harness(kind)
        defer { h.push.remove() }
        try await h.publish(key: ["q1": "a", "q2": "b"])
        let pushed = try await h.push.push([
            try h.answer(1, "att-1", "q1", "a", at: Self.atServer(3_600)),
            try h.answer(2, "att-2", "q1", "a", at: Self.atServer(60)),  // within the 5 minutes allowed
        ])
        #expect(pushed.results.map(\.status) == [.rejected, .applied])
        #expect(pushed.results[0].error?.code == .occurredAtOutOfRange)
    }
}
