import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// The load generator's HTTP/1.1 over SwiftNIO: thousands of simulated devices share one event
/// loop group in the bench process, each with a keep-alive connection of its own for its
/// requests (one at a time, as a device's sync engine sends them) and one for its live channel
/// (``EventStreamConnection``). A connection costs a socket and a few KiB, not a URLSession.
struct LoadRequest: Sendable {
    var method: HTTPMethod
    var path: String
    var headers: [(String, String)]
    var body: ByteBuffer?
    /// Keep the body of the answer (pull pages, push results); off for asset ranges, whose
    /// bytes are only counted.
    var keepsBody = true
}

/// An answer: its status, headers and body (or only the body's size).
struct LoadResponse: Sendable {
    var status: Int
    var headers: HTTPHeaders
    var body: ByteBuffer?
    var bodyBytes: Int
}

/// Failures of the transport itself (not an HTTP status): refused, reset, closed mid-answer.
struct LoadTransportError: Error, CustomStringConvertible {
    let description: String
}

/// Nanoseconds of the monotonic clock, the one instant every latency is measured between.
@inline(__always) func monotonicNanoseconds() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// A keep-alive HTTP/1.1 connection to 127.0.0.1: one request in flight at a time.
final class LoadConnection: Sendable {
    let channel: any Channel

    private init(channel: any Channel) {
        self.channel = channel
    }

    static func connect(port: Int, group: any EventLoopGroup) async throws -> LoadConnection {
        LoadConnection(channel: try await connectHTTP(port: port, group: group) { RequestResponseHandler() })
    }

    var isActive: Bool { channel.isActive }

    func send(_ request: LoadRequest) async throws -> LoadResponse {
        let promise = channel.eventLoop.makePromise(of: LoadResponse.self)
        channel.writeAndFlush(PendingRequest(request: request, promise: promise)).cascadeFailure(to: promise)
        do {
            return try await promise.futureResult.get()
        } catch let error as LoadTransportError {
            throw error
        } catch {
            throw LoadTransportError(description: "\(request.method) \(request.path): \(error)")
        }
    }

    func close() async {
        try? await channel.close()
    }
}

/// A TCP connection to 127.0.0.1:`port` with NIO's HTTP/1.1 client codec and `handler` (made on
/// the channel's event loop) after it.
private func connectHTTP<Handler: ChannelHandler>(
    port: Int, group: any EventLoopGroup, handler: @escaping @Sendable () -> Handler
) async throws -> any Channel {
    let bootstrap = ClientBootstrap(group: group)
        .channelOption(.tcpOption(.tcp_nodelay), value: 1)
        .connectTimeout(.seconds(30))
        .channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHTTPClientHandlers()
                try channel.pipeline.syncOperations.addHandler(handler())
            }
        }
    do {
        return try await bootstrap.connect(host: "127.0.0.1", port: port).get()
    } catch {
        throw LoadTransportError(description: "connect to 127.0.0.1:\(port): \(error)")
    }
}

/// What ``RequestResponseHandler`` writes: the request and the promise its answer completes.
private struct PendingRequest: Sendable {
    var request: LoadRequest
    var promise: EventLoopPromise<LoadResponse>
}

