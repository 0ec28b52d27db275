import Foundation
import NIOConcurrencyHelpers

/// The memory every response that lists stored data may take at once in a server process: pull
/// pages being read from storage, written, kept ahead of their request (``PullReadAhead``) or
/// sent, and the pages of the change feed, the exports, the fleet, the sinks and the console
/// (``ListingBudget``). Without it, a few clients asking at once for pages of large rows take the
/// process past its memory and it dies (a page is bounded in bytes; how many are built at once
/// was not).
///
/// A page reserves what it may weigh before it is read (``reservation(pageBytes:largestRowBytes:)``), and
/// gives back what it does not hold once written; the rest goes when the page is sent or
/// dropped (``Lease``, released when the last reference to it goes). A request that finds no
/// room waits, first come first served, up to ``maximumWait``; then it is answered 503
/// `server_busy` with `Retry-After`, and the device retries on its schedule. Read-ahead never
/// waits: without room it is simply not done.
final class ResponseMemoryBudget: Sendable {
    /// Bytes in all.
    let capacity: Int
    /// How long a request waits for room before it is refused.
    let maximumWait: Duration

    private struct Waiter {
        var id: UInt64
        var bytes: Int
        var continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var available: Int
        var waiters: [Waiter] = []
        var nextID: UInt64 = 0
    }

    private let state: NIOLockedValueBox<State>

    init(capacity: Int, maximumWait: Duration = .seconds(10)) {
        self.capacity = max(1, capacity)
        self.maximumWait = maximumWait
        state = NIOLockedValueBox(State(available: max(1, capacity)))
    }

    /// What a page may weigh while it is built: its rows as read (the budget plus the one row
    /// that may take it past, which the contracts bound) and its JSON written from them. Never
    /// more than the whole capacity, so one page can always be served.
    func reservation(pageBytes: Int, largestRowBytes: Int) -> Int {
        min(capacity, 2 * (pageBytes + largestRowBytes))
    }

    /// Memory held for one page; what is left of it goes back when the lease is released or
    /// its last reference goes.
    final class Lease: Sendable {
        private let budget: ResponseMemoryBudget
        private let held: NIOLockedValueBox<Int>

        fileprivate init(budget: ResponseMemoryBudget, bytes: Int) {
            self.budget = budget
            held = NIOLockedValueBox(bytes)
        }

        /// Keeps `bytes` (what the written page holds) and gives back the rest.
        func shrink(to bytes: Int) {
            let returned = held.withLockedValue { held -> Int in
                let kept = min(held, max(0, bytes))
                defer { held = kept }
                return held - kept
            }
            if returned > 0 { budget.give(returned) }
        }

        /// Gives everything back.
        func release() { shrink(to: 0) }

        deinit { release() }
    }

    /// A lease of `bytes`, waiting for room up to ``maximumWait``.
    /// - Throws: ``ServiceError`` 503 `server_busy` when no room came in time.
    func acquire(_ bytes: Int) async throws(ServiceError) -> Lease {
        guard let lease = await acquire(bytes, waitingAtMost: maximumWait) else {
            throw ServiceError(
                status: 503, .serverBusy, "the server is sending as many pages as its memory allows; retry after 1 s", retryAfter: 1
            )
        }
        return lease
    }

    /// A lease of `bytes`, waiting for its turn however long it takes: for a response already
    /// under way (the next chunk of a streamed export), which can no longer be answered 503.
    func acquireWaiting(_ bytes: Int) async -> Lease {
        // `nil` only when the wait expires, and this one never does.
        await acquire(bytes, waitingAtMost: nil)!
    }

    private func acquire(_ bytes: Int, waitingAtMost maximumWait: Duration?) async -> Lease? {
        let bytes = min(bytes, capacity)
        if let lease = tryAcquire(bytes) { return lease }
        let id = state.withLockedValue { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        // Started once the waiter is queued, so it cannot expire a waiter not there yet.
        let timeout = NIOLockedValueBox<Task<Void, Never>?>(nil)
        defer { timeout.withLockedValue { $0?.cancel() } }
        let granted = await withCheckedContinuation { continuation in
            let grantedAtOnce = state.withLockedValue { state -> Bool in
                if state.waiters.isEmpty, state.available >= bytes {
                    take(bytes, from: &state)
                    return true
                }
                state.waiters.append(Waiter(id: id, bytes: bytes, continuation: continuation))
                return false
            }
            if grantedAtOnce {
                continuation.resume(returning: true)
            } else if let maximumWait {
                timeout.withLockedValue {
                    $0 = Task {
                        try? await Task.sleep(for: maximumWait)
                        self.expire(id)
                    }
                }
            }
        }
        return granted ? Lease(budget: self, bytes: bytes) : nil
    }

    /// A lease of `bytes` at once, or `nil` when there is no room (or requests are waiting).
    func tryAcquire(_ bytes: Int) -> Lease? {
        let bytes = min(bytes, capacity)
        let granted = state.withLockedValue { state -> Bool in
            guard state.waiters.isEmpty, state.available >= bytes else { return false }
            take(bytes, from: &state)
            return true
        }
        return granted ? Lease(budget: self, bytes: bytes) : nil
    }

    /// Bytes held now.
    var held: Int { state.withLockedValue { capacity - $0.available } }

    /// Requests waiting for room now, in arrival order.
    var waiting: Int { state.withLockedValue { $0.waiters.count } }

    private func take(_ bytes: Int, from state: inout State) {
        state.available -= bytes
    }

    fileprivate func give(_ bytes: Int) {
        let woken = state.withLockedValue { state -> [CheckedContinuation<Bool, Never>] in
            state.available += bytes
            var woken: [CheckedContinuation<Bool, Never>] = []
            // First come, first served: a large page at the head is not passed by smaller ones.
            while let first = state.waiters.first, state.available >= first.bytes {
                state.waiters.removeFirst()
                take(first.bytes, from: &state)
                woken.append(first.continuation)
            }
            return woken
        }
        for continuation in woken { continuation.resume(returning: true) }
    }

    private func expire(_ id: UInt64) {
        let expired = state.withLockedValue { state -> CheckedContinuation<Bool, Never>? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return state.waiters.remove(at: index).continuation
        }
        expired?.resume(returning: false)
        // A large waiter leaving may let smaller ones behind it in.
        if expired != nil { give(0) }
    }
}
