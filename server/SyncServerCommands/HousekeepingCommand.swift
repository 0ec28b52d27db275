import ArgumentParser
import Foundation
import SyncServer

/// The data horizons' flags, shared by `serve` and `housekeeping`.
struct HorizonOptions: ParsableArguments {
    @Option(
        name: .customLong("push-result-retention"),
        help: ArgumentHelp(
            "How long a stored push result its device acknowledged is kept (90d, 36h; a bare number is days); 0 or off keeps them all.",
            valueName: "DURATION")
    )
    var pushResultRetention = "7d"

    @Option(
        name: .customLong("tombstone-horizon"),
        help: ArgumentHelp(
            "How long a deleted row's tombstone is kept (a bare number is days); older ones are deleted and a pull cursor from before them gets 410 cursor_expired. 0 or off keeps them all.",
            valueName: "DURATION")
    )
    var tombstoneHorizon = "90d"

    func validate() throws {
        _ = try horizons()
    }

    func horizons() throws -> ServerHousekeeping.Horizons {
        guard let retention = ServerHousekeeping.parseDuration(pushResultRetention, bareUnit: 86_400) else {
            throw ValidationError("--push-result-retention takes a duration such as 7d, 36h or off, not \(pushResultRetention)")
        }
        guard let horizon = ServerHousekeeping.parseDuration(tombstoneHorizon, bareUnit: 86_400) else {
            throw ValidationError("--tombstone-horizon takes a duration such as 90d, 2160h or off, not \(tombstoneHorizon)")
        }
        return ServerHousekeeping.Horizons(pushResultRetention: retention, tombstoneHorizon: horizon)
    }
}

struct HousekeepingCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "housekeeping",
        abstract: "Apply the data horizons once and print what was deleted.",
        discussion: """
            Deletes the stored push results their devices acknowledged longer ago than
            --push-result-retention, and the tombstones older than --tombstone-horizon (each scope
            then answers a pull cursor from before them with 410 cursor_expired), in short batches.
            `serve` does the same every --housekeeping-interval; running both, or several servers
            on one PostgreSQL database, is safe. See docs/server.md, Data horizons.
            """
    )

    @OptionGroup var data: DataOptions
    @OptionGroup var horizonOptions: HorizonOptions

    @Option(name: .customLong("batch-size"), help: "Rows deleted per transaction at most.")
    var batchSize = 500

    func validate() throws {
        guard batchSize > 0 else { throw ValidationError("--batch-size must be at least 1") }
    }

    func run() async throws {
        let horizons = try horizonOptions.horizons()
        let storage = try await data.openStorage()
        let counts: ServerHousekeeping.Counts
        do {
            counts = try await ServerHousekeeping(storage: storage, horizons: horizons, batchSize: batchSize).run(now: Date())
        } catch {
            await data.close(storage)
            throw fail("housekeeping failed: \(error)")
        }
        await data.close(storage)
        say("push results pruned: \(counts.pushResults)")
        say("tombstones compacted: \(counts.tombstones)")
        say("scopes compacted: \(counts.scopes)")
        say("urgent marks forgotten: \(counts.urgentMarks)")
    }
}
