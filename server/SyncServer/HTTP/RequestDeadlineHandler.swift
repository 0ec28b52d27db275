import HTTPTypes
import HummingbirdCore
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOHTTPTypes
import NIOSSL
import NIOTLS

/// Closes a connection whose client is too slow to be anything but an attack (slowloris): the
/// first request's headers must be complete within `headers` of the connection opening, a
/// request's body within `body` of its headers, and on a kept-alive connection the next request's
/// headers within `idle` of the previous response.
/// Hummingbird's own idle timeout closes connections that send nothing at all; this one also
/// catches clients that trickle a byte now and then to keep a connection, and a server task, busy.
final class RequestDeadlineHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let headers: TimeAmount
    private let body: TimeAmount
    private let idle: TimeAmount
    private var deadline: Scheduled<Void>?

    init(headers: TimeAmount, body: TimeAmount, idle: TimeAmount) {
        self.headers = headers
        self.body = body
        self.idle = idle
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(headers, context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(headers, context: context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: arm(body, context: context)
        case .body: break
        case .end:
            deadline?.cancel()
            deadline = nil
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // A response written in full: the next request's headers are now awaited.
        if case .end = unwrapOutboundIn(data) { arm(idle, context: context) }
        context.write(data, promise: promise)
    }

    private func arm(_ timeout: TimeAmount, context: ChannelHandlerContext) {
        deadline?.cancel()
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: timeout) {
            loopBound.value.close(promise: nil)
        }
    }
}

/// Closes a TLS connection whose handshake is not complete within `timeout` of its opening: a
/// client that opens connections and sends nothing (or trickles a ClientHello) would otherwise
/// hold a file descriptor each for ever, and enough of them starve every other client.
///
/// It sits right after the TLS handler, which tells it when the handshake is done
/// (`TLSUserEvent.handshakeCompleted`); it then removes itself, and the HTTP deadlines
/// (``RequestDeadlineHandler``, the idle timeout) take over.
final class TLSHandshakeDeadlineHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private let timeout: TimeAmount
    private var deadline: Scheduled<Void>?

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context: context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted = event {
            deadline?.cancel()
            deadline = nil
            // Passed on first: the handlers after this one configure the connection from it.
            context.fireUserInboundEventTriggered(event)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func arm(context: ChannelHandlerContext) {
        guard deadline == nil else { return }
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: timeout) {
            loopBound.value.close(promise: nil)
        }
    }
}

/// A server child channel whose connections must complete their TLS handshake within a deadline
/// (``TLSHandshakeDeadlineHandler``, placed right after the channel's `NIOSSLServerHandler`).
struct TLSHandshakeDeadlineChannel<Inner: ServerChildChannel>: ServerChildChannel {
    typealias Value = Inner.Value

    let inner: Inner
    let timeout: TimeAmount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let configured = inner.setup(channel: channel, logger: logger)
        do {
            // The inner setup added its TLS handler synchronously (it runs on the channel's loop).
            let tls = try channel.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self)
            try channel.pipeline.syncOperations.addHandler(TLSHandshakeDeadlineHandler(timeout: timeout), position: .after(tls))
        } catch {
            channel.close(promise: nil)
            return configured.flatMap { _ in channel.eventLoop.makeFailedFuture(error) }
        }
        return configured
    }

    func handle(value: Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// ``http2Upgrade(tlsConfiguration:configuration:)`` whose connections are closed when their
    /// TLS handshake is not complete within `handshakeTimeout`.
    static func http2Upgrade(
        tlsConfiguration: TLSConfiguration, configuration: HTTP2UpgradeChannel.Configuration, handshakeTimeout: Duration
    ) throws -> HTTPServerBuilder {
        .init { responder in
            TLSHandshakeDeadlineChannel(
                inner: try HTTP2UpgradeChannel(tlsConfiguration: tlsConfiguration, configuration: configuration, responder: responder),
                timeout: TimeAmount(handshakeTimeout))
        }
    }
}
