import ArgumentParser
import ContractRuntime
import Contracts
import Foundation
import LearningClient
import SyncClient

struct StatusCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Online or offline, what waits, conflicts, how fresh each scope is, and the storage used.",
        discussion: """
            Connectivity is the server's health endpoint probed now (offline while `offline on`). The \
            retention state turns `sync_needed` when changes waited 7 days and `read_only` after 14 days: \
            writes are then refused until a sync succeeds.
            """
    )

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    func execute() async throws {
        let session = try device.session()
        let store = session.store
        let now = session.clock.now()
        let online = await session.network.health()
        let status = await session.engine().currentStatus
        let counts = try store.outboxCounts()
        let states = Dictionary(try store.syncStates().map { ($0.scopeKey, $0) }, uniquingKeysWith: { first, _ in first })
        let failure = try store.lastSyncFailure()
        let storage = try store.cacheTotals()
        let profile = session.profile

        let retention: (name: String, since: Date?) = {
            switch status.retention {
            case .ok: return ("ok", nil)
            case .syncNeeded(let since): return ("sync_needed", since)
            case .readOnly(let since): return ("read_only", since)
            }
        }()

        if output.json {
            var freshness: [String: JSONValue] = [:]
            for scope in profile.scopes {
                let pulled = states[scope]?.lastPullAt
                freshness[scope] = .object([
                    "last_pull_at": pulled.json, "age_seconds": pulled.map { .int(Int64(now.timeIntervalSince($0))) } ?? .null,
                ])
            }
            Console.json(
                .object([
                    "device": .object([
                        "server": .string(profile.server.absoluteString), "tenant": .string(profile.tenant), "user": .string(profile.user),
                        "device": .string(profile.device), "client_id": .string(store.identity.clientId),
                        "teams": .array(profile.teams.map(JSONValue.string)), "home": .string(session.home.url.path),
                    ]),
                    "now": .string(now.iso8601),
                    "connectivity": .string(online ? "online" : "offline"), "network_switched_off": .bool(session.home.isOffline),
                    "pending": .int(Int64(counts.unsent)), "failed": .int(Int64(counts[.failed])),
                    "quarantined": .int(Int64(counts[.quarantined])), "conflicts": .int(Int64(status.conflicts)),
                    "retention": .object(["state": .string(retention.name), "since": retention.since.json]),
                    "last_sync": status.lastSuccess.json,
                    "last_error": failure.map {
                        .object([
                            "code": .string($0.error.code.rawValue), "message": .string($0.error.message), "at": .string($0.at.iso8601),
                        ])
                    } ?? .null,
                    "freshness": .object(freshness),
                    "storage": CacheListCommand.json(storage),
                ]))
            return
        }

        let connectivity = session.home.isOffline ? "offline (network switched off)" : online ? "online" : "offline (server unreachable)"
        Console.say("device '\(profile.device)' of user '\(profile.user)' (tenant '\(profile.tenant)') at \(profile.server.absoluteString)")
        Console.say("connectivity: \(connectivity)")
        var queue = "\(Wording.count(counts.unsent, "change")) waiting to be sent"
        if counts[.failed] > 0 { queue += ", \(counts[.failed]) refused by the server (sync-device outbox)" }
        if counts[.quarantined] > 0 { queue += ", \(counts[.quarantined]) quarantined (tampered)" }
        Console.say("queue: " + queue)
        Console.say("conflicts: \(status.conflicts == 0 ? "none" : "\(status.conflicts) to resolve (sync-device conflicts)")")
        switch status.retention {
        case .ok: break
        case .syncNeeded(let since):
            Console.say("retention: sync needed — changes have waited since \(since.iso8601) (\(Wording.age(of: since, now: now)))")
        case .readOnly(let since):
            Console.say(
                "retention: READ-ONLY — changes have waited since \(since.iso8601) (\(Wording.age(of: since, now: now))); "
                    + "writes are refused until a sync succeeds"
            )
        }
        Console.say("last sync: " + (status.lastSuccess.map { "\(Wording.age(of: $0, now: now)) (\($0.iso8601))" } ?? "never"))
        if let failure { Console.say("last error: \(failure.error.message) (\(Wording.age(of: failure.at, now: now)))") }
        for scope in profile.scopes {
            let freshness = states[scope]?.lastPullAt.map { "cached \(Wording.age(of: $0, now: now))" } ?? "never pulled"
            Console.say("  \(scope): \(freshness)")
        }
        Console.say(CacheTotalsLine.text(storage))
    }
}
