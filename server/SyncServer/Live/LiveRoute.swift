import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle
import SyncProtocol

extension SyncRoutes {
    /// `GET /sync/v1/live`: server-sent events telling the device which scopes it may read
    /// changed (``LiveEvent``), until the token expires, the device is revoked, the device opens
    /// one channel too many, or the server shuts down. Never any data: the device pulls.
    @Sendable func live(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let channels = liveChannels
        let connection = try channels.open(identity)
        let heartbeat = channels.configuration.heartbeat
        if let channel = context.channel { Self.abortWhenUnacknowledged(channel, after: heartbeat * 5 / 2) }
        context.logger.debug("live channel opened")
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-store"
        // Proxies that buffer responses would hold pokes back; nginx reads this header.
        headers[HTTPField.Name("X-Accel-Buffering")!] = "no"
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                defer { channels.remove(connection) }
                try await Self.stream(connection, of: channels, heartbeat: heartbeat, to: &writer)
            }
        )
    }

    /// Writes `hello`, then every batch of pokes as it comes, a heartbeat when nothing else was
    /// said for a heartbeat, and `bye` before closing. A write that fails (the peer is gone) ends it.
    private static func stream(
        _ connection: LiveConnection, of channels: LiveChannels, heartbeat: Duration, to writer: inout any ResponseBodyWriter
    ) async throws {
        try await writer.write(ByteBuffer(string: LiveEvent.hello(heartbeatMilliseconds: Int(heartbeat.milliseconds)).serverSentEvent))
        let timer = Task {
            var sinceCheck = Duration.zero
            while !Task.isCancelled {
                try? await Task.sleep(for: heartbeat)
                if Task.isCancelled { return }
                if channels.hasExpired(connection) { return connection.close(.tokenExpired) }
                sinceCheck += heartbeat
                if sinceCheck >= channels.configuration.revalidationInterval {
                    sinceCheck = .zero
                    // In a child task: the storage read's frames go back to the heap with it,
                    // instead of staying with this task for the channel's life (see ChildTaskMiddleware).
                    async let revalidated: Void = channels.revalidate(connection)
                    await revalidated
                }
                connection.heartbeatDue()
            }
        }
        defer { timer.cancel() }
        var closing: LiveCloseReason?
        try await withGracefulShutdownHandler {
            for await _ in connection.wakeUps {
                let batch = connection.take()
                var text = batch.events.map(\.serverSentEvent).joined()
                if let reason = batch.closing {
                    closing = reason
                    text += LiveEvent.bye(reason: reason).serverSentEvent
                } else if text.isEmpty, batch.heartbeatDue {
                    text = LiveEvent.heartbeat
                }
                if !text.isEmpty { try await writer.write(ByteBuffer(string: text)) }
                if closing != nil { break }
            }
        } onGracefulShutdown: {
            connection.close(.shutdown)
        }
        try await writer.finish(nil)
    }

    /// Lets the kernel abort the connection when what the server wrote stays unacknowledged for
    /// `timeout` (`TCP_USER_TIMEOUT`): a heartbeat to a peer that vanished without closing (a
    /// phone that lost its network) then fails the next write instead of waiting out TCP's
    /// retransmissions (about 15 minutes by default). Linux only; elsewhere the kernel's default holds.
    private static func abortWhenUnacknowledged(_ channel: any Channel, after timeout: Duration) {
        #if os(Linux)
            let option = ChannelOptions.Types.SocketOption(level: .tcp, name: NIOBSDSocket.Option(rawValue: 18))  // TCP_USER_TIMEOUT
            _ = channel.setOption(option, value: SocketOptionValue(clamping: timeout.milliseconds))
        #endif
    }
}

extension Duration {
    /// Whole milliseconds.
    var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}
