import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncClient
import SyncProtocol

extension TestStore {
    /// A store like ``TestStore/init(directory:clock:keys:tenantId:userId:retention:contracts:extensions:)``
    /// on the engines' own contracts (`EngineTestContracts`), with no store extensions. A file
    /// using it imports `EngineTestContracts`, never `Contracts`.
    static func engine(
        directory: TemporaryDirectory? = nil, clock: ManualClock = ManualClock(TestStore.start), keys: (any KeyProvider)? = nil,
        tenantId: String = "acme", userId: String = "u-1", retention: RetentionPolicy = .standard
    ) throws -> TestStore {
        try TestStore(
            directory: directory, clock: clock, keys: keys, tenantId: tenantId, userId: userId, retention: retention,
            contracts: ContractRegistry.self, extensions: []
        )
    }
}

/// Rows of the engines' own contracts in wire form, as the server sends them: boards, cards and
/// notes of team `team-1` (one card of `team-2`), the catalog's labels and `u-1`'s profile.
enum EngineSamples {
    static let t0 = Timestamp(millisecondsSince1970: 1_769_846_400_000)

    static func wire<Value: Encodable>(_ value: Value) -> JSONValue {
        try! JSONValue(encoding: value)
    }

    static func board(_ id: String, owner: String = "u-1", name: String? = nil, status: Board.Status = .active, createdAt: Int64 = 1_000) -> Board {
        Board(
            id: id, teamId: "team-1", ownerId: owner, name: name ?? "Board \(id)", status: status,
            createdAt: Timestamp(millisecondsSince1970: createdAt), updatedAt: t0
        )
    }

    /// Field merge (`field_merge`).
    static let boards = [
        board("board-paused", owner: "u-2", status: .paused, createdAt: 1_000),
        board("board-launch", name: "Launch", createdAt: 2_000),
        board("board-hiring", name: "Hiring", createdAt: 3_000),
        board("board-archive", status: .archived, createdAt: 4_000),
    ]

    /// Version check (`version_check` on `revision`).
    static let cards = [
        Card(id: "card-2", teamId: "team-1", boardId: "board-launch", title: "Draft the plan", assigneeId: "u-1", sortIndex: 2, revision: 3),
        Card(id: "card-1", teamId: "team-1", boardId: "board-launch", title: "Book the room", assigneeId: "u-2", sortIndex: 1, revision: 7),
        Card(id: "card-3", teamId: "team-2", boardId: "board-other", title: "Tidy up", lane: .done, revision: 1),
    ]

    /// Last writer wins, with an encrypted field (`private_remark`).
    static func note(_ id: String, card: String = "card-1", body: String? = nil) -> Note {
        Note(
            id: id, teamId: "team-1", cardId: card, authorId: "u-1", body: body ?? "Body of \(id)", privateRemark: "private remark of \(id)",
            updatedAt: t0
        )
    }

    static let notes = [note("note-1"), note("note-2", card: "card-2")]

    /// The read-only catalog (`server_authoritative`, direction down).
    static let labels = [
        Label(id: "label-2", name: "Urgent", color: .red, sortIndex: 2, updatedAt: t0),
        Label(id: "label-1", name: "Later", description: "Not this week", sortIndex: 1, updatedAt: t0),
    ]

    /// The member's own row, kept by the server (user scope, direction down).
    static let profile = Profile(id: "u-1", displayName: "Ada", updatedAt: t0)

    /// Everything above as one server page.
    static var everything: ServerChanges {
        ServerChanges(upserts: [
            "Board": boards.map(wire), "Card": cards.map(wire), "Note": notes.map(wire), "Label": labels.map(wire), "Profile": [wire(profile)],
        ])
    }
}
