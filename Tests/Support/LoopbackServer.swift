package import Foundation
import Hummingbird
package import HummingbirdTesting
package import SyncServer
import Testing

/// A sync server in this process, listening on a free loopback port (HummingbirdTesting's live
/// mode) for the duration of ``run(configuration:environment:_:)``: real HTTP, for clients that
/// need a socket (URLSession, the live channel, raw requests).
package struct LoopbackServer: Sendable {
    /// `http://127.0.0.1:PORT`.
    package let url: URL
    /// HummingbirdTesting's client of the server, for requests a test builds itself.
    package let client: any TestClientProtocol

    /// Serves `environment` while `body` runs. The configuration's host and port are replaced by
    /// loopback and a free port, so tests running side by side never meet.
    package static func run<Value: Sendable>(
        configuration: ServerConfiguration = ServerConfiguration(rateLimit: nil), environment: ServerEnvironment,
        _ body: @Sendable (LoopbackServer) async throws -> Value
    ) async throws -> Value {
        var configuration = configuration
        configuration.host = "127.0.0.1"
        configuration.port = 0
        return try await buildApplication(configuration: configuration, environment: environment).test(.live) { client in
            let port = try #require(client.port, "the live test client has no port")
            return try await body(LoopbackServer(url: URL(string: "http://127.0.0.1:\(port)")!, client: client))
        }
    }
}
