import ArgumentParser
import ContractRuntime
import Contracts
import Foundation
import SyncClient
import SyncProtocol

/// One sync of the device, as `sync` and `offline off` run it: the engine's progress drawn on
/// standard error when it is a terminal, then a report of what was pushed, pulled, conflicted
/// and refused.
struct SyncRun {
    let session: DeviceSession
    /// Changes per push request and rows per pulled page; `nil` for the engine's and server's defaults.
    var pushBatchSize: Int? = nil
    var pullPageSize: Int? = nil
    var pullCommitRows: Int? = nil
    /// The background window's safety margin and least request estimate; `nil` for the engine's.
    var windowSettings: BackgroundWindowSettings? = nil
    /// How progress shows on standard error: a bar on a terminal; elsewhere lines for the files
    /// uploaded before the push; nothing with `--quiet`.
    var progress: ProgressStyle = Console.standardErrorIsTerminal ? .bar : .lines

    /// How the sync ended.
    enum Ending {
        case succeeded
        /// The server could not be reached (`network`) or refused the request.
        case failed(ErrorDetail, network: Bool)
        case storeFailed(String)
        /// The engine did not sync by itself: the preferences hold automatic syncs.
        case paused(AutomaticSyncPause)
        /// The engine did not sync by itself now: low-power mode holds it for the timer.
        case deferred(nextSyncAt: Date?)
    }

    /// `sync`: the engine's `syncNow()`.
    func syncNow() async throws(OfflineStoreError) -> SyncReport {
        try await run { engine in
            if session.home.isOffline { await engine.connectivityChanged(online: false) }
            switch await engine.syncNow() {
            case .succeeded: return .succeeded
            case .failed(let error, _):
                if case .network = error { return .failed(error.detail, network: true) }
                return .failed(error.detail, network: false)
            case .storeFailed(let message): return .storeFailed(message)
            }
        }
    }

    /// `sync --window SECONDS`: the engine's `syncInBackgroundWindow(until:)`, as an app runs it in
    /// an OS background window: it stops before the deadline and says what is left.
    func backgroundWindow(seconds: TimeInterval) async throws(OfflineStoreError) -> SyncReport {
        let box = WindowBox()
        var report = try await run { engine in
            if session.home.isOffline { await engine.connectivityChanged(online: false) }
            let window = await engine.syncInBackgroundWindow(until: session.store.now().date.addingTimeInterval(seconds))
            box.report = window
            if let pause = window.skipped { return .paused(pause) }
            if let error = window.error {
                if error.code == ErrorCode("store") { return .storeFailed(error.message) }
                return .failed(error, network: error.code == ErrorCode("network"))
            }
            return .succeeded
        }
        report.window = box.report
        return report
    }

    /// The window's report, out of the engine's closure.
    private final class WindowBox {
        var report: BackgroundSyncReport?
    }

    /// `offline off`: the engine is told connectivity returned and syncs by itself, as it does in
    /// an app (`SyncEngine.connectivityChanged(online:)`).
    func connectivityReturned() async throws(OfflineStoreError) -> SyncReport {
        try await run { engine in
            await engine.pathChanged(NetworkPath(isOnline: true, isExpensive: session.home.isMetered))
            if let pause = await engine.currentStatus.automaticSyncsPaused { return .paused(pause) }
            if case .lowPowerMode(let next)? = await engine.currentStatus.deferred { return .deferred(nextSyncAt: next) }
            guard let error = await engine.currentStatus.lastError else { return .succeeded }
            // The engine reports its own store's failures under the code `store`.
            if error.code == ErrorCode("store") { return .storeFailed(error.message) }
            return .failed(error, network: error.code == ErrorCode("network"))
        }
    }

