import ContractRuntime
import Contracts
import Foundation
import Hummingbird
import HummingbirdTesting
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// Identifiers that Swift's `String ==` calls equal (canonical equivalence) and the databases
/// do not: every identifier must be in NFC, so the two never disagree (docs/security.md).
@Suite("Unicode-equivalent identifiers", .blockingWork)
struct IdentifierEquivalenceTests {
    /// `josé` with U+00E9 (NFC) and with `e` + U+0301 (NFD).
    static let composed = "jos\u{E9}"
    static let decomposed = "jose\u{301}"

    static func pull(_ client: any TestClientProtocol, scope: String, token: String) async throws -> TestResponse {
        try await client.execute(uri: "/sync/v1/pull?scope=\(scope)", method: .get, headers: HostileHarness.headers(token))
    }

    static func rowIDs(_ response: TestResponse) throws -> [String] {
        let page = try JSONDecoder().decode(PullResponse.self, from: Data(response.body.readableBytesView))
        return page.upserts.values.flatMap {
            $0.compactMap { row -> String? in
                guard case .object(let fields) = row, case .string(let id)? = fields["id"] else { return nil }
                return id
            }
        }
    }

    @Test("a token naming the NFD spelling of a user reads, writes and hears nothing of the NFC user's scope", arguments: StorageKind.allCases)
    func decomposedUserIsRefused(_ kind: StorageKind) async throws {
        #expect(Self.composed == Self.decomposed, "Swift calls them equal: the premise of the attack")
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            let her = h.token(user: Self.composed, device: "her-phone")
            let created = try await client.push(SampleMutations.push([SampleMutations.answer(seq: 1)], client: "her-client"), token: her)
            #expect(try created.pushResults.map(\.status) == [.applied])

            let his = h.token(user: Self.decomposed, device: "his-phone")
            for scope in ["user", "progress:user:jos%C3%A9", "progress:user:jose%CC%81"] {
                let response = try await Self.pull(client, scope: scope, token: his)
                // A non-NFC spelling in the query is refused before the token is read (400); the
                // token's own spelling otherwise (401). Either way, identifier_not_normalized.
                #expect(response.status == (scope.contains("%CC%81") ? .badRequest : .unauthorized), "\(scope): \(response.bodyText)")
                #expect(try response.errorDetail.code == .identifierNotNormalized)
            }
            var update = SampleMutations.answer(seq: 1)
            update.op = .update
            let pushed = try await client.push(SampleMutations.push([update], client: "his-client"), token: his)
            #expect(pushed.status == .unauthorized)
            let live = try await client.execute(uri: "/sync/v1/live", method: .get, headers: HostileHarness.headers(his))
            #expect(live.status == .unauthorized)

            // Her row is where it was, and hers alone.
            let mine = try await Self.pull(client, scope: "user", token: her)
            #expect(mine.status == .ok)
            #expect(try Self.rowIDs(mine) == ["9b2f3c1e-0000-4000-8000-000000000001"])
        }
    }

    @Test(
        "the NFC user naming her own scope in NFD, an NFD row id, client id or team: 400 identifier_not_normalized, nothing written",
        arguments: StorageKind.allCases)
    func decomposedSpellingsInRequests(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            let her = h.token(user: Self.composed, device: "her-phone")
            let scope = try await Self.pull(client, scope: "progress:user:jose%CC%81", token: her)
            #expect(scope.status == .badRequest)
            #expect(try scope.errorDetail.code == .identifierNotNormalized)

            let auditBefore = try await h.auditCount()
            let clientID = try await client.push(SampleMutations.push([SampleMutations.answer(seq: 1)], client: "caf" + "e\u{301}"), token: her)
            #expect(clientID.status == .badRequest)
            #expect(try clientID.errorDetail.code == .identifierNotNormalized)

            // A team id in a payload (Incident, team scope) in NFD: the mutation is rejected.
            let add = try await client.execute(
                uri: "/admin/v1/teams/%C3%A9quipe/members/jos%C3%A9", method: .put, headers: HostileHarness.headers(h.adminToken)
            )
            #expect(add.status == .noContent)
            let nfdTeam = try await client.execute(
                uri: "/admin/v1/teams/e%CC%81quipe/members/jos%C3%A9", method: .put, headers: HostileHarness.headers(h.adminToken)
            )
            #expect(nfdTeam.status == .badRequest)
            #expect(try nfdTeam.errorDetail.code == .identifierNotNormalized)
            let teamPull = try await Self.pull(client, scope: "ops:team:e%CC%81quipe", token: her)
            #expect(teamPull.status == .badRequest)
            #expect(try await h.auditCount() == auditBefore, "a refused request wrote something")

            var decomposedID = SampleMutations.answer(seq: 1)
            decomposedID.id = "caf" + "e\u{301}"
            let rowID = try await client.push(SampleMutations.push([decomposedID], client: "her-client"), token: her)
            #expect(rowID.status == .ok)
            #expect(try rowID.pushResults.first?.error?.code == .identifierNotNormalized)
        }
    }

    @Test("U+212B ANGSTROM SIGN is refused (its NFC is U+00C5); compatibility forms stay distinct users", arguments: StorageKind.allCases)
    func otherEquivalences(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            let angstrom = try await Self.pull(client, scope: "user", token: h.token(user: "\u{212B}ngstrom", device: "d"))
            #expect(angstrom.status == .unauthorized)
            #expect(try angstrom.errorDetail.code == .identifierNotNormalized)
            #expect(try await Self.pull(client, scope: "user", token: h.token(user: "\u{C5}ngstrom", device: "d")).status == .ok)

            // `ﬁle` (U+FB01) and `file` are not canonically equivalent: two users, each alone.
            let ligature = h.token(user: "\u{FB01}le", device: "d-1")
            let plain = h.token(user: "file", device: "d-2")
            let created = try await client.push(SampleMutations.push([SampleMutations.answer(seq: 1)], client: "lig-client"), token: ligature)
            #expect(try created.pushResults.map(\.status) == [.applied])
            let other = try await Self.pull(client, scope: "user", token: plain)
            #expect(try Self.rowIDs(other).isEmpty)
            #expect(
                try await Self.pull(
                    client,
                    scope: "progress:user:\u{FB01}le".addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(.init(charactersIn: ":")))!,
                    token: plain
                ).status == .forbidden)
            var update = SampleMutations.answer(seq: 1)
            update.op = .update
            let taken = try await client.push(SampleMutations.push([update], client: "plain-client"), token: plain)
            #expect(try taken.pushResults.first?.status != .applied, "another user's row is not updated")
        }
    }

    @Test("the rule itself: ASCII and NFC pass, NFD and singletons do not")
    func rule() {
        #expect(UnicodeIdentifier.isNormalized("team-1"))
        #expect(UnicodeIdentifier.isNormalized(Self.composed))
        #expect(!UnicodeIdentifier.isNormalized(Self.decomposed))
        #expect(!UnicodeIdentifier.isNormalized("\u{212B}"))
        #expect(UnicodeIdentifier.isNormalized("\u{FB01}"))
        // Past the first eight bytes, at every offset of the word-at-a-time ASCII check, and in a substring.
        for prefix in 0..<17 {
            let padding = String(repeating: "a", count: prefix)
            #expect(!UnicodeIdentifier.isNormalized(padding + Self.decomposed), "NFD after \(prefix) ASCII bytes")
            #expect(UnicodeIdentifier.isNormalized(padding + Self.composed), "NFC after \(prefix) ASCII bytes")
            #expect(UnicodeIdentifier.isNormalized(padding + "-device-0123456789"), "ASCII of \(prefix + 18) bytes")
        }
        let tail = ("row-0123456789/" + Self.decomposed).dropFirst(4)
        #expect(!UnicodeIdentifier.isNormalized(tail))
        #expect(UnicodeIdentifier.normalized(Self.decomposed).utf8.elementsEqual(Self.composed.utf8))
    }
}
