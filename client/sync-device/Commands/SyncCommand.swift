import ArgumentParser
import Foundation
import SyncClient

struct SyncCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Push the queued changes, pull every scope, and say what happened.",
        discussion: """
            Pushes oldest first, then pulls each scope page by page, fetching the next pages while \
            it stores those received; pages are committed together with the last one's cursor, up to \
            --commit-rows rows per transaction. A progress bar is drawn on standard error when it is a terminal (files uploaded \
            before the push with their bytes, percent and rate; on a pipe, a line now and then for the \
            files; nothing with --quiet). Exits 4 when \
            the sync finished but conflicts, refused or quarantined changes wait, 3 when the server was not reached \
            (the changes stay queued). --window SECONDS syncs as an app does in an OS background window \
            (SyncEngine.syncInBackgroundWindow): queued changes first, then urgent changes, subscriptions and \
            scopes by priority, a request started only when it fits before the deadline less --window-margin \
            (2s); it stops cleanly before the deadline and says what is left for the next window, which goes on \
            from the last page and change committed (exit 0 either way).
            """
    )

    @Option(help: "Changes per push request (default 100); smaller batches lose less to a broken connection.")
    var batch: Int?

    @Option(name: .customLong("page-size"), help: "Rows per pulled page (default: the server's).")
    var pageSize: Int?

    @Option(name: .customLong("commit-rows"), help: "Pulled rows stored per transaction, with their cursor (default 5000).")
    var commitRows: Int?

    @Option(help: "Sync within a background window of this many seconds, stopping before its end (an OS window is about 30).")
    var window: Double?

    @Option(name: .customLong("window-margin"), help: "With --window: seconds kept free before the deadline (default 2).")
    var windowMargin: Double?

    @Option(name: .customLong("request-estimate"), help: "With --window: the least a request is expected to take, in seconds (default 3).")
    var requestEstimate: Double?

    @OptionGroup var device: DeviceOptions
    @OptionGroup var progress: ProgressOptions
    @OptionGroup var output: OutputOptions

    func validate() throws {
        if let batch, batch < 1 { throw ValidationError("--batch must be at least 1, not \(batch)") }
        if let pageSize, pageSize < 1 { throw ValidationError("--page-size must be at least 1, not \(pageSize)") }
        if let commitRows, commitRows < 1 { throw ValidationError("--commit-rows must be at least 1, not \(commitRows)") }
        if let window, !(window > 0) { throw ValidationError("--window takes seconds above 0, not \(window)") }
        if window == nil, windowMargin != nil || requestEstimate != nil {
            throw ValidationError("--window-margin and --request-estimate go with --window")
        }
        if let windowMargin, !(windowMargin >= 0) { throw ValidationError("--window-margin takes seconds from 0, not \(windowMargin)") }
        if let requestEstimate, !(requestEstimate >= 0) {
            throw ValidationError("--request-estimate takes seconds from 0, not \(requestEstimate)")
        }
    }

    func execute() async throws {
        let session = try device.session()
        let defaults = BackgroundWindowSettings()
        let settings = BackgroundWindowSettings(
            safetyMargin: windowMargin ?? defaults.safetyMargin, minimumRequestEstimate: requestEstimate ?? defaults.minimumRequestEstimate)
        let run = SyncRun(
            session: session, pushBatchSize: batch, pullPageSize: pageSize, pullCommitRows: commitRows, windowSettings: settings,
            progress: progress.style)
        let report: SyncReport
        if let window {
            report = try await run.backgroundWindow(seconds: window)
        } else {
            report = try await run.syncNow()
        }
        if output.json { Console.json(report.json) } else { report.lines.forEach { Console.say($0) } }
        if report.exitCode != .success { throw report.exitCode }
    }
}

struct OfflineCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "offline",
        abstract: "Switch the device's network off or on (a simulated loss of network).",
        discussion: """
            `offline on`: every request fails as without a network, from this and every later command, \
            until `offline off`; writes keep working and wait in the queue. `offline off`: the network \
            returns and, as in an app, the sync engine syncs by itself (unless --no-sync); the exit code is \
            then the sync's.
            """
    )

    enum Switch: String, ExpressibleByArgument, CaseIterable {
        case on, off
    }

    @Argument(help: "on: no network; off: the network is back.")
    var state: Switch

    @Flag(help: "With `off`: only switch the network on, without syncing.")
    var noSync = false

    @OptionGroup var device: DeviceOptions
    @OptionGroup var progress: ProgressOptions
    @OptionGroup var output: OutputOptions

    func execute() async throws {
        let session = try device.session()
        switch state {
        case .on:
            try session.home.setOffline(true)
            let waiting = try session.store.outboxCounts().unsent
            Console.say("offline: the network is switched off; changes are kept and queued (\(Wording.count(waiting, "change")) waiting)")
        case .off:
            try session.home.setOffline(false)
            guard !noSync else {
                Console.say("online: the network is back")
                return
            }
            if !output.json { Console.say("online: the network is back; syncing") }
            let report = try await SyncRun(session: session, progress: progress.style).connectivityReturned()
            if output.json { Console.json(report.json) } else { report.lines.forEach { Console.say($0) } }
            if report.exitCode != .success { throw report.exitCode }
        }
    }
}
