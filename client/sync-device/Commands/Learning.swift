import ContractRuntime
import Contracts
import Foundation
import SyncClient

/// One question of an assessment, as its `questions` JSON holds it:
/// `[{"id": "q1", "prompt": "…", "choices": ["…", "…"]}]` (or `{"questions": [...]}`).
struct AssessmentQuestion {
    var id: String
    var prompt: String
    var choices: [String]

    static func all(of assessment: Assessment) -> [AssessmentQuestion] {
        var items: [JSONValue] = []
        switch assessment.questions {
        case .array(let list): items = list
        case .object(let object): if case .array(let list)? = object["questions"] { items = list }
        default: break
        }
        return items.compactMap { item in
            guard case .object(let question) = item, case .string(let id)? = question["id"] else { return nil }
            var prompt = ""
            if case .string(let text)? = question["prompt"] { prompt = text }
            var choices: [String] = []
            if case .array(let list)? = question["choices"] {
                choices = list.map { if case .string(let text) = $0 { text } else { CanonicalJSON.text($0) } }
            }
            return AssessmentQuestion(id: id, prompt: prompt, choices: choices)
        }
    }

    /// The answer as the server grades it: a choice by its number (`0`) or its text, or any JSON
    /// (or text) for a question without choices.
    func answer(_ text: String) throws(DeviceFailure) -> JSONValue {
        guard !choices.isEmpty else { return FieldAssignments.json(text) ?? .string(text) }
        if let index = Int(text) {
            guard choices.indices.contains(index) else {
                throw .usage("question \(id) has choices 0 to \(choices.count - 1), not \(index)")
            }
            return .int(Int64(index))
        }
        if let index = choices.firstIndex(of: text) { return .int(Int64(index)) }
        throw .usage(
            "'\(text)' is not a choice of question \(id)",
            hint: "answer with a number: " + choices.enumerated().map { "\($0.offset) = \($0.element)" }.joined(separator: ", ")
        )
    }
}

/// The learner's attempts as this device knows them: the ones it started (an `attempted`
/// statement naming the attempt), the answers and submissions it recorded, and the attempts the
/// server scored. The attempt in progress is the library's (``OfflineStore/attemptInProgress(assessmentId:)``).
struct AttemptBook {
    let store: OfflineStore

    /// An attempt started on this device.
    struct Started {
        var attemptId: String
        var assessmentId: String
        var startedAt: Timestamp
        /// The latest answer per question.
        var answers: [String: EventEnvelope<AnswerRecorded>]
        var submitted: EventEnvelope<AttemptSubmitted>?
    }

    func started(assessmentId: String? = nil) throws(OfflineStoreError) -> [Started] {
        var filter = RowFilter<Statement>.equals(.verb(.attempted))
        if let assessmentId { filter = filter && .equals(.objectId(assessmentId)) }
        let statements = try store.all(Statement.self, where: filter, orderBy: [.ascending("stated_at")])
        let answers = Dictionary(grouping: try store.events(AnswerRecorded.self), by: \.payload.attemptId)
        let submissions = Dictionary(grouping: try store.events(AttemptSubmitted.self), by: \.payload.attemptId)
        return statements.compactMap { statement in
            guard let attemptId = statement.attemptId else { return nil }
            var latest: [String: EventEnvelope<AnswerRecorded>] = [:]
            for answer in answers[attemptId] ?? [] { latest[answer.payload.questionId] = answer }
            return Started(
                attemptId: attemptId, assessmentId: statement.objectId, startedAt: statement.statedAt, answers: latest,
                submitted: submissions[attemptId]?.first
            )
        }
    }
}

/// The assessment or lesson a learning command names, from the device or (when nothing is
/// cached and the device is online) fetched once.
struct LearningContent {
    let session: DeviceSession

    var fetcher: ScopePullFetcher {
        ScopePullFetcher(store: session.store, network: session.network, scopes: session.profile.scopes)
    }

    func assessment(_ id: String) async throws -> Assessment {
        switch try await session.store.fetch(Assessment.self, id: id, from: fetcher) {
        case .cached(let assessment), .fetched(let assessment): return assessment
        case .offline, .unavailable: throw notFound("assessment", id)
        }
    }

    func notFound(_ kind: String, _ id: String) -> DeviceFailure {
        .notFound(
            "no \(kind) '\(id)' on this device" + (session.home.isOffline ? ", and it is offline" : ""),
            hint: "`sync-device units` lists what is cached; `sync-device sync` downloads the content"
        )
    }
}
