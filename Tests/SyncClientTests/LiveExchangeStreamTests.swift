import Foundation
import SyncProtocol
import Testing

@testable import SyncClient

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The live channel through an ``HTTPExchange``'s stream: the same event parsing, watchdog and
/// status handling as the URLSession path (``LiveEventFeed``), fed by a scripted exchange.
@Suite struct LiveExchangeStreamTests {
    /// Answers each live request with the next scripted status and body chunks; records the
    /// tokens it was sent and whether a body stream was ended by its consumer.
    final class ScriptedExchange: HTTPExchange, @unchecked Sendable {
        struct Answer {
            var status: Int
            var chunks: [Data]
            /// Keep the stream open after the chunks (a channel that goes quiet).
            var staysOpen = false
        }

        private let lock = NSLock()
        private var answers: [Answer]
        private(set) var tokens: [String] = []
        private(set) var closedByConsumer = false

        init(_ answers: [Answer]) {
            self.answers = answers
        }

        func send(_ request: URLRequest) async throws(TransportError) -> (Data, HTTPURLResponse) {
            throw .network("not scripted")
        }

        func stream(_ request: URLRequest) async throws(TransportError) -> (HTTPURLResponse, AsyncThrowingStream<Data, any Error>)? {
            let answer = lock.withLock {
                tokens.append(request.value(forHTTPHeaderField: "Authorization") ?? "")
                return answers.removeFirst()
            }
            let (stream, continuation) = AsyncThrowingStream.makeStream(of: Data.self)
            continuation.onTermination = { [weak self] termination in
                if case .cancelled = termination { self?.lock.withLock { self?.closedByConsumer = true } }
            }
            for chunk in answer.chunks { continuation.yield(chunk) }
            if !answer.staysOpen { continuation.finish() }
            let response = HTTPURLResponse(url: request.url!, statusCode: answer.status, httpVersion: "HTTP/1.1", headerFields: [:])!
            return (response, stream)
        }
    }

    /// An exchange that cannot stream (the protocol's default).
    struct PlainExchange: HTTPExchange {
        func send(_ request: URLRequest) async throws(TransportError) -> (Data, HTTPURLResponse) {
            throw .network("not scripted")
        }
    }

    static func transport(_ exchange: any HTTPExchange, timeout: TimeInterval = 30) -> URLSessionTransport {
        let refreshes = LockedBox(0)
        return URLSessionTransport(
            baseURL: URL(string: "https://sync.example.test")!, timeout: timeout,
            tokenProvider: ClosureTokenProvider {
                var count = 0
                refreshes.mutate {
                    $0 += 1
                    count = $0
                }
                return "token-\(count)"
            }, exchange: exchange)
    }

    /// `text` cut into pieces of `size` bytes, splitting lines, CRLFs and fields anywhere.
    static func chunks(_ text: String, size: Int) -> [Data] {
        let bytes = Array(text.utf8)
        return stride(from: 0, to: bytes.count, by: size).map { Data(bytes[$0..<min($0 + size, bytes.count)]) }
    }

    @Test("events cut anywhere are parsed as the URLSession path parses them; the stream ends when the server ends it")
    func parsesChunkedEvents() async throws {
        let text =
            LiveEvent.hello(heartbeatMilliseconds: 15000).serverSentEvent + LiveEvent.heartbeat
            + LiveEvent.change(scope: "team:red", sequence: 42).serverSentEvent + "event: unknown\r\ndata: {}\r\n\r\n"
            + LiveEvent.bye(reason: .shutdown).serverSentEvent
        let exchange = ScriptedExchange([.init(status: 200, chunks: Self.chunks(text, size: 3))])
        let events = try #require(try await Self.transport(exchange).liveEvents())
        var received: [LiveEvent] = []
        for try await event in events { received.append(event) }
        #expect(received == [.hello(heartbeatMilliseconds: 15000), .change(scope: "team:red", sequence: 42), .bye(reason: .shutdown)])
    }

    @Test("a 401 asks for a fresh token once; a 404 answers nil; another status is the route's typed error")
    func statuses() async throws {
        let refused = ScriptedExchange([
            .init(status: 401, chunks: []), .init(status: 200, chunks: [Data(LiveEvent.hello(heartbeatMilliseconds: 1000).serverSentEvent.utf8)]),
        ])
        let events = try #require(try await Self.transport(refused).liveEvents())
        var received: [LiveEvent] = []
        for try await event in events { received.append(event) }
        #expect(received == [.hello(heartbeatMilliseconds: 1000)])
        #expect(refused.tokens == ["Bearer token-1", "Bearer token-2"])

        #expect(try await Self.transport(ScriptedExchange([.init(status: 404, chunks: [])])).liveEvents() == nil)

        let body = Data(#"{"error":{"code":"rate_limited","message":"slow down"}}"#.utf8)
        let limited = ScriptedExchange([.init(status: 429, chunks: Self.chunks(String(decoding: body, as: UTF8.self), size: 7))])
        do {
            _ = try await Self.transport(limited).liveEvents()
            Issue.record("a 429 opened the channel")
        } catch {
            guard case .http(429, let detail, _) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(detail?.error.message == "slow down")
        }

        let twice = ScriptedExchange([.init(status: 401, chunks: []), .init(status: 401, chunks: [])])
        await #expect(throws: TransportError.self) { _ = try await Self.transport(twice).liveEvents() }
    }

    @Test("a channel silent past its limit fails with the watchdog's network error and is closed")
    func silentChannelFails() async throws {
        let exchange = ScriptedExchange([.init(status: 200, chunks: [], staysOpen: true)])
        let events = try #require(try await Self.transport(exchange, timeout: 0.3).liveEvents())
        do {
            for try await _ in events {}
            Issue.record("a silent channel ended without failing")
        } catch {
            guard case .network(let message)? = error as? TransportError else {
                Issue.record("\(error)")
                return
            }
            #expect(message.contains("silent"), "\(message)")
        }
        #expect(exchange.closedByConsumer, "the exchange's stream was ended from the device's side")
    }

    @Test("cancelling the consumer closes the exchange's stream")
    func cancellingCloses() async throws {
        let exchange = ScriptedExchange([
            .init(status: 200, chunks: [Data(LiveEvent.hello(heartbeatMilliseconds: 60000).serverSentEvent.utf8)], staysOpen: true)
        ])
        let events = try #require(try await Self.transport(exchange).liveEvents())
        let consumer = Task {
            for try await _ in events {}
        }
        try await Task.sleep(for: .milliseconds(100))
        consumer.cancel()
        _ = await consumer.result
        let deadline = Date().addingTimeInterval(5)
        while !exchange.closedByConsumer, Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(exchange.closedByConsumer)
    }

    @Test("an exchange that cannot stream opens no channel")
    func plainExchange() async throws {
        #expect(try await Self.transport(PlainExchange()).liveEvents() == nil)
    }
}
