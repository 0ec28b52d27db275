import ArgumentParser
import ContractRuntime
import Foundation
import SyncClient

// `subscribe`, `subscriptions` and `unsubscribe`: the rows of a subscription the contracts
// declare, synced instead of a whole scope (`rows --subscription ID` lists what one brought).

struct SubscribeCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscribe",
        abstract: "Subscribe to a subscription the contracts declare (one incident, one unit…), then sync it.",
        discussion: """
            Parameters are given as --param NAME=VALUE, a list as comma-separated values. The subscription \
            is checked against its contract before anything is stored, kept across runs, and pulled with \
            every sync. Subscribing again to the same name and parameters gives the same subscription. \
            Exits 3 when the server was not reached (the subscription stays, and syncs later), 6 when the \
            server refused it (another team's row: nothing of it is kept).

            Example: sync-device subscribe incident --param id=inc-1 --ttl 7d
            """
    )

    @Argument(help: "The subscription's name in the contracts: incident, assigned_incidents, unit, …")
    var name: String

    @Option(name: .customLong("param"), help: ArgumentHelp("A parameter; repeat for several.", valueName: "NAME=VALUE"))
    var parameters: [String] = []

    @Option(help: ArgumentHelp("How long its rows stay after unsubscribing: 30m, 12h, 7d (default: the contract's).", valueName: "DURATION"))
    var ttl: String?

    @Option(help: ArgumentHelp("Its priority tier: critical, high, normal or low (default: the contract's).", valueName: "TIER"))
    var priority: String?

    @Option(help: "The scope key to read in (default: the one the token grants).")
    var scope: String?

    @Flag(name: .customLong("no-sync"), help: "Only record the subscription; the next sync pulls it.")
    var noSync = false

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    func execute() async throws {
        let session = try device.session()
        var values: [String: JSONValue] = [:]
        for parameter in parameters {
            guard let equals = parameter.firstIndex(of: "="), equals != parameter.startIndex else {
                throw DeviceFailure.usage("--param takes NAME=VALUE, not '\(parameter)'")
            }
            let name = String(parameter[..<equals]), value = String(parameter[parameter.index(after: equals)...])
            let declared = session.store.contracts.subscription(named: self.name)?.parameter(named: name)
            if case .list? = declared?.kind {
                values[name] = .array(value.split(separator: ",").map { .string(String($0)) })
            } else {
                values[name] = .string(value)
            }
        }
        let tier: SyncPriority?
        if let priority {
            guard let parsed = SyncPriority(rawValue: priority) else {
                throw DeviceFailure.usage("--priority is one of critical, high, normal, low; not '\(priority)'")
            }
            tier = parsed
        } else {
            tier = nil
        }
        let ttl = try self.ttl.map(Self.duration)
        let status: SubscriptionStatus
        do {
            status = try session.store.subscribe(SubscriptionRequest(name: name, parameters: values, scope: scope), ttl: ttl, priority: tier)
        } catch {
            throw DeviceFailure.usage(error.description)
        }
        var report: SyncReport?
        if !noSync { report = try await SyncRun(session: session).syncNow() }
        let now = try session.store.subscriptionStatus(id: status.id)
        if let error = now?.error {
            try? session.store.forgetSubscription(id: status.id)
            throw DeviceFailure(message: "the server refused the subscription (\(error.code)): \(error.message)", exitCode: DeviceExit.notFound)
        }
        let rows = now?.rowCount ?? 0
        if output.json {
            Console.json(
                .object([
                    "id": .string(status.id), "name": .string(name), "has_synced": .bool(now?.hasSynced ?? false), "rows": .int(Int64(rows)),
                ]))
        } else {
            Console.say(
                "subscribed to \(name) (\(status.id)): "
                    + ((now?.hasSynced ?? false) ? "\(rows) row\(rows == 1 ? "" : "s") on this device" : "not synced yet"))
        }
        if let report, report.exitCode != .success { throw report.exitCode }
    }

    /// `30s`, `30m`, `12h`, `7d`, `2w`.
    static func duration(_ text: String) throws -> Duration {
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800]
        guard let unit = text.last, let seconds = units[unit], let amount = Int64(text.dropLast()), amount >= 0 else {
            throw DeviceFailure.usage("--ttl takes a duration such as 30m, 12h or 7d; not '\(text)'")
        }
        return .seconds(amount * seconds)
    }
}

struct SubscriptionsCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscriptions",
        abstract: "The device's subscriptions: active or ended, synced or not, the rows each holds.",
        discussion: """
            --json gives {"subscriptions": [{"id", "name", "parameters", "active", "has_synced", "last_synced_at", \
            "rows", "priority", "ttl_seconds", "expires_at"}]}.
            """
    )

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    func execute() async throws {
        let session = try device.session()
        let all = try session.store.subscriptions()
        if output.json {
            Console.json(.object(["subscriptions": .array(all.map(Self.json))]))
            return
        }
        if all.isEmpty { Console.say("no subscriptions on this device") }
        for status in all {
            let parameters = status.request.parameters.sorted { $0.key < $1.key }.map { "\($0.key)=\(Self.text($0.value))" }.joined(separator: " ")
            let state =
                status.isActive
                ? (status.hasSynced ? "synced" : "not synced yet") : "ended, rows kept until \(status.expiresAt.map(Timestamp.init)?.iso8601 ?? "?")"
            let rows = Wording.count(status.rowCount, "row")
            Console.say("\(status.id)  \(status.request.name) \(parameters)  \(status.priority.rawValue)  \(rows)  \(state)")
        }
    }

    static func text(_ value: JSONValue) -> String {
        switch value {
        case .string(let text): text
        case .array(let items): items.map(text).joined(separator: ",")
        default: CanonicalJSON.text(value)
        }
    }

    static func json(_ status: SubscriptionStatus) -> JSONValue {
        var object: [String: JSONValue] = [
            "id": .string(status.id), "name": .string(status.request.name), "parameters": .object(status.request.parameters),
            "active": .bool(status.isActive), "has_synced": .bool(status.hasSynced), "rows": .int(Int64(status.rowCount)),
            "priority": .string(status.priority.rawValue), "ttl_seconds": .int(status.ttl.components.seconds),
        ]
        if let last = status.lastSyncedAt { object["last_synced_at"] = .string(Timestamp(last).iso8601) }
        if let expires = status.expiresAt { object["expires_at"] = .string(Timestamp(expires).iso8601) }
        return .object(object)
    }
}

struct UnsubscribeCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "unsubscribe",
        abstract: "End a subscription: it is pulled no more, and its rows stay until its TTL passes.",
        discussion: "Rows another subscription, a scope synced whole or a write not yet on the server holds stay after that too."
    )

    @Argument(help: "The subscription's id (see `subscriptions`).")
    var id: String

    @OptionGroup var device: DeviceOptions

    func execute() async throws {
        let session = try device.session()
        do {
            try session.store.unsubscribeSubscription(id: id)
        } catch .notFound {
            throw DeviceFailure(
                message: "no subscription '\(id)' on this device", hint: "see `sync-device subscriptions`", exitCode: DeviceExit.notFound)
        } catch {
            throw DeviceFailure(message: error.description, exitCode: DeviceExit.failure)
        }
        let status = try session.store.subscriptionStatus(id: id)
        Console.say("unsubscribed \(id); its rows stay until \(status?.expiresAt.map(Timestamp.init)?.iso8601 ?? "its TTL passes")")
    }
}
