import ContractRuntime
import Foundation
package import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle
import SyncProtocol

/// How a server delivers its sinks: the webhooks and learning record stores a tenant's applied
/// changes go to (`sync-server sinks`, docs/integration.md).
public struct SinkDeliveryConfiguration: Sendable, Hashable {
    /// Whether this process delivers sinks at all (several processes may; one holds each sink).
    public var isEnabled = true
    /// Changes per batch at most.
    public var batchSize = 100
    /// Bytes of changes per batch at most (their JSON); a single change larger than this is sent
    /// alone. Rows may be as large as their contracts allow: a batch of 100 must not be 100 of them.
    public var maximumBatchBytes = 1 << 20
    /// How long a receiver has to take a batch: connecting, its answer's head and its body, all
    /// within it (never more than half of ``lease``).
    public var requestTimeout: Duration = .seconds(10)
    /// How long a process holds a sink without renewing it; another process takes a sink whose
    /// holder stopped (killed, cut off) once its lease ran out.
    public var lease: Duration = .seconds(30)
    /// How often a process looks for sinks no one holds (added, or left by a stopped process).
    public var pollInterval: Duration = .seconds(5)
    /// The wait after a batch's first failure; each further failure doubles it, up to
    /// ``maximumBackoff``, and the wait is drawn at random from its upper half (jitter).
    public var initialBackoff: Duration = .seconds(1)
    /// The longest wait between two attempts of a batch (before jitter).
    public var maximumBackoff: Duration = .seconds(300)

    /// The defaults: every process delivers, batches of 100, 10 s to answer, a 30 s lease.
    public init() {}
}

