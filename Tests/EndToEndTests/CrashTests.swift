import ContractRuntime
import Contracts
import Foundation
import LearningClient
import OutpostTestSupport
import SyncClient
import SyncProtocol
import SyncServer
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The crash suite: the real `sync-server` and `sync-device` processes killed with
/// SIGKILL at the worst moments, many times at seeded random points, then restarted and synced
/// to the end. Afterwards every change a device recorded is on the server exactly once (its
/// ledger and its audit log), no pulled page is half-applied, downloaded files match their
/// checksums, and devices and server agree on every subscribed scope.
///
/// Each test prints where its kills landed (`crash suite: …`). `OUTPOST_SOAK_ITERATIONS` sets the
/// kills per crash point (`make soak`), `OUTPOST_CRASH_SEED` the seed.
@Suite("Crash suite", .serialized, .blockingWork)
struct CrashTests {
    @Test("kill -9 of a device during a push, at random moments")
    func deviceKilledDuringPush() async throws {
        var plan = CrashPlan("device killed during a push", iterations: 16)
        var tally = KillTally(plan)
        let stage = try Stage()
        let tablet = try stage.device("tablet", user: "op-kim", teams: [Stage.team])
        var writes = FieldWrites(device: tablet)
        let (token, clientID, _) = try stage.credentials(of: tablet)

        // Each kill aims at a random batch (watched through the outbox: its first change marked
        // `sending` once a random number of changes are delivered), then lands a random few
        // milliseconds later: before the request left, while the server applied it, or while the
        // device recorded the answer.
        let watch = try OutboxWatch(tablet)
        let reached = "mid-push, the batch reached the server, its answer never recorded"
        let lost = "mid-push, the batch never reached the server"
        for _ in 0..<plan.iterations {
            let count = plan.int(2...5)
            try writes.queue(count, plan: &plan)
            let delivered = plan.int(0...(count - 1))
            let doneBefore = try watch.counts().done
            let sync = try tablet.start(["sync", "--batch", String(plan.int(1...2))])
            _ = try sync.poll {
                let counts = try watch.counts()
                return counts.sending > 0 && counts.done - doneBefore >= delivered
            }
            Stopwatch.sleep(plan.seconds(0...0.02))
            let finishedFirst = !sync.isRunning
            sync.signal(SIGKILL)
            _ = try sync.wait()

            let outbox = try DeviceInspector.read(tablet) { try $0.outbox() }
            let sending = outbox.filter { $0.status == .sending }
            if finishedFirst {
                tally.record("after the sync ended")
            } else if !sending.isEmpty {
                // The server's last seq of this client (right after the kill) says whether it
                // applied the batch in flight.
                let serverLast = try await stage.client().pull(
                    scope: Stage.teamScope, cursor: nil, limit: 1, token: token, clientID: clientID
                ).lastSeq
                tally.record(sending.allSatisfy { ($0.pushSeq ?? .max) <= serverLast } ? reached : lost)
            } else if outbox.contains(where: { OutboxStatus.unsent.contains($0.status) }) {
                tally.record("before a push")
            } else {
                tally.record("after the pushes (pulling)")
            }

            // Restarted, the device syncs to the end: what was in flight is sent again.
            try tablet.ok(["sync"])
            let left = try DeviceInspector.read(tablet) { try $0.outbox() }.filter { $0.status != .done }
            #expect(left.isEmpty, "changes not delivered after the restart: \(left)")
            try await stage.expectAgreement(tablet)
        }
        tally.report()
        let midPush = tally[reached] + tally[lost]
        #expect(midPush * 3 >= plan.iterations, "too few kills landed during a push: \(tally.summary)")

        try await stage.stopAndExpectEveryWriteOnce(tablet)
    }

