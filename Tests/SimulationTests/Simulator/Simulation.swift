import ContractRuntime
import Contracts
import Foundation
import GRDB
import SyncClient
import SyncProtocol
import SyncServer

/// An invariant that did not hold, and where.
struct SimFailure: Error, Hashable, Sendable, CustomStringConvertible {
    /// The step after which it was found (0-based), or `nil` at quiescence.
    var step: Int?
    /// A stable name of the invariant (`exactly-once`, `converged`, …): shrinking keeps a
    /// schedule only while it fails the same one.
    var invariant: String
    var message: String

    var description: String {
        "[\(invariant)] " + (step.map { "after step \($0 + 1): " } ?? "at quiescence: ") + message
    }
}

/// How a run ended.
struct SimOutcome: Sendable {
    var failure: SimFailure?
    /// Every step's result and every network exchange, in order: the same schedule gives the same trace.
    var trace: [String]
    var counts: SimCounts
}

/// What a run exercised.
struct SimCounts: Hashable, Sendable {
    var writes = 0
    var syncs = 0
    var failedSyncs = 0
    var conflictsResolved = 0
    var deviceCrashes = 0
    var serverRestarts = 0
    var lateDeliveries = 0
    var auditEntries = 0
    var pokesDelivered = 0
    var pokesLost = 0
    var automaticSyncs = 0
    var automaticSyncsPaused = 0
    var housekeepingRuns = 0
    var cursorExpiries = 0
    var revocations = 0
    var erasures = 0
    var wipes = 0
    var subscriptionsEnded = 0
    /// Team rows that left the device that syncs no team scope (evicted, or deleted).
    var subscriberRowsLeft = 0
    /// Background windows run, those that stopped for their deadline, and the processes killed at a window's end.
    var windows = 0
    var windowsStopped = 0
    var killedAtWindowEnd = 0
    /// Low-power mode toggled, and automatic syncs it held for the timer.
    var lowPowerToggles = 0
    var automaticSyncsHeldForPower = 0
}

/// A deliberate bug, to prove the invariants notice one.
enum SimSabotage: Sendable {
    /// Deletes a device's newest unsent write behind the store's back.
    case dropPendingWrite
    /// Deletes a row from the server without a tombstone, so no device hears of it.
    case forgetServerRow
    /// Deletes an incident from the device that syncs no team scope behind its store's back:
    /// its subscription still selects it, and no pull brings it back.
    case dropSubscribedRow
}

/// One run of a schedule: a sync server and the schedule's devices in this process, each on its
/// own SQLite files in a temporary folder, under one simulated clock and network.
final class Simulation {
    let schedule: SimSchedule
    private let root: URL
    private let clock = SimClock()
    private let network: SimNetwork
    private var server: SimServer
    private var devices: [SimDevice] = []
    private var serial = 0
    private var trace: [String] = []
    private var counts = SimCounts()
    private let sabotage: SimSabotage?
    /// Each erasure: its user, when, the last audit entry before it, and the push streams
    /// (client ids) of that user the server knew then: none may write again.
    private var erasures: [(user: String, at: Int64, auditBefore: Int64, clients: Set<String>)] = []

    private init(schedule: SimSchedule, sabotage: SimSabotage?) async throws {
        self.schedule = schedule
        self.sabotage = sabotage
        root = Self.scratchFolder.appendingPathComponent("outpost-sim-\(schedule.seed)-\(UUID().uuidString)")
        network = SimNetwork(clock: clock, seed: schedule.seed)
        server = try await SimServer(folder: root.appendingPathComponent("server"), clock: clock, processes: schedule.serverProcesses)
        network.server = server
        for index in 0..<schedule.devices {
            var random = SimRandom(seed: schedule.seed, salt: UInt64(index) + 1)
            // Device clocks disagree by up to a minute and a half either way.
            let skew = TimeInterval(random.below(181) - 90)
            let seed = random.next()
            // The device that syncs no team scope keeps no row limits: what it holds is what its subscriptions select.
            let isSubscriber = index == schedule.subscriber
            devices.append(
                try SimDevice(
                    index: index, user: SimSchedule.user(ofDevice: index), deviceID: "device-\(index)", root: root, network: network,
                    clock: clock.device(skew: skew), seed: seed, limits: isSubscriber ? nil : Self.storageLimits(&random),
                    renewsErasedSessions: schedule.renewsErasedSessions != false,
                    scopes: isSubscriber ? SimDevice.subscriberScopes : SimDevice.scopes
                )
            )
        }
    }

    /// Half the devices keep little: a few rows of the team's and the content's contracts, and
    /// now and then a small database budget, so housekeeping evicts rows as the schedule goes.
    private static func storageLimits(_ random: inout SimRandom) -> StorageLimits? {
        guard random.chance(50) else { return nil }
        var contracts: [String: ContractStorageLimit] = [:]
        for name in [ServiceAsset.descriptor.name, Incident.descriptor.name, FieldTask.descriptor.name, Unit.descriptor.name, Lesson.descriptor.name]
        where random.chance(60) {
            contracts[name] = ContractStorageLimit(maxRows: 2 + random.below(6))
        }
        return StorageLimits(contracts: contracts, databaseBudgetBytes: random.chance(30) ? Int64(2_000 + random.below(20_000)) : nil)
    }

