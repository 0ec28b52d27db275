import Foundation
import NIOConcurrencyHelpers

/// The next page of a pull, written while the device is still receiving the page before it.
///
/// A device downloading a scope asks for its pages one after the other: each request carries
/// the cursor of the page before. Left alone, the server idles while a page travels and is
/// read, and the device then waits while the server reads, shapes, writes and compresses the
/// next one: the two take turns instead of working at once. So when a page says `has_more`,
/// the server starts on the next one at once, as that device will ask for it, and keeps the
/// finished response body; the request that asks for exactly it gets it without the wait.
///
/// A page read ahead is what the request would have got had it arrived a moment earlier: the
/// rows of one snapshot after its cursor, which the pages after it continue, so the protocol's
/// guarantees hold unchanged. The last page (no more after it) is never kept: the request reads
/// it itself, so "nothing more" is always said as of the request. It is handed over only after the request passed authentication
/// (an erased or revoked token never reaches it) and the route's checks, and only to the same
/// identity (tenant, user, device, its current teams, the token's issue time) asking the same
/// thing (scope, cursor, limit, schema versions, client id, contracts, encoding). A push by the
/// client drops what was read ahead for it, so a page's `last_seq` is never older than the
/// device's last push on this process.
///
/// The server keeps up to ``depth`` pages ahead of a requester, each started when the one
/// before it is read from storage (its cursor names the next): one page's rows are read while
/// the page before is written and compressed, and the pages come back to back while the
/// device receives and stores the earlier ones.
///
/// Bounded: ``depth`` pages per requester (a request for another page than the next drops
/// them), ``maximumPages`` in all (past that none is started: the next request does the work
/// itself, as without read-ahead), dropped when the requester has not asked for one in
/// ``lifetime``. Requests of one device reaching different processes behind a
/// balancer simply miss it.
final class PullReadAhead: Sendable {
    /// A pull request, as far as its answer depends on it.
    struct Request: Hashable, Sendable {
        var identity: DeviceIdentity
        var scope: String
        var cursor: String?
        var limit: Int?
        var schema: [String: Int]
        var clientID: String?
        var contracts: [String]?
        /// Whether the body is gzip-compressed (the device accepts gzip).
        var gzip: Bool
        /// Whether rows the device holds may come with only their changed fields (`fields=changed`).
        var changedFields = false

        /// The same request for the page after one whose cursor is `cursor`.
        func next(after cursor: String) -> Request {
            var next = self
            next.cursor = cursor
            return next
        }

        fileprivate var requester: Requester { Requester(identity: identity, clientID: clientID) }
    }

    /// A page's response body, ready to send.
    struct Body: Sendable {
        /// The page's JSON, gzip-compressed when its request's ``Request/gzip``.
        var bytes: Data
        var rowCount: Int
        var cursor: String
        var hasMore: Bool
        /// The memory the body holds in the server's response memory budget, given back when the body is
        /// sent or dropped.
        var lease: ResponseMemoryBudget.Lease?
    }

    /// A page read from storage, its cursor known, its body not written yet.
    struct Read: Sendable {
        var cursor: String
        var hasMore: Bool
        /// Writes the page's body (JSON, compressed).
        var write: @Sendable () -> Body
    }

    /// Reads the page answering a request (the route's own work, done ahead). The next page
    /// is started as soon as this one is read, so one page's body is written while the next
    /// one's rows are read.
    typealias Work = @Sendable (Request) async throws -> Read

    /// What ``take(_:)`` found.
    enum Outcome: Sendable {
        case hit(Body)
        case miss
    }

    fileprivate struct Requester: Hashable {
        var identity: DeviceIdentity
        var clientID: String?
    }

    /// A page being written or written, for its request.
    private struct Entry {
        var request: Request
        var task: Task<Body?, Never>
    }

    /// The pages read ahead for one requester, in the order it will ask for them.
    private struct Chain {
        var id: UInt64
        var work: Work
        var pages: [Entry] = []
        /// The request of the newest page started; its page, when written, names the next.
        var newest: Request?
        /// The request to start next, when its page is known to exist and ``pages`` has room.
        var following: Request?
        /// The last time the requester asked for a page: a chain unused for ``lifetime`` is dropped.
        var touched: ContinuousClock.Instant
    }

    private struct State {
        var chains: [Requester: Chain] = [:]
        var pages = 0
        var nextID: UInt64 = 0
    }

    /// Pages read ahead per requester at most.
    let depth: Int
    /// The most pages kept or being written at once, for all requesters.
    let maximumPages: Int
    /// How long pages wait for their requester's next request.
    let lifetime: Duration
    private let clock = ContinuousClock()
    private let state = NIOLockedValueBox(State())

