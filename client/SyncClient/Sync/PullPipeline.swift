import Foundation
import SyncProtocol

/// The pages of one scope, fetched by a task of their own ahead of the engine that stores
/// them: while the engine commits some pages, the next ones are already being asked for,
/// received, parsed and prepared (``PreparedServerChanges``), and a page is prepared while the
/// request for the one after it is out. At most ``aheadRows`` rows (and always at least one
/// page) wait in memory; a slow store holds the fetching back, so memory stays bounded
/// whatever the size of the scope.
///
/// A pull may be several runs one after the other (a fresh scope downloaded one priority tier
/// at a time, then whole from the first tier's end): when a run's last page arrives, the next
/// run's first page is asked for at once, so the engine does not wait for it after storing the
/// run's last pages.
///
/// The fetching stops after the last page of the last run, after the first failure (handed
/// to the engine like a page), or when the engine ``close()``s the pipeline.
final class PullPipeline: Sendable {
    /// A page of run `run` after `cursor` (`nil`: the run's first page).
    typealias Fetch = @Sendable (_ run: Int, _ cursor: String?) async -> Result<Fetched, EngineFailure>
    typealias Prepare = @Sendable (_ run: Int, Fetched) -> Result<Page, EngineFailure>
    /// Where the run after `run` starts, given the last cursor of every run fetched so far
    /// (`ends[r]` for run `r`), or `nil` when `run` was the last.
    typealias Following = @Sendable (_ run: Int, _ ends: [String]) -> (run: Int, cursor: String?)?

    /// A page's body as the transport gave it, with its cursor and `has_more` peeked from it
    /// (``PullPageDecoder/peek(_:)``).
    struct Fetched: Sendable {
        var body: Data
        var cursor: String
        var hasMore: Bool

        var next: String? { hasMore ? cursor : nil }
    }

    /// A page received and prepared.
    struct Page: Sendable {
        var cursor: String
        var hasMore: Bool
        var changes: PreparedServerChanges
        /// The run the page belongs to; its last page has no more.
        var run = 0

        var rowCount: Int { changes.rowCount }
    }

    /// What ``next()`` hands over.
    enum Item {
        case page(Page)
        case failure(EngineFailure)
        /// Closed before the last page (by ``close()``).
        case closed
    }

    let aheadRows: Int
    private let state = Locked(State())
    private let fetcher: Task<Void, Never>

    private struct State {
        var waiting: [(result: Result<Page, EngineFailure>, rows: Int)] = []
        var waitingRows = 0
        var ended = false
        var closed = false
        var taker: CheckedContinuation<Item, Never>?
        var putter: (result: Result<Page, EngineFailure>, rows: Int, continuation: CheckedContinuation<Bool, Never>)?
    }

    /// Starts fetching the pages of run `run` after `cursor`, then of the runs `following` names.
    /// `ends`: the last cursors of the runs before `run`, as ``Following`` reads them.
    init(
        run: Int, after cursor: String?, ends: [String], aheadRows: Int, fetch: @escaping Fetch, prepare: @escaping Prepare,
        following: @escaping Following
    ) {
        self.aheadRows = max(aheadRows, 1)
        let state = self.state
        let limit = self.aheadRows
        // Detached: nothing of the engine's actor is needed to fetch, and a page must not wait
        // for the engine's current commit to be asked for.
        fetcher = Task.detached {
            var ends = ends
            var run = run
            var request: Task<Result<Fetched, EngineFailure>, Never>? = Task { [run] in await fetch(run, cursor) }
            while let current = request {
                let result = await current.value
                let pageRun = run
                request = nil
                if case .success(let fetched) = result {
                    // The next page is asked for before this one is read and prepared: the
                    // next of this run, or the first of the next run.
                    if let next = fetched.next {
                        request = Task { [run] in await fetch(run, next) }
                    } else {
                        ends.append(fetched.cursor)
                        if let start = following(run, ends) {
                            run = start.run
                            request = Task { [run] in await fetch(run, start.cursor) }
                        }
                    }
                }
                let page = result.flatMap { prepare(pageRun, $0) }.map { page in
                    var page = page
                    page.run = pageRun
                    return page
                }
                guard await Self.put(page, last: request == nil, into: state, limit: limit) else {
                    request?.cancel()
                    return
                }
            }
        }
    }

    deinit {
        close()
    }

    /// The next page in order, or the failure that ended the fetching; ``Item/closed`` once
    /// closed. Never called twice at once.
    func next() async -> Item {
        await withCheckedContinuation { continuation in
            let (item, release) = state.withLock { state -> (Item?, (() -> Void)?) in
                if !state.waiting.isEmpty {
                    let first = state.waiting.removeFirst()
                    state.waitingRows -= first.rows
                    var release: (() -> Void)?
                    if let putter = state.putter {
                        state.putter = nil
                        state.waiting.append((putter.result, putter.rows))
                        state.waitingRows += putter.rows
                        release = { putter.continuation.resume(returning: true) }
                    }
                    return (Self.item(first.result), release)
                }
                if state.closed || state.ended { return (.closed, nil) }
                state.taker = continuation
                return (nil, nil)
            }
            release?()
            if let item { continuation.resume(returning: item) }
        }
    }

    /// Stops the fetching; pages not handed over are dropped (the server sends them again).
    func close() {
        fetcher.cancel()
        let resume = state.withLock { state -> [() -> Void] in
            state.closed = true
            state.waiting.removeAll()
            state.waitingRows = 0
            var resume: [() -> Void] = []
            if let taker = state.taker {
                state.taker = nil
                resume.append { taker.resume(returning: .closed) }
            }
            if let putter = state.putter {
                state.putter = nil
                resume.append { putter.continuation.resume(returning: false) }
            }
            return resume
        }
        for action in resume { action() }
    }

    /// Hands `result` to a waiting engine, or queues it (`last`: nothing comes after it); waits
    /// while ``aheadRows`` rows are already queued. False once closed: the fetching stops.
    private static func put(_ result: Result<Page, EngineFailure>, last: Bool, into state: Locked<State>, limit: Int) async -> Bool {
        let rows = (try? result.get())?.rowCount ?? 0
        return await withCheckedContinuation { continuation in
            let resume = state.withLock { state -> (() -> Void) in
                if state.closed { return { continuation.resume(returning: false) } }
                if last { state.ended = true }
                if let taker = state.taker {
                    state.taker = nil
                    return {
                        taker.resume(returning: item(result))
                        continuation.resume(returning: true)
                    }
                }
                if state.waiting.isEmpty || state.waitingRows + rows <= limit {
                    state.waiting.append((result, rows))
                    state.waitingRows += rows
                    return { continuation.resume(returning: true) }
                }
                state.putter = (result, rows, continuation)
                return {}
            }
            resume()
        }
    }

    private static func item(_ result: Result<Page, EngineFailure>) -> Item {
        switch result {
        case .success(let page): .page(page)
        case .failure(let failure): .failure(failure)
        }
    }
}
