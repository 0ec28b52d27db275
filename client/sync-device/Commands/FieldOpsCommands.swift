import ArgumentParser
import ContractRuntime
import Contracts
import FieldOpsClient
import Foundation
import SyncClient

struct TasksCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "tasks",
        abstract: "The team's tasks in route order; `*` marks a task with changes not on the server yet."
    )

    @OptionGroup var list: TeamListOptions

    func execute() async throws {
        let (session, team) = try list.session()
        let tasks = try session.store.tasks(teamId: team)
        try RowListing(session: session, json: list.output.json).show(
            tasks, listKey: "tasks", rowKey: "task", none: "no tasks on this device (sync to download the team's tasks)"
        ) { task in
            ["\(task.id)  \(task.status.rawValue)  \(task.title)  (revision \(task.revision))"]
                + (task.notes.map { ["notes: \($0)"] } ?? [])
        }
    }
}

struct TaskCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "task",
        abstract: "Start or complete a task, online or offline.",
        discussion: """
            The change is stored and queued at once; the task travels under its contract's version_check \
            policy: if another device changed the task first, the sync reports a conflict to resolve \
            (`sync-device resolve ID mine|theirs`). Starting needs a task that is assigned, en route or \
            blocked; completing, one that is not completed or cancelled.
            """
    )

    enum Action: String, ExpressibleByArgument, CaseIterable {
        case start, complete
    }

    @Argument(help: "start or complete.")
    var action: Action

    @Argument(help: "The task's id (`sync-device tasks` lists them).")
    var id: String

    @OptionGroup var device: DeviceOptions

    func execute() async throws {
        let session = try device.session()
        let store = session.store
        guard let task = try store.fetch(FieldTask.self, id: id) else {
            throw DeviceFailure.notFound("no task '\(id)' on this device", hint: "`sync-device tasks` lists the team's tasks")
        }
        let now = Timestamp(session.clock.now())
        var changes: [FieldTask.Change]
        let target: FieldTask.Status
        switch action {
        case .start:
            target = .inProgress
            guard [.assigned, .enRoute, .blocked, .inProgress].contains(task.status) else {
                throw DeviceFailure.badState("task \(id) is \(task.status.rawValue); it cannot be started")
            }
            changes = [.status(.inProgress)]
        case .complete:
            target = .completed
            guard task.status != .cancelled else { throw DeviceFailure.badState("task \(id) is cancelled; it cannot be completed") }
            changes = [.status(.completed), .completedAt(now)]
        }
        if task.startedAt == nil { changes.append(.startedAt(now)) }
        guard task.status != target else {
            Console.say("task \(id) is already \(target.rawValue); nothing to queue")
            return
        }
        try store.patch(FieldTask.self, id: id, changes)
        Console.say("task \(id): \(task.status.rawValue) → \(target.rawValue); \(try session.queuedNote())")
    }
}

struct IncidentsCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "incidents",
        abstract: "The team's incidents, most urgent first; `*` marks changes not on the server yet."
    )

    @OptionGroup var list: TeamListOptions

    func execute() async throws {
        let (session, team) = try list.session()
        let incidents = try session.store.incidents(teamId: team)
        try RowListing(session: session, json: list.output.json).show(
            incidents, listKey: "incidents", rowKey: "incident", none: "no incidents on this device"
        ) { incident in
            ["\(incident.id)  \(incident.number)  \(incident.priority.rawValue)  \(incident.state.rawValue)  \(incident.shortDescription)"]
                + (incident.description.map { [$0] } ?? [])
        }
    }
}

/// The options of a list of a team's rows: which team, which device, text or JSON.
struct TeamListOptions: ParsableArguments {
    @Option(help: "The team (default: the device's only team).")
    var team: String?

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    func session() throws(DeviceFailure) -> (DeviceSession, team: String) {
        let session = try device.session()
        return (session, try session.profile.team(team))
    }
}

/// A list of rows, each marked when it has changes not on the server yet: as text (under
/// `header`, if any), or as `{"<list>": [{"<row>": {...}, "unsynced_changes": n}]}`.
struct RowListing {
    let session: DeviceSession
    let json: Bool

    func show<E: ContractEntity>(
        _ rows: [E], listKey: String, rowKey: String, none: String, header: String? = nil, lines: (E) -> [String]
    ) throws {
        let unsynced = try session.unsyncedRows()
        let changes = { (row: E) in unsynced[E.descriptor.name + "\u{0}" + row.contractPrimaryKey] ?? 0 }
        if json {
            Console.json(
                .object([
                    listKey: .array(
                        rows.map { row in .object([rowKey: .object(Wire.object(row)), "unsynced_changes": .int(Int64(changes(row)))]) })
                ]))
            return
        }
        if rows.isEmpty { Console.say(none) }
        if let header, !rows.isEmpty { Console.say("  " + header) }
        for row in rows {
            for (index, line) in lines(row).enumerated() {
                Console.say(index == 0 ? (changes(row) > 0 ? "* " : "  ") + line : "    " + line)
            }
        }
    }
}