    /// Where runs keep their files: memory-backed `/dev/shm` where there is one (the databases
    /// are real SQLite files either way; only the disk's flushes are skipped), else the temporary folder.
    static let scratchFolder: URL = {
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: "/dev/shm", isDirectory: &isFolder), isFolder.boolValue,
            FileManager.default.isWritableFile(atPath: "/dev/shm")
        {
            return URL(fileURLWithPath: "/dev/shm", isDirectory: true)
        }
        return FileManager.default.temporaryDirectory
    }()

    /// Runs `schedule`, then brings the system to quiescence and checks every invariant.
    static func run(_ schedule: SimSchedule, sabotage: SimSabotage? = nil) async -> SimOutcome {
        let simulation: Simulation
        do {
            simulation = try await Simulation(schedule: schedule, sabotage: sabotage)
        } catch {
            return SimOutcome(failure: SimFailure(step: nil, invariant: "setup", message: "\(error)"), trace: [], counts: SimCounts())
        }
        defer { simulation.tearDown() }
        var failure: SimFailure?
        do {
            for (index, step) in schedule.steps.enumerated() {
                do {
                    try await simulation.perform(step, index: index)
                    try await simulation.checkAfterStep()
                } catch var stepFailure as SimFailure {
                    stepFailure.step = index
                    throw stepFailure
                }
            }
            try await simulation.quiesce()
            try await simulation.checkAtQuiescence()
        } catch let error as SimFailure {
            failure = error
        } catch {
            failure = SimFailure(step: nil, invariant: "harness", message: "\(error)")
        }
        var trace = simulation.trace
        trace.append(contentsOf: simulation.network.trace.map { "  net: " + $0 })
        return SimOutcome(failure: failure, trace: trace, counts: simulation.counts)
    }

    private func tearDown() {
        for device in devices { device.close() }
        try? FileManager.default.removeItem(at: root)
    }

    private func log(_ line: String) {
        trace.append("[\(clock.seconds - Int64(SimClock.start.timeIntervalSince1970))s] " + line)
        network.record("— " + line)
    }

    // MARK: Steps

    private func perform(_ step: SimStep, index: Int) async throws {
        switch step {
        case .write(let device, let salt):
            var random = SimRandom(seed: salt &+ 1)
            clock.advance(by: TimeInterval(1 + random.below(30)))
            serial += 1
            let store = devices[device].store
            let result =
                devices[device].isSubscriber
                ? SimWorkload.subscriberWrite(store, user: devices[device].user, salt: salt, serial: serial, now: clock.now())
                : SimWorkload.write(store, user: devices[device].user, salt: salt, serial: serial, now: clock.now())
            counts.writes += 1
            log("device \(device): \(result)")
        case .sync(let device, let faults, let salt):
            clock.advance(by: 1)
            try await sync(devices[device], faults: faults ? SimRandom(seed: salt) : nil)
        case .resolveConflicts(let device, let salt):
            clock.advance(by: 5)
            let conflicted = Set(devices[device].lastStatus.filter { $0.value == .conflicted }.keys)
            let result = SimWorkload.resolveConflicts(devices[device].store, salt: salt)
            if result.hasPrefix("resolved") { counts.conflictsResolved += 1 }
            log("device \(device): \(result)")
            // A resolved conflict's entry may go: it was settled by the app, not purged.
            for id in conflicted { devices[device].lastStatus[id] = nil }
        case .partition(let device, let seconds):
            network.partition(device, for: TimeInterval(seconds))
            log("device \(device) partitioned for \(seconds) s")
        case .advance(let seconds):
            clock.advance(by: TimeInterval(seconds))
            log("\(seconds) s pass")
        case .crashDevice(let device):
            try devices[device].restart()
            counts.deviceCrashes += 1
            log("device \(device) crashed and restarted")
        case .restartServer:
            for device in devices {
                device.live?.close()
                device.live = nil
            }
            server = try await SimServer(folder: root.appendingPathComponent("server"), clock: clock, processes: schedule.serverProcesses)
            network.server = server
            counts.serverRestarts += 1
            log("server restarted")
            try await checkAuditChain()
        case .deliverDelayed(let salt):
            guard network.heldCount > 0 else { return }
            await network.deliverHeld(salt: salt)
            counts.lateDeliveries += 1
        case .publishContent(let salt):
            clock.advance(by: 10)
            log("admin: " + (await publishContent(salt: salt)))
        case .eraseUser(let device):
            clock.advance(by: 1)
            try await erase(user: devices[device].user)
        case .revokeDevice(let device):
            clock.advance(by: 1)
            try await revoke(devices[device])
        case .reenrolDevice(let device):
            clock.advance(by: 1)
            reenrol(devices[device])
        case .serverHousekeeping(let salt):
            clock.advance(by: 1)
            try await runHousekeeping(salt: salt)
        case .deliverPokes(let device, let salt):
            clock.advance(by: 1)
            try await deliverPokes(devices[device], salt: salt)
        case .automaticSync(let device, let salt):
            clock.advance(by: 1)
            try await automaticSync(devices[device], salt: salt)
        case .subscription(let device, let salt):
            try await changeSubscriptions(devices[device], salt: salt)
        case .backgroundWindow(let device, let seconds, let salt):
            clock.advance(by: 1)
            try await backgroundWindow(devices[device], seconds: seconds, salt: salt)
        case .setLowPower(let device, let on):
            clock.advance(by: 1)
            try await setLowPower(devices[device], on: on)
        case .setPreferences(let device, let salt):
            var random = SimRandom(seed: salt)
            // Low-power mode is its own step's to change: kept as it is.
            let lowPower = await devices[device].engine.syncPreferences.lowPowerMode
            let preferences = SyncPreferences(
                allowsExpensiveNetwork: random.chance(50), dailyAutomaticDataBudget: random.chance(60) ? 1_000 + random.below(30_000) : nil,
                syncInterval: TimeInterval(60 * (1 + random.below(60))), lowPowerMode: lowPower
            )
            do {
                try await devices[device].engine.setPreferences(preferences)
                log("device \(device) prefers: \(preferences)")
            } catch {
                log("device \(device) could not save its preferences: \(error)")
            }
        }
    }

    // MARK: Background windows, low-power mode

    /// A background window of `seconds`: each request takes 1 to 3 simulated seconds (the
    /// engine's estimate is 3 s and its margin 2 s), through a faulty network now and then. It
    /// must stop before its deadline less the margin, make no request when the preferences hold
    /// it, and leave nothing the invariants after the step would miss; the process is killed at
    /// its end now and then (its memory gone, the files as the window left them).
    private func backgroundWindow(_ device: SimDevice, seconds: Int, salt: UInt64) async throws {
        var random = SimRandom(seed: salt)
        let cost = TimeInterval(1 + random.below(3))
        let faults = random.chance(30) ? SimRandom(seed: random.next()) : nil
        let killedAtEnd = random.chance(40)
        let requestsBefore = network.requestCount(device.index)
        network.setFaults(device.index, faults)
        network.setRequestCost(device.index, cost)
        let deadline = device.store.now().date.addingTimeInterval(TimeInterval(seconds))
        let report = await device.engine.syncInBackgroundWindow(until: deadline)
        network.setRequestCost(device.index, nil)
        network.setFaults(device.index, nil)
        counts.windows += 1
        let crashed = network.takeCrash(device.index)
        let requests = network.requestCount(device.index) - requestsBefore
        let margin = BackgroundWindowSettings().safetyMargin
        log(
            "device \(device.index) window of \(seconds) s (requests of \(Int(cost)) s\(faults == nil ? "" : ", faulty network")): "
                + "pushed \(report.pushed), pulled \(report.pulled), \(requests) requests, "
                + (report.skipped.map { "skipped: \($0)" } ?? report.error.map { "failed: \($0.code.rawValue)" }
                    ?? (report.finished ? "finished" : "stopped, \(report.remainingWrites) writes and \(report.scopesLeftToPull.count) scopes left")))
        if report.skipped != nil, requests > 0 {
            throw SimFailure(invariant: "window-obeys-preferences", message: "device \(device.index)'s skipped window made \(requests) requests")
        }
        if !crashed, report.ended > report.deadline.addingTimeInterval(-margin) {
            throw SimFailure(
                invariant: "window-deadline",
                message:
                    "device \(device.index)'s window ended \(report.ended.timeIntervalSince(report.deadline)) s after its deadline (margin \(margin) s)"
            )
        }
        if report.stoppedForDeadline {
            counts.windowsStopped += 1
            if await device.engine.currentStatus.deferred != .backgroundWindowEnded, !crashed {
                throw SimFailure(invariant: "window-deadline", message: "device \(device.index)'s window stopped and its status does not say so")
            }
        }
        if let error = report.error {
            if error.code == ErrorCode("store"), !crashed {
                throw SimFailure(
                    invariant: "store-healthy", message: "device \(device.index)'s store failed in a window without a crash: \(error.message)")
            }
            try await afterEngineRan(device)
        }
        if crashed {
            try device.restart()
            counts.deviceCrashes += 1
            log("device \(device.index) crashed in its window and restarted")
        } else if killedAtEnd {
            try device.restart()
            counts.killedAtWindowEnd += 1
            log("device \(device.index) killed at its window's end and restarted")
        }
    }

    /// The user's battery saver goes on or off. Going off, what it held runs at once (an
    /// automatic sync, when the preferences allow it): waited for, so the next step starts after it.
    private func setLowPower(_ device: SimDevice, on: Bool) async throws {
        var preferences = await device.engine.syncPreferences
        guard preferences.lowPowerMode != on else {
            log("device \(device.index)'s low-power mode stays \(on ? "on" : "off")")
            return
        }
        preferences.lowPowerMode = on
        let requestsBefore = network.requestCount(device.index)
        do {
            try await device.engine.setPreferences(preferences)
        } catch {
            log("device \(device.index) could not save its low-power mode: \(error)")
            return
        }
        await device.engine.settle()
        counts.lowPowerToggles += 1
        let requests = network.requestCount(device.index) - requestsBefore
        if on, requests > 0 {
            throw SimFailure(invariant: "low-power-obeyed", message: "device \(device.index) made \(requests) requests as low-power mode went on")
        }
        log("device \(device.index)'s low-power mode \(on ? "on" : "off")\(requests > 0 ? ": what it held synced, \(requests) requests" : "")")
        if requests > 0 { try await afterEngineRan(device) }
    }

    /// The app subscribes (TTLs of minutes to two hours; up to 45 minutes on the device that
    /// syncs no team scope) or ends a subscription. A device that syncs every scope picks among
    /// the incidents it sees (or one that never is); the one that syncs no team scope among
    /// those the server holds, or an id a later incident may take.
    private func changeSubscriptions(_ device: SimDevice, salt: UInt64) async throws {
        var random = SimRandom(seed: salt)
        let held = try device.store.subscriptions().filter(\.isActive)
        if !held.isEmpty, random.chance(device.isSubscriber ? 45 : 40), let ended = random.pick(held) {
            try device.unsubscribe(ended)
            counts.subscriptionsEnded += 1
            log(
                "device \(device.index) ends its subscription \(ended.request.name) \(ended.request.parameters) (TTL \(ended.ttl), \(ended.rowCount) rows held)"
            )
        } else if random.chance(device.isSubscriber ? 25 : 30) {
            let ttl = 60 * (1 + random.below(device.isSubscriber ? 45 : 120))
            try await device.subscribe(Subscriptions.assignedIncidents(), ttlSeconds: ttl)
            log("device \(device.index) subscribes to its user's assigned incidents (TTL \(ttl) s)")
        } else {
            let id: String
            if device.isSubscriber {
                let existing = try await serverRows(Incident.descriptor).filter { !$0.isDeleted }.compactMap { $0.text("id") }
                id = random.chance(80) ? (random.pick(existing) ?? "inc-1") : "inc-\(1 + random.below(serial + 20))"
            } else {
                let known = try device.store.all(Incident.self).map(\.id)
                id = random.chance(70) ? (random.pick(known) ?? "no-incident") : "incident-\(random.below(40))"
            }
            let ttl = 60 * (1 + random.below(device.isSubscriber ? 45 : 120))
            try await device.subscribe(Subscriptions.incident(id: id), ttlSeconds: ttl)
            log("device \(device.index) subscribes to incident \(id) (TTL \(ttl) s)")
        }
    }

    // MARK: Identity: erasure and revocation

    /// An admin erases `user`'s data and adds them back to the team. Right after, a new device
    /// of the user finds nothing of their own scope on the server.
    private func erase(user: String) async throws {
        let auditBefore = try await auditEntries().last?.id ?? 0
        let clients = Set(try await clientStreams(of: user))
        let response = await server.admin(.delete, "/admin/v1/users/\(user)")
        guard response.status == 200, case .object(let report)? = JSONParser.parse(String(decoding: response.body, as: UTF8.self)),
            case .int(let erasedAt)? = report["erased_at"]
        else {
            throw SimFailure(
                invariant: "erasure", message: "erasing \(user) answered \(response.status): \(String(decoding: response.body, as: UTF8.self))")
        }
        network.erased(user: user, at: erasedAt)
        erasures.append((user, erasedAt, auditBefore, clients))
        counts.erasures += 1
        // Membership is not data the erasure keeps: the user comes back to the team.
        let member = await server.admin(.put, "/admin/v1/teams/\(SimServer.team)/members/\(user)")
        guard member.status == 204 else { throw SimFailure(invariant: "erasure", message: "adding \(user) back answered \(member.status)") }
        for device in devices where device.user == user {
            // Their audit details are erased with the rest: what they were told is done cannot be read back.
            device.toldDone = []
            // The server's channel revalidation closes their channels within a minute.
            device.live?.close()
            device.live = nil
            device.heldPokes = []
        }
        log("admin erased \(user) at \(erasedAt): \(report["rows_erased"].map { "\($0)" } ?? "?") rows")
        // A token issued in the erasure's second is refused with the rest.
        clock.advance(by: 1)
        let observer = try SimDevice(
            index: 200 + counts.erasures, user: user, deviceID: "erasure-check-\(counts.erasures)", root: root, network: network,
            clock: clock.device(skew: 0), seed: 1
        )
        defer { observer.close() }
        let result = await observer.engine.syncNow()
        guard case .succeeded = result else {
            throw SimFailure(invariant: "erased-gone", message: "a new device of \(user) could not download after the erasure: \(result)")
        }
        let left =
            try observer.store.count(AssessmentResponse.self) + observer.store.count(Attempt.self) + observer.store.count(CompletionRecord.self)
        if left > 0 {
            throw SimFailure(invariant: "erased-gone", message: "\(left) rows of \(user)'s own scope are still on the server after the erasure")
        }
    }

    /// The push streams of `user` the server has recorded a push of, from the audit log.
    private func clientStreams(of user: String) async throws -> [String] {
        var clients: Set<String> = []
        for entry in try await auditEntries() where entry.userID == user && !entry.detail.isEmpty {
            for change in try AuditedChange.changes(of: entry, readableDetail: entry.detail) {
                if case .string(let client)? = change.detail["client_id"] { clients.insert(client) }
            }
        }
        return clients.sorted()
    }

    private func revoke(_ device: SimDevice) async throws {
        let response = await server.admin(.post, "/admin/v1/revocations", body: Data(#"{"device":"\#(device.deviceID)"}"#.utf8))
        guard response.status == 200 else {
            throw SimFailure(invariant: "revocation", message: "revoking device \(device.index) answered \(response.status)")
        }
        network.revoked(deviceID: device.deviceID, at: clock.seconds)
        device.isRevoked = true
        device.transport.revoke()
        device.live?.close()
        device.live = nil
        counts.revocations += 1
        log("admin revoked device \(device.index)")
    }

    private func reenrol(_ device: SimDevice) {
        guard device.isRevoked else { return log("device \(device.index) is enrolled already") }
        // A re-enrolment token is dated past the revocation's leeway, which the server takes
        // once its clock is a second past the revocation: an operator is never quicker.
        if let revoked = network.revokedAt(deviceID: device.deviceID), clock.seconds <= revoked {
            clock.advance(by: TimeInterval(revoked + 1 - clock.seconds))
        }
        device.isRevoked = false
        device.transport.enrol()
        log("device \(device.index) enrolled again")
    }

    /// After an engine ran: when it heard 410 `user_erased`, its store must be gone from disk;
    /// when the app's sign-in said the account was erased instead (the device's token had
    /// expired: it never heard the 410), the app wipes the store itself. The user then signs in
    /// again with a new store.
    private func afterEngineRan(_ device: SimDevice) async throws {
        if device.transport.takeAccountErased(), !(await device.engine.currentStatus.accountErased) {
            do { try device.store.signOut(force: true) } catch .signedOut {} catch {
                throw SimFailure(invariant: "erased-wiped", message: "device \(device.index)'s app could not wipe the erased account: \(error)")
            }
            log("device \(device.index)'s sign-in says the account was erased: the app wipes its store")
        } else if !(await device.engine.currentStatus.accountErased) {
            return
        }
        for file in device.databaseFiles where FileManager.default.fileExists(atPath: file.path) {
            throw SimFailure(
                invariant: "erased-wiped", message: "device \(device.index) heard its user was erased, and \(file.lastPathComponent) is still there")
        }
        counts.wipes += 1
        clock.advance(by: 1)
        try device.signInAgain()
        if device.isRevoked { device.transport.revoke() }
        log("device \(device.index) wiped its store and signed in again")
    }

    // MARK: Server housekeeping

    /// The data horizons, short enough for a schedule's days: push results kept minutes to
    /// hours, tombstones minutes to days.
    private func runHousekeeping(salt: UInt64) async throws {
        var random = SimRandom(seed: salt)
        let results = 600 * (1 + random.below(48))
        let tombstones = random.chance(50) ? 300 * (1 + random.below(24)) : 3_600 * (1 + random.below(48))
        let housekeeping = ServerHousekeeping(
            storage: server.storage,
            horizons: ServerHousekeeping.Horizons(pushResultRetention: .seconds(results), tombstoneHorizon: .seconds(tombstones)),
            batchSize: 1 + random.below(8)
        )
        let done = try await housekeeping.run(now: clock.date)
        counts.housekeepingRuns += 1
        log("server housekeeping (push results \(results) s, tombstones \(tombstones) s): \(done)")
    }

    // MARK: Live channel, automatic syncs

    /// The pokes the device's channel received since the last time (opened first when it has
    /// none), with those held back before: each delivered, dropped or held again. Delivered
    /// ones start the automatic sync the engine's poke handler starts (its live loop itself
    /// runs on real-time tasks, outside a deterministic run).
    private func deliverPokes(_ device: SimDevice, salt: UInt64) async throws {
        if device.live?.isOpen != true {
            device.live?.close()
            device.live = nil
            do {
                device.live = try await device.transport.openLive()
                log("device \(device.index) opened its live channel")
            } catch {
                log("device \(device.index)'s live channel refused: \(error.detail.code.rawValue)")
                if error.isUserErased {
                    // The engine's live loop syncs on hearing it: the sync wipes the store.
                    await device.engine.appDidBecomeActive()
                    try await afterEngineRan(device)
                }
                return
            }
        }
        guard let live = device.live else { return }
        // Every commit since the channel opened in a scope the device reads must be poked to it.
        let keys = SimServer.readableKeys(user: device.user)
        let expected = server.committed.current.filter { keys.contains($0.key) && $0.value > (live.committedAtOpening[$0.key] ?? 0) }
        guard await live.settle(expected) else {
            throw SimFailure(
                invariant: "poked", message: "device \(device.index)'s open channel did not hear of every commit in its scopes: \(expected)")
        }
        var random = SimRandom(seed: salt)
        var delivered: [String: Int64] = [:]
        var held: [LiveEvent] = []
        for event in device.heldPokes + live.take() {
            guard case .change(let scope, let sequence) = event else { continue }
            switch random.below(10) {
            case 0..<6:
                delivered[scope] = max(delivered[scope] ?? 0, sequence)
                counts.pokesDelivered += 1
            case 6..<8: counts.pokesLost += 1
            default: held.append(event)
            }
        }
        device.heldPokes = held
        log("device \(device.index) pokes: \(delivered.count) scopes delivered, \(held.count) held")
        guard !delivered.isEmpty else { return }
        try await runAutomaticSync(device, expensive: false, poked: true)
    }

    /// The engine syncs by itself on a path drawn from `salt`.
    private func automaticSync(_ device: SimDevice, salt: UInt64) async throws {
        var random = SimRandom(seed: salt)
        try await runAutomaticSync(device, expensive: random.chance(50), poked: false)
    }

    /// One automatic sync (on a poke, or the app coming to the foreground): it must not run when
    /// the preferences pause it (Wi-Fi only on an expensive path, the day's data budget used),
    /// and must run otherwise.
    private func runAutomaticSync(_ device: SimDevice, expensive: Bool, poked: Bool) async throws {
        let preferences = await device.engine.syncPreferences
        let lowPower = await device.engine.isLowPowerMode
        let used = try device.store.automaticDataUsage().bytes
        let paused = (expensive && !preferences.allowsExpensiveNetwork) || preferences.dailyAutomaticDataBudget.map { used >= $0 } == true
        let requestsBefore = network.requestCount(device.index)
        // The path the monitor reports, then the trigger (a path change online starts one too).
        await device.engine.pathChanged(NetworkPath(isOnline: true, isExpensive: expensive))
        await device.engine.appDidBecomeActive()
        counts.automaticSyncs += 1
        let requests = network.requestCount(device.index) - requestsBefore
        if paused {
            counts.automaticSyncsPaused += 1
            if requests > 0 {
                throw SimFailure(
                    invariant: "preferences-obeyed",
                    message:
                        "device \(device.index) synced by itself (\(requests) requests) though its preferences pause it (expensive: \(expensive), \(used) bytes used, \(preferences))"
                )
            }
            log("device \(device.index)'s automatic sync paused by its preferences")
            return
        }
        if lowPower {
            // Low-power mode: only the timer syncs by itself; the foreground and a reconnect wait for it.
            counts.automaticSyncsHeldForPower += 1
            if requests > 0 {
                throw SimFailure(
                    invariant: "low-power-obeyed", message: "device \(device.index) synced by itself (\(requests) requests) in low-power mode")
            }
            guard case .lowPowerMode? = await device.engine.currentStatus.deferred else {
                throw SimFailure(invariant: "low-power-obeyed", message: "device \(device.index)'s status does not say low-power mode holds its sync")
            }
            log("device \(device.index)'s automatic sync held by low-power mode")
            return
        }
        if requests == 0, !network.isPartitioned(device.index) {
            throw SimFailure(
                invariant: "automatic-sync-runs", message: "device \(device.index)'s automatic sync made no request though nothing pauses it")
        }
        try await afterEngineRan(device)
        log("device \(device.index) synced by itself\(poked ? " on a poke" : ""): \(requests) requests")
    }

    private func sync(_ device: SimDevice, faults: SimRandom?) async throws {
        network.setFaults(device.index, faults)
        let result = await device.engine.syncNow()
        network.setFaults(device.index, nil)
        counts.syncs += 1
        let crashed = network.takeCrash(device.index)
        switch result {
        case .succeeded(let pushed, let pulled):
            log("device \(device.index) synced: pushed \(pushed), pulled \(pulled)")
        case .failed(let error, _):
            counts.failedSyncs += 1
            log("device \(device.index) sync failed: \(error.detail.code.rawValue) \(error.detail.message)")
            if let status = error.status, status >= 500 {
                throw SimFailure(invariant: "no-server-error", message: "device \(device.index) got HTTP \(status): \(error.detail.message)")
            }
            try await afterEngineRan(device)
        case .storeFailed(let message):
            counts.failedSyncs += 1
            log("device \(device.index) store failed: \(message)")
            if !crashed {
                throw SimFailure(invariant: "store-healthy", message: "device \(device.index)'s store failed without a crash: \(message)")
            }
        }
        if crashed {
            try device.restart()
            counts.deviceCrashes += 1
            log("device \(device.index) crashed mid-sync and restarted")
        }
    }

    private func publishContent(salt: UInt64) async -> String {
        var random = SimRandom(seed: salt)
        let unit = "unit-\(random.below(4))"
        do {
            switch random.below(5) {
            case 0, 1:
                _ = try await server.content.publish(
                    entity: "Unit",
                    row: .object([
                        "id": .string(unit), "title": .string("Unit \(random.below(100))"),
                        "learner_level": .string(Unit.LearnerLevel.allCases[random.below(3)].rawValue),
                    ]),
                    identity: SimServer.admin
                )
                return "published \(unit)"
            case 2, 3:
                let lesson = "\(unit)-lesson-\(random.below(3))"
                _ = try await server.content.publish(
                    entity: "Lesson",
                    row: .object([
                        "id": .string(lesson), "unit_id": .string(unit), "title": .string("Lesson \(random.below(100))"),
                        "sort_index": .int(Int64(random.below(10))), "lesson_kind": .string("reading"),
                    ]),
                    identity: SimServer.admin
                )
                return "published \(lesson)"
            default:
                try await server.content.delete(entity: "Unit", id: unit, identity: SimServer.admin)
                return "withdrew \(unit)"
            }
        } catch {
            return "refused: \(error)"
        }
    }

    // MARK: Invariants after every step

    /// What must hold at every moment: nothing pending is purged, cursors never go back, no
    /// write is applied twice.
    private func checkAfterStep() async throws {
        if let violation = network.takeIdentityViolations().first {
            throw SimFailure(invariant: "identity-refused", message: violation)
        }
        for device in devices {
            // A re-download after 410 cursor_expired starts the scope again from scratch.
            if network.takeCursorExpiry(device.index) {
                counts.cursorExpiries += 1
                device.cursorSequences = [:]
            }
            let entries: [OutboxEntry]
            do { entries = try device.store.outboxEntries() } catch {
                throw SimFailure(invariant: "store-healthy", message: "device \(device.index) cannot list its outbox: \(error)")
            }
            var now: [String: OutboxStatus] = [:]
            for entry in entries { now[entry.clientMutationId] = entry.status }
            for (id, status) in device.lastStatus where OutboxStatus.unsynced.contains(status) && now[id] == nil {
                throw SimFailure(
                    invariant: "pending-kept", message: "device \(device.index)'s write \(id), last seen \(status.rawValue), is gone from its outbox"
                )
            }
            for (id, status) in now where status == .done { device.toldDone.insert(id) }
            device.lastStatus = now
            try checkPendingRowsKept(device, entries)
            try await checkRowsHeldByWrites(device, entries)
            if device.isSubscriber {
                let incidents = try device.store.all(Incident.self).map { "Incident \($0.id)" }
                let rows = Set(incidents + (try device.store.all(ServiceAsset.self).map { "ServiceAsset \($0.id)" }))
                counts.subscriberRowsLeft += device.teamRowsSeen.subtracting(rows).count
                device.teamRowsSeen = rows
            }

            for scope in device.scopes {
                guard let text = try device.store.cursor(forScope: scope) else { continue }
                let sequence: Int64
                do { sequence = try SyncCursor(encoded: text).sequence } catch {
                    throw SimFailure(invariant: "cursor-forward", message: "device \(device.index) stores an unreadable cursor for \(scope)")
                }
                if let previous = device.cursorSequences[scope], sequence < previous {
                    throw SimFailure(
                        invariant: "cursor-forward", message: "device \(device.index)'s \(scope) cursor went back from \(previous) to \(sequence)"
                    )
                }
                device.cursorSequences[scope] = sequence
            }
        }
        _ = try await appliedMutations()
    }

    /// Housekeeping never evicts (retention, row limits, the database budget) a row whose write
    /// is still to be sent: each unsent create, update or patch has its row, unless the app
    /// deleted it since.
    private func checkPendingRowsKept(_ device: SimDevice, _ entries: [OutboxEntry]) throws {
        let unsent = entries.filter { [.pending, .sending, .waiting].contains($0.status) }
        let deleted = Set(unsent.filter { $0.op == .delete }.map { "\($0.entity) \($0.rowId)" })
        for entry in unsent where entry.op != .delete && !deleted.contains("\(entry.entity) \(entry.rowId)") {
            let present: Bool
            switch entry.entity {
            case ServiceAsset.descriptor.name: present = try device.store.fetch(ServiceAsset.self, id: entry.rowId) != nil
            case Incident.descriptor.name: present = try device.store.fetch(Incident.self, id: entry.rowId) != nil
            case FieldTask.descriptor.name: present = try device.store.fetch(FieldTask.self, id: entry.rowId) != nil
            case AssessmentResponse.descriptor.name: present = try device.store.fetch(AssessmentResponse.self, id: entry.rowId) != nil
            default: continue
            }
            if !present {
                throw SimFailure(
                    invariant: "pending-kept",
                    message:
                        "device \(device.index)'s row \(entry.entity) \(entry.rowId) is gone while its \(entry.op.rawValue) (\(entry.clientMutationId)) is still \(entry.status.rawValue)"
                )
            }
        }
    }

    /// A row whose write is not on the server yet (pending, sending, waiting, conflicted, failed)
    /// is never evicted, whatever subscriptions let go of it meanwhile: an incident or asset
    /// that was on the device with such a write at the last check is still there, unless the
    /// app deleted it or the server did (a pull, or settling a conflict, may then take it).
    private func checkRowsHeldByWrites(_ device: SimDevice, _ entries: [OutboxEntry]) async throws {
        let unsynced = entries.filter { OutboxStatus.unsynced.contains($0.status) }
        let deleted = Set(unsynced.filter { $0.op == .delete }.map { "\($0.entity) \($0.rowId)" })
        var held: Set<String> = []
        for entry in unsynced where entry.op != .delete {
            let key = "\(entry.entity) \(entry.rowId)"
            guard !deleted.contains(key), !held.contains(key) else { continue }
            let descriptor: EntityDescriptor
            let present: Bool
            switch entry.entity {
            case Incident.descriptor.name:
                (descriptor, present) = (Incident.descriptor, try device.store.fetch(Incident.self, id: entry.rowId) != nil)
            case ServiceAsset.descriptor.name:
                (descriptor, present) = (ServiceAsset.descriptor, try device.store.fetch(ServiceAsset.self, id: entry.rowId) != nil)
            default: continue
            }
            if present {
                held.insert(key)
                continue
            }
            guard device.rowsHeldByWrites.contains(key), let row = try await serverRow(descriptor, id: entry.rowId), !row.isDeleted else { continue }
            let subscriptions = try device.store.subscriptions().map {
                "\($0.request.name) \($0.request.parameters) (\($0.isActive ? "active" : "ended"))"
            }
            throw SimFailure(
                invariant: "subscription-evicted-held",
                message:
                    "device \(device.index)'s \(key) is gone while its \(entry.op.rawValue) (\(entry.clientMutationId)) is \(entry.status.rawValue) and the server still has the row; its subscriptions: \(subscriptions)"
            )
        }
        device.rowsHeldByWrites = held
    }

    /// The server's row of `entity` with this key (a tombstone too), read from its database.
    private func serverRow(_ entity: EntityDescriptor, id: String) async throws -> StoredRow? {
        try await server.storage.read { reader in try await reader.row(in: ContractTable(entity), tenant: SimServer.tenant, id: id) }
    }

    /// Every row of `entity` the server holds (tombstones too), read from its database.
    private func serverRows(_ entity: EntityDescriptor) async throws -> [StoredRow] {
        try await server.storage.read { reader in
            try await reader.rows(in: ContractTable(entity), tenant: SimServer.tenant, where: [:], limit: 1_000_000)
        }
    }

    /// Every push outcome in the audit log, by client mutation id; fails when one was applied twice.
    private func appliedMutations() async throws -> [String: [String]] {
        let entries = try await auditEntries()
        var outcomes: [String: [String]] = [:]
        // A push's entry lists its mutations (and the rows its reducers wrote, `fold`).
        for entry in entries where !entry.detail.isEmpty {
            for change in try AuditedChange.changes(of: entry, readableDetail: entry.detail) where change.operation != .fold {
                guard case .string(let id)? = change.detail["client_mutation_id"], case .string(let status)? = change.detail["status"] else {
                    continue
                }
                outcomes[id, default: []].append(status)
                // A push stream of an erased user never writes again: its device must wipe first.
                if status == "applied", case .string(let client)? = change.detail["client_id"],
                    let erasure = erasures.first(where: { entry.id > $0.auditBefore && $0.clients.contains(client) })
                {
                    throw SimFailure(
                        invariant: "erased-stays-erased",
                        message:
                            "\(erasure.user)'s push stream \(client) wrote \(change.entity) \(change.rowID) (\(id)) after the erasure at \(erasure.at)"
                    )
                }
            }
        }
        for (id, statuses) in outcomes where statuses.filter({ $0 == "applied" }).count > 1 {
            throw SimFailure(invariant: "exactly-once", message: "mutation \(id) was applied \(statuses.count) times: \(statuses)")
        }
        return outcomes
    }

    private func auditEntries() async throws -> [AuditEntry] {
        var all: [AuditEntry] = []
        var after: Int64 = 0
        while true {
            // Details are stored encrypted per user: the invariants read them in clear.
            let key = server.storage.auditKey
            let page = try await server.storage.read { [after] reader in
                var page = try await reader.auditEntries(after: after, limit: 1_000)
                for (index, detail) in try await AuditChain.readableDetails(of: page, in: reader, key: key).enumerated() {
                    page[index].detail = detail ?? ""
                }
                return page
            }
            all.append(contentsOf: page)
            guard let last = page.last, page.count == 1_000 else { return all }
            after = last.id
        }
    }

    private func checkAuditChain() async throws {
        let verification = try await AuditChain.verify(server.storage)
        if case .broken(let entry, let reason) = verification {
            throw SimFailure(invariant: "audit-verifies", message: "the audit chain breaks at entry \(entry): \(reason)")
        }
    }

    // MARK: Quiescence

    /// The network heals, held requests arrive, and the devices sync and settle their conflicts
    /// until nothing is left to send.
    private func quiesce() async throws {
        switch sabotage {
        case .dropPendingWrite?: try dropNewestPendingWrite(devices[0])
        case .forgetServerRow?: try await forgetAServerRow()
        case .dropSubscribedRow?: try dropASubscribedRow()
        case nil: break
        }
        network.healPartitions()
        for device in devices {
            network.setFaults(device.index, nil)
            // The owner gets a revoked device back and enrols it again.
            if device.isRevoked { reenrol(device) }
        }
        await network.deliverAllHeld()
        log("quiescence: the network heals")
        var quietRounds = 0
        for round in 0..<12 {
            clock.advance(by: 60)
            for device in devices {
                let result = await device.engine.syncNow()
                counts.syncs += 1
                log("quiescence round \(round): device \(device.index): \(result)")
                if case .failed = result, await device.engine.currentStatus.accountErased || device.transport.accountErasedPending {
                    try await afterEngineRan(device)
                    continue
                }
                guard case .succeeded = result else {
                    throw SimFailure(invariant: "quiescence", message: "device \(device.index)'s sync on a healed network: \(result)")
                }
            }
            try await checkAfterStep()
            var busy = false
            for device in devices {
                if try !device.store.conflicts().isEmpty {
                    busy = true
                    let conflicted = Set(device.lastStatus.filter { $0.value == .conflicted }.keys)
                    let salt = schedule.seed &+ UInt64(round * 31 + device.index)
                    log("device \(device.index): " + SimWorkload.resolveConflicts(device.store, salt: salt))
                    counts.conflictsResolved += 1
                    for id in conflicted { device.lastStatus[id] = nil }
                }
                if try device.store.outboxCounts().unsent > 0 { busy = true }
            }
            quietRounds = busy ? 0 : quietRounds + 1
            // Two quiet rounds: the last writes pushed, then pulled by every device.
            if quietRounds == 2 { return }
        }
        let stuck = try devices.map {
            "device \($0.index): \(try $0.store.outboxCounts().unsent) unsent, \(try $0.store.conflicts().count) conflicts"
        }
        throw SimFailure(invariant: "nothing-stuck", message: "still busy after 12 rounds on a healed network: \(stuck.joined(separator: "; "))")
    }

    // MARK: Invariants at quiescence

    private func checkAtQuiescence() async throws {
        // No write lost or stuck: each ends done, or failed with a reason the app can show.
        for device in devices {
            for entry in try device.store.outboxEntries() {
                switch entry.status {
                case .done: break
                case .failed:
                    guard let error = entry.lastError, !error.code.rawValue.isEmpty, !error.message.isEmpty else {
                        throw SimFailure(
                            invariant: "nothing-stuck", message: "device \(device.index)'s write \(entry.clientMutationId) failed without a reason")
                    }
                default:
                    throw SimFailure(
                        invariant: "nothing-stuck",
                        message:
                            "device \(device.index)'s write \(entry.clientMutationId) (\(entry.entity) \(entry.op.rawValue) \(entry.rowId)) is still \(entry.status.rawValue)"
                    )
                }
            }
        }
        // Exactly once: every write a device was told is done reached the server (applied,
        // found to be a duplicate of what is there, or conflicted and then settled by the app),
        // and none was applied twice (``appliedMutations()``).
        let outcomes = try await appliedMutations()
        for device in devices {
            for id in device.toldDone.sorted() where (outcomes[id] ?? []).isEmpty {
                throw SimFailure(invariant: "exactly-once", message: "device \(device.index) was told \(id) is done; the server never recorded it")
            }
        }
        try checkSubscriptions()
        try await checkVersionCheckedUpdates()
        try await checkAuditChain()
        try await checkConvergence()
        counts.auditEntries = try await auditEntries().count
    }

    /// Subscriptions at quiescence: the store holds exactly those the app made whose TTL has not
    /// passed (the last sync deleted the others), active or ended as the app left them; every
    /// active one synced whole, and every row one holds on the device (none evicted while held,
    /// none held that is gone).
    private func checkSubscriptions() throws {
        for device in devices {
            let now = device.store.now().millisecondsSince1970
            let statuses = try device.store.subscriptions()
            let stored = Dictionary(statuses.map { (SimDevice.Subscribed.key($0.request), $0) }, uniquingKeysWith: { first, _ in first })
            if stored.count != statuses.count {
                throw SimFailure(
                    invariant: "subscriptions-exact",
                    message: "device \(device.index) holds two subscriptions of one name and parameters: \(statuses.map(\.request))")
            }
            for (key, made) in device.subscribed.sorted(by: { $0.key < $1.key }) {
                let status = stored[key]
                let state = made.endedAt.map { "ended at \($0)" } ?? "active"
                let what = "device \(device.index)'s subscription \(key) (TTL \(made.ttlSeconds) s, \(state), now \(now))"
                if made.hasExpired(at: now) {
                    if let status {
                        throw SimFailure(invariant: "subscriptions-exact", message: "\(what) is still held after its TTL passed: \(status)")
                    }
                    continue
                }
                guard let status else { throw SimFailure(invariant: "subscriptions-exact", message: "\(what) is gone before its TTL passed") }
                if let error = status.error { throw SimFailure(invariant: "subscriptions-exact", message: "\(what) was refused: \(error)") }
                if status.isActive != (made.endedAt == nil) {
                    throw SimFailure(invariant: "subscriptions-exact", message: "\(what) is \(status.isActive ? "active" : "ended") in the store")
                }
            }
            for key in stored.keys.sorted() where device.subscribed[key] == nil {
                throw SimFailure(invariant: "subscriptions-exact", message: "device \(device.index) holds a subscription it never made: \(key)")
            }
            for status in try device.store.subscriptions() where status.isActive && status.error == nil {
                guard status.hasSynced else {
                    throw SimFailure(
                        invariant: "subscriptions-synced", message: "device \(device.index)'s subscription \(status.request.name) never synced")
                }
                for (entity, ids) in try device.store.subscriptionRowIDs(id: status.id) {
                    func present(_ id: String) throws -> Bool {
                        switch entity {
                        case Incident.descriptor.name: try device.store.fetch(Incident.self, id: id) != nil
                        case ServiceAsset.descriptor.name: try device.store.fetch(ServiceAsset.self, id: id) != nil
                        default: true
                        }
                    }
                    for id in ids where try !present(id) {
                        throw SimFailure(
                            invariant: "subscriptions-held",
                            message: "device \(device.index)'s subscription holds \(entity) \(id), which is not on the device")
                    }
                }
            }
        }
    }

    /// Under `version_check`, an update applied on a stale version would be a lost update: each
    /// applied change of a task must be based on the version the one before it produced.
    private func checkVersionCheckedUpdates() async throws {
        var versions: [String: Int64] = [:]
        for entry in try await auditEntries() where entry.entity == FieldTask.descriptor.name {
            guard case .object(let detail)? = JSONParser.parse(entry.detail) else {
                // Erased with its author's data: the next change is checked from its answer on.
                versions[entry.rowID] = nil
                continue
            }
            if entry.operation == .fold {
                versions[entry.rowID] = nil  // a reducer moved it; the next change is checked from its answer on
                continue
            }
            guard case .string("applied")? = detail["status"] else { continue }
            if entry.operation != .create, case .int(let base)? = detail["base_version"], let known = versions[entry.rowID], base != known {
                throw SimFailure(
                    invariant: "no-lost-update",
                    message: "task \(entry.rowID): \(entry.operation) based on version \(base) was applied over version \(known) without a conflict"
                )
            }
            if case .int(let version)? = detail["server_version"] { versions[entry.rowID] = version }
        }
    }

    /// Every device holds what a new device of its user downloads from scratch, scope by scope.
    private func checkConvergence() async throws {
        var observers: [String: SimDevice] = [:]
        defer { for observer in observers.values { observer.close() } }
        for user in Set(devices.map(\.user)).sorted() {
            let observer = try SimDevice(
                index: 100 + observers.count, user: user, deviceID: "observer-\(user)", root: root, network: network,
                clock: clock.device(skew: 0), seed: 1
            )
            let result = await observer.engine.syncNow()
            guard case .succeeded = result else {
                throw SimFailure(invariant: "converged", message: "a new device of \(user) could not download: \(result)")
            }
            observers[user] = observer
        }
        for device in devices {
            let reference = observers[device.user]!.store
            let label = "device \(device.index) (\(device.user))"
            if device.isSubscriber {
                try await checkSubscribedRowsExact(device, reference: reference)
            } else {
                try compare(ServiceAsset.self, device.store, reference, label)
                try compare(Incident.self, device.store, reference, label)
                try compare(FieldTask.self, device.store, reference, label)
            }
            try compare(AssessmentResponse.self, device.store, reference, label)
            try compare(Attempt.self, device.store, reference, label)
            try compare(CompletionRecord.self, device.store, reference, label)
            try compare(Unit.self, device.store, reference, label)
            try compare(Lesson.self, device.store, reference, label)
        }
    }

    /// On the device that syncs no team scope, after the last sync, the team's rows are exactly
    /// those its subscriptions select on the server plus those its unsynced writes keep:
    /// - an active `incident(id:)` selects the server's incident with that id and the asset it
    ///   names, `assigned_incidents` the incidents assigned to the device's user (tombstones
    ///   select nothing); each such row is on the device, as the server (a new device of the
    ///   user, `reference`) has it, unless a write of it is not on the server yet or housekeeping
    ///   dropped it at the end of its retention at the version the server still has;
    /// - an ended subscription whose TTL has not passed is pulled no more since it ended: the
    ///   rows it still holds may stay, as they were;
    /// - nothing else: a row no subscription holds and no write not yet on the server keeps is
    ///   gone (evicted when a subscription let go of it, or when its write reached the server).
    private func checkSubscribedRowsExact(_ device: SimDevice, reference: OfflineStore) async throws {
        var byID: [String: [String: StoredRow]] = [:]
        for entity in [Incident.descriptor, ServiceAsset.descriptor, FieldTask.descriptor] {
            for row in try await serverRows(entity) where !row.isDeleted {
                if let id = row.text(entity.primaryKey) { byID[entity.name, default: [:]][id] = row }
            }
        }
        let incidents = byID[Incident.descriptor.name] ?? [:]
        let assets = byID[ServiceAsset.descriptor.name] ?? [:]
        // Why each row may (or must) be on the device, by entity and key.
        var selected: [String: [String: String]] = [:]
        var mayStay: [String: [String: String]] = [:]
        for status in try device.store.subscriptions() where status.error == nil {
            let name = "\(status.request.name) \(status.request.parameters)"
            guard status.isActive else {
                for (entity, ids) in try device.store.subscriptionRowIDs(id: status.id) {
                    for id in ids { mayStay[entity, default: [:]][id] = "held by the ended subscription \(name)" }
                }
                continue
            }
            var roots: [StoredRow] = []
            switch status.request.name {
            case "incident":
                if case .string(let id)? = status.request.parameters["id"], let row = incidents[id] { roots = [row] }
            case "assigned_incidents":
                roots = incidents.values.filter { $0.text("assignee_id") == device.user }
            default:
                continue
            }
            for root in roots {
                guard let id = root.text("id") else { continue }
                selected[Incident.descriptor.name, default: [:]][id] = "selected by \(name)"
                if status.request.name == "incident", let asset = root.text("service_asset_id"), assets[asset] != nil {
                    selected[ServiceAsset.descriptor.name, default: [:]][asset] = "selected by \(name) through incident \(id)"
                }
            }
        }
        var unsynced: [String: [String: OutboxEntry]] = [:]
        for entry in try device.store.outboxEntries() where OutboxStatus.unsynced.contains(entry.status) {
            unsynced[entry.entity, default: [:]][entry.rowId] = entry
        }
        let label = "device \(device.index) (\(device.user), no team scope)"
        func check<E: ContractEntity>(_ type: E.Type) throws {
            let name = E.descriptor.name
            let mine = Dictionary(uniqueKeysWithValues: try device.store.all(E.self).map { ($0.contractPrimaryKey, $0) })
            let dropped = try device.store.droppedRows(E.self)
            let writes = unsynced[name] ?? [:]
            for (id, why) in (selected[name] ?? [:]).sorted(by: { $0.key < $1.key }) where writes[id] == nil {
                guard let row = mine[id] else {
                    if let drop = dropped[id], drop.serverVersion == byID[name]?[id]?.integer("_version") { continue }
                    throw SimFailure(invariant: "subscriptions-exact", message: "\(label) lacks \(name) \(id), \(why)")
                }
                let theirs = try reference.fetch(E.self, id: id)
                if row != theirs {
                    throw SimFailure(
                        invariant: "subscriptions-exact",
                        message:
                            "\(label) holds \(name) \(id) (\(why)) unlike the server: device \(row), server \(theirs.map { "\($0)" } ?? "has none")"
                    )
                }
            }
            for id in mine.keys.sorted() where selected[name]?[id] == nil && mayStay[name]?[id] == nil && writes[id] == nil {
                let history = try device.store.outboxEntries().filter { $0.entity == name && $0.rowId == id }
                    .map { "\($0.op.rawValue) \($0.clientMutationId) \($0.status.rawValue)" }
                throw SimFailure(
                    invariant: "subscriptions-exact",
                    message:
                        "\(label) holds \(name) \(id), which no subscription selects (the server \(byID[name]?[id] == nil ? "has no such row" : "has it")) and no unsynced write keeps; its writes: \(history.isEmpty ? "none" : history.joined(separator: ", "))"
                )
            }
        }
        try check(Incident.self)
        try check(ServiceAsset.self)
        try check(FieldTask.self)
    }

    /// A row the device lacks is converged only when the device dropped it at the end of its
    /// retention at the version the server still has (a later change would have been pulled).
    private func compare<E: ContractEntity>(_ type: E.Type, _ device: OfflineStore, _ reference: OfflineStore, _ label: String) throws {
        let mine = Dictionary(uniqueKeysWithValues: try device.all(E.self).map { ($0.contractPrimaryKey, $0) })
        let theirs = Dictionary(uniqueKeysWithValues: try reference.all(E.self).map { ($0.contractPrimaryKey, $0) })
        guard mine != theirs else { return }
        let expired = try device.droppedRows(E.self)
        for id in Set(mine.keys).union(theirs.keys).sorted() where mine[id] != theirs[id] {
            if mine[id] == nil, let dropped = expired[id], dropped.serverVersion == (try reference.syncInfo(E.self, id: id))?.serverVersion {
                continue
            }
            throw SimFailure(
                invariant: "converged",
                message:
                    "\(label) differs from the server on \(E.descriptor.name) \(id): device \(mine[id].map { "\($0)" } ?? "has none"), server \(theirs[id].map { "\($0)" } ?? "has none")"
            )
        }
    }

    // MARK: Sabotage

    private func dropNewestPendingWrite(_ device: SimDevice) throws {
        let database = try DatabaseQueue(path: device.folder.appendingPathComponent("outpost.sqlite").path)
        try database.write { db in
            try db.execute(sql: "DELETE FROM outbox WHERE seq = (SELECT MAX(seq) FROM outbox WHERE status = 'pending')")
        }
        log("sabotage: device \(device.index)'s newest pending write deleted")
    }

    private func dropASubscribedRow() throws {
        guard let device = devices.first(where: \.isSubscriber) else { return }
        let database = try DatabaseQueue(path: device.folder.appendingPathComponent("outpost.sqlite").path)
        let table = Incident.descriptor.table.quotedDatabaseIdentifier
        let deleted = try database.write { db in
            try db.execute(sql: "DELETE FROM \(table) WHERE rowid = (SELECT MIN(rowid) FROM \(table))")
            return db.changesCount
        }
        if deleted > 0 { log("sabotage: an incident deleted from device \(device.index) behind its store's back") }
    }

    private func forgetAServerRow() async throws {
        let database = try DatabaseQueue(path: root.appendingPathComponent("server/server.sqlite").path)
        let deleted = try await database.write { db in
            try db.execute(sql: "DELETE FROM units WHERE rowid = (SELECT MIN(rowid) FROM units)")
            return db.changesCount
        }
        if deleted > 0 { log("sabotage: a unit deleted on the server without a tombstone") }
    }
}
