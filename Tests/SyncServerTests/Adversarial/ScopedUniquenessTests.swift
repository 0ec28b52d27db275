import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// Unique indexes hold within a scope: another team's rows neither block a value nor show
/// through a refusal.
@Suite("Uniqueness per scope")
struct ScopedUniquenessTests {
    static let carol = DeviceIdentity(tenant: PushHarness.tenant, userID: "carol", deviceID: "carol-phone", teams: ["blue"], expiresAt: .max)

    func incident(_ h: PushHarness, seq: Int64, id: String, team: String, number: String) -> Mutation {
        var payload = h.incidentPayload(id, number: number)
        payload["team_id"] = .string(team)
        return h.mutation(seq, "Incident", .create, id, payload, hlc: h.hlc(1000 + seq, "n"))
    }

    @Test("two teams each hold incident number INC7; a second INC7 in one team is refused naming only its own row", arguments: StorageKind.allCases)
    func perScope(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        let red = try await h.push([incident(h, seq: 1, id: "inc-red", team: "red", number: "INC7")])
        let blue = try await h.push([incident(h, seq: 1, id: "inc-blue", team: "blue", number: "INC7")], as: Self.carol)
        #expect(red.results.map(\.status) == [.applied])
        #expect(blue.results.map(\.status) == [.applied])

        let again = try await h.push([incident(h, seq: 2, id: "inc-red-2", team: "red", number: "INC7")])
        let refusal = try #require(again.results.first?.error)
        #expect(refusal.code == .invalidPayload)
        #expect(refusal.message.contains("inc-red"))
        #expect(!refusal.message.contains("inc-blue"))
        #expect(try await h.row(Incident.descriptor, "inc-blue") != nil)
    }

    @Test("an id taken in a scope the device cannot read is refused without naming the scope or the row", arguments: StorageKind.allCases)
    func foreignID(_ kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        _ = try await h.push([incident(h, seq: 1, id: "inc-secret", team: "blue", number: "INC9")], as: Self.carol)
        // Alice (team red only) pushes a row with the same id into her own team.
        let response = try await h.push([incident(h, seq: 1, id: "inc-secret", team: "red", number: "INC1")])
        let result = try #require(response.results.first)
        #expect(result.status == .rejected)
        #expect(result.error?.code == .notWritable)
        #expect(result.serverRow == nil)
        let text = String(decoding: try JSONEncoder().encode(result), as: UTF8.self)
        for secret in ["blue", "INC9", "ops:team"] {
            #expect(!text.contains(secret), "the refusal names \(secret): \(text)")
        }
        // The same answer as for a scope she names but may not write.
        let named = try await h.push([incident(h, seq: 2, id: "inc-new", team: "blue", number: "INC2")])
        #expect(named.results.first?.error?.message == "this device may not write Incident 'inc-new'")
        #expect(result.error?.message == "this device may not write Incident 'inc-secret'")
    }
}
