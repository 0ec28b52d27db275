public import Foundation

/// How the sync engine and the health probe wait (the 15-minute timer, retry delays, probe
/// intervals), injectable so tests move time by hand instead of waiting.
public protocol Sleeper: Sendable {
    /// Returns after `seconds`, or throws `CancellationError` when the task is cancelled first.
    func sleep(for seconds: TimeInterval) async throws
}

/// Real time (`Task.sleep`).
public struct TaskSleeper: Sleeper {
    /// A sleeper in real time.
    public init() {}

    /// Sleeps `seconds`; throws when the task is cancelled.
    public func sleep(for seconds: TimeInterval) async throws {
        try await Task.sleep(nanoseconds: UInt64(max(0, seconds) * 1_000_000_000))
    }
}
