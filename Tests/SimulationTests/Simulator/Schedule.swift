import Foundation

/// One thing that happens in a simulation. Steps name their device by index and carry a salt
/// from which everything random about them is drawn, so a step means the same thing wherever
/// shrinking moves it.
enum SimStep: Codable, Hashable, Sendable, CustomStringConvertible {
    /// The app on a device writes: a create, update, patch or delete of one contract, an
    /// append-only record or an event (which one, and on which row, drawn from `salt`). The
    /// ``SimSchedule/subscriber`` patches, replaces or deletes the rows its subscriptions hold,
    /// or writes in its own scope or an event, and creates nothing in the team's.
    case write(device: Int, salt: UInt64)
    /// The device syncs (a trigger: the timer, the app coming to the foreground, the network
    /// returning or a due retry). With `faults`, each of its requests may be dropped, answered
    /// late, duplicated, delayed past later ones, or cut by the device crashing.
    case sync(device: Int, faults: Bool, salt: UInt64)
    /// The app resolves the conflicts it shows: keep mine or take theirs, drawn from `salt`.
    case resolveConflicts(device: Int, salt: UInt64)
    /// The device loses the network for `seconds` of simulated time.
    case partition(device: Int, seconds: Int)
    /// Simulated time passes.
    case advance(seconds: Int)
    /// The device's process dies (`kill -9`): its memory is gone, its database reopened from disk.
    case crashDevice(device: Int)
    /// The server process restarts on the same data.
    case restartServer
    /// One request the network held back reaches the server now (its answer is lost).
    case deliverDelayed(salt: UInt64)
    /// An admin publishes or withdraws content every device downloads.
    case publishContent(salt: UInt64)
    /// An admin erases the user of `device` (`DELETE /admin/v1/users/…`) and adds them back to
    /// the team: their devices hear 410 `user_erased`, wipe their stores and sign in again.
    case eraseUser(device: Int)
    /// An admin revokes the device (`POST /admin/v1/revocations`): its tokens are refused, and
    /// the app's sign-in refuses it a new one until it is enrolled again.
    case revokeDevice(device: Int)
    /// The revoked device is enrolled again: its next token is accepted.
    case reenrolDevice(device: Int)
    /// The server's housekeeping runs with horizons drawn from `salt` (hours to days): old push
    /// results pruned, old tombstones compacted, older cursors answered 410 `cursor_expired`.
    case serverHousekeeping(salt: UInt64)
    /// The live pokes the device's channel received reach it, or are dropped or held back
    /// (drawn per poke from `salt`); those delivered start the engine's automatic sync.
    case deliverPokes(device: Int, salt: UInt64)
    /// The engine syncs by itself (the app comes to the foreground) on a path drawn from
    /// `salt`, cheap or expensive: its sync preferences decide whether it may.
    case automaticSync(device: Int, salt: UInt64)
    /// The user changes the device's sync preferences (Wi-Fi only, daily data budget), drawn from `salt`.
    case setPreferences(device: Int, salt: UInt64)
    /// The device subscribes to an incident or to those assigned to its user, or ends one of its
    /// subscriptions with a short TTL. The ``SimSchedule/subscriber`` picks among the incidents
    /// the server holds (or ones that may come), the others among those they see.
    case subscription(device: Int, salt: UInt64)
    /// The OS gives the app a background window of `seconds` (`SyncEngine.syncInBackgroundWindow`):
    /// each request takes simulated seconds (drawn from `salt`, as are faults now and then and
    /// whether the process is killed at the window's end).
    case backgroundWindow(device: Int, seconds: Int, salt: UInt64)
    /// The device's low-power mode goes on or off (the user's battery saver, `SyncPreferences.lowPowerMode`).
    case setLowPower(device: Int, on: Bool)

    var description: String {
        switch self {
        case .write(let device, let salt): "device \(device) writes (salt \(salt))"
        case .sync(let device, let faults, let salt): "device \(device) syncs\(faults ? " through a faulty network" : "") (salt \(salt))"
        case .resolveConflicts(let device, let salt): "device \(device) resolves its conflicts (salt \(salt))"
        case .partition(let device, let seconds): "device \(device) loses the network for \(seconds) s"
        case .advance(let seconds): "\(seconds) s pass"
        case .crashDevice(let device): "device \(device) crashes and restarts"
        case .restartServer: "the server restarts"
        case .deliverDelayed(let salt): "a delayed request arrives (salt \(salt))"
        case .publishContent(let salt): "an admin publishes content (salt \(salt))"
        case .eraseUser(let device): "an admin erases the data of device \(device)'s user"
        case .revokeDevice(let device): "an admin revokes device \(device)"
        case .reenrolDevice(let device): "device \(device) is enrolled again"
        case .serverHousekeeping(let salt): "the server's housekeeping runs (salt \(salt))"
        case .deliverPokes(let device, let salt): "device \(device)'s live pokes arrive (salt \(salt))"
        case .automaticSync(let device, let salt): "device \(device) syncs by itself (salt \(salt))"
        case .setPreferences(let device, let salt): "device \(device)'s sync preferences change (salt \(salt))"
        case .subscription(let device, let salt): "device \(device) subscribes or unsubscribes (salt \(salt))"
        case .backgroundWindow(let device, let seconds, let salt): "device \(device) syncs in a background window of \(seconds) s (salt \(salt))"
        case .setLowPower(let device, let on): "device \(device)'s low-power mode goes \(on ? "on" : "off")"
        }
    }