    /// - Parameters:
    ///   - depth: pages read ahead per requester; 0 turns read-ahead off.
    ///   - maximumPages: pages kept or being written at once, for all requesters.
    ///   - lifetime: how long pages wait for their requester's next request.
    init(depth: Int = 4, maximumPages: Int = 256, lifetime: Duration = .seconds(10)) {
        self.depth = max(0, depth)
        self.maximumPages = max(0, maximumPages)
        self.lifetime = lifetime
    }

    /// Starts reading ahead after `request`, just answered with `body` by the request itself
    /// (not from read-ahead: those pages continue on their own), replacing what was read ahead
    /// for its requester.
    func readAhead(after request: Request, answered body: Body, work: @escaping Work) {
        guard depth > 0, body.hasMore else { return }
        let now = clock.now
        let dropped = state.withLockedValue { state -> [Entry] in
            var dropped = sweep(&state, now: now)
            let requester = request.requester
            if let old = state.chains.removeValue(forKey: requester) {
                dropped += old.pages
                state.pages -= old.pages.count
            }
            state.nextID += 1
            var chain = Chain(id: state.nextID, work: work, following: request.next(after: body.cursor), touched: now)
            grow(&chain, requester: requester, &state)
            state.chains[requester] = chain
            return dropped
        }
        for entry in dropped { entry.task.cancel() }
    }

    /// The body read ahead for exactly `request`, waiting for it when it is still being written;
    /// ``Outcome/miss`` when there is none (or it failed), and the request does the work itself.
    func take(_ request: Request) async -> Outcome {
        let now = clock.now
        let (task, dropped) = state.withLockedValue { state -> (Task<Body?, Never>?, [Entry]) in
            var dropped = sweep(&state, now: now)
            let requester = request.requester
            guard var chain = state.chains.removeValue(forKey: requester) else { return (nil, dropped) }
            guard let index = chain.pages.firstIndex(where: { $0.request == request }) else {
                // The device moved on (another cursor, schema or filter): what was read is of no use.
                state.pages -= chain.pages.count
                return (nil, dropped + chain.pages)
            }
            let entry = chain.pages[index]
            dropped += chain.pages[..<index]
            chain.pages.removeFirst(index + 1)
            state.pages -= index + 1
            chain.touched = now
            grow(&chain, requester: requester, &state)
            state.chains[requester] = chain
            return (entry.task, dropped)
        }
        for entry in dropped { entry.task.cancel() }
        guard let task, let body = await task.value else { return .miss }
        return .hit(body)
    }

    /// Drops what was read ahead for the pushing client of `identity`: its pages' `last_seq` moved.
    func discard(identity: DeviceIdentity, clientID: String) {
        let chain = state.withLockedValue { state -> Chain? in
            let chain = state.chains.removeValue(forKey: Requester(identity: identity, clientID: clientID))
            state.pages -= chain?.pages.count ?? 0
            return chain
        }
        for entry in chain?.pages ?? [] { entry.task.cancel() }
    }

    /// Pages kept or being written, for all requesters.
    var count: Int { state.withLockedValue { $0.pages } }

    /// Starts the chain's next pages while it has room: one at a time, since each page's cursor
    /// comes from the page before.
    private func grow(_ chain: inout Chain, requester: Requester, _ state: inout State) {
        guard let request = chain.following, chain.pages.count < depth, state.pages < maximumPages else { return }
        chain.following = nil
        chain.newest = request
        let (work, id) = (chain.work, chain.id)
        // Any failure is left for the request itself to meet, with its own error answer. So is
        // a last page: read ahead, it would say "nothing more" of a moment before the request,
        // and a device would stop there short of a change committed in between (a page with
        // more after it may be older: the pages after it continue from its cursor).
        let task = Task { [self] () -> Body? in
            let read = try? await work(request)
            self.read(request, cursor: read?.hasMore == true ? read?.cursor : nil, chain: id, requester: requester)
            guard let read, read.hasMore else { return nil }
            return read.write()
        }
        chain.pages.append(Entry(request: request, task: task))
        state.pages += 1
    }

    /// A page of a chain is read: the one after it (when it has more, `cursor`) may start.
    private func read(_ request: Request, cursor: String?, chain id: UInt64, requester: Requester) {
        state.withLockedValue { state in
            guard var chain = state.chains[requester], chain.id == id, chain.newest == request, let cursor else { return }
            chain.following = request.next(after: cursor)
            grow(&chain, requester: requester, &state)
            state.chains[requester] = chain
        }
    }

    /// Removes the chains unused for ``lifetime``; their pages, to cancel outside the lock.
    private func sweep(_ state: inout State, now: ContinuousClock.Instant) -> [Entry] {
        var dropped: [Entry] = []
        for (requester, chain) in state.chains where now - chain.touched >= lifetime {
            dropped += chain.pages
            state.pages -= chain.pages.count
            state.chains[requester] = nil
        }
        return dropped
    }
}
