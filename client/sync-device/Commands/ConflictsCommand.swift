import ArgumentParser
import ContractRuntime
import Contracts
import Foundation
import LearningClient
import SyncClient

struct ConflictsCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "conflicts",
        abstract: "Changes the server answered with a conflict: both rows and how they differ.",
        discussion: "Lists the open ones (with --all, also the resolved ones and those the policy settled by itself)."
    )

    @Flag(help: "Include resolved conflicts.")
    var all = false

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    func execute() async throws {
        let session = try device.session()
        let conflicts = try session.store.conflicts(includeResolved: all)
        // Attempts the server did not take: what was taken, and the answers kept.
        let attempts = Dictionary(try session.store.attemptConflicts(includeResolved: all).map { ($0.id, $0) }) { first, _ in first }
        if output.json {
            Console.json(
                .object([
                    "conflicts": .array(
                        conflicts.map { conflict in
                            guard case .object(var object) = ConflictRendering.json(conflict), let attempt = attempts[conflict.id] else {
                                return ConflictRendering.json(conflict)
                            }
                            object["attempt"] = JSONParser.parse(attempt.exportedAnswers()) ?? .null
                            return .object(object)
                        })
                ]))
            return
        }
        if conflicts.isEmpty { Console.say(all ? "no conflicts" : "no open conflicts") }
        for conflict in conflicts {
            var lines = ConflictRendering.lines(conflict)
            if let attempt = attempts[conflict.id] {
                let taken = attempt.takenRevision.map { "taken on revision \($0)" } ?? "taken before revisions were recorded"
                lines.insert(
                    "    attempt \(attempt.attemptId) at \(attempt.assessmentTitle ?? attempt.assessmentId), \(taken): "
                        + "\(Wording.count(attempt.answers.count, "answer")) kept on this device",
                    at: 1
                )
            }
            lines.forEach { Console.say($0) }
        }
    }
}

