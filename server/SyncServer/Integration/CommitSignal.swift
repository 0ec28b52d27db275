import NIOConcurrencyHelpers

/// Wakes the requests that wait for the next commit (the change feed's `wait`): a counter the
/// storage's commit observer moves, and the waiters it then resumes. A request takes the
/// counter before it reads, and waits only if no commit came since, so a commit between its
/// read and its wait is not missed.
final class CommitSignal: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var nextWaiter: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = NIOLockedValueBox(State())

    /// How many commits this process has been told of.
    var generation: UInt64 { state.withLockedValue { $0.generation } }

    /// A commit: every waiter resumes.
    func signal() {
        let woken = state.withLockedValue { state in
            state.generation &+= 1
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in woken { waiter.resume() }
    }

    /// Returns once a commit came after `generation`, or at `deadline`, or when the task is
    /// cancelled, whichever is first.
    func wait(after generation: UInt64, until deadline: ContinuousClock.Instant) async {
        let id = state.withLockedValue { state -> UInt64 in
            state.nextWaiter &+= 1
            return state.nextWaiter
        }
        let timer = Task { [self] in
            try? await Task.sleep(until: deadline, clock: .continuous)
            resume(id)
        }
        defer { timer.cancel() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLockedValue { state -> Bool in
                    if state.generation != generation || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            resume(id)
        }
    }

    private func resume(_ id: UInt64) {
        state.withLockedValue { $0.waiters.removeValue(forKey: id) }?.resume()
    }
}
