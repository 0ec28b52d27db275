import ContractRuntime
import EngineTestContracts
import Foundation
import Hummingbird
import HummingbirdTesting
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// An erasure covers the tokens dated up to the issuers' clock leeway after it, as a revocation
/// does (issue 44: a token dated 50 s ahead of the server kept pulling and pushing into an
/// erased scope). On the engines' own contracts (a member's `Activity`).
@Suite("Erasure's iat margin: tokens dated ahead of the server's clock", .blockingWork)
struct ErasureMarginTests {
    /// Waits until the system clock's whole seconds are past `seconds`: from then on the server
    /// takes a token dated `seconds` + ``TokenSigner/issuedAtLeeway`` + 1.
    static func waitPast(_ seconds: Int64) async throws {
        while Int64(Date().timeIntervalSince1970) <= seconds { try await Task.sleep(for: .milliseconds(20)) }
    }

    static func token(_ h: HostileHarness, issuedAt: Int64) -> String {
        h.signer.sign(
            DeviceIdentity(tenant: "acme", userID: "ana", deviceID: "phone", expiresAt: Int64(Date().timeIntervalSince1970) + 3_600),
            issuedAt: issuedAt)
    }

    /// A row of ana's own scope, pushed with a token issued two minutes ago: something to erase.
    static func seed(_ h: HostileHarness, _ client: any TestClientProtocol) async throws {
        let before = token(h, issuedAt: Int64(Date().timeIntervalSince1970) - 120)
        let created = try await client.push(EngineMutations.push([EngineMutations.activity(seq: 1)], client: "ana-seed"), token: before)
        #expect(try created.pushResults.map(\.status) == [.applied])
    }

    @Test(
        "a token dated 50 s ahead, issued before the erasure, is refused 410 user_erased on pull, push and the live channel",
        arguments: StorageKind.allCases)
    func tokenDatedAheadIsRefused(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.engine(kind)
        try await h.live(apps: []) { client in
            let now = Int64(Date().timeIntervalSince1970)
            let ahead = Self.token(h, issuedAt: now + 50)
            let created = try await client.push(EngineMutations.push([EngineMutations.activity(seq: 1)], client: "ana-client"), token: ahead)
            #expect(try created.pushResults.map(\.status) == [.applied])
            let erased = try await UserErasure(storage: h.storage).erase(tenant: "acme", userID: "ana", requestedBy: .commandLine)
            #expect(erased.rowsErased == 1 && erased.erasedAt < now + 50, "the token is dated after the erasure")
            let auditBefore = try await h.auditCount()

            let pull = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(ahead))
            #expect(pull.status == .gone)
            #expect(try pull.errorDetail.code == .userErased)
            // A new push stream: the stream refusal alone would let it write.
            let push = try await client.push(
                EngineMutations.push([EngineMutations.activity(seq: 1, id: "9b2f3c1e-0000-4000-8000-000000000002")], client: "ana-fresh"),
                token: ahead)
            #expect(push.status == .gone)
            #expect(try push.errorDetail.code == .userErased)
            let live = try await client.execute(uri: "/sync/v1/live", method: .get, headers: HostileHarness.headers(ahead))
            #expect(live.status == .gone)
            #expect(try await h.auditCount() == auditBefore, "nothing written into the erased scope")
        }
    }

    @Test(
        "the margin is the leeway: a token dated leeway seconds after the erasure is refused, one a second later is a new session",
        arguments: StorageKind.allCases)
    func marginIsTheLeeway(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.engine(kind)
        try await h.live(apps: []) { client in
            try await Self.seed(h, client)
            let erased = try await UserErasure(storage: h.storage).erase(tenant: "acme", userID: "ana", requestedBy: .commandLine)
            try await Self.waitPast(erased.erasedAt)
            let covered = Self.token(h, issuedAt: erased.erasedAt + TokenSigner.issuedAtLeeway)
            let refused = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(covered))
            #expect(refused.status == .gone)
            #expect(try refused.errorDetail.code == .userErased)

            let fresh = Self.token(h, issuedAt: erased.erasedAt + TokenSigner.issuedAtLeeway + 1)
            let pull = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(fresh))
            #expect(pull.status == .ok, "\(pull.bodyText.prefix(200))")
            let push = try await client.push(
                EngineMutations.push(
                    [EngineMutations.activity(seq: 1, id: "9b2f3c1e-0000-4000-8000-000000000003", subject: "card-3")], client: "ana-new-store"),
                token: fresh)
            #expect(try push.pushResults.map(\.status) == [.applied], "a session begun past the margin syncs")
        }
    }

    @Test("an expired token dated within the margin is told user_erased, not token_expired", arguments: StorageKind.allCases)
    func expiredTokenWithinTheMargin(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.engine(kind)
        try await h.live(apps: []) { client in
            try await Self.seed(h, client)
            let erased = try await UserErasure(storage: h.storage).erase(tenant: "acme", userID: "ana", requestedBy: .commandLine)
            let expired = h.signer.sign(
                DeviceIdentity(tenant: "acme", userID: "ana", deviceID: "phone", expiresAt: erased.erasedAt - 1), issuedAt: erased.erasedAt + 30)
            let response = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(expired))
            #expect(response.status == .gone)
            #expect(try response.errorDetail.code == .userErased)
        }
    }

    @Test(
        "a push stream that moved within the erasure's second counts as before it: 410 on push and pull whatever token it comes back with",
        arguments: StorageKind.allCases)
    func streamMovedInTheErasuresSecond(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.engine(kind)
        try await h.live(apps: []) { client in
            let now = Int64(Date().timeIntervalSince1970)
            let before = Self.token(h, issuedAt: now - 120)
            let created = try await client.push(EngineMutations.push([EngineMutations.activity(seq: 1)], client: "ana-client"), token: before)
            #expect(try created.pushResults.map(\.status) == [.applied])
            let moved = try #require(
                try await h.storage.read { reader in try await reader.clients(tenant: "acme", ownedBy: "ana") }.first { $0.clientID == "ana-client" })
            // Erased in the very millisecond the stream last moved: dated that second, which the
            // stream's milliseconds are past.
            let erased = try await UserErasure(storage: h.storage, clock: PushFixedClock(time: Timestamp(millisecondsSince1970: moved.updatedAt)))
                .erase(tenant: "acme", userID: "ana", requestedBy: .commandLine)
            #expect(erased.erasedAt == moved.updatedAt / 1000)

            try await Self.waitPast(erased.erasedAt)
            let renewed = Self.token(h, issuedAt: erased.erasedAt + TokenSigner.issuedAtLeeway + 1)
            let push = try await client.push(
                EngineMutations.push([EngineMutations.activity(seq: 2, id: "9b2f3c1e-0000-4000-8000-000000000002")], client: "ana-client"),
                token: renewed)
            #expect(push.status == .gone)
            #expect(try push.errorDetail.code == .userErased)
            let pull = try await client.execute(
                uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(renewed, [.outpostClient: "ana-client"]))
            #expect(pull.status == .gone)
        }
    }
}
