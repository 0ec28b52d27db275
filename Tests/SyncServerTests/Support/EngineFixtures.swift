import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncProtocol

@testable import SyncServer

/// What the engine suites push: rows of the engines' own contracts (EngineTestContracts), so a
/// change to the sample apps' contracts never reaches them.
extension PushHarness {
    /// A push service on a fresh storage of the engines' own contracts, without reducers.
    static func engine(_ kind: StorageKind) async throws -> PushHarness {
        try await PushHarness(kind, contracts: ContractRegistry.self, reducers: [])
    }

    /// A valid `Card` (version_check on `revision`, team scope) row.
    func cardPayload(_ id: String, team: String = "red", title: String = "Draft the plan", lane: String = "todo") -> [String: JSONValue] {
        ["id": .string(id), "team_id": .string(team), "board_id": .string("board-1"), "title": .string(title), "lane": .string(lane)]
    }

    /// A valid `Board` (field_merge, team scope) row.
    func boardPayload(_ id: String, name: String = "Launch") -> [String: JSONValue] {
        [
            "id": .string(id), "team_id": .string("red"), "owner_id": .string("alice"), "name": .string(name),
            "status": .string("active"), "created_at": .string("2026-01-01T08:00:00.000Z"), "updated_at": .string("2026-01-01T08:00:00.000Z"),
        ]
    }

    /// A valid `Note` (last_writer_wins, team scope) row.
    func notePayload(_ id: String, body: String = "Call the venue", card: String = "card-1") -> [String: JSONValue] {
        [
            "id": .string(id), "team_id": .string("red"), "card_id": .string(card), "author_id": .string("alice"), "body": .string(body),
            "updated_at": .string("2026-01-01T08:00:00.000Z"),
        ]
    }

    /// The `n`th `Activity` id: a lowercase UUID (its primary key is a uuid), the same for the same `n`.
    func activityID(_ n: Int) -> String {
        String(format: "00000000-0000-4000-8000-%012d", n)
    }

    /// A valid `Activity` (append_only, up, user scope) row.
    func activityPayload(_ id: String, verb: String = "viewed", subject: String = "card-1") -> [String: JSONValue] {
        [
            "id": .string(id), "verb": .string(verb), "subject_id": .string(subject), "happened_at": .string("2026-01-01T07:00:00.000Z"),
            "happened_on": .string("2026-01-01"),
        ]
    }
}
