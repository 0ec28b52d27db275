public import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOTLS
import SwiftASN1
public import SyncClient
import X509

#if canImport(FoundationNetworking)
    public import FoundationNetworking
#endif

/// HTTPS whose every connection is checked against ``PublicKeyPins``, for
/// `URLSessionTransport(…, exchange:)` where URLSession cannot pin (Linux's has no server-trust
/// hook).
///
/// Each request opens its own TLS connection (HTTP/1.1). During the handshake the served chain
/// is validated as a browser would (a trusted root, validity dates, the URL's host name or IP
/// address, by swift-certificates), then the keys of the validated chain are compared with the
/// pins: a match on any passes. The request is written only once the handshake has passed, so a
/// refused server receives nothing. Pins are checked against the validated chain, not every
/// certificate served: a pinned certificate appended to an otherwise valid chain does not pass.
public struct PinnedHTTPSExchange: HTTPExchange {
    /// The keys accepted.
    public let pins: PublicKeyPins
    private let roots: CertificateStore
    private let context: NIOSSLContext
    private let timeout: Duration

    /// - Parameters:
    ///   - pins: the keys accepted (at least one; keep a backup pin).
    ///   - additionalTrustRoots: PEM files of CA certificates trusted beside the system's roots
    ///     (a private CA).
    ///   - timeout: how long one request may take, connection and handshake included.
    public init(pins: PublicKeyPins, additionalTrustRoots: [URL] = [], timeout: Duration = .seconds(30)) throws(TrustRootsError) {
        self.pins = pins
        self.timeout = timeout
        var roots = CertificateStore.systemTrustRoots
        for file in additionalTrustRoots {
            do {
                let certificates = try NIOSSLCertificate.fromPEMFile(file.path)
                guard !certificates.isEmpty else { throw TrustRootsError("\(file.path) holds no PEM certificate") }
                roots.append(contentsOf: try certificates.map { try Certificate(derEncoded: $0.toDERBytes()) })
            } catch let error as TrustRootsError {
                throw error
            } catch {
                throw TrustRootsError("cannot read the CA certificates of \(file.path): \(error)")
            }
        }
        self.roots = roots
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        do {
            context = try NIOSSLContext(configuration: configuration)
        } catch {
            throw TrustRootsError("cannot set up TLS: \(error)")
        }
    }

    /// Sends `request` over HTTPS with the pins checked, and answers the body and response.
    public func send(_ request: URLRequest) async throws(TransportError) -> (Data, HTTPURLResponse) {
        let (url, host, port) = try Self.target(of: request)
        let refusal = NIOLockedValueBox<TransportError?>(nil)
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        let answer = eventLoop.makePromise(of: (HTTPResponseHead, ByteBuffer).self)
        let (head, body) = Self.requestParts(request, url: url, host: host, port: port)
        let bootstrap = makeBootstrap(eventLoop: eventLoop, host: host, refusal: refusal, request: (head, body)) { _ in
            OneExchangeHandler(answer: answer)
        }
        let timeout = self.timeout
        let deadline = eventLoop.scheduleTask(in: TimeAmount(timeout)) {
            answer.fail(ExchangeFailure("no answer within \(timeout)"))
        }
        defer { deadline.cancel() }
        let channel: any Channel
        do {
            channel = try await bootstrap.connect(host: host, port: port).get()
        } catch {
            answer.fail(error)
            throw .network("cannot connect to \(host):\(port): \(error)")
        }
        let responseHead: HTTPResponseHead
        let responseBody: ByteBuffer
        do {
            (responseHead, responseBody) = try await answer.futureResult.get()
        } catch {
            channel.close(promise: nil)
            if let refused = refusal.withLockedValue({ $0 }) { throw refused }
            throw .network("\(host):\(port): \(error)")
        }
        return (Data(responseBody.readableBytesView), try HTTPURLResponse.answering(url, status: responseHead.status, headers: responseHead.headers))
    }

