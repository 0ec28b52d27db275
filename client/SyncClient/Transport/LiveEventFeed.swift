import Foundation
import SyncProtocol

/// The bytes of one live channel turned into ``LiveEvent``s, whoever reads them off the wire
/// (`LiveChannelConnection`'s URLSession delegate, or an ``HTTPExchange``'s stream): the
/// event-stream parser, the stream the events go to, and the watchdog that fails a silent
/// channel. Both paths share it so a pinned channel is read and timed out exactly as a plain one.
final class LiveEventFeed: Sendable {
    /// The channel's events; ends when ``end(failure:)`` is called, failing with
    /// ``TransportError/network(_:)`` when it was given a failure. Its consumer going away ends
    /// the feed ("closed by the device").
    let events: AsyncThrowingStream<LiveEvent, any Error>
    private let continuation: AsyncThrowingStream<LiveEvent, any Error>.Continuation

    private struct State {
        var parser = ServerSentEventParser()
        var lastActivity = Date()
        /// Silence longer than this means the connection is dead: the open timeout until
        /// `hello`, then 2.5 heartbeats.
        var silenceLimit: TimeInterval
        var watchdog: Task<Void, Never>?
        /// Told once, when the feed ends, so the reader closes its connection.
        var onEnd: (@Sendable (_ failure: String?) -> Void)?
    }

    private let state: Locked<State>

    /// - Parameters:
    ///   - openTimeout: the silence allowed until `hello` says the heartbeat.
    ///   - watchdogInterval: how often the watchdog looks at the silence.
    ///   - onEnd: called once when the feed ends, with the failure if it failed (the watchdog,
    ///     the consumer gone, a stream that cannot be parsed, or the reader's own failure).
    init(openTimeout: TimeInterval, watchdogInterval: Duration = .milliseconds(250), onEnd: @escaping @Sendable (_ failure: String?) -> Void) {
        // Unbounded: events are small and few (a poke per commit in a scope, a heartbeat), and a
        // consumer that falls behind must not make the reader drop one.
        (events, continuation) = AsyncThrowingStream.makeStream(of: LiveEvent.self, bufferingPolicy: .unbounded)
        state = Locked(State(silenceLimit: openTimeout, onEnd: onEnd))
        continuation.onTermination = { [weak self] _ in self?.end(failure: "closed by the device") }
        let watchdog = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: watchdogInterval)
                guard let self else { return }
                let (silence, limit) = self.state.withLock { (Date().timeIntervalSince($0.lastActivity), $0.silenceLimit) }
                if silence > limit {
                    let seconds = { (value: TimeInterval) in String(format: "%.1f", value) }
                    self.end(failure: "the live channel was silent for \(seconds(silence)) s (its limit: \(seconds(limit)) s)")
                    return
                }
            }
        }
        state.withLock { $0.watchdog = watchdog }
    }

    /// Something arrived that is not part of the event stream (a response head, an error body):
    /// the connection is alive.
    func touch() {
        state.withLock { $0.lastActivity = Date() }
    }

    /// Bytes of the event stream as they arrived (cut anywhere): yields the events they complete,
    /// and takes `hello`'s heartbeat as the new silence limit.
    func receive(_ data: Data) {
        let outcome = state.withLock { state in
            state.lastActivity = Date()
            return Result { () throws(ServerSentEventParser.Failure) in try state.parser.feed(data) }
        }
        switch outcome {
        case .failure(let failure):
            end(failure: failure.description)
        case .success(let events):
            for event in events.compactMap(LiveEvent.init) {
                if case .hello(let heartbeat) = event {
                    state.withLock { $0.silenceLimit = Double(heartbeat) / 1000 * 2.5 }
                }
                continuation.yield(event)
            }
        }
    }

    /// Ends the feed once: the stream finishes (throwing when `failure` is given), the watchdog
    /// stops, and `onEnd` is told. Later calls do nothing.
    func end(failure: String?) {
        let ending = state.withLock { state in
            defer {
                state.onEnd = nil
                state.watchdog = nil
            }
            return (state.onEnd, state.watchdog)
        }
        guard let onEnd = ending.0 else { return }
        ending.1?.cancel()
        if let failure {
            continuation.finish(throwing: TransportError.network(failure))
        } else {
            continuation.finish()
        }
        onEnd(failure)
    }
}