    @Test("kill -9 of a device inside a pulled page's transaction, at random pages")
    func deviceKilledDuringPullApply() async throws {
        var plan = CrashPlan("device killed while applying a pulled page", iterations: 16)
        var tally = KillTally(plan)
        let stage = try Stage()
        let writer = try stage.device("writer", user: "op-wes", teams: [Stage.team])
        var writes = FieldWrites(device: writer)
        let reader = try stage.device("reader", user: "op-rae", teams: [Stage.team])

        for iteration in 0..<plan.iterations {
            // New rows, and new versions of old ones, for the devices to pull.
            try writes.queue(plan.int(1...4), plan: &plan)
            try writer.ok(["sync"])
            // A new device pulls everything; the reader, what changed since its cursors.
            let device =
                plan.chance(0.5)
                ? try stage.device("new-\(iteration)", user: "op-new-\(iteration)", teams: [Stage.team], sync: false) : reader
            let pageSize = plan.int(1...4)
            let (token, clientID, scopes) = try stage.credentials(of: device)
            let before = try DeviceInspector.read(device) { inspector in
                try scopes.map { (contents: try inspector.contents(ofScope: $0), cursor: try inspector.cursor(ofScope: $0)) }
            }
            // The pages the device is about to apply, in its order: scope by scope in priority
            // order; a scope it never pulled, by priority tiers (no cursor stored) and then
            // whole from where the first tier ended (that cursor stored once the tiers are in).
            var pages: [(scope: Int, page: PullResponse, storesCursor: Bool)] = []
            var cursorAfterTiers: [Int: (lastTierPage: Int, cursor: String)] = [:]
            for scope in PullPriorities(ContractCatalog(ContractRegistry.self)).order(scopes) {
                let index = scopes.firstIndex(of: scope)!
                let tiers = PullPriorities(ContractCatalog(ContractRegistry.self)).tiers(of: scope)
                var start = before[index].cursor
                if start == nil, tiers.count > 1 {
                    var firstTierEnd: String?
                    for tier in tiers {
                        let tierPages = try await stage.client().pullAll(
                            scope: scope, from: nil, limit: pageSize, token: token, clientID: clientID, contracts: tier
                        )
                        pages += tierPages.map { (index, $0, false) }
                        firstTierEnd = firstTierEnd ?? tierPages.last!.cursor
                    }
                    cursorAfterTiers[index] = (pages.count - 1, firstTierEnd!)
                    start = firstTierEnd
                }
                let scopePages = try await stage.client().pullAll(scope: scope, from: start, limit: pageSize, token: token, clientID: clientID)
                pages += scopePages.map { (index, $0, true) }
            }

            // A scope at random, then one of its pages: every scope gets its share of kills.
            let scopeIndex = plan.int(0...(scopes.count - 1))
            let target = plan.pick(pages.indices.filter { pages[$0].scope == scopeIndex }) + 1
            // Pages are committed in groups of at least `commitRows` rows (or up to the last page
            // of a run); a kill inside one loses that whole group and nothing before it.
            let commitRows = plan.int(1...8)
            let sync = try device.start(
                ["sync", "--page-size", String(pageSize), "--commit-rows", String(commitRows)],
                environment: [FaultPauses.environmentVariable: "pull-apply#\(target):60000"]
            )
            let paused = try sync.waitForError(containing: "fault: pausing at pull-apply (\(target))")
            sync.signal(SIGKILL)
            let ended = try sync.wait()
            try #require(paused, "the device never reached page \(target) of \(pages.count): \(ended)")
            let scope = scopes[pages[target - 1].scope]
            tally.record("inside a page's transaction (\(try DeviceInspector.scope(ofKey: scope).name) scope)")

            // Every group before the target's is there whole, with its cursor; nothing of its group.
            let committedCount = Self.firstOfCommitGroup(containing: target - 1, pages.map { ($0.scope, $0.page) }, commitRows: commitRows)
            let committed = pages.prefix(committedCount)
            let after = try DeviceInspector.read(device) { inspector in
                try scopes.map { (contents: try inspector.contents(ofScope: $0), cursor: try inspector.cursor(ofScope: $0)) }
            }
            for (index, scope) in scopes.enumerated() {
                let applied = committed.filter { $0.scope == index }
                var expected = before[index].contents
                expected.apply(applied.map(\.page))
                #expect(
                    after[index].contents == expected,
                    "\(device.name), \(scope) after a kill in page \(target): \(after[index].contents) vs \(expected)")
                var cursor = before[index].cursor
                if let tiers = cursorAfterTiers[index], tiers.lastTierPage < committedCount { cursor = tiers.cursor }
                if let last = applied.last(where: \.storesCursor) { cursor = last.page.cursor }
                #expect(after[index].cursor == cursor, "\(device.name), \(scope): cursor")
            }

            // Restarted, it syncs to the end and agrees with the server.
            try device.ok(["sync", "--page-size", String(plan.int(1...50))])
            try await stage.expectAgreement(device)
        }
        tally.report()
        #expect(tally.kills == plan.iterations)
        try await stage.stopAndExpectEveryWriteOnce(writer)
    }

    /// The index of the first page of the commit group holding page `index`: the engine takes a
    /// scope's pages in order into one transaction until they hold `commitRows` rows or the
    /// scope's last page came.
    static func firstOfCommitGroup(containing index: Int, _ pages: [(scope: Int, page: PullResponse)], commitRows: Int) -> Int {
        var first = 0
        var rows = 0
        // Rows of the scope stored so far: a scope's first groups are smaller (one page, then
        // as many rows as stored so far, up to `commitRows`).
        var stored = 0
        for position in 0..<index {
            if position > 0, pages[position].scope != pages[position - 1].scope { stored = 0 }
            rows += pages[position].page.rowCount
            if rows >= min(commitRows, max(1, stored)) || !pages[position].page.hasMore {
                first = position + 1
                stored += rows
                rows = 0
            }
        }
        return first
    }

    @Test("kill -9 of a device downloading a unit's files, at random moments")
    func deviceKilledDuringAssetDownload() async throws {
        var plan = CrashPlan("device killed during an asset download", iterations: 10)
        var tally = KillTally(plan)
        let stage = try Stage()
        let megabytes = 24
        let video = try await stage.publishLargeAsset(
            id: "asset-reporting-video", lesson: "lesson-reporting-practice", megabytes: megabytes, seed: plan.seed
        )
        let unit = "unit-field-reporting"
        let fileSize = Int64(megabytes * 1024 * 1024)
        let phone = try stage.device("phone", user: "learner-pat", sync: false)
        // The engine's partial download of the large file, in the store's files folder.
        let partial = try DeviceInspector.read(phone) { $0.store.partialFileURL(sha256: video.checksum) }

        for _ in 0..<plan.iterations {
            // One or two kills before the download may finish: a resumed download is killed too.
            for _ in 0..<plan.int(1...2) {
                let sizeBefore = Self.size(of: partial)
                let download = try phone.start(["download", unit])
                if plan.chance(0.8) {
                    // Aimed at a random byte of what remains of the large file, then a few
                    // milliseconds more: while a range arrives, is appended, or is recorded.
                    // (A partial file already whole, killed before it was verified, has no byte left.)
                    let target = Int64.random(in: min(sizeBefore, fileSize - 1)...(fileSize - 1), using: &plan.random)
                    _ = try download.poll { Self.size(of: partial) > target }
                    Stopwatch.sleep(plan.seconds(0...0.01))
                } else {
                    // At any moment of the start: the units route, the small file, the first range.
                    Stopwatch.sleep(plan.seconds(0...0.3))
                }
                let finishedFirst = !download.isRunning
                download.signal(SIGKILL)
                _ = try download.wait()
                let stored = try DeviceInspector.read(phone) { try $0.store.storedFile(sha256: video.checksum) }
                let onDisk = Self.size(of: partial)
                if finishedFirst {
                    tally.record("after the download ended")
                } else if stored != nil {
                    tally.record("after the large file was verified")
                } else if onDisk > 0 {
                    tally.record("mid-file, the partial file as it stood")
                } else {
                    tally.record("before the large file's first range")
                }
                // Nothing runs any more: the device must not show the unit as downloading.
                let listed = try phone.json(["units"])["units"].array.first { $0["unit"]["id"].string == unit }
                #expect(listed?["local"]["download_status"].string != "downloading", "\(String(describing: listed))")
            }

            // Restarted, the download completes, and every file hashes to its server checksum.
            let done = try phone.run(["download", unit, "--json"])
            #expect(done.status == 0, "\(done)")
            let files = try DeviceInspector.read(phone) { inspector in
                try ["asset-reporting-notes", video.id].map { id in
                    let file = try #require(try inspector.store.fetch(Asset.self, id: id)?.file, "\(id) names no file")
                    return (id, file, try inspector.store.storedFile(sha256: file.sha256))
                }
            }
            for (id, file, stored) in files {
                let url = try #require(stored?.url, "\(id)'s file is not on the device")
                #expect(Hex.sha256(try Data(contentsOf: url)) == file.sha256, "\(id) does not match its file's SHA-256")
            }
            #expect(files.first { $0.0 == video.id }?.1.sha256 == video.checksum)
            #expect(!FileManager.default.fileExists(atPath: partial.path), "a partial file was left behind")
            // Deleted, files too (the engine's cache would keep them), so that the next round
            // downloads from nothing again.
            try phone.ok(["cache", "delete", unit])
            for case (_, _, let stored?) in files { try FileManager.default.removeItem(at: stored.url) }
        }
        tally.report()
        let midFile = tally["mid-file, the partial file as it stood"]
        #expect(midFile * 2 >= tally.kills, "too few kills landed during the download: \(tally.summary)")
    }

    @Test("kill -9 of the server between receiving a push and answering it, at random pushes")
    func serverKilledBeforeAnsweringPush() async throws {
        var plan = CrashPlan("server killed between receiving a push and answering it", iterations: 12)
        var tally = KillTally(plan)
        let stage = try Stage()
        let tablet = try stage.device("tablet", user: "op-sol", teams: [Stage.team])
        var writes = FieldWrites(device: tablet)
        let (_, clientID, _) = try stage.credentials(of: tablet)

        for _ in 0..<plan.iterations {
            let count = plan.int(1...5)
            let batch = plan.int(1...3)
            try writes.queue(count, plan: &plan)
            // Two writes of one task go in separate pushes, so there are at least this many.
            let target = plan.int(1...((count + batch - 1) / batch))
            let point = plan.pick([FaultPoint.pushBeforeApply, .pushBeforeAnswer])
            try stage.server.stop()
            try stage.server.start(environment: [FaultPauses.environmentVariable: "\(point.rawValue)#\(target):60000"])
            let sync = try tablet.start(["sync", "--batch", String(batch)])
            let paused = try stage.server.waitForError(containing: "fault: pausing at \(point.rawValue) (\(target))")
            try stage.server.crash()
            let ended = try sync.wait()
            try #require(paused, "the server never reached push \(target): \(ended)\n\(stage.server.log)")
            #expect(ended.status == 3, "the device should see the connection lost: \(ended)")

            // The server (down) committed the push it was holding after applying it, and nothing
            // of one it held before; either way the device still holds the batch.
            let serverLast = try await stage.storage().read { reader in try await reader.lastSequence(tenant: Stage.tenant, clientID: clientID) }
            let outbox = try DeviceInspector.read(tablet) { try $0.outbox() }
            let held = outbox.filter { $0.status != .done && $0.pushSeq != nil }
            #expect(!held.isEmpty, "the held push is not waiting on the device: \(outbox)")
            if point == .pushBeforeAnswer {
                #expect(held.allSatisfy { $0.pushSeq! <= serverLast }, "the server did not commit the push it held: \(held)")
                #expect(serverLast == outbox.compactMap(\.pushSeq).max(), "the server's last seq is not the last one sent")
                tally.record("committed, before the answer (push \(target))")
            } else {
                #expect(held.allSatisfy { $0.pushSeq! > serverLast }, "the server applied a push it never got to: \(held)")
                tally.record("received, before anything was applied (push \(target))")
            }

            // Restarted, the server answers the resent push from its stored results.
            try stage.server.start()
            try tablet.ok(["sync"])
            try await stage.expectAgreement(tablet)
        }
        tally.report()
        #expect(tally.kills == plan.iterations)

        try await stage.stopAndExpectEveryWriteOnce(tablet)
    }

    @Test("two server restarts in a row while a device keeps writing and syncing")
    func twoServerRestartsWhileSyncing() async throws {
        var plan = CrashPlan("two server restarts in a row", iterations: 2)
        var tally = KillTally(plan)
        let stage = try Stage()
        let tablet = try stage.device("tablet", user: "op-ria", teams: [Stage.team])
        let loop = SyncLoop(device: tablet)
        loop.start()
        defer { loop.stop() }

        for _ in 0..<plan.iterations {
            try loop.waitForSyncs(2)
            for restart in 1...2 {
                Stopwatch.sleep(plan.seconds(0...0.3))
                let graceful = plan.chance(0.5)
                if graceful { try stage.server.stop() } else { try stage.server.crash() }
                tally.record(graceful ? "graceful stop (SIGTERM)" : "kill -9")
                Stopwatch.sleep(plan.seconds(0...0.5))
                try stage.server.start()
                if restart == 1 { Stopwatch.sleep(plan.seconds(0...0.2)) }
            }
            try loop.waitForSyncs(2)
        }
        let summary = loop.stop()
        print("crash suite: \(plan.name): device syncs: \(summary.synced) succeeded, \(summary.offline) found the server down")
        tally.report()
        #expect(summary.failures.isEmpty, "\(summary.failures)")

        try tablet.ok(["sync"])
        try await stage.expectAgreement(tablet)
        try await stage.stopAndExpectEveryWriteOnce(tablet)
    }
}

