import ContractRuntime
import EngineTestContracts
import Foundation
import SyncClient
import SyncProtocol
import Testing

/// How conflicts end, against the real server: the cases the deterministic simulation found
/// wrong (docs/testing.md lists the seeds), each as a plain two-device story, on the engines' own
/// contracts: a note (last writer wins) and a card (version check).
@Suite struct ConflictSettlementTests {
    typealias Device = EngineConflictPolicyTests.Device

    private static func sharedNote(_ a: Device, _ b: Device) async throws {
        try a.store.create(Note(id: "note-1", teamId: "team-1", cardId: "card-1", authorId: "u-1", body: "Agenda", updatedAt: EngineSamples.t0))
        await a.sync()
        await b.sync()
    }

    private static func sharedCard(_ a: Device, _ b: Device) async throws {
        try a.store.create(Card(id: "card-1", teamId: "team-1", boardId: "board-1", title: "Original", revision: 0))
        await a.sync()
        await b.sync()
    }

    @Test("last writer wins: a delete pushed after a later delete is a duplicate, not a conflict")
    func twoDeletesNeedNoDecision() async throws {
        try await LiveServer.engine { server in
            let (a, b) = try EngineConflictPolicyTests.devices(server)
            try await Self.sharedNote(a, b)
            // B's clock is behind A's: its delete is the older one, and it arrives second.
            try b.store.delete(Note.self, id: "note-1")
            try a.store.delete(Note.self, id: "note-1")
            await a.sync()
            await b.sync()
            #expect(try b.store.conflicts(includeResolved: true).isEmpty)
            #expect(await b.engine.currentStatus.pending == 0)
            #expect(try b.store.fetch(Note.self, id: "note-1") == nil)
        }
    }

    @Test("last writer wins: an edit that loses to a later delete is settled, the row goes")
    func anEditLosingToALaterDeleteIsSettled() async throws {
        try await LiveServer.engine { server in
            let (a, b) = try EngineConflictPolicyTests.devices(server)
            try await Self.sharedNote(a, b)
            try b.store.patch(Note.self, id: "note-1", [.body("From B")])
            try a.store.delete(Note.self, id: "note-1")
            await a.sync()
            await b.sync()
            #expect(try b.store.conflicts().isEmpty, "nothing for the user to decide")
            let settled = try b.store.conflicts(includeResolved: true)
            #expect(settled.map(\.serverResolution) == ["lost"])
            #expect(settled.first?.resolution == .takeTheirs)
            #expect(try b.store.fetch(Note.self, id: "note-1") == nil)
        }
    }

    @Test("taking theirs takes the server's latest row, not the one the conflict first showed")
    func takingTheirsTakesTheLatestRow() async throws {
        try await LiveServer.engine { server in
            let (a, b) = try EngineConflictPolicyTests.devices(server)
            try await Self.sharedCard(a, b)
            try b.store.patch(Card.self, id: "card-1", [.title("B1")])
            await b.sync()
            try a.store.patch(Card.self, id: "card-1", [.title("A1")])
            await a.sync()
            let conflict = try #require(try a.store.conflicts().first)
            #expect(conflict.serverRow?["title"] == .string("B1"))
            // The server moves on while the conflict waits; A pulls that change.
            try b.store.patch(Card.self, id: "card-1", [.title("B2")])
            await b.sync()
            await a.sync()
            #expect(try a.store.conflict(id: conflict.id)?.serverRow?["title"] == .string("B2"))
            try a.store.resolveConflict(conflict.id, with: .takeTheirs)
            await a.sync()
            #expect(try a.store.fetch(Card.self, id: "card-1") == b.store.fetch(Card.self, id: "card-1"))
            #expect(try a.store.fetch(Card.self, id: "card-1")?.title == "B2")
        }
    }

    @Test("version check: an edit of a row deleted meanwhile stays visible, and keeping it brings the row back")
    func keepingMineBringsADeletedRowBack() async throws {
        try await LiveServer.engine { server in
            let (a, b) = try EngineConflictPolicyTests.devices(server)
            try await Self.sharedCard(a, b)
            try b.store.delete(Card.self, id: "card-1")
            await b.sync()
            try a.store.patch(Card.self, id: "card-1", [.title("Still needed")])
            await a.sync()
            let conflict = try #require(try a.store.conflicts().first)
            #expect(conflict.serverRow == nil, "the server's side is the delete")
            #expect(try a.store.fetch(Card.self, id: "card-1")?.title == "Still needed", "the pulled delete does not take the user's edit")
            try a.store.resolveConflict(conflict.id, with: .keepMine)
            await a.sync()
            #expect(try a.store.conflicts().isEmpty)
            await b.sync()
            #expect(try b.store.fetch(Card.self, id: "card-1")?.title == "Still needed")
            #expect(try a.store.fetch(Card.self, id: "card-1") == b.store.fetch(Card.self, id: "card-1"))
        }
    }

    /// The simulation's seed 171: two edits of a deleted row conflicted; keeping the first and
    /// taking theirs on the second dropped the row the kept edit was bringing back, while its
    /// create was still to be sent.
    @Test("taking theirs on one conflict of a row leaves a later write of it, and its row, alone")
    func takingTheirsAfterKeepingAnotherOfTheRow() async throws {
        try await LiveServer.engine { server in
            let (a, b) = try EngineConflictPolicyTests.devices(server)
            try await Self.sharedCard(a, b)
            try b.store.delete(Card.self, id: "card-1")
            await b.sync()
            try a.store.patch(Card.self, id: "card-1", [.title("First")])
            try a.store.patch(Card.self, id: "card-1", [.title("Second")])
            await a.sync()
            let conflicts = try a.store.conflicts()
            #expect(conflicts.count == 2)
            try a.store.resolveConflict(conflicts[0].id, with: .keepMine)
            try a.store.resolveConflict(conflicts[1].id, with: .takeTheirs)
            #expect(try a.store.fetch(Card.self, id: "card-1") != nil, "the kept edit's row stays while it is on its way")
            await a.sync()
            #expect(try a.store.conflicts().isEmpty)
            await b.sync()
            #expect(try b.store.fetch(Card.self, id: "card-1") != nil, "the kept edit brought the card back")
            #expect(try a.store.fetch(Card.self, id: "card-1") == b.store.fetch(Card.self, id: "card-1"))
        }
    }
}