    private func run(_ body: (SyncEngine) async -> Ending) async throws(OfflineStoreError) -> SyncReport {
        let store = session.store
        let known = Set(try store.conflicts(includeResolved: true).map(\.id))
        let engine = session.engine(
            pushBatchSize: pushBatchSize, pullPageSize: pullPageSize, pullCommitRows: pullCommitRows, backgroundWindow: windowSettings)
        let uploads = TransferMeter("upload", style: self.progress)
        let progress = self.progress == .quiet ? nil : ProgressBar.follow(engine, style: self.progress, uploads: uploads)
        let ending = await body(engine)
        progress?.cancel()
        _ = await progress?.value
        uploads.finish()
        if self.progress == .bar { Console.redraw("") }
        if case .failed(let error, _) = ending, error.code == .userErased {
            // The engine wiped the store: there is nothing left to count.
            return SyncReport(
                server: session.profile.server, ending: ending, outcomes: session.network.pushOutcomes, pulled: [:], opened: [], pending: 0,
                failed: 0, quarantined: 0, openConflicts: 0
            )
        }
        let opened = try store.conflicts(includeResolved: true).filter { !known.contains($0.id) }
        let counts = try store.outboxCounts()
        return SyncReport(
            server: session.profile.server, ending: ending, outcomes: session.network.pushOutcomes,
            pulled: session.network.pulledRows, opened: opened, pending: counts.unsent, failed: counts[.failed],
            quarantined: counts[.quarantined], openConflicts: try store.conflicts().count,
            changedFieldRows: session.network.changedFieldRows
        )
    }
}

/// Draws the engine's progress on standard error: `[########------] pushing 3/8 Task`, and the
/// files uploaded before the push with their bytes (``SyncProgress/fileBytesSent`` of
/// ``SyncProgress/fileBytesTotal``), on a terminal; elsewhere only the files' progress, as lines.
enum ProgressBar {
    static func follow(_ engine: SyncEngine, style: ProgressStyle, uploads: TransferMeter) -> Task<Void, Never> {
        Task {
            var uploadTotal: Int64 = 0
            for await status in await engine.status {
                if Task.isCancelled { break }
                let files = status.progress
                if status.phase == .pushing, files.fileBytesTotal > 0 {
                    if !uploads.isActive || files.fileBytesTotal != uploadTotal {
                        uploads.finish()
                        uploadTotal = files.fileBytesTotal
                        uploads.begin(total: files.fileBytesTotal, done: files.fileBytesSent)
                    } else {
                        uploads.set(done: files.fileBytesSent, total: files.fileBytesTotal)
                    }
                    if files.fileBytesSent < files.fileBytesTotal { continue }
                } else if uploads.isActive {
                    uploads.finish()
                }
                guard style == .bar else { continue }
                switch status.phase {
                case .pushing where status.progress.total > 0:
                    let total = max(status.progress.total, 1)
                    let filled = min(24, status.progress.done * 24 / total)
                    let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: 24 - filled)
                    Console.redraw(
                        "[\(bar)] pushing \(status.progress.done)/\(status.progress.total) \(status.progress.currentEntity ?? "")")
                case .pulling(let scope):
                    Console.redraw("pulling \(scope): \(status.progress.done) rows")
                case .reconciling:
                    Console.redraw("reconciling")
                case .idle, .pushing, .waitingToRetry:
                    break
                }
            }
        }
    }
}

/// What a sync did, for people (`lines`) and scripts (`json`).
struct SyncReport {
    var server: URL
    var ending: SyncRun.Ending
    var outcomes: [DeviceNetwork.Outcome]
    var pulled: [String: Int]
    /// Conflicts this sync recorded: open ones wait for `resolve`; resolved ones the policy settled.
    var opened: [ConflictRecord]
    var pending: Int
    var failed: Int
    var quarantined: Int
    var openConflicts: Int
    /// Pulled rows that came with only their changed fields.
    var changedFieldRows = 0
    /// What a background window did and left (`sync --window`).
    var window: BackgroundSyncReport?

    func count(_ status: MutationStatus) -> Int { outcomes.filter { $0.result.status == status }.count }
    var merged: [DeviceNetwork.Outcome] { outcomes.filter { $0.result.status == .applied && $0.result.resolution == "merged" } }
    var pulledTotal: Int { pulled.values.reduce(0, +) }

    /// 0, or 4 when conflicts, refused or quarantined changes wait, 3 when the server was not
    /// reached, 1 when the store failed.
    var exitCode: ExitCode {
        switch ending {
        case .succeeded: return openConflicts > 0 || failed > 0 || quarantined > 0 ? DeviceExit.needsAttention : .success
        case .paused, .deferred: return .success
        case .failed: return DeviceExit.network
        case .storeFailed: return DeviceExit.failure
        }
    }

    /// Fields of a merged change where the server kept another device's value.
    static func keptFields(_ outcome: DeviceNetwork.Outcome) -> [String] {
        guard case .object(let sent)? = outcome.mutation.payload, case .object(let row)? = outcome.result.serverRow else { return [] }
        let key = ContractRegistry.entity(named: outcome.mutation.entity)?.primaryKey
        return sent.keys.filter { $0 != key && row[$0] != sent[$0] }.sorted()
    }

