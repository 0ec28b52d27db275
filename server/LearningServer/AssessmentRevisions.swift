import ContractRuntime
import Contracts
import Foundation
import SyncServer

/// An assessment's revisions: its content version (`revision`, which devices see) and the
/// grading of every earlier revision (`answer_key_history`, server-only), both owned by the
/// server.
///
/// Publishing an `Assessment` whose questions, answer key, pass score, question count or time
/// limit differ from the stored row's makes a new revision: `revision` goes up by one and the
/// stored revision's grading is added to the history, so an attempt taken on it is still graded
/// against it (see ``LearningReducer``). Any other change (title, instructions,
/// `available_until`) keeps the revision. Whatever `revision` or `answer_key_history` a
/// publisher sends is replaced. A new row starts at revision 1; a row published again after its
/// deletion continues from the deleted row's revision.
enum AssessmentRevisions {
    /// The fields whose change makes a new revision: what a learner answers and how it is graded.
    static let gradedFields = ["questions", "answer_key", "pass_score", "question_count", "time_limit_seconds"]

    /// How one revision is graded.
    struct Grading: Sendable {
        var answerKey: AssessmentAnswerKey
        var passScore: Double
        var timeLimitSeconds: Int64?
    }

    /// Sets `revision` and `answer_key_history` of a published row's columns from the stored row.
    ///
    /// The history also keeps when each revision was published, by the server's clock
    /// (`published_at`: revision → milliseconds), the earliest a learner could have begun an
    /// attempt on it (``publication(of:revision:)``).
    static func stamp(_ values: inout [String: ColumnValue], existing: StoredRow?, now: Timestamp) {
        guard let existing else {
            values["revision"] = .integer(1)
            values["answer_key_history"] = .text(CanonicalJSON.text(.object([publishedAtKey: .object(["1": .int(now.millisecondsSince1970)])])))
            return
        }
        let stored = existing.integer("revision") ?? 1
        let history = existing["answer_key_history"]
        guard gradedFields.contains(where: { existing[$0] != (values[$0] ?? .null) }) else {
            values["revision"] = .integer(stored)
            values["answer_key_history"] = history
            return
        }
        var earlier: [String: JSONValue] = [:]
        if case .text(let text) = history, case .object(let object)? = JSONParser.parse(text) { earlier = object }
        var published: [String: JSONValue] = [:]
        if case .object(let times)? = earlier[publishedAtKey] { published = times }
        published[String(stored + 1)] = .int(now.millisecondsSince1970)
        earlier[publishedAtKey] = .object(published)
        earlier[String(stored)] = .object([
            "answer_key": existing.text("answer_key").flatMap(JSONParser.parse) ?? .null,
            "pass_score": number(existing["pass_score"]) ?? .null,
            "question_count": existing.integer("question_count").map(JSONValue.int) ?? .null,
            "time_limit_seconds": existing.integer("time_limit_seconds").map(JSONValue.int) ?? .null,
        ])
        values["revision"] = .integer(stored + 1)
        values["answer_key_history"] = .text(CanonicalJSON.text(.object(earlier)))
    }

    /// The grading of `revision` of a stored assessment row: the row's own for its current
    /// revision (or a later one, or none named), the history's for an earlier one; `nil` for an
    /// earlier revision the history does not hold (published before revisions were kept).
    static func grading(of row: StoredRow, revision: Int64?) -> Grading? {
        let current = row.integer("revision") ?? 1
        guard let revision, revision < current else {
            return Grading(
                answerKey: AssessmentAnswerKey(row.text("answer_key").flatMap(JSONParser.parse) ?? .null),
                passScore: double(row["pass_score"]) ?? 0.7, timeLimitSeconds: row.integer("time_limit_seconds")
            )
        }
        guard let text = row.text("answer_key_history"), case .object(let history)? = JSONParser.parse(text),
            case .object(let earlier)? = history[String(revision)]
        else { return nil }
        var passScore = 0.7
        switch earlier["pass_score"] {
        case .double(let value)?: passScore = value
        case .int(let value)?: passScore = Double(value)
        default: break
        }
        var limit: Int64?
        if case .int(let value)? = earlier["time_limit_seconds"] { limit = value }
        return Grading(answerKey: AssessmentAnswerKey(earlier["answer_key"] ?? .null), passScore: passScore, timeLimitSeconds: limit)
    }

    /// The member of `answer_key_history` that says when each revision was published.
    static let publishedAtKey = "published_at"

    /// `revision` of a stored assessment row and when it was published, by the server's clock;
    /// without a revision, the earliest one whose publication is known. `nil` when the server
    /// did not keep that (revisions published before it did).
    static func publication(of row: StoredRow, revision: Int64?) -> (revision: Int64, at: Timestamp)? {
        guard let text = row.text("answer_key_history"), case .object(let history)? = JSONParser.parse(text),
            case .object(let times)? = history[publishedAtKey]
        else { return nil }
        let known = times.compactMap { key, value -> (Int64, Int64)? in
            guard let number = Int64(key), case .int(let milliseconds) = value else { return nil }
            return (number, milliseconds)
        }
        let chosen = revision.map { wanted in known.first { $0.0 == wanted } } ?? known.min { $0.0 < $1.0 }
        return chosen.map { (revision: $0.0, at: Timestamp(millisecondsSince1970: $0.1)) }
    }

    private static func double(_ value: ColumnValue) -> Double? {
        switch value {
        case .real(let number): return number
        case .integer(let number): return Double(number)
        default: return nil
        }
    }

    private static func number(_ value: ColumnValue) -> JSONValue? {
        double(value).map(JSONValue.double)
    }
}