/// Delivers every sink of the storage (``Sink``): reads its tenant's change feed from its
/// cursor, POSTs batches signed with `Outpost-Signature`, retries with exponential backoff and
/// jitter (honouring `Retry-After`), parks refused batches as dead letters, and moves the sink's
/// cursor only once its receiver acknowledged.
///
/// At least once: a batch is recorded (its end and its idempotency key) before it is sent, and
/// the cursor moves past it after the 2xx, so a crash at any point sends it again, under the
/// same key; a receiver that deduplicates by `Idempotency-Key` sees each batch once. In order:
/// one process at a time holds a sink (a lease in the database), and sends one batch at a time,
/// in commit order, so a scope's changes arrive in the order they were applied.
package final class SinkDelivery: Service, Sendable {
    let store: SinkStore
    let feed: ChangeFeed
    let catalog: ContractCatalog
    let configuration: SinkDeliveryConfiguration
    let metrics: ServerMetrics
    let clock: any ServerClock
    let logger: Logger
    /// Where deliveries may connect (``ServerConfiguration/outboundAllowList``).
    let outbound: OutboundAddressPolicy
    /// The kinds of sink this server has (the webhook, and its apps').
    let kinds: SinkKinds
    /// This process's name in the sinks' leases.
    let holder = "process-" + UUID().uuidString.lowercased()
    private let commits = CommitSignal()
    /// Wakes the look for new sinks (a sink was added here).
    private let sinksChanged = CommitSignal()

    package init(
        storage: any SyncStorage, configuration: SinkDeliveryConfiguration, metrics: ServerMetrics, clock: any ServerClock, logger: Logger,
        outbound: OutboundAddressPolicy = OutboundAddressPolicy(), kinds: SinkKinds = SinkKinds()
    ) {
        self.outbound = outbound
        self.kinds = kinds
        store = SinkStore(storage: storage)
        feed = ChangeFeed(storage: storage)
        catalog = storage.contracts
        self.configuration = configuration
        self.metrics = metrics
        self.clock = clock
        self.logger = logger
        let commits = self.commits
        storage.observeCommits { _ in commits.signal() }
    }

    /// Tells the process to look for sinks now rather than at its next poll.
    package func sinkAdded() { sinksChanged.signal() }

    package func run() async throws {
        guard configuration.isEnabled else { return }
        await cancelWhenGracefulShutdown {
            await self.deliverAll()
        }
    }

    /// Looks for sinks every poll interval and delivers each one this process can hold, in a
    /// task of its own, until cancelled.
    private func deliverAll() async {
        let running = NIOLockedValueBox(Set<String>())
        // Sinks already reported as unreadable (said once, not at every look).
        var unreadable = Set<String>()
        await withDiscardingTaskGroup { group in
            while !Task.isCancelled {
                let generation = sinksChanged.generation
                do {
                    let now = clock.now().millisecondsSince1970
                    for sink in try await store.sinks() where !running.withLockedValue({ $0.contains(Self.key(sink)) }) {
                        guard sink.secretsReadable else {
                            if unreadable.insert(Self.key(sink)).inserted {
                                logger.error("sink \(sink.id) of \(sink.tenant): its secrets do not open with this server's audit key; not delivered")
                            }
                            continue
                        }
                        guard sink.leaseHolder == nil || sink.leaseHolder == holder || sink.leaseUntil < now else { continue }
                        guard let claimed = try await store.claim(tenant: sink.tenant, id: sink.id, holder: holder, now: now, until: leaseEnd())
                        else { continue }
                        running.withLockedValue { _ = $0.insert(Self.key(claimed)) }
                        group.addTask {
                            await self.deliver(claimed)
                            running.withLockedValue { _ = $0.remove(Self.key(claimed)) }
                        }
                    }
                } catch {
                    logger.warning("sinks: cannot read the sinks (tried again in \(configuration.pollInterval)): \(error)")
                }
                await sinksChanged.wait(after: generation, until: .now + configuration.pollInterval)
            }
        }
    }

    private static func key(_ sink: Sink) -> String { sink.tenant + "\u{0}" + sink.id }

    private func leaseEnd() -> Int64 {
        clock.now().millisecondsSince1970 + configuration.lease.milliseconds
    }

    /// How long a receiver has, for the whole exchange: never past half the lease, which is
    /// renewed right before each send, so that no other process takes the sink while a batch is
    /// still being sent.
    private var requestTimeout: Duration { min(configuration.requestTimeout, configuration.lease / 2) }

    /// Delivers one sink while this process holds it: until cancelled, the sink removed, or the
    /// lease lost. A storage failure ends the turn; the sink is taken again at the next poll.
    private func deliver(_ claimed: Sink) async {
        var sink = claimed
        let renewEvery = configuration.lease / 3
        do {
            while !Task.isCancelled {
                let now = clock.now().millisecondsSince1970
                if sink.nextAttemptAt > now {
                    let wait = min(Duration.milliseconds(sink.nextAttemptAt - now), renewEvery)
                    try? await Task.sleep(for: wait)
                    guard try await store.renew(sink, holder: holder, until: leaseEnd()) else { break }
                    continue
                }
                let generation = commits.generation
                guard let next = try await step(sink) else { break }
                if next.waitForCommits {
                    await commits.wait(after: generation, until: .now + renewEvery)
                    guard try await store.renew(next.sink, holder: holder, until: leaseEnd()) else { break }
                }
                // Read again: an operator may have removed the sink or a replay changed it.
                guard let current = try await store.sink(tenant: sink.tenant, id: sink.id), current.leaseHolder == holder, current.secretsReadable
                else { break }
                sink = current
            }
            if Task.isCancelled {
                // Given back from a task of its own: this one is cancelled, and a storage call
                // of a cancelled task ends before it starts.
                let (store, holder, last) = (store, holder, sink)
                try await Task { try await store.release(last, holder: holder) }.value
            }
        } catch {
            logger.warning("sink \(sink.id): delivery paused (taken again at the next poll): \(error)")
        }
    }

    /// What one step left: the sink, and whether there was nothing to send.
    private struct Step {
        var sink: Sink
        var waitForCommits: Bool
    }

    /// Sends the batch in flight, or starts the next one; `nil` when the lease was lost.
    private func step(_ sink: Sink) async throws -> Step? {
        let contracts = sink.contracts.map(Set.init)
        var sink = sink
        guard let kind = kinds.kind(named: sink.kind) else {
            // Its app is not among this server's (removed, or another process's build): nothing
            // is skipped; the sink waits, as after a failed delivery, for a server that has it.
            let (now, wait) = (clock.now().millisecondsSince1970, Int64(configuration.maximumBackoff.seconds * 1000))
            let reason = "this server has no sink kind '\(sink.kind)'"
            logger.error("sink \(sink.id): \(reason); delivery waits for a server that has it")
            guard
                try await store.failed(
                    sink, attempts: sink.attempts + 1, nextAttemptAt: now + wait, error: reason, holder: holder, leaseUntil: leaseEnd())
            else { return nil }
            sink.attempts += 1
            sink.nextAttemptAt = now + wait
            return Step(sink: sink, waitForCommits: false)
        }
        var page: ChangeFeed.Page
        let pending: Sink.Pending
        do {
            if let inFlight = sink.pending {
                page = try await feed.page(
                    tenant: sink.tenant, after: sink.cursor, contracts: contracts, limit: configuration.batchSize, until: inFlight.until)
                pending = inFlight
            } else {
                page = try await feed.page(tenant: sink.tenant, after: sink.cursor, contracts: contracts, limit: configuration.batchSize)
                guard !page.changes.isEmpty else {
                    if page.cursor != sink.cursor {
                        guard try await store.skip(sink, to: page.cursor, holder: holder, leaseUntil: leaseEnd()) else { return nil }
                        sink.cursor = page.cursor
                    }
                    return Step(sink: sink, waitForCommits: true)
                }
                page = Self.trimmed(page, toBytes: configuration.maximumBatchBytes)
                pending = Sink.Pending(until: page.cursor, key: "\(sink.id)-\(sink.cursor.text)")
                guard try await store.begin(sink, pending: pending, holder: holder, leaseUntil: leaseEnd()) else { return nil }
                sink.pending = pending
            }
        } catch let error as ServiceError where error.detail.code == .cursorExpired {
            // The log was archived past the sink: it resumes at the oldest change kept.
            logger.error("sink \(sink.id): \(error.detail.message); it resumes at the oldest change kept")
            let restart = try await feed.page(tenant: sink.tenant, after: nil, contracts: contracts, limit: 1)
            let start = restart.changes.isEmpty ? restart.cursor : ChangeFeed.Cursor(entry: restart.cursor.entry, passed: 0)
            guard try await store.skip(sink, to: start, holder: holder, leaseUntil: leaseEnd()) else { return nil }
            sink.cursor = start
            sink.pending = nil
            return Step(sink: sink, waitForCommits: false)
        }
        guard let request = request(for: sink, kind: kind, changes: page.changes, key: pending.key) else {
            // Nothing of the batch is left to send (rows a later change moved on, rows that map
            // to no statement): the sink moves past it.
            guard try await store.skip(sink, to: pending.until, holder: holder, leaseUntil: leaseEnd()) else { return nil }
            sink.cursor = pending.until
            sink.pending = nil
            return Step(sink: sink, waitForCommits: false)
        }
        // The lease is renewed right before the send: it outlasts the whole exchange (at most half
        // the lease), so no other process sends this batch meanwhile.
        guard try await store.renew(sink, holder: holder, until: leaseEnd()) else { return nil }
        let started = ContinuousClock.now
        let outcome = await request.send(
            policy: outbound, secret: sink.secrets.signing, timeout: requestTimeout, now: clock.now().millisecondsSince1970)
        let now = clock.now().millisecondsSince1970
        metrics.recordSinkAttempt(tenant: sink.tenant, sink: sink.id, outcome: outcome, seconds: (ContinuousClock.now - started).seconds)
        switch outcome {
        case .delivered:
            guard try await store.delivered(sink, to: pending.until, changes: page.changes.count, at: now, holder: holder, leaseUntil: leaseEnd())
            else { return nil }
            metrics.recordSinkDelivery(tenant: sink.tenant, sink: sink.id, lags: page.changes.compactMap { Self.lag(of: $0, now: now) })
            sink.cursor = pending.until
            sink.pending = nil
            sink.attempts = 0
        case .retry(let reason, let retryAfter):
            let attempts = sink.attempts + 1
            let wait = retryAfter.map { Int64(min($0, 3600)) * 1000 } ?? backoff(attempts: attempts)
            logger.info("sink \(sink.id): batch \(pending.key) failed (\(reason)); attempt \(attempts + 1) in \(wait) ms")
            guard try await store.failed(sink, attempts: attempts, nextAttemptAt: now + wait, error: reason, holder: holder, leaseUntil: leaseEnd())
            else { return nil }
            sink.attempts = attempts
            sink.nextAttemptAt = now + wait
        case .refused(let status):
            logger.warning("sink \(sink.id): batch \(pending.key) refused with HTTP \(status); parked as a dead letter")
            let letter = DeadLetter(
                id: 0, sinkID: sink.id, idempotencyKey: pending.key, body: String(decoding: request.body, as: UTF8.self),
                changes: page.changes.count, status: status, failedAt: now)
            guard try await store.deadLetter(sink, to: pending.until, letter: letter, holder: holder, leaseUntil: leaseEnd()) else { return nil }
            metrics.recordDeadLetter(tenant: sink.tenant, sink: sink.id)
            sink.cursor = pending.until
            sink.pending = nil
        }
        return Step(sink: sink, waitForCommits: false)
    }

    /// The first changes of `page` whose JSON fits in `bytes` (at least one), ending at the
    /// cursor after the last of them. A batch sent again reads the feed up to that cursor, so it
    /// never grows past what was measured here.
    static func trimmed(_ page: ChangeFeed.Page, toBytes bytes: Int) -> ChangeFeed.Page {
        var total = 0
        for (index, change) in page.changes.enumerated() {
            total += CanonicalJSON.bytes(change).count + 1
            guard total > bytes, index > 0 else { continue }
            guard case .object(let object) = page.changes[index - 1], case .string(let text)? = object["cursor"],
                let end = ChangeFeed.Cursor(text: text)
            else { return page }
            return ChangeFeed.Page(changes: Array(page.changes[..<index]), cursor: end, hasMore: true)
        }
        return page
    }

    /// Milliseconds to wait after `attempts` failures: exponential, capped, with jitter over
    /// its upper half so that many sinks failing together do not retry together.
    func backoff(attempts: Int) -> Int64 {
        let ceiling = min(configuration.maximumBackoff.seconds, configuration.initialBackoff.seconds * pow(2, Double(min(attempts - 1, 30))))
        return Int64(Double.random(in: (ceiling / 2)...ceiling) * 1000)
    }

    /// The request of a batch, or `nil` when it holds nothing to send.
    func request(for sink: Sink, kind: any SinkKind, changes: [JSONValue], key: String) -> SinkRequest? {
        guard !changes.isEmpty else { return nil }
        let settings = sink.settings
        let batch = SinkBatch(sinkID: sink.id, tenant: sink.tenant, idempotencyKey: key, changes: changes, settings: settings)
        guard let body = kind.body(for: batch) else { return nil }
        return SinkRequest(
            url: kind.destination(of: sink.url, settings: settings), body: Array(body),
            headers: SinkAdministration.headers(of: sink, kind: kind, key: key))
    }

    /// Seconds from a change's commit to now.
    private static func lag(of change: JSONValue, now: Int64) -> Double? {
        guard case .object(let object) = change, case .string(let text)? = object["recorded_at"], let recorded = Timestamp(iso8601: text)
        else { return nil }
        return Double(now - recorded.millisecondsSince1970) / 1000
    }
}

extension Duration {
    /// In seconds, as a `Double`.
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