struct ResolveCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "resolve",
        abstract: "Resolve a conflict: keep mine (sent again, based on the server's version) or take theirs.",
        discussion: """
            `mine` queues the device's row again on top of the server's version; the next sync sends it. \
            `theirs` replaces the device's row with the server's, and nothing is sent. \
            A submitted attempt whose assessment moved to a new revision is resolved with `submit-anyway` \
            (handed in again, graded against the revision it was taken on) or `retake` (given up; the new \
            revision is stored, answer it again); one whose assessment was deleted with `discard`, after \
            `--export FILE` has written its answers as JSON.
            """
    )

    enum Choice: String, ExpressibleByArgument, CaseIterable {
        case mine, theirs
        case submitAnyway = "submit-anyway"
        case retake, discard
    }

    @Argument(help: "The conflict's id (`sync-device conflicts` lists them), or the id of the row in conflict.")
    var conflict: String

    @Argument(help: "mine or theirs; for a submitted attempt, submit-anyway, retake or discard.")
    var choice: Choice

    @Option(help: "Write the attempt's answers to this file as JSON first (an attempt conflict only).")
    var export: String?

    @OptionGroup var device: DeviceOptions

    func execute() async throws {
        let session = try device.session()
        let conflict = try openConflict(in: session.store)
        let id = conflict.id
        if ConflictRendering.isAttempt(conflict) {
            try resolveAttempt(id, session: session)
            return
        }
        if export != nil { throw DeviceFailure.usage("--export is for an attempt conflict; conflict \(id) is about \(conflict.entity)") }
        switch choice {
        case .submitAnyway, .retake, .discard:
            throw DeviceFailure.usage(
                "\(choice.rawValue) resolves a submitted attempt; conflict \(id) is about \(conflict.entity) \(conflict.rowId)",
                hint: "resolve it with mine or theirs"
            )
        case .mine:
            let queued = try session.store.resolveConflict(id, with: .keepMine)
            Console.say(
                "conflict \(id): kept this device's \(conflict.entity) \(conflict.rowId)"
                    + (queued.map { " (queued again as change \($0.seq))" } ?? "") + "; \(try session.queuedNote())"
            )
        case .theirs:
            try session.store.resolveConflict(id, with: .takeTheirs)
            Console.say("conflict \(id): took the server's \(conflict.entity) \(conflict.rowId); nothing to send")
        }
    }

    /// An attempt conflict: the learner's choice, the answers exported first when asked.
    private func resolveAttempt(_ id: Int64, session: DeviceSession) throws {
        let store = session.store
        guard let attempt = try store.attemptConflicts().first(where: { $0.id == id }) else {
            throw DeviceFailure.notFound("conflict \(id) is not an open attempt conflict", hint: "`sync-device conflicts` lists the open ones")
        }
        let chosen: AttemptConflictChoice
        switch choice {
        case .submitAnyway: chosen = .submitAnyway
        case .retake: chosen = .retake
        case .discard: chosen = .discard
        case .mine, .theirs:
            throw DeviceFailure.usage(
                "conflict \(id) is about a submitted attempt",
                hint: "resolve it with " + attempt.choices.map { $0 == .submitAnyway ? "submit-anyway" : $0.rawValue }.joined(separator: " or ")
            )
        }
        if let export {
            let url = URL(fileURLWithPath: export)
            do {
                try attempt.exportedAnswers().write(to: url, options: .atomic)
            } catch {
                throw DeviceFailure.failure("cannot write \(export): \(error.localizedDescription)")
            }
            Console.say("exported \(Wording.count(attempt.answers.count, "answer")) of attempt \(attempt.attemptId) to \(export)")
        }
        let resubmitted = try store.resolveAttemptConflict(id, with: chosen)
        switch chosen {
        case .submitAnyway:
            Console.say(
                "conflict \(id): attempt \(attempt.attemptId) submitted anyway, to be graded against revision "
                    + "\(attempt.takenRevision.map(String.init) ?? "?") (queued as \(resubmitted?.eventId ?? "?")); \(try session.queuedNote())"
            )
        case .retake:
            Console.say(
                "conflict \(id): attempt \(attempt.attemptId) given up; the new revision is on this device: "
                    + "answer again with `sync-device answer \(attempt.assessmentId) QUESTION ANSWER`"
            )
        case .discard:
            Console.say("conflict \(id): attempt \(attempt.attemptId) and its answers given up")
        }
    }

    /// The open conflict named by its id, or by the id of its row when that row has exactly one.
    private func openConflict(in store: OfflineStore) throws -> ConflictRecord {
        let open = try store.conflicts()
        let matches = Int64(conflict).map { id in open.filter { $0.id == id } } ?? open.filter { $0.rowId == conflict }
        guard let match = matches.first else {
            throw DeviceFailure.notFound("no open conflict \(conflict)", hint: "`sync-device conflicts` lists the open ones")
        }
        guard matches.count == 1 else {
            throw DeviceFailure.usage(
                "row \(conflict) has \(matches.count) open conflicts",
                hint: "name one by its id: " + matches.map { String($0.id) }.joined(separator: ", ")
            )
        }
        return match
    }
}

struct OutboxCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "outbox",
        abstract: "The queued changes: waiting, refused, conflicted (with --all, also the delivered ones)."
    )

    @Flag(help: "Include the changes the server already has.")
    var all = false

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    func execute() async throws {
        let session = try device.session()
        let entries = try session.store.outboxEntries(statuses: all ? nil : OutboxStatus.unsynced)
        if output.json {
            Console.json(
                .object([
                    "client_id": .string(session.store.identity.clientId),
                    "entries": .array(
                        entries.map { entry in
                            .object([
                                "seq": .int(entry.seq), "push_seq": entry.pushSeq.map(JSONValue.int) ?? .null,
                                "client_mutation_id": .string(entry.clientMutationId), "entity": .string(entry.entity),
                                "op": .string(entry.op.rawValue), "row_id": .string(entry.rowId), "status": .string(entry.status.rawValue),
                                "attempts": .int(Int64(entry.attempts)), "created_at": .string(entry.createdAt.iso8601),
                                "last_error": entry.lastError.map {
                                    .object(["code": .string($0.code.rawValue), "message": .string($0.message)])
                                } ?? .null,
                            ])
                        }),
                ]))
            return
        }
        if entries.isEmpty { Console.say(all ? "nothing was ever queued" : "nothing waits: every change is on the server") }
        for entry in entries {
            let error = entry.lastError.map { "  — \($0.message)" } ?? ""
            Console.say("\(entry.seq)  \(entry.status.rawValue)  \(entry.op.rawValue) \(entry.entity) \(entry.rowId)\(error)")
        }
    }
}
