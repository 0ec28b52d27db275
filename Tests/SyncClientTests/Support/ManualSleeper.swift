import Foundation
import SyncClient

/// A ``Sleeper`` whose time moves only when a test calls ``advance(by:)``; it moves the store's
/// ``ManualClock`` too, so timers and ages agree.
final class ManualSleeper: Sleeper, @unchecked Sendable {
    private struct Waiter {
        let id: UUID
        let deadline: TimeInterval
        let continuation: CheckedContinuation<Void, any Error>
    }

    private let lock = NSLock()
    private var elapsed: TimeInterval = 0
    private var waiters: [Waiter] = []
    private var cancelled: Set<UUID> = []
    let clock: ManualClock?

    init(clock: ManualClock? = nil) {
        self.clock = clock
    }

    /// How many tasks are asleep now.
    var sleeping: Int { lock.withLock { waiters.count } }

    func sleep(for seconds: TimeInterval) async throws {
        let id = UUID()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow: Bool? = lock.withLock {
                    if cancelled.remove(id) != nil { return false }
                    if seconds <= 0 { return true }
                    waiters.append(Waiter(id: id, deadline: elapsed + seconds, continuation: continuation))
                    return nil
                }
                switch resumeNow {
                case true?: continuation.resume()
                case false?: continuation.resume(throwing: CancellationError())
                case nil: break
                }
            }
        } onCancel: {
            let waiter: Waiter? = lock.withLock {
                guard let index = waiters.firstIndex(where: { $0.id == id }) else {
                    cancelled.insert(id)
                    return nil
                }
                return waiters.remove(at: index)
            }
            waiter?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward and wakes every sleeper whose time has come.
    func advance(by seconds: TimeInterval) {
        clock?.advance(by: seconds)
        let due: [Waiter] = lock.withLock {
            elapsed += seconds
            let due = waiters.filter { $0.deadline <= elapsed }
            waiters.removeAll { $0.deadline <= elapsed }
            return due
        }
        for waiter in due { waiter.continuation.resume() }
    }
}
