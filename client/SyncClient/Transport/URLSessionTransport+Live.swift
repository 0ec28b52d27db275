import Foundation
public import SyncProtocol

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionTransport {
    /// `GET /sync/v1/live`, read as it arrives: through ``exchange``'s
    /// ``HTTPExchange/stream(_:)`` when there is an exchange (its checks, pins included, made on
    /// the channel's own connection before the request is written), else through a session of
    /// its own whose delegate receives the body (the same code on Apple platforms and Linux).
    /// Either way the stream fails with ``TransportError/network(_:)`` when nothing arrives for
    /// 2.5 heartbeats (the timeout of the request until `hello` says the heartbeat), and with
    /// the route's typed error when it answers anything but 200; a 401 asks the token provider
    /// for a fresh token once. A 404 (a server without the channel), or an exchange that cannot
    /// stream, answers `nil`: the engine keeps to its timer.
    public func liveEvents() async throws(TransportError) -> AsyncThrowingStream<LiveEvent, any Error>? {
        var refresh = false
        while true {
            var request = makeRequest(path: "sync/v1/live", query: [])
            request.setValue("text/event-stream", forHTTPHeaderField: "Accept")
            request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
            if let appVersion { request.setValue(appVersion, forHTTPHeaderField: ProtocolHeaders.appVersion) }
            // The channel's own watchdog decides when it is dead; URLSession must not time it out first.
            request.timeoutInterval = 7 * 24 * 3600
            try await authorize(&request, refresh: refresh)
            let opening: LiveChannelOpening
            if let exchange {
                guard let (response, body) = try await exchange.stream(request) else { return nil }
                opening = await Self.openLiveChannel(response: response, body: body, openTimeout: timeout)
            } else {
                opening = await LiveChannelConnection(request: request, openTimeout: timeout).open()
            }
            switch opening {
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

    /// The live channel from an exchange's streamed answer: a 200's body read into a
    /// ``LiveEventFeed`` by a task of its own (ending the feed cancels the task, which closes the
    /// exchange's stream and so its connection); any other status with its error body.
    static func openLiveChannel(
        response: HTTPURLResponse, body: AsyncThrowingStream<Data, any Error>, openTimeout: TimeInterval
    ) async -> LiveChannelOpening {
        guard response.statusCode == 200 else {
            var data = Data()
            do {
                for try await chunk in body {
                    data.append(chunk)
                    // An error body is a small JSON document; more is not worth waiting for.
                    if data.count > 64 * 1024 { break }
                }
            } catch {
                // The status is the answer; a body cut short only loses its details.
            }
            return .refused(status: response.statusCode, body: data, retryAfter: response.value(forHTTPHeaderField: "Retry-After"))
        }
        // The reader, or whether the feed ended before it was set (then it is cancelled at once).
        let reader = Locked<(task: Task<Void, Never>?, ended: Bool)>((nil, false))
        let feed = LiveEventFeed(openTimeout: openTimeout) { _ in
            reader.withLock { state in
                state.ended = true
                return state.task
            }?.cancel()
        }
        let task = Task {
            do {
                for try await chunk in body { feed.receive(chunk) }
                // The server closed the stream (after `bye`, or without one): the channel ended.
                feed.end(failure: nil)
            } catch {
                feed.end(failure: String(describing: error))
            }
        }
        let ended = reader.withLock { state in
            state.task = task
            return state.ended
        }
        if ended { task.cancel() }
        return .streaming(feed.events)
    }
}

/// How opening the live channel went.
enum LiveChannelOpening {
    case streaming(AsyncThrowingStream<LiveEvent, any Error>)
    case refused(status: Int, body: Data, retryAfter: String?)
    case failed(String)
}

/// One live channel on a URLSession of its own: hands the bytes to a ``LiveEventFeed`` as they
/// arrive; the feed ending (its watchdog, its consumer gone) cancels the request.
final class LiveChannelConnection: NSObject, URLSessionDataDelegate, Sendable {
    /// Everything the delegate callbacks and the feed share.
    private struct State {
        var session: URLSession?
        var task: URLSessionDataTask?
        var opening: CheckedContinuation<LiveChannelOpening, Never>?
        var refusal: (status: Int, body: Data, retryAfter: String?)?
        var feed: LiveEventFeed?
    }

    private let request: URLRequest
    private let openTimeout: TimeInterval
    private let state = Locked(State())

    init(request: URLRequest, openTimeout: TimeInterval) {
        self.request = request
        self.openTimeout = openTimeout
    }

    func open() async -> LiveChannelOpening {
        await withCheckedContinuation { continuation in
            let configuration = URLSessionConfiguration.ephemeral
            configuration.timeoutIntervalForRequest = request.timeoutInterval
            configuration.timeoutIntervalForResource = request.timeoutInterval
            configuration.urlCache = nil
            let session = URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
            let task = session.dataTask(with: request)
            // Made now so its watchdog also times out an opening that never answers.
            let feed = LiveEventFeed(openTimeout: openTimeout) { [weak self] failure in
                self?.finish(.failed(failure ?? "the live channel ended"))
            }
            state.withLock { state in
                state.opening = continuation
                state.session = session
                state.task = task
                state.feed = feed
            }
            task.resume()
        }
    }

    /// Ends the channel once: answers a pending `open()`, ends the feed, cancels the request.
    private func finish(_ outcome: LiveChannelOpening) {
        let ending = state.withLock { state in
            defer {
                state.opening = nil
                state.task = nil
                state.session = nil
                state.feed = nil
            }
            return (state.opening, state.feed, state.task, state.session)
        }
        let (opening, feed, task, session) = ending
        opening?.resume(returning: outcome)
        if case .failed(let message) = outcome {
            feed?.end(failure: message)
        } else {
            feed?.end(failure: nil)
        }
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
            let feed = state.withLock { state in
                state.refusal = (http.statusCode, Data(), http.value(forHTTPHeaderField: "Retry-After"))
                return state.feed
            }
            feed?.touch()
            return completionHandler(.allow)
        }
        let (opening, feed) = state.withLock { state in
            defer { state.opening = nil }
            return (state.opening, state.feed)
        }
        feed?.touch()
        completionHandler(.allow)
        if let feed { opening?.resume(returning: .streaming(feed.events)) }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let (refused, feed) = state.withLock { state in
            if state.refusal != nil { state.refusal!.body.append(data) }
            return (state.refusal != nil, state.feed)
        }
        if refused {
            feed?.touch()
        } else {
            feed?.receive(data)
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