extension CrashTests {
    /// The size of a file, 0 when there is none.
    static func size(of file: URL) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: file.path))?[.size] as? NSNumber)?.int64Value ?? 0
    }
}

/// Random writes of a field operative, one `sync-device` run each: logged issues (append-only
/// events), incident edits (`field_merge`) and task notes (`version_check`).
struct FieldWrites {
    let device: Device
    private var written = 0

    init(device: Device) {
        self.device = device
    }

    mutating func queue(_ count: Int, plan: inout CrashPlan) throws {
        for _ in 0..<count {
            written += 1
            let note = "\(device.name) note \(written)"
            switch plan.int(0...2) {
            case 0:
                try device.ok([
                    "event", "issue-logged", "--field", "service_asset_id=\(Stage.team)-vehicle-017", "--field", "category=damage",
                    "--field", "description=\(note)", "--field", "observed_on=today",
                ])
            case 1:
                try device.ok(["edit", "incident", StoryTests.incident, "--field", "description=\(note)"])
            default:
                let task = plan.pick([StoryTests.swapTask, StoryTests.inspectTask, "\(Stage.team)-task-charge-204"])
                try device.ok(["edit", "task", task, "--field", "notes=\(note)"])
            }
        }
    }
}

/// A device writing and syncing over and over on a background thread, whatever the server does:
/// each round records a logged issue, then syncs (which may find the server down).
final class SyncLoop: @unchecked Sendable {
    struct Summary {
        var synced = 0
        var offline = 0
        var failures: [String] = []
    }

