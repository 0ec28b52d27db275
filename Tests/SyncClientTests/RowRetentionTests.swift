import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import SyncServer
import Testing

@testable import SyncClient

/// The contracts' `retention` on a device, against the real server, on the engines' own contracts:
/// `Note` keeps synced rows 14 days, `Label` 30 days, `Board` forever, `Card` has none. Rows with
/// a write not yet on the server, and pinned rows, are never dropped; dropped rows come back when
/// the app asks.
@Suite(.blockingWork) struct RowRetentionTests {
    static let day: TimeInterval = 86_400

    func engine(_ store: OfflineStore, _ transport: any SyncTransport, scopes: [String] = ["team"]) -> SyncEngine {
        SyncEngine(
            store: store, transport: transport, configuration: SyncEngineConfiguration(scopes: scopes, retriesAutomatically: false)
        )
    }

    func note(_ id: String) -> Note {
        Note(id: id, teamId: "team-1", cardId: "card-1", authorId: "u-1", body: "Note \(id)", updatedAt: EngineSamples.t0)
    }

    @Test func syncedRowsPastTheirRetentionAreDroppedAfterASyncAndWhenTheStoreOpens() async throws {
        try await LiveServer.engine { server in
            let directory = try TemporaryDirectory()
            let clock = ManualClock(Date())
            var store = try makeEngineDeviceStore(directory, device: "d-1", clock: clock)
            let transport = server.transport("d-1")
            for id in ["note-old", "note-pinned", "note-edited"] { try store.create(note(id)) }
            try await server.publish("Label", ["id": .string("label-1"), "name": .string("Later")])
            let scopes = ["team", "catalog"]
            guard case .succeeded = await engine(store, transport, scopes: scopes).syncNow() else { Issue.record("first sync"); return }
            #expect(try store.fetch(Label.self, id: "label-1") != nil)
            try store.pin(Note.self, id: "note-pinned")

            // Fifteen days on: a write waits for the server on note-edited (no sync yet).
            clock.advance(by: 15 * Self.day)
            try store.patch(Note.self, id: "note-edited", [.body("Edited offline")])

            // Reopening (as after an app launch) drops what outlived its retention.
            try store.close()
            store = try makeEngineDeviceStore(directory, device: "d-1", clock: clock)
            #expect(try store.fetch(Note.self, id: "note-old") == nil)
            #expect(try store.fetch(Note.self, id: "note-pinned") != nil)
            #expect(try store.fetch(Note.self, id: "note-edited")?.body == "Edited offline")
            #expect(try store.fetch(Label.self, id: "label-1") != nil, "30 days of retention: kept after 15")
            #expect(Set(try store.droppedRows(Note.self).keys) == ["note-old"])

            // The edit reaches the server; the next sync does not bring note-old back (unchanged).
            guard case .succeeded = await engine(store, transport, scopes: scopes).syncNow() else { Issue.record("second sync"); return }
            #expect(try store.fetch(Note.self, id: "note-old") == nil)
            #expect(try store.fetch(Note.self, id: "note-edited") != nil, "just acknowledged: its age starts again")

            // Thirty-one days after the first sync, a sync drops the label too.
            clock.advance(by: 16 * Self.day)
            guard case .succeeded = await engine(store, transport, scopes: scopes).syncNow() else { Issue.record("third sync"); return }
            #expect(try store.fetch(Label.self, id: "label-1") == nil)
            #expect(try store.fetch(Note.self, id: "note-pinned") != nil, "pinned rows stay")

            // Unpinned, it goes at the next housekeeping.
            try store.unpin(Note.self, id: "note-pinned")
            let report = try store.runHousekeeping()
            #expect(report.expiredRows["Note"] == 1)
            #expect(try store.fetch(Note.self, id: "note-pinned") == nil)
        }
    }

    @Test func aDroppedRowComesBackWhenTheServerChangesItOrTheAppAsks() async throws {
        try await LiveServer.engine { server in
            let clock = ManualClock(Date())
            let device = try TemporaryDirectory(), other = try TemporaryDirectory()
            let store = try makeEngineDeviceStore(device, device: "d-1", clock: clock)
            let otherStore = try makeEngineDeviceStore(other, device: "d-2")
            try store.create(note("note-1"))
            try store.create(note("note-2"))
            guard case .succeeded = await engine(store, server.transport("d-1")).syncNow() else { Issue.record("sync"); return }
            clock.advance(by: 15 * Self.day)
            #expect(try store.runHousekeeping().expiredRows["Note"] == 2)

            // Another device changes note-1 on the server: the next pull brings it back.
            guard case .succeeded = await engine(otherStore, server.transport("d-2")).syncNow() else { Issue.record("d-2"); return }
            try otherStore.patch(Note.self, id: "note-1", [.body("Renamed")])
            guard case .succeeded = await engine(otherStore, server.transport("d-2")).syncNow() else { Issue.record("d-2"); return }
            guard case .succeeded = await engine(store, server.transport("d-1")).syncNow() else { Issue.record("d-1"); return }
            #expect(try store.fetch(Note.self, id: "note-1")?.body == "Renamed")
            #expect(try store.fetch(Note.self, id: "note-2") == nil)
            #expect(Set(try store.droppedRows(Note.self).keys) == ["note-2"])

            // The app asks for note-2: a read-through fetches it from the server again.
            let fetcher = ScopeFetcher(store: store, transport: server.transport("d-1"), scope: "team")
            guard case .fetched(let again) = try await store.fetch(Note.self, id: "note-2", from: fetcher) else {
                Issue.record("read-through of a dropped row")
                return
            }
            #expect(again.id == "note-2")
            #expect(try store.droppedRows(Note.self).isEmpty)
        }
    }