    /// The same step with its network faults off (a simpler schedule for shrinking).
    var withoutFaults: SimStep? {
        if case .sync(let device, true, let salt) = self { return .sync(device: device, faults: false, salt: salt) }
        return nil
    }
}

/// A whole simulation: its devices and its steps. Made from a seed (``generate(seed:devices:steps:)``)
/// or read back from the JSON a failing run wrote.
struct SimSchedule: Codable, Hashable, Sendable {
    var seed: UInt64
    /// Devices 0, 1, … belong to users `u-1`, `u-1`, `u-2`, `u-1`, `u-2`, …: two devices of one
    /// user share its scope, and both users share the team's (but ``subscriber``).
    var devices: Int
    var steps: [SimStep]
    /// Server processes behind the balancer, each its own router (live channels, pull
    /// read-ahead) over the one storage; `nil` (schedules written before there could be more) is one.
    var servers: Int?
    /// Whether the app's sign-in gives a device of an erased user a fresh token for a session
    /// begun before the erasure: it does unless `false`, and the server must then tell the
    /// device itself (410 `user_erased` on its old push stream; docs/testing.md, "What it
    /// found"). `false`: the sign-in tells the app the account was erased, and the app wipes.
    var renewsErasedSessions: Bool?
    /// The device that syncs no team scope, only its user's, the content and its subscriptions:
    /// the team's rows come and go with what its subscriptions select; `nil` (schedules written
    /// before there was one) is none.
    var subscriber: Int?

    init(
        seed: UInt64, devices: Int, steps: [SimStep], servers: Int? = nil, renewsErasedSessions: Bool? = nil, subscriber: Int? = nil
    ) {
        self.seed = seed
        self.devices = devices
        self.steps = steps
        self.servers = servers
        self.renewsErasedSessions = renewsErasedSessions
        self.subscriber = subscriber
    }

    var serverProcesses: Int { max(1, servers ?? 1) }

    static func user(ofDevice index: Int) -> String { index == 0 || index % 2 == 1 ? "u-1" : "u-2" }

    /// The schedule of a seed: mostly writes and syncs, with partitions, long offline spans,
    /// crashes, server restarts, late requests and content publishing mixed in; then, from a
    /// generator of their own (so a seed keeps the steps it had before they existed), live
    /// pokes, automatic syncs and preferences, housekeeping and more deletes for it to compact,
    /// revocations and erasures, and one or two server processes. Last, one more device, after
    /// the `devices` that sync every scope: the ``subscriber``, with steps of its own
    /// (subscriptions, writes on what they hold, syncs, time for their TTLs to pass). Background
    /// windows and low-power mode come from a generator of their own too.
    static func generate(seed: UInt64, devices: Int = 3, steps count: Int = 80) -> SimSchedule {
        var random = SimRandom(seed: seed, salt: 0x5C4E_D01E)
        var extra = SimRandom(seed: seed, salt: 0xB11D_5B07)
        // Subscriptions came later still: a generator of their own.
        var subscriptions = SimRandom(seed: seed, salt: 0x5B5C_0001)
        // And the device that syncs no team scope later again: its own, too.
        var subscriberSteps = SimRandom(seed: seed, salt: 0x5B5C_0002)
        // Background windows and low-power mode later again.
        var power = SimRandom(seed: seed, salt: 0x5B5C_0003)
        let subscriber = devices
        var steps: [SimStep] = []
        for _ in 0..<count {
            if power.chance(10) { steps += powerStep(&power, devices: devices + 1) }
            if extra.chance(30) { steps.append(extraStep(&extra, devices: devices)) }
            if subscriptions.chance(12) { steps.append(.subscription(device: subscriptions.below(devices), salt: subscriptions.next())) }
            if subscriberSteps.chance(40) { steps += subscriberStep(&subscriberSteps, device: subscriber, teamDevices: devices) }
            let device = random.below(devices)
            let roll = random.below(100)
            let step: SimStep
            switch roll {
            case 0..<40: step = .write(device: device, salt: random.next())
            case 40..<70: step = .sync(device: device, faults: random.chance(40), salt: random.next())
            case 70..<73: step = .resolveConflicts(device: device, salt: random.next())
            case 73..<77:
                // Mostly minutes; now and then days, past token lifetimes and retention ages.
                let seconds = random.chance(25) ? 3_600 * (1 + random.below(96)) : 30 + random.below(1_800)
                step = .partition(device: device, seconds: seconds)
            case 77..<84:
                let seconds = random.chance(20) ? 3_600 * (1 + random.below(72)) : 1 + random.below(900)
                step = .advance(seconds: seconds)
            case 84..<88: step = .crashDevice(device: device)
            case 88..<90: step = .restartServer
            case 90..<95: step = .deliverDelayed(salt: random.next())
            default: step = .publishContent(salt: random.next())
            }
            steps.append(step)
        }
        return SimSchedule(seed: seed, devices: devices + 1, steps: steps, servers: extra.chance(50) ? 2 : 1, subscriber: subscriber)
    }