    private let device: Device
    private let lock = NSLock()
    private var summary = Summary()
    private var stopping = false
    private var thread: Thread?
    private let finished = DispatchSemaphore(value: 0)

    init(device: Device) {
        self.device = device
    }

    func start() {
        let thread = Thread { [self] in
            var round = 0
            while !lock.withLock({ stopping }) {
                round += 1
                do {
                    try device.ok([
                        "event", "issue-logged", "--field", "service_asset_id=\(Stage.team)-vehicle-017", "--field", "category=other",
                        "--field", "description=round \(round)", "--field", "observed_on=today",
                    ])
                    let sync = try device.run(["sync"])
                    lock.withLock {
                        switch sync.status {
                        case 0: summary.synced += 1
                        case 3: summary.offline += 1
                        default: summary.failures.append(sync.description)
                        }
                    }
                } catch {
                    lock.withLock { summary.failures.append(String(describing: error)) }
                }
            }
            finished.signal()
        }
        self.thread = thread
        thread.start()
    }

    /// Waits until `count` more syncs succeeded.
    func waitForSyncs(_ count: Int, timeout: Double = 120) throws {
        let target = lock.withLock { summary.synced } + count
        let deadline = Date().addingTimeInterval(timeout)
        while lock.withLock({ summary.synced }) < target {
            guard Date() < deadline else {
                throw Device.Unexpected(description: "the device did not sync \(count) times: \(lock.withLock { summary })")
            }
            usleep(20_000)
        }
    }

    /// Stops after the current round; returns what the rounds did.
    @discardableResult
    func stop() -> Summary {
        let wasRunning = lock.withLock {
            defer { stopping = true }
            return !stopping && thread != nil
        }
        if wasRunning { finished.wait() }
        return lock.withLock { summary }
    }
}
