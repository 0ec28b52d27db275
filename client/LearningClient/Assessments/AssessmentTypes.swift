public import ContractRuntime
public import Contracts
public import Foundation
public import SyncClient

/// What a learner is shown of an assessment before starting it: which revision it is, until
/// when it takes submissions and how long an attempt may last, by the device's clock. The server
/// enforces both (`assessment_closed`, `time_limit_exceeded`); the device shows them first.
public struct AssessmentAvailability: Hashable, Sendable {
    public var assessment: Assessment
    /// The assessment's content version an attempt started now is taken on.
    public var revision: Int64 { assessment.revision }
    /// The last day (UTC) it takes submissions; `nil` for no end.
    public var availableUntil: CalendarDate? { assessment.availableUntil }
    /// How long an attempt may last from its start; `nil` for no limit.
    public var timeLimitSeconds: Int64? { assessment.timeLimitSeconds }
    /// The device's day (UTC) when this was read.
    public var today: CalendarDate
    /// The attempt this device is taking at it, if any.
    public var attemptInProgress: AttemptInProgress?

    /// Whether it still takes submissions today.
    public var isOpen: Bool { availableUntil.map { today <= $0 } ?? true }

    /// Days left to submit, today included (1 on the last day, 0 once closed); `nil` without an end.
    public var daysLeft: Int? { availableUntil.map { max(0, $0.daysSince1970 - today.daysSince1970 + 1) } }
}

/// An attempt this device started and has not handed in or given up.
public struct AttemptInProgress: Hashable, Sendable {
    public var attemptId: String
    public var assessmentId: String
    /// The assessment revision it is taken on; `nil` for an attempt started before the device
    /// recorded revisions (graded against the server's current revision).
    public var assessmentRevision: Int64?
    public var startedAt: Date
    /// When its time runs out (the start plus the time limit it was started under); `nil` without a limit.
    public var deadline: Date?
    /// The latest answer to each question, by question id.
    public var answers: [String: RecordedAnswer]
}

/// One answer the learner recorded (an `AnswerRecorded` event), kept on the device.
public struct RecordedAnswer: Hashable, Sendable {
    public var questionId: String
    public var answer: JSONValue
    public var timeSpentMs: Int64
    public var answeredAt: Date
}

/// A submitted attempt the server answered with a conflict: the assessment moved to a newer
/// revision than the one the attempt was taken on, or it was deleted. The learner's answers are
/// kept on the device until the app resolves it (``OfflineStore/resolveAttemptConflict(_:with:)``).
public struct AttemptConflict: Hashable, Sendable, Identifiable {
    /// The conflict's id (the same as in ``OfflineStore/conflicts(includeResolved:)``).
    public var id: Int64
    public var attemptId: String
    public var assessmentId: String
    /// The assessment's title, when the device has it.
    public var assessmentTitle: String?
    /// The revision the attempt was taken on.
    public var takenRevision: Int64?
    public var kind: Kind
    /// The learner's latest answer to each question, ordered by question id.
    public var answers: [RecordedAnswer]
    /// When the learner handed the attempt in.
    public var submittedAt: Date
    public var detectedAt: Date
    /// How it was resolved; `nil` while open.
    public var resolution: ConflictResolution?

    public enum Kind: Hashable, Sendable {
        /// The server's assessment is at a newer revision: `current`.
        case newRevision(current: Assessment)
        /// The assessment was deleted on the server.
        case assessmentDeleted
    }

    /// What the app may choose: submit anyway or retake for a new revision, discard (after
    /// ``exportedAnswers()``) for a deleted assessment.
    public var choices: [AttemptConflictChoice] {
        switch kind {
        case .newRevision: return [.submitAnyway, .retake]
        case .assessmentDeleted: return [.discard]
        }
    }

    /// The attempt and its answers as JSON (sorted keys), for the learner to keep:
    /// `{"attempt_id", "assessment_id", "assessment_title", "assessment_revision", "submitted_at", "answers": [{"question_id", "answer", "time_spent_ms", "answered_at"}]}`.
    public func exportedAnswers() -> Data {
        let object: JSONValue = .object([
            "attempt_id": .string(attemptId), "assessment_id": .string(assessmentId),
            "assessment_title": assessmentTitle.map(JSONValue.string) ?? .null,
            "assessment_revision": takenRevision.map(JSONValue.int) ?? .null,
            "submitted_at": .string(Timestamp(submittedAt).iso8601),
            "answers": .array(
                answers.map { answer in
                    .object([
                        "question_id": .string(answer.questionId), "answer": answer.answer, "time_spent_ms": .int(answer.timeSpentMs),
                        "answered_at": .string(Timestamp(answer.answeredAt).iso8601),
                    ])
                }),
        ])
        return Data(CanonicalJSON.text(object).utf8)
    }
}

/// How the app resolves an ``AttemptConflict``.
public enum AttemptConflictChoice: String, Hashable, Sendable, CaseIterable {
    /// Hand the attempt in again as it was taken, graded against the revision it was taken on
    /// (a new revision only). Recorded as ``ConflictResolution/keepMine``.
    case submitAnyway = "submit_anyway"
    /// Give the attempt up and start again on the new revision, which is stored at once (a new
    /// revision only). Recorded as ``ConflictResolution/takeTheirs``.
    case retake
    /// Give the attempt and its answers up (export them first with
    /// ``AttemptConflict/exportedAnswers()``). Recorded as ``ConflictResolution/discarded``.
    case discard
}

/// Why an assessment call was refused.
public enum AssessmentError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The device has no assessment with that id (sync the content first).
    case unknownAssessment(id: String)
    /// The assessment took submissions until `lastDay` (UTC), by the device's clock.
    case closed(assessmentId: String, lastDay: CalendarDate)
    /// An attempt at the assessment is already in progress on this device.
    case attemptInProgress(attemptId: String)
    /// The attempt is not in progress on this device (never started here, handed in, or given up).
    case attemptNotInProgress(attemptId: String)
    /// The attempt's time ran out at `deadline`, by the device's clock.
    case timeLimitReached(attemptId: String, deadline: Date)
    /// The choice does not fit the conflict (submitting an attempt at a deleted assessment).
    case invalidChoice(conflictId: Int64, reason: String)
    /// The store failed or refused (a conflict already resolved, read-only until a sync, …).
    case store(OfflineStoreError)

    public var description: String {
        switch self {
        case .unknownAssessment(let id): return "no assessment '\(id)' on this device"
        case .closed(let id, let lastDay): return "\(id) took submissions until \(lastDay) (UTC)"
        case .attemptInProgress(let id): return "attempt \(id) is already in progress"
        case .attemptNotInProgress(let id): return "attempt \(id) is not in progress on this device"
        case .timeLimitReached(let id, let deadline): return "the time of attempt \(id) ran out at \(Timestamp(deadline).iso8601)"
        case .invalidChoice(let id, let reason): return "conflict \(id): \(reason)"
        case .store(let error): return error.description
        }
    }
}