    /// Steps of the device that syncs no team scope: mostly subscribing and unsubscribing (half
    /// the time synced at once), writing on what its subscriptions hold and syncing (through a
    /// faulty network now and then), with minutes to hours passing (its TTLs are minutes to two
    /// hours), crashes, partitions, automatic syncs and live pokes; and a device that syncs the
    /// team creating or patching an incident (its assignee, its asset), for it to subscribe to.
    private static func subscriberStep(_ random: inout SimRandom, device: Int, teamDevices: Int) -> [SimStep] {
        switch random.below(100) {
        case 0..<22:
            let step = SimStep.subscription(device: device, salt: random.next())
            return random.chance(50) ? [step, .sync(device: device, faults: false, salt: random.next())] : [step]
        case 22..<52: return [.write(device: device, salt: random.next())]
        case 52..<68: return [.sync(device: device, faults: random.chance(40), salt: random.next())]
        case 68..<80:
            // The workload's kinds 5 (create an incident) and 6 (patch one), half the time pushed at once.
            let kind = random.chance(60) ? 5 : 6
            var salt = random.next()
            while true {
                var workload = SimRandom(seed: salt)
                if workload.below(14) == kind { break }
                salt = random.next()
            }
            let team = random.below(teamDevices)
            let write = SimStep.write(device: team, salt: salt)
            return random.chance(50) ? [write, .sync(device: team, faults: false, salt: random.next())] : [write]
        case 80..<86: return [.advance(seconds: random.chance(70) ? 60 * (1 + random.below(30)) : 3_600 * (1 + random.below(3)))]
        case 86..<90: return [.crashDevice(device: device)]
        case 90..<93: return [.partition(device: device, seconds: 30 + random.below(570))]
        case 93..<97: return [.automaticSync(device: device, salt: random.next())]
        default: return [.deliverPokes(device: device, salt: random.next())]
        }
    }

    /// A background window (6 to 40 s, on any device, the subscriber's too), most often after a
    /// few writes, so that a window has work to stop in; or low-power mode toggled.
    private static func powerStep(_ random: inout SimRandom, devices: Int) -> [SimStep] {
        let device = random.below(devices)
        if random.chance(30) { return [.setLowPower(device: device, on: random.chance(60))] }
        var steps: [SimStep] = []
        if device < devices - 1, random.chance(60) {
            for _ in 0..<(3 + random.below(10)) { steps.append(.write(device: device, salt: random.next())) }
        }
        steps.append(.backgroundWindow(device: device, seconds: 6 + random.below(35), salt: random.next()))
        return steps
    }

    /// One of the steps the first simulator left out.
    private static func extraStep(_ random: inout SimRandom, devices: Int) -> SimStep {
        let device = random.below(devices)
        switch random.below(112) {
        case 100...:
            // A delete (the workload's kind 4), so tombstones reach the horizons and cursors expire.
            var salt = random.next()
            while true {
                var workload = SimRandom(seed: salt)
                if workload.below(14) == 4 { break }
                salt = random.next()
            }
            return .write(device: device, salt: salt)
        case 0..<35: return .deliverPokes(device: device, salt: random.next())
        case 35..<57: return .automaticSync(device: device, salt: random.next())
        case 57..<67: return .setPreferences(device: device, salt: random.next())
        case 67..<84: return .serverHousekeeping(salt: random.next())
        case 84..<88: return .revokeDevice(device: device)
        case 88..<96: return .reenrolDevice(device: device)
        default: return .eraseUser(device: device)
        }
    }

    /// The steps, numbered, one per line.
    var listing: String {
        steps.enumerated().map { "  \($0.offset + 1). \($0.element)" }.joined(separator: "\n")
    }
}