    /// The answer streamed on a connection of its own, checked as ``send(_:)`` checks (the
    /// request is written only once the chain and the pins have passed): answered once the
    /// response head arrived, its body yielded as it arrives. The timeout bounds the connection,
    /// the handshake and the wait for the head, and an error answer's whole body; a 2xx body
    /// streams until the server ends it. Cancelling the consumer closes the connection.
    public func stream(_ request: URLRequest) async throws(TransportError) -> (HTTPURLResponse, AsyncThrowingStream<Data, any Error>)? {
        let (url, host, port) = try Self.target(of: request)
        let refusal = NIOLockedValueBox<TransportError?>(nil)
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        let opened = eventLoop.makePromise(of: HTTPResponseHead.self)
        // Unbounded: the live channel's events are small and few; the connection is closed when
        // the consumer goes away, so nothing accumulates for nobody.
        let (body, continuation) = AsyncThrowingStream.makeStream(of: Data.self, bufferingPolicy: .unbounded)
        let (head, requestBody) = Self.requestParts(request, url: url, host: host, port: port)
        let timeout = self.timeout
        let bootstrap = makeBootstrap(eventLoop: eventLoop, host: host, refusal: refusal, request: (head, requestBody)) { channel in
            let deadline = channel.eventLoop.scheduleTask(in: TimeAmount(timeout)) {
                opened.fail(ExchangeFailure("no answer within \(timeout)"))
                continuation.finish(throwing: ExchangeFailure("the answer did not end within \(timeout)"))
                channel.close(promise: nil)
            }
            return StreamingExchangeHandler(opened: opened, continuation: continuation, deadline: deadline)
        }
        let channel: any Channel
        do {
            channel = try await bootstrap.connect(host: host, port: port).get()
        } catch {
            opened.fail(error)
            continuation.finish(throwing: error)
            throw .network("cannot connect to \(host):\(port): \(error)")
        }
        continuation.onTermination = { _ in channel.close(promise: nil) }
        let responseHead: HTTPResponseHead
        do {
            responseHead = try await opened.futureResult.get()
        } catch {
            channel.close(promise: nil)
            if let refused = refusal.withLockedValue({ $0 }) { throw refused }
            throw .network("\(host):\(port): \(error)")
        }
        return (try HTTPURLResponse.answering(url, status: responseHead.status, headers: responseHead.headers), body)
    }

    /// The URL, host and port of `request`, which must be `https`.
    private static func target(of request: URLRequest) throws(TransportError) -> (URL, String, Int) {
        guard let url = request.url, url.scheme?.lowercased() == "https", let host = url.host, !host.isEmpty else {
            throw .network("a pinned connection needs an https URL, not \(request.url?.absoluteString ?? "none")")
        }
        return (url, host, url.port ?? 443)
    }

    /// A connection to `host` whose TLS handshake validates the chain and checks the pins
    /// (recording why it refused in `refusal`), then HTTP/1.1; `request` is written once the
    /// handshake passed, and the handler `exchange` makes reads the answer.
    private func makeBootstrap(
        eventLoop: any EventLoop, host: String, refusal: NIOLockedValueBox<TransportError?>,
        request: (head: HTTPRequestHead, body: ByteBuffer?),
        exchange: @escaping @Sendable (any Channel) -> any ChannelHandler
    ) -> ClientBootstrap {
        let isAddress = (try? SocketAddress(ipAddress: host, port: 0)) != nil
        let (context, roots, pins) = (self.context, self.roots, self.pins)
        let verify: @Sendable ([NIOSSLCertificate], EventLoopPromise<NIOSSLVerificationResult>) -> Void = { served, verdict in
            verdict.completeWithTask {
                if let error = await Self.check(served, host: host, isAddress: isAddress, roots: roots, pins: pins) {
                    refusal.withLockedValue { $0 = error }
                    return .failed
                }
                return .certificateVerified
            }
        }
        return ClientBootstrap(group: eventLoop)
            .connectTimeout(TimeAmount(timeout))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let tls = try NIOSSLClientHandler(
                        context: context, serverHostname: isAddress ? nil : host, customVerificationCallback: verify)
                    try channel.pipeline.syncOperations.addHandler(tls)
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(RequestAfterHandshake(head: request.head, body: request.body))
                    try channel.pipeline.syncOperations.addHandler(exchange(channel))
                }
            }
    }

    /// The request's head and body as NIO writes them: its headers, but `identity` as the only
    /// encoding accepted (nothing here inflates gzip) and a connection closed after its answer.
    private static func requestParts(_ request: URLRequest, url: URL, host: String, port: Int) -> (HTTPRequestHead, ByteBuffer?) {
        var path = url.path.isEmpty ? "/" : url.path
        if let query = URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedQuery { path += "?" + query }
        var headers = HTTPHeaders()
        for (name, value) in request.allHTTPHeaderFields ?? [:] where name.lowercased() != "accept-encoding" {
            headers.add(name: name, value: value)
        }
        let hostHeader = host.contains(":") ? "[\(host)]" : host
        headers.replaceOrAdd(name: "Host", value: port == 443 ? hostHeader : "\(hostHeader):\(port)")
        headers.replaceOrAdd(name: "Accept-Encoding", value: "identity")
        headers.replaceOrAdd(name: "Connection", value: "close")
        let body = request.httpBody.map { ByteBuffer(bytes: $0) }
        headers.replaceOrAdd(name: "Content-Length", value: String(body?.readableBytes ?? 0))
        let method = HTTPMethod(rawValue: request.httpMethod ?? "GET")
        return (HTTPRequestHead(version: .http1_1, method: method, uri: path, headers: headers), body)
    }

    /// Why `served` may not be trusted for `host`, or `nil` when it may: a chain to one of
    /// `roots` for `host`, with a key among `pins`.
    static func check(_ served: [NIOSSLCertificate], host: String, isAddress: Bool, roots: CertificateStore, pins: PublicKeyPins) async
        -> TransportError?
    {
        let chain: [Certificate]
        do {
            chain = try served.map { try Certificate(derEncoded: $0.toDERBytes()) }
        } catch {
            return .network("the server's certificate could not be read: \(error)")
        }
        guard let leaf = chain.first else { return .network("the server sent no certificate") }
        var verifier = Verifier(rootCertificates: roots) {
            RFC5280Policy()
            ServerIdentityPolicy(serverHostname: isAddress ? nil : host, serverIP: isAddress ? host : nil)
        }
        switch await verifier.validate(leaf: leaf, intermediates: CertificateStore(chain.dropFirst())) {
        case .validCertificate(let validated):
            let keys: [String]
            do {
                keys = try validated.map { certificate in
                    // The whole DER SubjectPublicKeyInfo (algorithm and key), as pin-sha256 hashes it.
                    var serializer = DER.Serializer()
                    try serializer.serialize(certificate.publicKey)
                    return PublicKeyPins.pin(subjectPublicKeyInfo: serializer.serializedBytes)
                }
            } catch {
                return .network("the server's public key could not be read: \(error)")
            }
            return pins.matches(anyOf: keys) ? nil : .publicKeyPinMismatch(expected: pins.sha256, served: keys)
        case .couldNotValidate(let failures):
            let reason = failures.first.map { "\($0.policyFailureReason)" } ?? "it does not chain to a trusted root certificate"
            return .network("the server's certificate is not trusted for \(host): \(reason)")
        }
    }
}