/// Turns a ``PendingRequest`` into HTTP parts and completes its promise with the answer that
/// comes back; answers come in request order on HTTP/1.1, so pending promises form a queue.
private final class RequestResponseHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = PendingRequest
    typealias OutboundOut = HTTPClientRequestPart

    private var pending = CircularBuffer<(promise: EventLoopPromise<LoadResponse>, keepsBody: Bool)>()
    private var head: HTTPResponseHead?
    private var body: ByteBuffer?
    private var bodyBytes = 0

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let pendingRequest = unwrapOutboundIn(data)
        let request = pendingRequest.request
        pending.append((pendingRequest.promise, request.keepsBody))
        var headers = HTTPHeaders(request.headers)
        headers.add(name: "Host", value: "127.0.0.1")
        if let body = request.body { headers.add(name: "Content-Length", value: String(body.readableBytes)) }
        let head = HTTPRequestHead(version: .http1_1, method: request.method, uri: request.path, headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if let body = request.body { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        context.write(wrapOutboundOut(.end(nil)), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let responseHead):
            head = responseHead
            body = nil
            bodyBytes = 0
        case .body(var part):
            bodyBytes += part.readableBytes
            if pending.first?.keepsBody == true {
                if body == nil { body = part } else { body!.writeBuffer(&part) }
            }
        case .end:
            guard let responseHead = head, !pending.isEmpty else { return }
            let (promise, _) = pending.removeFirst()
            head = nil
            promise.succeed(LoadResponse(status: Int(responseHead.status.code), headers: responseHead.headers, body: body, bodyBytes: bodyBytes))
            body = nil
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        failPending(LoadTransportError(description: "the server closed the connection"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failPending(LoadTransportError(description: "\(error)"))
        context.close(promise: nil)
    }

    private func failPending(_ error: any Error) {
        while let waiting = pending.popFirst() { waiting.promise.fail(error) }
    }
}

// MARK: - The live channel

/// One server-sent event (https://html.spec.whatwg.org/multipage/server-sent-events.html):
/// `event` is `message` when the server names none. Comments (`: heartbeat`) are counted apart.
struct ServerSentEvent: Sendable, Equatable {
    var event: String
    var data: String
}

/// Parses an event stream fed in arbitrary pieces: lines end with LF, CRLF or CR; a blank line
/// ends an event; `data:` lines join with LF; a line starting with `:` is a comment.
struct ServerSentEventParser {
    private var line: [UInt8] = []
    private var lastWasCR = false
    private var eventName = ""
    private var dataLines: [String] = []
    private var hasData = false

    /// Feeds bytes; returns the events completed by them and the number of comment lines.
    mutating func feed<Bytes: Sequence>(_ bytes: Bytes) -> (events: [ServerSentEvent], comments: Int) where Bytes.Element == UInt8 {
        var events: [ServerSentEvent] = []
        var comments = 0
        for byte in bytes {
            if byte == 0x0A, lastWasCR {
                // The LF of a CRLF: the line already ended at the CR.
                lastWasCR = false
                continue
            }
            lastWasCR = byte == 0x0D
            if byte == 0x0A || byte == 0x0D {
                if let event = endLine(&comments) { events.append(event) }
            } else {
                line.append(byte)
            }
        }
        return (events, comments)
    }

    private mutating func endLine(_ comments: inout Int) -> ServerSentEvent? {
        defer { line.removeAll(keepingCapacity: true) }
        if line.isEmpty {
            defer {
                eventName = ""
                dataLines = []
                hasData = false
            }
            guard hasData else { return nil }
            return ServerSentEvent(event: eventName.isEmpty ? "message" : eventName, data: dataLines.joined(separator: "\n"))
        }
        if line.first == UInt8(ascii: ":") {
            comments += 1
            return nil
        }
        let text = String(decoding: line, as: UTF8.self)
        let field: Substring, value: Substring
        if let colon = text.firstIndex(of: ":") {
            field = text[..<colon]
            let rest = text[text.index(after: colon)...]
            value = rest.first == " " ? rest.dropFirst() : rest
        } else {
            (field, value) = (Substring(text), "")
        }
        switch field {
        case "event": eventName = String(value)
        case "data":
            dataLines.append(String(value))
            hasData = true
        default: break  // id, retry: not used by the live channel
        }
        return nil
    }
}

/// What a live connection reports as it happens, with the instant its bytes arrived.
enum LiveStreamUpdate: Sendable {
    /// The answer's status and headers; a non-200 ends the stream after its body.
    case opened(status: Int, headers: HTTPHeaders)
    case event(ServerSentEvent, receivedAt: UInt64)
    case heartbeat(receivedAt: UInt64)
    /// The body of a refusal (the JSON error), when the status was not 200.
    case refusalBody(String)
    /// The connection ended: closed by the server, reset, or by us.
    case closed(error: String?)
}

/// `GET /sync/v1/live` on a connection of its own, its events passed to `onUpdate` on the
/// event loop as they arrive (so the receive instant is the loop's, not a scheduled task's).
final class EventStreamConnection: Sendable {
    let channel: any Channel

    private init(channel: any Channel) {
        self.channel = channel
    }

    static func open(
        port: Int, token: String, group: any EventLoopGroup, onUpdate: @escaping @Sendable (LiveStreamUpdate) -> Void
    ) async throws -> EventStreamConnection {
        let channel = try await connectHTTP(port: port, group: group) { EventStreamHandler(onUpdate: onUpdate) }
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: "127.0.0.1")
        headers.add(name: "Authorization", value: "Bearer \(token)")
        headers.add(name: "Accept", value: "text/event-stream")
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/sync/v1/live", headers: headers)
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        do {
            try await channel.writeAndFlush(HTTPClientRequestPart.end(nil)).get()
        } catch {
            try? await channel.close()
            throw LoadTransportError(description: "GET /sync/v1/live: \(error)")
        }
        return EventStreamConnection(channel: channel)
    }

    var isActive: Bool { channel.isActive }

    func close() async {
        try? await channel.close()
    }
}

private final class EventStreamHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let onUpdate: @Sendable (LiveStreamUpdate) -> Void
    private var parser = ServerSentEventParser()
    private var status = 0
    private var refusal = ""
    private var ended = false

    init(onUpdate: @escaping @Sendable (LiveStreamUpdate) -> Void) {
        self.onUpdate = onUpdate
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = Int(head.status.code)
            onUpdate(.opened(status: status, headers: head.headers))
        case .body(let part):
            let receivedAt = monotonicNanoseconds()
            guard status == 200 else {
                refusal += String(buffer: part)
                return
            }
            let parsed = parser.feed(part.readableBytesView)
            for event in parsed.events { onUpdate(.event(event, receivedAt: receivedAt)) }
            for _ in 0..<parsed.comments { onUpdate(.heartbeat(receivedAt: receivedAt)) }
        case .end:
            if status != 200 { onUpdate(.refusalBody(refusal)) }
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !ended {
            ended = true
            onUpdate(.closed(error: nil))
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if !ended {
            ended = true
            onUpdate(.closed(error: "\(error)"))
        }
        context.close(promise: nil)
    }
}
