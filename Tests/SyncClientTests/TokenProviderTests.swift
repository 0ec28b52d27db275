import Foundation
import SyncClient
import SyncProtocol
import SyncServer
import Testing

/// The transport asks the app for a fresh token when the server refuses the one it had.
@Suite("Token provider")
struct TokenProviderTests {
    /// Hands out an expired token until asked to refresh; counts the refreshes.
    final class Provider: TokenProvider, @unchecked Sendable {
        let expired: String
        let fresh: String
        let refreshes: Bool
        private let lock = NSLock()
        private var count = 0

        init(expired: String, fresh: String, refreshes: Bool = true) {
            self.expired = expired
            self.fresh = fresh
            self.refreshes = refreshes
        }

        var refreshCount: Int { lock.withLock { count } }

        func token(refresh: Bool) async throws -> String {
            guard refresh else { return expired }
            lock.withLock { count += 1 }
            return refreshes ? fresh : expired
        }
    }

    static func expiredToken(_ server: LiveServer) -> String {
        let past = Int64(Date().timeIntervalSince1970) - 20 * 86_400
        return server.signer.sign(DeviceIdentity(tenant: "acme", userID: "u-1", deviceID: "phone", expiresAt: past + 3600), issuedAt: past)
    }

    @Test("a device back from weeks offline: its expired token gets a 401, the app gives a new one, the request goes through once")
    func refreshOnce() async throws {
        try await LiveServer.run { server in
            let provider = Provider(expired: Self.expiredToken(server), fresh: server.token("phone"))
            let transport = URLSessionTransport(baseURL: server.url, timeout: 10, tokenProvider: provider)
            let page = try PullResponse(json: try await transport.pull(scope: "user", cursor: nil, limit: 10, schema: [:], clientID: "phone-client"))
            #expect(page.lastSeq == 0)
            #expect(provider.refreshCount == 1)
        }
    }

    @Test("a token refused again after a refresh surfaces as the typed 401, after one retry")
    func refusedTwice() async throws {
        try await LiveServer.run { server in
            let provider = Provider(expired: Self.expiredToken(server), fresh: "", refreshes: false)
            let transport = URLSessionTransport(baseURL: server.url, timeout: 10, tokenProvider: provider)
            do {
                _ = try await transport.pull(scope: "user", cursor: nil, limit: 10, schema: [:], clientID: "phone-client")
                Issue.record("an expired token was accepted")
            } catch {
                guard case TransportError.http(let status, let body, _)? = error as? TransportError else {
                    Issue.record("expected an HTTP error, got \(error)")
                    return
                }
                #expect(status == 401)
                #expect(body?.error.code == .tokenExpired)
            }
            #expect(provider.refreshCount == 1)
        }
    }
}
