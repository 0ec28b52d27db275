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
}

/// A deliberate bug, to prove the invariants notice one.
enum SimSabotage: Sendable {
    /// Deletes a device's newest unsent write behind the store's back.
    case dropPendingWrite
    /// Deletes a row from the server without a tombstone, so no device hears of it.
    case forgetServerRow
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

    private init(schedule: SimSchedule, sabotage: SimSabotage?) async throws {
        self.schedule = schedule
        self.sabotage = sabotage
        root = Self.scratchFolder.appendingPathComponent("outpost-sim-\(schedule.seed)-\(UUID().uuidString)")
        network = SimNetwork(clock: clock)
        server = try await SimServer(folder: root.appendingPathComponent("server"), clock: clock)
        network.server = server
        for index in 0..<schedule.devices {
            var random = SimRandom(seed: schedule.seed, salt: UInt64(index) + 1)
            // Device clocks disagree by up to a minute and a half either way.
            let skew = TimeInterval(random.below(181) - 90)
            devices.append(
                try SimDevice(
                    index: index, user: SimSchedule.user(ofDevice: index), deviceID: "device-\(index)", root: root, network: network,
                    clock: clock.device(skew: skew), seed: random.next()
                )
            )
        }
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
            let result = SimWorkload.write(store, user: devices[device].user, salt: salt, serial: serial, now: clock.now())
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
            server = try await SimServer(folder: root.appendingPathComponent("server"), clock: clock)
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
        }
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
        for device in devices {
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

            for scope in SimDevice.scopes {
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

    /// Every push outcome in the audit log, by client mutation id; fails when one was applied twice.
    private func appliedMutations() async throws -> [String: [String]] {
        let entries = try await auditEntries()
        var outcomes: [String: [String]] = [:]
        // A push's entry lists its mutations (and the rows its reducers wrote, `fold`).
        for entry in entries where !entry.detail.isEmpty {
            for change in try AuditedChange.changes(of: entry, readableDetail: entry.detail) where change.operation != "fold" {
                guard case .string(let id)? = change.detail["client_mutation_id"], case .string(let status)? = change.detail["status"] else { continue }
                outcomes[id, default: []].append(status)
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
        case nil: break
        }
        network.healPartitions()
        for device in devices { network.setFaults(device.index, nil) }
        await network.deliverAllHeld()
        log("quiescence: the network heals")
        var quietRounds = 0
        for round in 0..<12 {
            clock.advance(by: 60)
            for device in devices {
                let result = await device.engine.syncNow()
                counts.syncs += 1
                log("quiescence round \(round): device \(device.index): \(result)")
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
        let stuck = try devices.map { "device \($0.index): \(try $0.store.outboxCounts().unsent) unsent, \(try $0.store.conflicts().count) conflicts" }
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
                        throw SimFailure(invariant: "nothing-stuck", message: "device \(device.index)'s write \(entry.clientMutationId) failed without a reason")
                    }
                default:
                    throw SimFailure(
                        invariant: "nothing-stuck",
                        message: "device \(device.index)'s write \(entry.clientMutationId) (\(entry.entity) \(entry.op.rawValue) \(entry.rowId)) is still \(entry.status.rawValue)"
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
        try await checkVersionCheckedUpdates()
        try await checkAuditChain()
        try await checkConvergence()
        counts.auditEntries = try await auditEntries().count
    }

    /// Under `version_check`, an update applied on a stale version would be a lost update: each
    /// applied change of a task must be based on the version the one before it produced.
    private func checkVersionCheckedUpdates() async throws {
        var versions: [String: Int64] = [:]
        for entry in try await auditEntries() where entry.entity == FieldTask.descriptor.name {
            guard case .object(let detail)? = JSONParser.parse(entry.detail) else { continue }
            if entry.operation == "fold" {
                versions[entry.rowID] = nil  // a reducer moved it; the next change is checked from its answer on
                continue
            }
            guard case .string("applied")? = detail["status"] else { continue }
            if entry.operation != "create", case .int(let base)? = detail["base_version"], let known = versions[entry.rowID], base != known {
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
            try compare(ServiceAsset.self, device.store, reference, label)
            try compare(Incident.self, device.store, reference, label)
            try compare(FieldTask.self, device.store, reference, label)
            try compare(AssessmentResponse.self, device.store, reference, label)
            try compare(Attempt.self, device.store, reference, label)
            try compare(CompletionRecord.self, device.store, reference, label)
            try compare(Unit.self, device.store, reference, label)
            try compare(Lesson.self, device.store, reference, label)
        }
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
                message: "\(label) differs from the server on \(E.descriptor.name) \(id): device \(mine[id].map { "\($0)" } ?? "has none"), server \(theirs[id].map { "\($0)" } ?? "has none")"
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

    private func forgetAServerRow() async throws {
        let database = try DatabaseQueue(path: root.appendingPathComponent("server/server.sqlite").path)
        let deleted = try await database.write { db in
            try db.execute(sql: "DELETE FROM units WHERE rowid = (SELECT MIN(rowid) FROM units)")
            return db.changesCount
        }
        if deleted > 0 { log("sabotage: a unit deleted on the server without a tombstone") }
    }
}