    var lines: [String] {
        var lines: [String] = []
        let pushed = "pushed \(outcomes.count)" + (outcomes.isEmpty ? "" : " (" + pushParts.joined(separator: ", ") + ")")
        let pulledText =
            "pulled \(Wording.count(pulledTotal, "row"))"
            + (pulled.isEmpty ? "" : " (" + pulled.keys.sorted().map { "\($0) \(pulled[$0]!)" }.joined(separator: ", ") + ")")
        switch ending {
        case .succeeded:
            lines.append("synced with \(server.absoluteString): \(pushed), \(pulledText)")
        case .failed(let error, _) where error.code == .userErased:
            lines.append("erased: the server erased this user's data; this device's store was wiped (sign in again to start afresh)")
            return lines
        case .failed(let error, let network):
            lines.append((network ? "offline: " : "sync failed: ") + error.message)
            if !outcomes.isEmpty || !pulled.isEmpty { lines.append("before that: \(pushed), \(pulledText)") }
        case .storeFailed(let message):
            lines.append("sync failed on the device: \(message)")
        case .paused(let pause):
            lines.append("no automatic sync: " + PreferencesCommand.describe(pause) + "; `sync-device sync` syncs anyway")
        case .deferred(let next):
            lines.append(
                "no automatic sync now: low-power mode holds it for the timer"
                    + (next.map { " (next at \(ISO8601DateFormatter().string(from: $0)))" } ?? "") + "; `sync-device sync` syncs anyway")
        }
        if let window { lines += Self.windowLines(window) }
        if changedFieldRows > 0 { lines.append("  \(Wording.count(changedFieldRows, "row")) came with only their changed fields") }
        for outcome in merged {
            let kept = Self.keptFields(outcome)
            let sent = (outcome.mutation.payload.flatMap { if case .object(let fields) = $0 { fields } else { nil } } ?? [:]).keys
                .filter { $0 != ContractRegistry.entity(named: outcome.mutation.entity)?.primaryKey && !kept.contains($0) }.sorted()
            var line =
                "  merged    \(outcome.mutation.entity) \(outcome.mutation.id): field_merge took "
                + (sent.isEmpty ? "nothing" : sent.joined(separator: ", ")) + " from this device"
            if !kept.isEmpty { line += "; kept another device's later " + kept.joined(separator: ", ") }
            lines.append(line)
        }
        for outcome in outcomes where outcome.result.status == .rejected {
            lines.append("  refused   \(outcome.mutation.entity) \(outcome.mutation.id): \(outcome.result.error?.message ?? "rejected")")
        }
        for outcome in outcomes where outcome.result.status == .duplicate {
            lines.append("  duplicate \(outcome.mutation.entity) \(outcome.mutation.id): already on the server, not applied again")
        }
        for conflict in opened {
            lines += ConflictRendering.lines(conflict).map { "  " + $0 }
        }
        var state = ["\(Wording.count(pending, "change")) waiting"]
        if openConflicts > 0 { state.append("\(Wording.count(openConflicts, "conflict")) to resolve (sync-device conflicts)") }
        if failed > 0 { state.append("\(failed) refused (sync-device outbox)") }
        if quarantined > 0 { state.append("\(quarantined) quarantined") }
        lines.append("now: " + state.joined(separator: ", "))
        return lines
    }

    /// A background window's report for people: what it did, why it stopped, what is left.
    static func windowLines(_ window: BackgroundSyncReport) -> [String] {
        let length = Int(window.deadline.timeIntervalSince(window.started).rounded())
        let took = window.ended.timeIntervalSince(window.started)
        var lines = [
            "window of \(length)s: pushed \(window.pushed), pulled \(Wording.count(window.pulled, "row")) in "
                + "\(Wording.count(window.requests, "request")), \(String(format: "%.1f", took))s; "
                + (window.finished ? "finished" : window.stoppedForDeadline ? "stopped before the deadline" : "not finished")
        ]
        if !window.finished {
            var left = ["\(Wording.count(window.remainingWrites, "change")) to push"]
            if window.filesLeftToUpload > 0 {
                left.append("\(Wording.count(window.filesLeftToUpload, "file")) to upload (\(Wording.bytes(window.fileBytesLeftToUpload)))")
            }
            if !window.scopesLeftToPull.isEmpty { left.append("scopes to pull: " + window.scopesLeftToPull.joined(separator: ", ")) }
            if !window.subscriptionsLeftToPull.isEmpty {
                left.append("\(Wording.count(window.subscriptionsLeftToPull.count, "subscription")) to pull")
            }
            lines.append("left for the next window: " + left.joined(separator: "; "))
        }
        return lines
    }

