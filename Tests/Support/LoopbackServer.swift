package import Foundation
import Hummingbird
import Testing
package import HummingbirdTesting
package import SyncServer

/// A sync server in this process, listening on a free loopback port (HummingbirdTesting's live
/// mode) for the duration of ``run(configuration:environment:_:)``: real HTTP, for clients that
/// need a socket (URLSession, the live channel, raw requests).
package struct LoopbackServer: Sendable {
    /// `http://127.0.0.1:PORT`.
    package let url: URL
    package let port: Int
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
            return try await body(LoopbackServer(url: URL(string: "http://127.0.0.1:\(port)")!, port: port, client: client))
        }
    }
}

extension TokenSigner {
    /// A device token issued at `now` (seconds since 1970, the system's clock unless the test
    /// runs the server on another) and valid for `lifetime` seconds: what the harnesses hand
    /// their devices.
    package func token(
        tenant: String, user: String, device: String, teams: [String] = [], isAdmin: Bool = false, lifetime: Int64 = 3600,
        now: Int64 = Int64(Date().timeIntervalSince1970)
    ) -> String {
        sign(
            DeviceIdentity(tenant: tenant, userID: user, deviceID: device, teams: teams, isAdmin: isAdmin, expiresAt: now + lifetime),
            issuedAt: now
        )
    }
}
