import ArgumentParser
import ContractRuntime
import Contracts
import Foundation
import SyncClient

// `create`, `rows`, `show` and `delete` work on any entity contract through the generated
// registry: each command finds the contract by name, then opens its generated type and uses the
// store's typed API, so values are checked and queued exactly as an app's would be.

struct CreateCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Create a row of any entity devices write (a service asset, an incident, a task…), online or offline.",
        discussion: """
            Values are parsed by the type the contract declares (see `edit`); a field left out takes the \
            contract's default, and a missing required field is named with the type it expects. Without \
            --id the id is made on the device: a UUID for a uuid key, else a ULID. The version field \
            (updated_at, revision) is filled in here and stamped by the server. `team_id` defaults to the \
            device's only team. Entities the server owns (direction down, server_authoritative) are refused.

            Example: sync-device create service-asset --field asset_tag=CHG-204 --field display_name="Charger 204" \
            --field category=charger
            """
    )

    @Argument(help: "The entity: service-asset, incident, task, … (a contract name or its table).")
    var entity: String

    @Option(help: "The new row's id (default: a new ULID or UUID, as the contract's key type asks).")
    var id: String?

    @Option(
        name: [.customShort("f"), .customLong("field")], help: ArgumentHelp("A field to set; repeat for several.", valueName: "NAME=VALUE"))
    var fields: [String] = []

    @OptionGroup var device: DeviceOptions

    func execute() async throws {
        let session = try device.session()
        let (descriptor, type) = try ContractLookup.entity(named: entity)
        try RowCommands.refuseServerOwned(descriptor, action: "created")
        let settable = descriptor.fields.filter { !$0.isPrimaryKey && !$0.isVersionField }
        let files = FileImports(store: session.store)
        let assignments = FieldAssignments(contract: descriptor.name, fields: settable, clock: session.clock, files: files)
        try FieldAssignments.refuseKeyAndVersion(in: fields, of: descriptor, action: "set with --field", keyHint: "pass --id ID")
        do {
            var values = FieldAssignments.defaultingTeam(try assignments.parse(fields), fields: descriptor.fields, teams: session.profile.teams)
            try assignments.requireAll(in: values)
            if let key = descriptor.field(named: descriptor.primaryKey) {
                values[key.name] = try newKey(key, of: descriptor, assignments: assignments, clock: session.clock)
            }
            if let version = descriptor.versionField.flatMap(descriptor.field(named:)) {
                values[version.name] = Self.initialVersion(of: version, now: session.clock.now())
            }
            let created = try create(type, values: values, session: session)
            Console.say(
                "created \(descriptor.name) \(created); \(try session.queuedNote())" + EventCommand.fileNote(values, fields: descriptor.fields))
        } catch {
            files.discardUnused()
            throw error
        }
    }

    /// `--id` checked against the key's type, or a new id that no other device makes.
    private func newKey(
        _ key: FieldDescriptor, of entity: EntityDescriptor, assignments: FieldAssignments, clock: any DeviceClock
    ) throws(DeviceFailure) -> JSONValue {
        if let id { return try assignments.value(id, for: key) }
        switch key.kind {
        case .uuid: return try assignments.value("new", for: key)
        case .id, .string: return .string(ULIDGenerator(clock: clock).nextString())
        default: throw .usage("\(entity.name)'s key \(key.name) is \(key.kind.spelling), which the device cannot make up: pass --id")
        }
    }

    /// What the version field holds until the server stamps the row: the device's time, or 0
    /// for a revision number (as an app creating the row through its generated type would).
    private static func initialVersion(of field: FieldDescriptor, now: Date) -> JSONValue? {
        switch field.kind {
        case .timestamp: return .string(Timestamp(now).iso8601)
        case .int: return .int(0)
        default: return nil
        }
    }

    private func create<E: ContractEntity>(_ type: E.Type, values: [String: JSONValue], session: DeviceSession) throws -> String {
        let row = try Wire.decode(E.self, from: values, contract: E.descriptor.name)
        try session.store.create(row)
        return row.contractPrimaryKey
    }
}