    static func windowJSON(_ window: BackgroundSyncReport) -> JSONValue {
        .object([
            "seconds": .double(window.deadline.timeIntervalSince(window.started)),
            "took_seconds": .double(window.ended.timeIntervalSince(window.started)),
            "pushed": .int(Int64(window.pushed)), "pulled": .int(Int64(window.pulled)), "requests": .int(Int64(window.requests)),
            "finished": .bool(window.finished), "stopped_for_deadline": .bool(window.stoppedForDeadline),
            "left": .object([
                "changes": .int(Int64(window.remainingWrites)),
                "scopes": .array(window.scopesLeftToPull.map(JSONValue.string)),
                "subscriptions": .array(window.subscriptionsLeftToPull.map(JSONValue.string)),
                "files": .int(Int64(window.filesLeftToUpload)), "file_bytes": .int(window.fileBytesLeftToUpload),
            ]),
        ])
    }

    private var pushParts: [String] {
        var parts: [String] = []
        let applied = count(.applied) - merged.count
        if applied > 0 { parts.append("\(applied) applied") }
        if !merged.isEmpty { parts.append("\(merged.count) merged") }
        if count(.duplicate) > 0 { parts.append("\(count(.duplicate)) duplicate") }
        if count(.conflicted) > 0 { parts.append("\(count(.conflicted)) conflicted") }
        if count(.rejected) > 0 { parts.append("\(count(.rejected)) refused") }
        return parts
    }

    var json: JSONValue {
        let result: String
        let error: JSONValue
        switch ending {
        case .succeeded: (result, error) = ("succeeded", .null)
        case .failed(let detail, let network):
            (result, error) = (
                network ? "offline" : "failed", .object(["code": .string(detail.code.rawValue), "message": .string(detail.message)])
            )
        case .storeFailed(let message):
            (result, error) = ("store_failed", .object(["code": .string("store"), "message": .string(message)]))
        case .paused(let pause):
            (result, error) = (
                "paused", .object(["code": .string(PreferencesCommand.code(pause)), "message": .string(PreferencesCommand.describe(pause))])
            )
        case .deferred:
            (result, error) = (
                "deferred", .object(["code": .string("low_power_mode"), "message": .string("low-power mode holds automatic syncs for the timer")])
            )
        }
        let outcomes = self.outcomes.map { outcome -> JSONValue in
            .object([
                "seq": .int(outcome.mutation.seq), "client_mutation_id": .string(outcome.mutation.clientMutationId),
                "entity": .string(outcome.mutation.entity), "id": .string(outcome.mutation.id), "op": .string(outcome.mutation.op.rawValue),
                "status": .string(outcome.result.status.rawValue), "resolution": outcome.result.resolution.map(JSONValue.string) ?? .null,
                "kept_fields": .array(Self.keptFields(outcome).map(JSONValue.string)),
                "error": outcome.result.error.map { .object(["code": .string($0.code.rawValue), "message": .string($0.message)]) } ?? .null,
            ])
        }
        return .object([
            "result": .string(result), "error": error,
            "pushed": .object([
                "total": .int(Int64(self.outcomes.count)), "applied": .int(Int64(count(.applied) - merged.count)),
                "merged": .int(Int64(merged.count)), "duplicate": .int(Int64(count(.duplicate))),
                "conflicted": .int(Int64(count(.conflicted))), "rejected": .int(Int64(count(.rejected))),
            ]),
            "outcomes": .array(outcomes),
            "pulled": .object([
                "total": .int(Int64(pulledTotal)), "by_contract": .object(pulled.mapValues { .int(Int64($0)) }),
                "changed_fields_rows": .int(Int64(changedFieldRows)),
            ]),
            "window": window.map(Self.windowJSON) ?? .null,
            "conflicts": .array(opened.filter { $0.resolution == nil }.map(ConflictRendering.json)),
            "settled_conflicts": .array(opened.filter { $0.resolution != nil }.map(ConflictRendering.json)),
            "after": .object([
                "pending": .int(Int64(pending)), "failed": .int(Int64(failed)), "quarantined": .int(Int64(quarantined)),
                "conflicts": .int(Int64(openConflicts)),
            ]),
        ])
    }
}
