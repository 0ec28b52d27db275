import Foundation

/// One thing that happens in a simulation. Steps name their device by index and carry a salt
/// from which everything random about them is drawn, so a step means the same thing wherever
/// shrinking moves it.
enum SimStep: Codable, Hashable, Sendable, CustomStringConvertible {
    /// The app on a device writes: a create, update, patch or delete of one contract, an
    /// append-only record or an event (which one, and on which row, drawn from `salt`).
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
    /// user share its scope, and both users share the team's.
    var devices: Int
    var steps: [SimStep]

    static func user(ofDevice index: Int) -> String { index == 0 || index % 2 == 1 ? "u-1" : "u-2" }

    /// The schedule of a seed: mostly writes and syncs, with partitions, long offline spans,
    /// crashes, server restarts, late requests and content publishing mixed in.
    static func generate(seed: UInt64, devices: Int = 3, steps count: Int = 80) -> SimSchedule {
        var random = SimRandom(seed: seed, salt: 0x5C4E_D01E)
        var steps: [SimStep] = []
        for _ in 0..<count {
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
        return SimSchedule(seed: seed, devices: devices, steps: steps)
    }

    /// The steps, numbered, one per line.
    var listing: String {
        steps.enumerated().map { "  \($0.offset + 1). \($0.element)" }.joined(separator: "\n")
    }
}