struct RowsCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "rows",
        abstract: "The rows of any entity on the device, in id order; `*` marks a row with changes not on the server yet.",
        discussion: """
            --where values are parsed like `edit`'s (`null` for an empty optional field); several must all \
            hold. The text is a table of every field, long values cut short; --json gives whole rows as \
            {"rows": [{"row": {...}, "unsynced_changes": n}]}.

            Example: sync-device rows service-asset --where category=charger --where status=in_service
            """
    )

    @Argument(help: "The entity: service-asset, incident, unit, … (a contract name or its table).")
    var entity: String

    @Option(
        name: .customLong("where"), help: ArgumentHelp("Only rows whose field has this value; repeat to narrow.", valueName: "NAME=VALUE"))
    var conditions: [String] = []

    @Option(help: ArgumentHelp("Only the rows this subscription brought (see `subscriptions`).", valueName: "ID"))
    var subscription: String?

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    func execute() async throws {
        let session = try device.session()
        let (descriptor, type) = try ContractLookup.entity(named: entity)
        let assignments = FieldAssignments(contract: descriptor.name, fields: descriptor.fields, clock: session.clock, option: "--where")
        var held: Set<String>?
        if let subscription {
            guard try session.store.subscriptionStatus(id: subscription) != nil else {
                throw DeviceFailure(
                    message: "no subscription '\(subscription)' on this device", hint: "see `sync-device subscriptions`",
                    exitCode: DeviceExit.notFound)
            }
            held = Set(try session.store.subscriptionRowIDs(id: subscription)[descriptor.name] ?? [])
        }
        try list(type, matching: try assignments.parse(conditions), heldBy: held, session: session)
    }

    private func list<E: ContractEntity>(_ type: E.Type, matching values: [String: JSONValue], heldBy held: Set<String>?, session: DeviceSession)
        throws
    {
        let conditions = values.sorted { $0.key < $1.key }.map { name, value in
            value == .null ? RowFilter<E>.isNull(name) : .equals(name, value)
        }
        var rows = try session.store.all(E.self, where: conditions.isEmpty ? nil : .all(conditions))
        if let held { rows = rows.filter { held.contains($0.contractPrimaryKey) } }
        let table = RowTable(fields: E.descriptor.fields, rows: rows.map(Wire.object))
        let filtered = values.isEmpty ? "" : " matching " + conditionsText(values)
        try RowListing(session: session, json: output.json).show(
            rows, listKey: "rows", rowKey: "row", none: "no \(E.descriptor.name) rows\(filtered) on this device", header: table.header
        ) { row in [table.line(Wire.object(row))] }
    }

    private func conditionsText(_ values: [String: JSONValue]) -> String {
        values.sorted { $0.key < $1.key }.map { "\($0.key)=\(Wording.value($0.value))" }.joined(separator: ", ")
    }
}

struct ShowCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "One row of any entity on the device: every field, and whether it is on the server yet.",
        discussion: """
            --json gives {"row": {...}, "unsynced_changes": n, "server_version": v, "synced_at": t}: the row \
            in its contract's wire form, the server version it is based on and when it last came from the \
            server (null for a row the server has not acknowledged yet).
            """
    )

    @Argument(help: "The entity: service-asset, incident, unit, … (a contract name or its table).")
    var entity: String

    @Argument(help: "The row's id.")
    var id: String

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    func execute() async throws {
        let session = try device.session()
        let (_, type) = try ContractLookup.entity(named: entity)
        try show(type, session: session)
    }

    private func show<E: ContractEntity>(_ type: E.Type, session: DeviceSession) throws {
        let entity = E.descriptor
        let (row, info) = try session.store.read { reader throws(OfflineStoreError) in
            (try reader.fetch(E.self, id: id), try reader.syncInfo(E.self, id: id))
        }
        guard let row else { throw DeviceFailure.noRow(entity, id: id) }
        let wire = Wire.object(row)
        let unsynced = try session.unsyncedRows()[entity.name + "\u{0}" + row.contractPrimaryKey] ?? 0
        if output.json {
            Console.json(
                .object([
                    "row": .object(wire), "unsynced_changes": .int(Int64(unsynced)),
                    "server_version": info?.serverVersion.map(JSONValue.int) ?? .null,
                    "synced_at": info?.syncedAt.map { .string($0.iso8601) } ?? .null,
                ]))
            return
        }
        Console.say("\(entity.name) \(row.contractPrimaryKey)")
        let width = entity.fields.map(\.name.count).max() ?? 0
        for field in entity.fields {
            Console.say("  " + field.name.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + Wording.value(wire[field.name]))
        }
        guard let version = info?.serverVersion else { return Console.say("not on the server yet") }
        let synced = info?.syncedAt.map { ", synced \(Wording.age(of: $0.date, now: session.clock.now()))" } ?? ""
        let waiting = unsynced > 0 ? "; \(Wording.count(unsynced, "change")) not on the server yet" : ""
        Console.say("server version \(version)\(synced)\(waiting)")
    }
}

