import AsyncHTTPClient
public import Foundation
import NIOCore
import NIOHTTP1
public import SyncClient

#if canImport(FoundationNetworking)
    public import FoundationNetworking
#endif

/// HTTP and HTTPS through AsyncHTTPClient (SwiftNIO), for `URLSessionTransport(…, exchange:)`
/// on Linux.
///
/// Linux's URLSession runs on libcurl under swift-corelibs-foundation, which keeps a request's
/// socket armed for writing after the request has gone: the device's CPU then spins for as
/// long as it waits for the answer (docs/PERFORMANCE.md, `incremental-sync-cpu`). This exchange
/// waits on SwiftNIO's event loop instead, keeps its connections alive in AsyncHTTPClient's
/// pool (one pool per process), and inflates answers the server sent gzip-compressed (up to
/// `maximumBodyBytes`). A server's certificate is checked as a browser would; for pinned keys
/// use ``PinnedHTTPSExchange``.
///
/// ```swift
/// let transport = URLSessionTransport(
///     baseURL: server, tokenProvider: tokens, exchange: HTTPClientExchange(timeout: .seconds(30)))
/// ```
public struct HTTPClientExchange: HTTPExchange {
    /// How long ``send(_:)`` may take in all, its whole body included, and how long
    /// ``stream(_:)`` may wait for its answer's head.
    public let timeout: Duration
    /// The largest body ``send(_:)`` answers, after inflating; a larger one is a network error.
    public let maximumBodyBytes: Int

    /// - Parameters:
    ///   - timeout: how long ``send(_:)`` may take in all, and ``stream(_:)`` may wait for the
    ///     answer's head.
    ///   - maximumBodyBytes: the largest body ``send(_:)`` holds (default 256 MiB: a file's
    ///     largest range is 64 MiB and a pull page a few MiB).
    public init(timeout: Duration = .seconds(30), maximumBodyBytes: Int = 256 << 20) {
        self.timeout = timeout
        self.maximumBodyBytes = max(1, maximumBodyBytes)
    }

    /// One client for the whole process: its connection pool is what keeps connections alive
    /// between a sync's requests. Never shut down: it lives as long as the process.
    private static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.decompression = .enabled(limit: .size(256 << 20))
        configuration.timeout.connect = .seconds(30)
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    /// Sends `request` and answers its whole body (inflated when it came gzip-compressed).
    public func send(_ request: URLRequest) async throws(TransportError) -> (Data, HTTPURLResponse) {
        let (outbound, url) = try Self.outbound(request)
        let limit = maximumBodyBytes
        let result: Result<(Data, HTTPURLResponse), any Error> = await Self.within(timeout) {
            let response = try await Self.client.execute(outbound, timeout: TimeAmount(timeout))
            let head = try HTTPURLResponse.answering(url, status: response.status, headers: response.headers)
            let body = try await response.body.collect(upTo: limit)
            return (Data(body.readableBytesView), head)
        }
        switch result {
        case .success(let answer): return answer
        case .failure(let error as TransportError): throw error
        case .failure(let error): throw .network("\(Self.describe(url)): \(error)")
        }
    }

    /// The answer with its body yielded as it arrives, for the live channel: answered once its
    /// head has arrived (within the timeout); the body streams until the server ends it, and
    /// cancelling the consumer cancels the request, which closes its connection.
    public func stream(_ request: URLRequest) async throws(TransportError) -> (HTTPURLResponse, AsyncThrowingStream<Data, any Error>)? {
        let (outbound, url) = try Self.outbound(request)
        let response: HTTPClientResponse
        do {
            response = try await Self.client.execute(outbound, timeout: TimeAmount(timeout))
        } catch {
            throw .network("\(Self.describe(url)): \(error)")
        }
        let head = try HTTPURLResponse.answering(url, status: response.status, headers: response.headers)
        // Unbounded: the live channel's events are small and few, and the request is cancelled
        // when the consumer goes away, so nothing accumulates for nobody.
        let (body, continuation) = AsyncThrowingStream.makeStream(of: Data.self, bufferingPolicy: .unbounded)
        let reading = Task {
            do {
                for try await piece in response.body { continuation.yield(Data(piece.readableBytesView)) }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in reading.cancel() }
        return (head, body)
    }

    /// `request` as AsyncHTTPClient's, with its URL.
    private static func outbound(_ request: URLRequest) throws(TransportError) -> (HTTPClientRequest, URL) {
        guard let url = request.url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw .network("not an http or https URL: \(request.url?.absoluteString ?? "none")")
        }
        var outbound = HTTPClientRequest(url: url.absoluteString)
        outbound.method = HTTPMethod(rawValue: request.httpMethod ?? "GET")
        for (name, value) in request.allHTTPHeaderFields ?? [:] { outbound.headers.add(name: name, value: value) }
        if let body = request.httpBody { outbound.body = .bytes(ByteBuffer(bytes: body)) }
        return (outbound, url)
    }

    /// `body`'s result, or a network error once `timeout` has passed (`body` is then cancelled,
    /// which cancels its request).
    private static func within<T: Sendable>(
        _ timeout: Duration, _ body: @escaping @Sendable () async throws -> T
    ) async -> Result<T, any Error> {
        await withTaskGroup(of: Result<T, any Error>?.self) { group in
            group.addTask {
                do { return .success(try await body()) } catch { return .failure(error) }
            }
            group.addTask {
                do { try await Task.sleep(for: timeout) } catch { return nil }
                return .failure(TransportError.network("no whole answer within \(timeout)"))
            }
            var answer: Result<T, any Error> = .failure(CancellationError())
            for await finished in group {
                guard let finished else { continue }
                answer = finished
                break
            }
            group.cancelAll()
            return answer
        }
    }

    private static func describe(_ url: URL) -> String {
        "\(url.host ?? "?"):\(url.port.map(String.init) ?? (url.scheme == "https" ? "443" : "80"))"
    }
}
