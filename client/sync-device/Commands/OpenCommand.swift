import ArgumentParser
import ContractRuntime
import Contracts
import Foundation
import LearningClient
import SyncClient

struct OpenCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "open",
        abstract: "Open a lesson (and record the learner's progress) or an assessment (its questions).",
        discussion: """
            A lesson shows its content and files and records a LessonProgressed event (read to the end \
            unless --progress says otherwise); a read-only device still shows it, then exits 5. The files of \
            a downloaded unit are given as file:// URLs on the device, verified (`download UNIT`). An \
            assessment shows its questions and the learner's attempts; `answer` answers them.
            """
    )

    @Argument(help: "A lesson id or an assessment id.")
    var id: String

    @Option(help: "How far the learner got, from 0 to 1 (1 completes the lesson).")
    var progress = 1.0

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    func validate() throws {
        guard (0...1).contains(progress) else { throw ValidationError("--progress must be between 0 and 1, not \(progress)") }
    }

    func execute() async throws {
        let session = try device.session()
        let content = LearningContent(session: session)
        if let assessment = try session.store.fetch(Assessment.self, id: id) {
            try openAssessment(assessment, session: session)
            return
        }
        switch try await session.store.fetch(Lesson.self, id: id, from: content.fetcher) {
        case .cached(let lesson), .fetched(let lesson):
            try await openLesson(lesson, session: session)
        case .offline, .unavailable:
            // The read-through pulled the content scope already: an assessment is cached by now if it exists.
            guard let assessment = try session.store.fetch(Assessment.self, id: id) else {
                throw content.notFound("lesson or assessment", id)
            }
            try openAssessment(assessment, session: session)
        }
    }

    private func openLesson(_ lesson: Lesson, session: DeviceSession) async throws {
        let store = session.store
        let detail = try store.unitDetail(id: lesson.unitId)
        let files = detail?.lessons.first { $0.lesson.id == lesson.id }
        let assets = files?.assets ?? []
        let local = try localFiles(of: assets, session: session)
        if detail != nil { try store.markUnitOpened(id: lesson.unitId) }
        // Shown first: a read-only device still opens lessons.
        if output.json {
            Console.json(
                .object([
                    "lesson": .object(Wire.object(lesson)), "unit_title": detail.map { .string($0.unit.title) } ?? .null,
                    "assets": .array(
                        assets.map { asset in
                            .object([
                                "asset": .object(Wire.object(asset)),
                                "status": .string(local[asset.id] == nil ? "remote" : "downloaded"),
                                "file": local[asset.id].map { .string($0.absoluteString) } ?? .null,
                            ])
                        }),
                ]))
        } else {
            Console.say(
                "\(detail?.unit.title ?? lesson.unitId) › \(lesson.sortIndex + 1). \(lesson.title)  (\(lesson.lessonKind.rawValue)"
                    + (lesson.durationSeconds.map { ", \(($0 + 59) / 60) min" } ?? "") + ")"
            )
            Console.say("  \(CanonicalJSON.text(lesson.body))")
            for asset in assets {
                let place = local[asset.id]?.absoluteString ?? "not on the device (sync-device download \(lesson.unitId))"
                Console.say("  file \(asset.id)  \(asset.contentType)  \(Wording.bytes(asset.sizeBytes))  \(place)")
            }
        }
        let recorded = try store.record(
            LessonProgressed(lessonId: lesson.id, unitId: lesson.unitId, sessionId: UUID(), progress: progress, completed: progress >= 1)
        )
        if !output.json {
            let done = progress >= 1 ? "read to the end" : "\(Int(progress * 100)) % read"
            Console.say("recorded: \(done) (LessonProgressed \(recorded.eventId)); \(try session.queuedNote())")
        }
    }

    /// The `file://` URLs of the lesson's files the device holds (the engine's file cache,
    /// each checked against its SHA-256 when it was stored); files not downloaded are left to
    /// `download`, so opening a lesson never starts a download on its own.
    private func localFiles(of assets: [Asset], session: DeviceSession) throws -> [String: URL] {
        var urls: [String: URL] = [:]
        for asset in assets {
            guard let file = asset.file, let url = try session.store.localFile(for: file) else { continue }
            urls[asset.id] = url
        }
        return urls
    }

    private func openAssessment(_ assessment: Assessment, session: DeviceSession) throws {
        let questions = AssessmentQuestion.all(of: assessment)
        let availability = try session.store.assessmentAvailability(id: assessment.id)
        let open = availability?.attemptInProgress
        let scored = try session.store.attempts(assessmentId: assessment.id)
        if output.json {
            Console.json(
                .object([
                    "assessment": .object(Wire.object(assessment).filter { $0.key != "questions" }),
                    "questions": .array(
                        questions.map { question in
                            .object([
                                "id": .string(question.id), "prompt": .string(question.prompt),
                                "choices": .array(question.choices.map(JSONValue.string)),
                                "answer": open?.answers[question.id]?.answer ?? .null,
                            ])
                        }),
                    "open_attempt": open.map { .string($0.attemptId) } ?? .null,
                    "availability": .object([
                        "revision": .int(assessment.revision), "is_open": .bool(availability?.isOpen ?? true),
                        "available_until": assessment.availableUntil.map { .string($0.description) } ?? .null,
                        "days_left": availability?.daysLeft.map { .int(Int64($0)) } ?? .null,
                        "time_limit_seconds": assessment.timeLimitSeconds.map(JSONValue.int) ?? .null,
                        "attempt_revision": open?.assessmentRevision.map(JSONValue.int) ?? .null,
                        "attempt_deadline": open?.deadline.map { .string(Timestamp($0).iso8601) } ?? .null,
                    ]),
                    "attempts": .array(scored.map { .object(Wire.object($0)) }),
                ]))
            return
        }
        Console.say(
            "\(assessment.title)  (\(Wording.count(questions.count, "question")), pass at \(Int((assessment.passScore * 100).rounded())) %)"
        )
        if let availability { Console.say("  " + Self.availabilityLine(availability)) }
        if let instructions = assessment.instructions { Console.say("  \(instructions)") }
        for question in questions {
            let answered = open?.answers[question.id].map { "  [answered: \(Wording.value($0.answer))]" } ?? ""
            Console.say("  \(question.id). \(question.prompt)\(answered)")
            for (index, choice) in question.choices.enumerated() { Console.say("      \(index)) \(choice)") }
        }
        if let open {
            let taken = open.assessmentRevision.map { " on revision \($0)" } ?? ""
            let deadline = open.deadline.map { ", time runs out at \(Timestamp($0).iso8601)" } ?? ""
            Console.say("attempt \(open.attemptId) in progress\(taken): \(open.answers.count) of \(questions.count) answered\(deadline)")
        }
        for attempt in scored { Console.say(AttemptsCommand.line(attempt, title: nil)) }
        if availability?.isOpen ?? true { Console.say("answer with: sync-device answer \(assessment.id) QUESTION CHOICE") }
    }

    /// `revision 2 · open until 2026-03-31 (12 days left) · time limit 10 min`, or closed.
    static func availabilityLine(_ availability: AssessmentAvailability) -> String {
        var parts = ["revision \(availability.revision)"]
        if let lastDay = availability.availableUntil {
            parts.append(
                availability.isOpen
                    ? "open until \(lastDay) (UTC; \(Wording.count(availability.daysLeft ?? 0, "day")) left)"
                    : "closed: it took submissions until \(lastDay) (UTC), the server refuses later ones"
            )
        } else {
            parts.append("no closing day")
        }
        if let limit = availability.timeLimitSeconds {
            parts.append("time limit " + (limit % 60 == 0 ? "\(limit / 60) min" : "\(limit) s") + " from the first answer")
        } else {
            parts.append("no time limit")
        }
        return parts.joined(separator: " · ")
    }
}
