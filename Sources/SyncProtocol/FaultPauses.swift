import Foundation

/// A point where a process can be made to pause, so that an end-to-end crash test can
/// `kill -9` it exactly there.
package enum FaultPoint: String, CaseIterable, Sendable {
    /// The server: a push is received and read, nothing of it applied yet.
    case pushBeforeApply = "push-before-apply"
    /// The server: a push is applied and committed, its answer not yet sent.
    case pushBeforeAnswer = "push-before-answer"
    /// A device: a pulled page's rows are written in its transaction, its cursor not yet, and
    /// nothing is committed.
    case pullApply = "pull-apply"
}

/// Test-only pauses, set by `OUTPOST_FAULT_DELAY_MS=POINT[#N]:MILLISECONDS[,…]`: for example
/// `push-before-answer:3000` pauses every push, `pull-apply#4:60000` only the fourth page. At a
/// pause the process writes `fault: pausing at POINT (N) for MS ms` to standard error, then
/// sleeps, so a test watching its output knows the moment to kill it. Unset, as everywhere but
/// in those tests, nothing pauses: the code paths are the same, only the sleep is skipped.
package struct FaultPauses: Sendable {
    package static let environmentVariable = "OUTPOST_FAULT_DELAY_MS"

    /// No pause anywhere.
    package static let none = FaultPauses(pauses: [:])

    /// How long to pause at a point, and at which time it is reached (`nil`: every time).
    package struct Pause: Hashable, Sendable {
        package var milliseconds: Int
        package var occurrence: Int?

        package init(milliseconds: Int, occurrence: Int? = nil) {
            self.milliseconds = milliseconds
            self.occurrence = occurrence
        }
    }

    package let pauses: [FaultPoint: Pause]
    private let reached = ReachedCounts()

    package init(pauses: [FaultPoint: Pause]) {
        self.pauses = pauses
    }

    /// Why the variable's value was refused.
    package struct Malformed: Error, CustomStringConvertible {
        package var description: String
    }

    /// The pauses the environment asks for; ``none`` when the variable is unset or empty.
    package static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws(Malformed)
        -> FaultPauses
    {
        guard let text = environment[environmentVariable], !text.isEmpty else { return .none }
        var pauses: [FaultPoint: Pause] = [:]
        for item in text.split(separator: ",") {
            let parts = item.split(separator: ":", maxSplits: 1)
            let target = parts.first?.split(separator: "#", maxSplits: 1) ?? []
            guard parts.count == 2, let name = target.first, let point = FaultPoint(rawValue: String(name)),
                let delay = Int(parts[1]), delay >= 0
            else {
                throw Malformed(
                    description: "\(environmentVariable): '\(item)' is not POINT[#N]:MILLISECONDS with POINT one of "
                        + FaultPoint.allCases.map(\.rawValue).joined(separator: ", ")
                )
            }
            var occurrence: Int?
            if target.count == 2 {
                guard let number = Int(target[1]), number >= 1 else {
                    throw Malformed(description: "\(environmentVariable): '\(item)': #N counts from 1")
                }
                occurrence = number
            }
            pauses[point] = Pause(milliseconds: delay, occurrence: occurrence)
        }
        return FaultPauses(pauses: pauses)
    }

    /// Pauses the calling thread at `point` when asked to (inside a database transaction, say).
    package func pause(at point: FaultPoint) {
        guard let delay = announce(point) else { return }
        Thread.sleep(forTimeInterval: Double(delay) / 1000)
    }

    /// Pauses the calling task at `point` when asked to.
    package func pause(at point: FaultPoint) async {
        guard let delay = announce(point) else { return }
        // A cancelled task stops pausing; there is nothing else to undo.
        try? await Task.sleep(nanoseconds: UInt64(delay) * 1_000_000)
    }

    private func announce(_ point: FaultPoint) -> Int? {
        guard let pause = pauses[point] else { return nil }
        let count = reached.increment(point)
        if let occurrence = pause.occurrence, occurrence != count { return nil }
        FileHandle.standardError.write(Data("fault: pausing at \(point.rawValue) (\(count)) for \(pause.milliseconds) ms\n".utf8))
        return pause.milliseconds
    }
}

/// How many times each point was reached in this process.
private final class ReachedCounts: @unchecked Sendable {
    private let lock = NSLock()
    private var counts: [FaultPoint: Int] = [:]

    func increment(_ point: FaultPoint) -> Int {
        lock.withLock {
            counts[point, default: 0] += 1
            return counts[point]!
        }
    }
}