struct DeleteCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete a row of any entity devices write, online or offline.",
        discussion: """
            The deletion is stored and queued at once and travels under the contract's conflict policy. \
            Entities the server owns (direction down, server_authoritative), append-only ones and those \
            without tombstones are refused.
            """
    )

    @Argument(help: "The entity: service-asset, incident, task, … (a contract name or its table).")
    var entity: String

    @Argument(help: "The row's id.")
    var id: String

    @OptionGroup var device: DeviceOptions

    func execute() async throws {
        let session = try device.session()
        let (descriptor, type) = try ContractLookup.entity(named: entity)
        try RowCommands.refuseServerOwned(descriptor, action: "deleted")
        try delete(type, session: session)
        Console.say("deleted \(descriptor.name) \(id); \(try session.queuedNote())")
    }

    private func delete<E: ContractEntity>(_ type: E.Type, session: DeviceSession) throws {
        do {
            try session.store.delete(E.self, id: id)
        } catch OfflineStoreError.rowNotFound {
            throw DeviceFailure.noRow(E.descriptor, id: id)
        }
    }
}

/// What the generic row commands share.
enum RowCommands {
    /// Refuses to create or delete rows the server owns, before any value is parsed, so the
    /// reason is the first thing said (the store would refuse the write as well).
    static func refuseServerOwned(_ entity: EntityDescriptor, action: String) throws(DeviceFailure) {
        let reason: String
        if entity.direction == .down {
            reason = "it travels from the server to devices only (direction down)"
        } else if entity.conflict == .serverAuthoritative {
            reason = "the server owns its rows (server_authoritative)"
        } else {
            return
        }
        throw .usage(
            "\(entity.name) rows cannot be \(action) on a device: \(reason)",
            hint: "`sync-device rows \(ContractLookup.kebab(entity.name))` lists the rows the server sent"
        )
    }
}

extension DeviceFailure {
    /// No row `id` of `entity` on the device (exit 6), and where to look.
    static func noRow(_ entity: EntityDescriptor, id: String) -> Self {
        .notFound(
            "no \(entity.name) '\(id)' on this device",
            hint: "`sync-device rows \(ContractLookup.kebab(entity.name))` lists those on this device; "
                + "`sync-device sync` brings the server's"
        )
    }
}

/// Rows as a text table: a column per field in contract order, each as wide as its widest
/// value, values longer than ``widest`` cut short.
struct RowTable {
    static let widest = 32

    let fields: [FieldDescriptor]
    private let widths: [Int]

    init(fields: [FieldDescriptor], rows: [[String: JSONValue]]) {
        self.fields = fields
        widths = fields.map { field in
            rows.map { Self.cell($0[field.name]).count }.reduce(field.name.count, max)
        }
    }

    var header: String { line(fields.map(\.name)) }

    func line(_ row: [String: JSONValue]) -> String {
        line(fields.map { Self.cell(row[$0.name]) })
    }

    /// The cells padded to their columns' widths, the last one not (no trailing spaces).
    private func line(_ cells: [String]) -> String {
        zip(cells, widths).enumerated().map { index, column in
            index == cells.count - 1 ? column.0 : column.0.padding(toLength: column.1, withPad: " ", startingAt: 0)
        }.joined(separator: "  ")
    }

    private static func cell(_ value: JSONValue?) -> String {
        let text = Wording.value(value).replacingOccurrences(of: "\n", with: " ")
        return text.count > widest ? String(text.prefix(widest - 1)) + "…" : text
    }
}
