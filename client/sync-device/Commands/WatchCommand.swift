import ArgumentParser
import Foundation
import SyncClient

/// `watch`: the device online with its engine running as in an app, printing what arrives.
struct WatchCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Stay online and show changes as other devices make them (the live channel).",
        discussion: """
            Starts the sync engine as an app does: it opens the server's live channel (GET /sync/v1/live) \
            and syncs whenever the server says a scope this device reads changed, reopens the channel on \
            the retry schedule when it is lost, and falls back to syncing every 15 minutes when it cannot \
            be had. Prints a line when the channel opens or is lost and one per sync that brought rows, by \
            contract. Runs until interrupted, for --seconds, or until --changes rows arrived; exits 3 when \
            it ends without the channel open.
            """
    )

    @Option(help: "Stop after this many seconds (default: run until interrupted).")
    var seconds: Double?

    @Option(help: "Stop once this many rows (upserts and deletes) arrived.")
    var changes: Int?

    @OptionGroup var device: DeviceOptions

    func validate() throws {
        if let seconds, seconds <= 0 { throw ValidationError("--seconds must be positive, not \(seconds)") }
        if let changes, changes < 1 { throw ValidationError("--changes must be at least 1, not \(changes)") }
    }

    func execute() async throws {
        let session = try device.session()
        var configuration = SyncEngineConfiguration(scopes: session.profile.scopes)
        configuration.retriesAutomatically = true
        let engine = SyncEngine(store: session.store, transport: session.network, configuration: configuration)
        let deadline = seconds.map { Date().addingTimeInterval($0) }
        let statuses = await engine.status
        await engine.start(connectivity: ManualConnectivityMonitor(online: !session.home.isOffline, expensive: session.home.isMetered))
        Console.say("watching \(session.profile.server) (\(session.profile.scopes.joined(separator: ", "))); ctrl-C stops")

        let watch = Task { () -> LiveChannelState in
            var live = LiveChannelState.off
            var counted: [String: Int] = [:]
            var arrived = 0
            for await status in statuses {
                if status.live != live {
                    live = status.live
                    if let line = Self.describe(live) { Console.say("\(Self.time()) \(line)") }
                }
                let pulled = session.network.pulledRows
                let new = pulled.compactMap { contract, rows in
                    rows > counted[contract, default: 0] ? (contract, rows - counted[contract, default: 0]) : nil
                }
                .sorted { $0.0 < $1.0 }
                if !new.isEmpty {
                    counted = pulled
                    arrived += new.map(\.1).reduce(0, +)
                    Console.say("\(Self.time()) pulled " + new.map { "\($0.1) \($0.0)" }.joined(separator: ", "))
                    if let changes, arrived >= changes { return live }
                }
            }
            return live
        }
        let timer = Task {
            if let deadline {
                try? await Task.sleep(for: .seconds(max(0, deadline.timeIntervalSinceNow)))
            } else {
                try? await Task.sleep(for: .seconds(Double(Int32.max)))
            }
            watch.cancel()
        }
        let last = await watch.value
        timer.cancel()
        await engine.stop()
        if last != .connected {
            // A refusal that is not the network's (a pin mismatch, a refused token) is why the
            // channel never opened: say it, as `sync` would.
            switch session.network.lastLiveFailure {
            case nil, .network?: throw DeviceExit.network
            case let failure?: throw failure.failure
            }
        }
    }

    static func describe(_ state: LiveChannelState) -> String? {
        switch state {
        case .off: nil
        case .connecting: "live: connecting"
        case .connected: "live: connected; changes arrive as they are made"
        case .waitingToReconnect(let until):
            "live: lost; reconnecting in \(max(0, Int(until.timeIntervalSinceNow.rounded()))) s (syncing on the timer meanwhile)"
        case .unavailable: "live: unavailable (the server has none, or refused it for good); syncing every 15 minutes"
        }
    }

    static func time() -> String {
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm:ss.SSS"
        return formatter.string(from: Date())
    }
}