/// Why ``PinnedHTTPSExchange`` could not be set up.
public struct TrustRootsError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, with the file or step concerned.
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}

struct ExchangeFailure: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// Writes the request when the TLS handshake has passed (the chain validated and the pins
/// checked): nothing of it leaves before.
private final class RequestAfterHandshake: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let head: HTTPRequestHead
    private let body: ByteBuffer?

    init(head: HTTPRequestHead, body: ByteBuffer?) {
        self.head = head
        self.body = body
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted? = event as? TLSUserEvent {
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            if let body { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }
}

/// Collects the answer to the request ``RequestAfterHandshake`` wrote.
private final class OneExchangeHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let answer: EventLoopPromise<(HTTPResponseHead, ByteBuffer)>
    private var responseHead: HTTPResponseHead?
    private var responseBody = ByteBuffer()
    private var isDone = false

    init(answer: EventLoopPromise<(HTTPResponseHead, ByteBuffer)>) {
        self.answer = answer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            responseHead = head
        case .body(var bytes):
            responseBody.writeBuffer(&bytes)
        case .end:
            if let responseHead { finish(.success((responseHead, responseBody))) }
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(.failure(error))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(.failure(ExchangeFailure("the connection closed before a whole answer")))
        context.fireChannelInactive()
    }

    private func finish(_ result: Result<(HTTPResponseHead, ByteBuffer), any Error>) {
        guard !isDone else { return }
        isDone = true
        answer.completeWith(result)
    }
}

/// Answers the response head of the request ``RequestAfterHandshake`` wrote, and yields the
/// body's pieces as they arrive to a stream.
private final class StreamingExchangeHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let opened: EventLoopPromise<HTTPResponseHead>
    private let continuation: AsyncThrowingStream<Data, any Error>.Continuation
    private let deadline: Scheduled<Void>

    init(
        opened: EventLoopPromise<HTTPResponseHead>,
        continuation: AsyncThrowingStream<Data, any Error>.Continuation, deadline: Scheduled<Void>
    ) {
        self.opened = opened
        self.continuation = continuation
        self.deadline = deadline
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            // A 2xx body streams as long as the server keeps it open (the live channel); an
            // error answer is short and stays under the deadline.
            if (200..<300).contains(head.status.code) { deadline.cancel() }
            opened.succeed(head)
        case .body(let bytes):
            continuation.yield(Data(bytes.readableBytesView))
        case .end:
            deadline.cancel()
            continuation.finish()
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        deadline.cancel()
        opened.fail(error)
        continuation.finish(throwing: error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline.cancel()
        let failure = ExchangeFailure("the connection closed before a whole answer")
        opened.fail(failure)
        continuation.finish(throwing: failure)
        context.fireChannelInactive()
    }
}