struct EditCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "edit",
        abstract: "Change fields of a row (an incident, a task, a service asset…), online or offline.",
        discussion: """
            Values are parsed by the type the contract declares: text as is, numbers, true/false, \
            enum values, ISO-8601 times (or `now`), dates (or `today`), lists as a,b,c or JSON, JSON \
            for json fields, and `null` for an optional field. The change travels under the contract's \
            conflict policy (an incident's field_merge merges edits of different fields).

            Example: sync-device edit incident team-1-incident-0001 --field state=in_progress --field priority=high
            """
    )

    @Argument(help: "The entity: incident, task, service-asset, … (a contract name).")
    var entity: String

    @Argument(help: "The row's id.")
    var id: String

    @Option(
        name: [.customShort("f"), .customLong("field")], help: ArgumentHelp("A field to set; repeat for several.", valueName: "NAME=VALUE"))
    var fields: [String] = []

    @OptionGroup var device: DeviceOptions

    func validate() throws {
        if fields.isEmpty { throw ValidationError("give at least one --field NAME=VALUE") }
    }

    func execute() async throws {
        let session = try device.session()
        let (descriptor, type) = try ContractLookup.entity(named: entity)
        let editable = descriptor.fields.filter { !$0.isPrimaryKey && !$0.isVersionField }
        let files = FileImports(store: session.store)
        let assignments = FieldAssignments(contract: descriptor.name, fields: editable, clock: session.clock, files: files)
        try FieldAssignments.refuseKeyAndVersion(in: fields, of: descriptor, action: "edited")
        let values: [String: JSONValue]
        let queued: Bool
        do {
            values = try assignments.parse(fields)
            queued = try update(type, values: values, session: session)
        } catch {
            files.discardUnused()
            throw error
        }
        if queued {
            Console.say("\(descriptor.name) \(id): set \(values.keys.sorted().joined(separator: ", ")); \(try session.queuedNote())")
        } else {
            Console.say("\(descriptor.name) \(id) already has these values; nothing to queue")
        }
    }

    /// Reads the row, sets the fields, and stores it (queued as the policy says). `false` when
    /// nothing changed.
    private func update<E: ContractEntity>(_ type: E.Type, values: [String: JSONValue], session: DeviceSession) throws -> Bool {
        guard let current = try session.store.fetch(E.self, id: id) else { throw DeviceFailure.noRow(E.descriptor, id: id) }
        let changed = try Wire.decode(E.self, from: Wire.object(current).merging(values) { $1 }, contract: E.descriptor.name)
        return try session.store.update(changed) != nil
    }
}

struct EventCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "event",
        abstract: "Record any event of the contracts (TaskStarted, IssueLogged, BatterySwapCompleted, …), online or offline.",
        discussion: """
            Fields are parsed by the type the event's contract declares (see `edit`); a missing required \
            field is named with the type it expects. `team_id` defaults to the device's only team. Run with \
            an unknown TYPE to list the events.

            Example: sync-device event issue-logged --field service_asset_id=team-1-vehicle-017 \
            --field category=damage --field description="Cracked mirror" --field observed_on=today
            """
    )

    @Argument(help: "The event: a contract name such as IssueLogged or issue-logged.")
    var type: String

    @Option(
        name: [.customShort("f"), .customLong("field")],
        help: ArgumentHelp("A field of the event; repeat for several.", valueName: "NAME=VALUE"))
    var fields: [String] = []

    @OptionGroup var device: DeviceOptions

    func execute() async throws {
        let session = try device.session()
        let (descriptor, type) = try ContractLookup.event(named: self.type)
        let files = FileImports(store: session.store)
        let assignments = FieldAssignments(contract: descriptor.name, fields: descriptor.fields, clock: session.clock, files: files)
        do {
            let values = FieldAssignments.defaultingTeam(
                try assignments.parse(fields), fields: descriptor.fields, teams: session.profile.teams
            )
            try assignments.requireAll(in: values)
            let eventId = try record(type, values: values, session: session, contract: descriptor.name)
            Console.say("recorded \(descriptor.name) \(eventId); \(try session.queuedNote())" + Self.fileNote(values, fields: descriptor.fields))
        } catch {
            files.discardUnused()
            throw error
        }
    }

    /// `; its file goes up before it` when the values name a file.
    static func fileNote(_ values: [String: JSONValue], fields: [FieldDescriptor]) -> String {
        let named = fields.filter { FileFields.isFile($0.kind) && values[$0.name].map { $0 != .null } == true }
        return named.isEmpty ? "" : "; its file goes up before it (\(named.map(\.name).joined(separator: ", ")))"
    }

    private func record<P: ContractEvent>(
        _ type: P.Type, values: [String: JSONValue], session: DeviceSession, contract: String
    ) throws -> String {
        let payload = try Wire.decode(P.self, from: values, contract: contract)
        return try session.store.record(payload).eventId
    }
}
