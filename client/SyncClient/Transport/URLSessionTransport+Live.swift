import Foundation
public import SyncProtocol

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionTransport {
    /// `GET /sync/v1/live` through a session of its own whose delegate receives the body as it
    /// arrives (the same code on Apple platforms and Linux). The stream fails with
    /// ``TransportError/network(_:)`` when nothing arrives for 2.5 heartbeats (the timeout of
    /// the request until `hello` says the heartbeat), and with the route's typed error when it
    /// answers anything but 200; a 401 asks the token provider for a fresh token once. A 404
    /// (a server without the channel) answers `nil`: the engine keeps to its timer, as it does
    /// with an ``exchange`` (whose checks a URLSession of its own would bypass).
    public func liveEvents() async throws(TransportError) -> AsyncThrowingStream<LiveEvent, any Error>? {
        guard exchange == nil else { return nil }
        var refresh = false
        while true {
            var request = makeRequest(path: "sync/v1/live", query: [])
            request.setValue("text/event-stream", forHTTPHeaderField: "Accept")
            request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
            if let appVersion { request.setValue(appVersion, forHTTPHeaderField: ProtocolHeaders.appVersion) }
            // The channel's own watchdog decides when it is dead; URLSession must not time it out first.
            request.timeoutInterval = 7 * 24 * 3600
            try await authorize(&request, refresh: refresh)
            let channel = LiveChannelConnection(request: request, openTimeout: timeout)
            switch await channel.open() {
            case .streaming(let events):
                return events
            case .refused(let status, let body, let retryAfter):
                if status == 401, !refresh {
                    refresh = true
                    continue
                }
                if status == 404 { return nil }
                throw Self.error(status: status, data: body, retryAfter: retryAfter)
            case .failed(let message):
                throw .network(message)
            }
        }
    }
}

/// One live channel on a URLSession of its own: parses the event stream as bytes arrive and
/// hands the events to an `AsyncThrowingStream`; cancelling the stream's consumer closes it.
final class LiveChannelConnection: NSObject, URLSessionDataDelegate, Sendable {
    enum Opening {
        case streaming(AsyncThrowingStream<LiveEvent, any Error>)
        case refused(status: Int, body: Data, retryAfter: String?)
        case failed(String)
    }

    /// Everything the delegate callbacks, the watchdog and the consumer share.
    private struct State {
        var session: URLSession?
        var task: URLSessionDataTask?
        var opening: CheckedContinuation<Opening, Never>?
        var refusal: (status: Int, body: Data, retryAfter: String?)?
        var parser = ServerSentEventParser()
        var continuation: AsyncThrowingStream<LiveEvent, any Error>.Continuation?
        var lastActivity = Date()
        /// Silence longer than this means the connection is dead: the open timeout until
        /// `hello`, then 2.5 heartbeats.
        var silenceLimit: TimeInterval
        var watchdog: Task<Void, Never>?
    }

    private let request: URLRequest
    private let state: Locked<State>

    init(request: URLRequest, openTimeout: TimeInterval) {
        self.request = request
        state = Locked(State(silenceLimit: openTimeout))
    }

    func open() async -> Opening {
        await withCheckedContinuation { continuation in
            let configuration = URLSessionConfiguration.ephemeral
            configuration.timeoutIntervalForRequest = request.timeoutInterval
            configuration.timeoutIntervalForResource = request.timeoutInterval
            configuration.urlCache = nil
            let session = URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
            let task = session.dataTask(with: request)
            let watchdog = Task { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(nanoseconds: 250_000_000)
                    guard let self else { return }
                    let (silence, limit) = self.state.withLock { (Date().timeIntervalSince($0.lastActivity), $0.silenceLimit) }
                    if silence > limit {
                        let seconds = { (value: TimeInterval) in String(format: "%.1f", value) }
                        self.finish(.failed("the live channel was silent for \(seconds(silence)) s (its limit: \(seconds(limit)) s)"))
                        return
                    }
                }
            }
            state.withLock { state in
                state.opening = continuation
                state.session = session
                state.task = task
                state.lastActivity = Date()
                state.watchdog = watchdog
            }
            task.resume()
        }
    }

    /// Ends the channel once: answers a pending `open()`, ends the stream, cancels the request.
    private func finish(_ outcome: Opening) {
        let ending = state.withLock { state in
            defer {
                state.opening = nil
                state.continuation = nil
                state.task = nil
                state.session = nil
                state.watchdog = nil
            }
            return (state.opening, state.continuation, state.task, state.session, state.watchdog)
        }
        let (opening, continuation, task, session, watchdog) = ending
        opening?.resume(returning: outcome)
        if case .failed(let message) = outcome {
            continuation?.finish(throwing: TransportError.network(message))
        } else {
            continuation?.finish()
        }
        watchdog?.cancel()
        task?.cancel()
        session?.invalidateAndCancel()
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        guard let http = response as? HTTPURLResponse else {
            completionHandler(.cancel)
            return finish(.failed("not an HTTP response"))
        }
        guard http.statusCode == 200 else {
            // Read the error body, answered at completion.
            state.withLock { $0.refusal = (http.statusCode, Data(), http.value(forHTTPHeaderField: "Retry-After")) }
            return completionHandler(.allow)
        }
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: LiveEvent.self, bufferingPolicy: .unbounded)
        continuation.onTermination = { [weak self] _ in self?.finish(.failed("closed by the device")) }
        let opening = state.withLock { state in
            state.continuation = continuation
            state.lastActivity = Date()
            defer { state.opening = nil }
            return state.opening
        }
        completionHandler(.allow)
        opening?.resume(returning: .streaming(stream))
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let outcome: Result<[ServerSentEvent], ServerSentEventParser.Failure>? = state.withLock { state in
            state.lastActivity = Date()
            if state.refusal != nil {
                state.refusal!.body.append(data)
                return nil
            }
            return Result { () throws(ServerSentEventParser.Failure) in try state.parser.feed(data) }
        }
        switch outcome {
        case nil:
            return
        case .failure(let failure):
            finish(.failed(failure.description))
        case .success(let events):
            let continuation = state.withLock { $0.continuation }
            for event in events.compactMap(LiveEvent.init) {
                if case .hello(let heartbeat) = event {
                    state.withLock { $0.silenceLimit = Double(heartbeat) / 1000 * 2.5 }
                }
                continuation?.yield(event)
            }
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        if let refusal = state.withLock({ $0.refusal }) {
            finish(.refused(status: refusal.status, body: refusal.body, retryAfter: refusal.retryAfter))
        } else if let error {
            finish(.failed(String(describing: error)))
        } else {
            // The server closed the stream (after `bye`, or without one): the channel ended.
            finish(.refused(status: 200, body: Data(), retryAfter: nil))
        }
    }
}