    @Test func aContractWithoutTombstonesRefusesADeleteOnTheDevice() throws {
        var entity = Note.descriptor
        entity.tombstones = false
        #expect(
            throws: OfflineStoreError.notWritable(
                contract: "Note", reason: "its rows are never deleted (tombstones: false): no deletion could reach other devices"
            )
        ) {
            try OfflineStore.requireWritable(entity, .delete)
        }
        try OfflineStore.requireWritable(entity, .update)
        try OfflineStore.requireWritable(Note.descriptor, .delete)
    }

    @Test func rowsWithoutRetentionOrNeverAcknowledgedStay() throws {
        let test = try TestStore.engine()
        try test.store.applyServerChanges(EngineSamples.everything)
        try test.store.create(note("note-local"))
        test.clock.advance(by: 400 * Self.day)
        let report = try test.store.runHousekeeping()
        // Boards (retention forever), cards and the profile (none) stay; the unpushed note stays;
        // the synced notes and the labels (14 and 30 days) go.
        #expect(try test.store.all(Board.self).count == EngineSamples.boards.count)
        #expect(try test.store.all(Card.self).count == EngineSamples.cards.count)
        #expect(try test.store.fetch(Profile.self, id: EngineSamples.profile.id) != nil)
        #expect(try test.store.fetch(Note.self, id: "note-local") != nil)
        #expect(try test.store.fetch(Note.self, id: EngineSamples.notes[0].id) == nil)
        #expect(report.expiredRows == ["Note": EngineSamples.notes.count, "Label": EngineSamples.labels.count])
    }

    @Test func acknowledgedOutboxEntriesArePrunedAfterTheirRetentionWhileOthersStay() async throws {
        try await LiveServer.engine { server in
            let directory = try TemporaryDirectory()
            let clock = ManualClock(Date())
            let store = try makeEngineDeviceStore(directory, device: "d-1", clock: clock)
            try store.create(note("note-1"))
            guard case .succeeded = await engine(store, server.transport("d-1")).syncNow() else { Issue.record("sync"); return }
            try store.patch(Note.self, id: "note-1", [.body("Not sent yet")])
            #expect(try store.outboxCounts()[.done] == 1)

            clock.advance(by: 6 * Self.day)
            #expect(try store.runHousekeeping().prunedOutboxEntries == 0, "7 days by default")
            clock.advance(by: 2 * Self.day)
            #expect(try store.runHousekeeping().prunedOutboxEntries == 1)
            #expect(try store.outboxCounts()[.done] == 0)
            #expect(try store.outboxCounts()[.pending] == 1, "a write not yet sent is never pruned")
            // The server's audit still holds the pruned write.
            let key = server.storage.auditKey
            let changes = try await server.storage.read { reader in
                let entries = try await reader.auditEntries(after: 0, limit: 100)
                return try await zip(entries, AuditChain.readableDetails(of: entries, in: reader, key: key)).flatMap { entry, text in
                    try AuditedChange.changes(of: entry, readableDetail: text ?? "{}")
                }
            }
            #expect(changes.contains { $0.rowID == "note-1" })
        }
    }
}

/// A read-through fetcher over the real server: pulls a scope from the start and hands back
/// the page rows of the requested contract, as an app's own fetcher would.
struct ScopeFetcher: RemoteFetcher {
    let store: OfflineStore
    let transport: any SyncTransport
    let scope: String

    func fetch(_ request: RemoteFetchRequest) async throws -> ServerChanges {
        var cursor: String?
        // No scope key and no cursor: what a read-through stores must not move the scope's cursor.
        var found = ServerChanges()
        while true {
            let page: PullResponse
            do {
                page = try PullResponse(
                    json: try await transport.pull(
                        scope: scope, cursor: cursor, limit: nil, schema: store.schemaVersions, clientID: store.identity.clientId
                    ))
            } catch TransportError.network {
                throw RemoteFetchFailure.offline
            }
            let changes = ServerChanges(pull: page, scopeKey: scope)
            found.schemaVersions = changes.schemaVersions
            for row in changes.upserts[request.contract] ?? [] {
                guard case .object(let fields) = row, request.id == nil || fields["id"] == .string(request.id ?? "") else { continue }
                found.upserts[request.contract, default: []].append(row)
            }
            guard page.hasMore else { return found }
            cursor = page.cursor
        }
    }
}
