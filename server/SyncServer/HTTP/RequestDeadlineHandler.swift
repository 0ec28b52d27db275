import HTTPTypes
import NIOCore
import NIOHTTPTypes

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
