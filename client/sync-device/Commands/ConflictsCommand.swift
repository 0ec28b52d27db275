import ArgumentParser
import ContractRuntime
import Contracts
import Foundation
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
        if output.json {
            Console.json(.object(["conflicts": .array(conflicts.map(ConflictRendering.json))]))
            return
        }
        if conflicts.isEmpty { Console.say(all ? "no conflicts" : "no open conflicts") }
        for conflict in conflicts { ConflictRendering.lines(conflict).forEach { Console.say($0) } }
    }
}

struct ResolveCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "resolve",
        abstract: "Resolve a conflict: keep mine (sent again, based on the server's version) or take theirs.",
        discussion: """
            `mine` queues the device's row again on top of the server's version; the next sync sends it. \
            `theirs` replaces the device's row with the server's, and nothing is sent.
            """
    )

    enum Choice: String, ExpressibleByArgument, CaseIterable {
        case mine, theirs
    }

    @Argument(help: "The conflict's id (`sync-device conflicts` lists them), or the id of the row in conflict.")
    var conflict: String

    @Argument(help: "mine or theirs.")
    var choice: Choice

    @OptionGroup var device: DeviceOptions

    func execute() async throws {
        let session = try device.session()
        let conflict = try openConflict(in: session.store)
        let id = conflict.id
        switch choice {
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
