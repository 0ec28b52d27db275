import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import Testing

/// The assessment's versions with the real binaries: an attempt taken on revision 1 meets
/// revision 2 and is retaken; an attempt at an assessment deleted meanwhile is exported and
/// discarded, its answers never dropped silently. (`make demo` shows submit-anyway.)
@Suite("End-to-end: an assessment that changes while a learner takes it", .serialized, .blockingWork)
struct AssessmentRevisionStoryTests {
    static let assessment = StoryTests.assessment

    /// The seeded assessment with q3's choices swapped: its right answer becomes 1.
    static let revision2: [String: JSONValue] = [
        "id": .string(assessment), "unit_id": .string("unit-battery-basics"), "title": .string("Battery swap check"),
        "questions": .array(
            [
                ("q1", ["Switch the vehicle off", "Start the motor"]), ("q2", ["Below 20 %", "Below 80 %"]),
                ("q3", ["Swapped as usual", "Reported as a safety issue"]),
            ].map { id, choices in
                .object(["id": .string(id), "prompt": .string(id), "choices": .array(choices.map(JSONValue.string))])
            }),
        "answer_key": .array([("q1", 0), ("q2", 0), ("q3", 1)].map { .object(["id": .string($0.0), "correct": .int(Int64($0.1))]) }),
        "question_count": .int(3), "pass_score": .double(0.66), "time_limit_seconds": .int(600),
    ]

    @Test(
        "a submission on revision 1 after revision 2 is a conflict; retaken, the new attempt is graded on revision 2; a deleted assessment's answers are exported, then discarded"
    )
    func revisionConflictRetakeAndDeletion() async throws {
        let stage = try Stage()
        let phone = try stage.device("phone", user: "learner-1")
        let shown = try phone.json(["open", Self.assessment])["availability"]
        #expect(shown["revision"].int == 1)
        #expect(shown["time_limit_seconds"].int == 600)
        #expect(shown["is_open"].bool == true)

        try phone.ok(["offline", "on"])
        for question in ["q1", "q2", "q3"] { try phone.ok(["answer", Self.assessment, question, "0"]) }
        try phone.ok(["submit", Self.assessment])
        let admin = try stage.adminToken()
        try await stage.client().publish("Assessment", Self.revision2, adminToken: admin)

        let back = try phone.run(["offline", "off"])
        #expect(back.status == 4, "\(back)")
        let conflicts = try phone.json(["conflicts"])["conflicts"]
        #expect(conflicts.array.count == 1)
        let conflict = conflicts[0]
        #expect(conflict["entity"].string == "AttemptSubmitted")
        #expect(conflict["reason"].string?.contains("moved to revision 2") == true, "\(conflict)")
        #expect(conflict["attempt"]["assessment_revision"].int == 1)
        #expect(conflict["attempt"]["answers"].array.count == 3)
        let id = try #require(conflict["id"].int)

        // mine/theirs are for rows; an attempt takes the learner's choice.
        #expect(try phone.run(["resolve", String(id), "mine"]).status == 64)
        try phone.ok(["resolve", String(id), "retake"])
        #expect(try phone.json(["conflicts"])["conflicts"].array.isEmpty)
        let reopened = try phone.json(["open", Self.assessment])
        #expect(reopened["availability"]["revision"].int == 2)
        #expect(reopened["open_attempt"].string == nil)
        for (question, answer) in [("q1", "0"), ("q2", "0"), ("q3", "1")] { try phone.ok(["answer", Self.assessment, question, answer]) }
        try phone.ok(["submit", Self.assessment])
        try phone.ok(["sync"])
        let attempts = try phone.json(["attempts", Self.assessment])
        let graded = try #require(attempts["attempts"].array.first { $0["state"].string == "closed" })
        #expect(graded["outcome"].string == "passed", "\(attempts)")
        #expect(graded["score"].double == 3)
        #expect(graded["assessment_revision"].int == 2)
        // The attempt given up: the server has it (its answers), never graded.
        let givenUp = try #require(attempts["attempts"].array.first { $0["state"].string == "open" })
        #expect(givenUp["conflict"].string == "given up for a retake on the new revision", "\(attempts)")

        // Deleted while the learner takes it again.
        try phone.ok(["offline", "on"])
        try phone.ok(["answer", Self.assessment, "q1", "0", "--seconds", "7"])
        try phone.ok(["submit", Self.assessment])
        try await stage.client().delete("Assessment", id: Self.assessment, adminToken: admin)
        #expect(try phone.run(["offline", "off"]).status == 4)
        let deleted = try phone.json(["conflicts"])["conflicts"][0]
        #expect(deleted["reason"].string?.contains("deleted") == true, "\(deleted)")
        let deletedID = try #require(deleted["id"].int)
        #expect(try phone.run(["resolve", String(deletedID), "submit-anyway"]).status == 64)
        let file = stage.folder.appendingPathComponent("answers.json")
        try phone.ok(["resolve", String(deletedID), "discard", "--export", file.path])
        let exported = try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: Any]
        let answers = exported?["answers"] as? [[String: Any]]
        #expect(answers?.count == 1)
        #expect(answers?.first?["question_id"] as? String == "q1")
        #expect(answers?.first?["time_spent_ms"] as? Int == 7_000)
        #expect(try phone.json(["conflicts"])["conflicts"].array.isEmpty)
        #expect(try phone.json(["status"])["pending"].int == 0)
    }
}
