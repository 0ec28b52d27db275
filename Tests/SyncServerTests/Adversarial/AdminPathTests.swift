import ContractRuntime
import EngineTestContracts
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// Admin routes name users, teams and rows in their paths: each is percent-decoded once, and an
/// operation that matched nothing says so (404), never that it was done. On the engines' own
/// contracts (a member's `Activity`, the catalog's `Label`).
@Suite("Admin path parameters")
struct AdminPathTests {
    @Test("DELETE /admin/v1/users/jos%C3%A9 erases josé: her rows and tokens go; an unknown user is 404", arguments: StorageKind.allCases)
    func erasureOfAnEncodedUser(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.engine(kind)
        try await h.live(apps: []) { client in
            let her = h.token(user: "jos\u{E9}", device: "her-phone")
            let created = try await client.push(EngineMutations.push([EngineMutations.activity(seq: 1)], client: "her-client"), token: her)
            #expect(try created.pushResults.map(\.status) == [.applied])

            let erased = try await client.execute(uri: "/admin/v1/users/jos%C3%A9", method: .delete, headers: HostileHarness.headers(h.adminToken))
            #expect(erased.status == .ok, "\(erased.bodyText)")
            let report = try JSONDecoder().decode(UserErasure.Report.self, from: Data(erased.body.readableBytesView))
            #expect(report.userID == "jos\u{E9}")
            #expect(report.rowsErased == 1)
            let told = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(her))
            #expect(told.status == .gone, "her token goes with her data")

            let auditBefore = try await h.auditCount()
            for path in ["/admin/v1/users/nobody", "/admin/v1/users/jos%C3%A9"] {
                let nothing = try await client.execute(uri: path, method: .delete, headers: HostileHarness.headers(h.adminToken))
                #expect(nothing.status == .notFound, "\(path): \(nothing.bodyText)")
                #expect(try nothing.errorDetail.code == .notFound)
            }
            #expect(try await h.auditCount() == auditBefore, "an erasure that matched nothing records nothing")
            let export = try await client.execute(uri: "/admin/v1/users/nobody/export", method: .get, headers: HostileHarness.headers(h.adminToken))
            #expect(export.status == .notFound)
            let herExport = try await client.execute(
                uri: "/admin/v1/users/jos%C3%A9/export", method: .get, headers: HostileHarness.headers(h.adminToken))
            #expect(herExport.status == .ok, "an erased user still has her erasure and audit on record")

            let malformed = try await client.execute(uri: "/admin/v1/users/jos%E9", method: .delete, headers: HostileHarness.headers(h.adminToken))
            #expect(malformed.status == .badRequest, "not UTF-8 once decoded")
        }
    }

    @Test(
        "DELETE /admin/v1/teams/field%20ops/members/u-fo removes u-fo from `field ops`; removing a non-member is 404", arguments: StorageKind.allCases
    )
    func teamWithASpace(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.engine(kind)
        try await h.live(apps: []) { client in
            let member = h.token(user: "u-fo", device: "fo-phone")
            let add = try await client.execute(
                uri: "/admin/v1/teams/field%20ops/members/u-fo", method: .put, headers: HostileHarness.headers(h.adminToken))
            #expect(add.status == .noContent)
            let pull = {
                try await client.execute(uri: "/sync/v1/pull?scope=workspace:team:field%20ops", method: .get, headers: HostileHarness.headers(member))
            }
            #expect(try await pull().status == .ok)
            #expect(try await h.storage.read { try await $0.teamMemberships(tenant: HostileHarness.tenant) }.map(\.team) == ["field ops"])

            let remove = try await client.execute(
                uri: "/admin/v1/teams/field%20ops/members/u-fo", method: .delete, headers: HostileHarness.headers(h.adminToken))
            #expect(remove.status == .noContent)
            #expect(try await pull().status == .forbidden, "removed: the team's scope is gone")
            let again = try await client.execute(
                uri: "/admin/v1/teams/field%20ops/members/u-fo", method: .delete, headers: HostileHarness.headers(h.adminToken))
            #expect(again.status == .notFound)
        }
    }

    @Test("a label published with id `label withdrawn x` is deleted by DELETE …/Label/label%20withdrawn%20x", arguments: StorageKind.allCases)
    func contentIDWithSpaces(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.engine(kind)
        try await h.live(apps: []) { client in
            let label = #"{"id": "label withdrawn x", "name": "Old", "color": "gray"}"#
            let published = try await client.execute(
                uri: "/admin/v1/content/Label", method: .post, headers: HostileHarness.headers(h.adminToken), body: ByteBuffer(string: label)
            )
            #expect(published.status == .ok, "\(published.bodyText)")
            let deleted = try await client.execute(
                uri: "/admin/v1/content/Label/label%20withdrawn%20x", method: .delete, headers: HostileHarness.headers(h.adminToken)
            )
            #expect(deleted.status == .noContent, "\(deleted.bodyText)")
            let row = try await h.storage.read {
                try await $0.row(in: ContractTable(Label.descriptor), tenant: HostileHarness.tenant, id: "label withdrawn x")
            }
            #expect(row?.integer("_deleted") == 1)
        }
    }
    @Test(
        "U+0000 in an admin path never reaches another identifier: u-nul%00x erases nobody, team-1%00x grants nothing, the audit verifies",
        arguments: StorageKind.allCases)
    func nulInAdminPaths(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.engine(kind)
        try await h.live(apps: []) { client in
            let victim = h.token(user: "u-nul", device: "d-nul")
            let created = try await client.push(EngineMutations.push([EngineMutations.activity(seq: 1)], client: "nul-client"), token: victim)
            #expect(try created.pushResults.map(\.status) == [.applied])
            let memberships = { try await h.storage.read { try await $0.teamMemberships(tenant: HostileHarness.tenant) }.map(\.team) }
            let teamsBefore = try await memberships()

            for (method, path) in [
                (HTTPRequest.Method.delete, "/admin/v1/users/u-nul%00x"), (.get, "/admin/v1/users/u-nul%00x/export"),
                (.put, "/admin/v1/teams/team-1%00x/members/u-nul"), (.delete, "/admin/v1/teams/team-1%00x/members/u-nul"),
                (.put, "/admin/v1/teams/team-1/members/u-nul%00x"), (.get, "/admin/v1/fleet/devices/u-nul%00x/d-nul"),
                (.delete, "/admin/v1/content/Label/label-1%00x"),
            ] {
                let response = try await client.execute(uri: path, method: method, headers: HostileHarness.headers(h.adminToken))
                #expect(response.status == .badRequest, "\(method) \(path): \(response.status) \(response.bodyText)")
                #expect(try response.errorDetail.code == .nulCharacter, "\(method) \(path)")
            }
            let pulled = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(victim))
            #expect(pulled.status == .ok, "u-nul was not erased: \(pulled.bodyText.prefix(200))")
            #expect(try await memberships() == teamsBefore, "no team was granted or removed")
        }
        #expect(try await AuditChain.verify(h.storage).isIntact)
    }
}
