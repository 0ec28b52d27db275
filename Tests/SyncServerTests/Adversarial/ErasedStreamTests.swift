import ContractRuntime
import EngineTestContracts
import Foundation
import Hummingbird
import HummingbirdTesting
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// A device offline through its user's erasure must still be told of it, whatever token it
/// comes back with (the simulation found it writing again: docs/testing.md, seeds 1, 3 and 4). On
/// the engines' own contracts (a member's `Activity`).
@Suite("Push streams of an erased user")
struct ErasedStreamTests {
    @Test(
        "a renewed token on a push stream from before the erasure: 410 user_erased on push and pull; a new stream works",
        arguments: StorageKind.allCases)
    func renewedTokenOnAnOldStream(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.engine(kind)
        try await h.live(apps: []) { client in
            let now = Int64(Date().timeIntervalSince1970)
            let before = h.signer.sign(DeviceIdentity(tenant: "acme", userID: "ana", deviceID: "phone", expiresAt: now + 3600), issuedAt: now - 120)
            let created = try await client.push(EngineMutations.push([EngineMutations.activity(seq: 1)], client: "ana-client"), token: before)
            #expect(try created.pushResults.map(\.status) == [.applied])
            let erased = try await UserErasure(storage: h.storage).erase(tenant: "acme", userID: "ana", requestedBy: .commandLine)
            #expect(erased.rowsErased == 1)

            // The token expired while the device was offline, and it got a new one: dated past
            // the erasure's leeway, which the server takes from the second after the erasure.
            try await ErasureMarginTests.waitPast(erased.erasedAt)
            let renewed = h.signer.sign(
                DeviceIdentity(tenant: "acme", userID: "ana", deviceID: "phone", expiresAt: now + 3600),
                issuedAt: erased.erasedAt + TokenSigner.issuedAtLeeway + 1)
            let auditBefore = try await h.auditCount()
            let push = try await client.push(
                EngineMutations.push([EngineMutations.activity(seq: 2, id: "9b2f3c1e-0000-4000-8000-000000000002")], client: "ana-client"),
                token: renewed)
            #expect(push.status == .gone)
            #expect(try push.errorDetail.code == .userErased)
            #expect(try await h.auditCount() == auditBefore, "nothing written")
            let pull = try await client.execute(
                uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(renewed, [.outpostClient: "ana-client"])
            )
            #expect(pull.status == .gone)

            // Wiped, the device starts a new stream: it works. (A new activity id: `Activity` is
            // append_only, where the same id again is never a new row.)
            let fresh = try await client.push(
                EngineMutations.push([EngineMutations.activity(seq: 1, id: "9b2f3c1e-0000-4000-8000-000000000003")], client: "ana-client-2"),
                token: renewed)
            #expect(try fresh.pushResults.map(\.status) == [.applied])
            let again = try await client.push(
                EngineMutations.push(
                    [EngineMutations.activity(seq: 2, id: "9b2f3c1e-0000-4000-8000-000000000002", subject: "card-2")], client: "ana-client-2"),
                token: renewed
            )
            #expect(try again.pushResults.map(\.status) == [.applied], "a stream begun after the erasure goes on")
        }
    }

    @Test("an expired token issued before the erasure is told user_erased (410), not token_expired", arguments: [StorageKind.sqlite])
    func expiredTokenOfAnErasedUser(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.engine(kind)
        try await h.live(apps: []) { client in
            let now = Int64(Date().timeIntervalSince1970)
            let expired = h.signer.sign(DeviceIdentity(tenant: "acme", userID: "ana", deviceID: "phone", expiresAt: now - 10), issuedAt: now - 3_610)
            let other = h.signer.sign(DeviceIdentity(tenant: "acme", userID: "bob", deviceID: "phone", expiresAt: now - 10), issuedAt: now - 3_610)
            let created = try await client.push(
                EngineMutations.push([EngineMutations.activity(seq: 1)], client: "ana-client"), token: h.token(user: "ana", device: "phone"))
            #expect(try created.pushResults.map(\.status) == [.applied])
            _ = try await UserErasure(storage: h.storage).erase(tenant: "acme", userID: "ana", requestedBy: .commandLine)
            let told = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(expired))
            #expect(told.status == .gone)
            #expect(try told.errorDetail.code == .userErased)
            let stillExpired = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(other))
            #expect(try stillExpired.errorDetail.code == .tokenExpired, "another user's expired token is just expired")
        }
    }
}
