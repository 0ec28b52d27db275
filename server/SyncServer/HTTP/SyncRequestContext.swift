public import Hummingbird
package import NIOCore

/// The per-request context of the server's router: Hummingbird's core storage plus the
/// identity the bearer token proved (set by the authentication middleware).
public struct SyncRequestContext: RequestContext {
    /// Hummingbird's own per-request state.
    public var coreContext: CoreRequestContextStorage
    /// `nil` until authenticated; routes behind authentication always see a value.
    public var identity: DeviceIdentity?
    /// The connection's remote IP address (`nil` in the in-process test client).
    public var peerAddress: String?
    /// The connection, for the live channel's socket options (`nil` in the in-process test client).
    package let channel: (any Channel)?
    /// The server's own address this connection reached (`nil` in the in-process test client).
    package var localAddress: SocketAddress? { channel?.localAddress }

    /// A context for a request on its channel, before authentication.
    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        identity = nil
        peerAddress = source.channel.remoteAddress?.ipAddress
        channel = source.channel.remoteAddress == nil ? nil : source.channel
    }

    /// The authenticated identity; only routes registered behind the authentication middleware call it.
    func requireIdentity() throws(ServiceError) -> DeviceIdentity {
        guard let identity else { throw .unauthorized("this route needs Authorization: Bearer <token>") }
        return identity
    }
}
