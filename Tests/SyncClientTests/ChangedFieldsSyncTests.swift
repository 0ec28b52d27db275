import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import SyncServer
import Testing

@testable import SyncClient

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Pulls of changed fields only (`fields=changed`): the store merges a row carrying only its
/// changed fields into the row it holds, or refuses it when it cannot; the engine asks for them
/// when it resumes from a stored cursor and pulls the pages again whole after a refusal; against
/// the real server on both storages, on the engines' own contracts.
@Suite("Changed fields only, on the pull", .serialized)
struct ChangedFieldsSyncTests {
    // MARK: The store

    private static func noteRow(_ id: String, version: Int64) -> JSONValue {
        .object([
            "id": .string(id), "team_id": .string("team-1"), "card_id": .string("card-1"), "author_id": .string("u-1"),
            "body": .string("Body of \(id)"), "format": .string("plain"), "private_remark": .string("private remark of \(id)"),
            "word_count": .int(3), "updated_at": .string("2026-01-01T08:00:00.000Z"), "_server_version": .int(version),
        ])
    }

    private static func partial(_ id: String, base: Int64, version: Int64, _ fields: [String: JSONValue]) -> JSONValue {
        var row = fields
        row["id"] = .string(id)
        row["_base_version"] = .int(base)
        row["_server_version"] = .int(version)
        return .object(row)
    }

    @Test("a row with only its changed fields is merged into the row held at its base version; the others stay as held")
    func storeMerges() throws {
        let folder = try TemporaryDirectory()
        let store = try makeEngineDeviceStore(folder, device: "phone")
        try store.applyServerChanges(ServerChanges(upserts: ["Note": [Self.noteRow("note-1", version: 1)]]))
        try store.applyServerChanges(
            ServerChanges(upserts: ["Note": [Self.partial("note-1", base: 1, version: 2, ["format": .string("markdown")])]]))
        let merged = try #require(try store.fetch(Note.self, id: "note-1"))
        #expect(merged.format == .markdown)
        #expect(merged.privateRemark == "private remark of note-1", "a sealed field not sent keeps what the device holds")
        #expect(merged.body == "Body of note-1" && merged.wordCount == 3)

        // A field set to null is sent as null, and stored so.
        try store.applyServerChanges(
            ServerChanges(upserts: ["Note": [Self.partial("note-1", base: 2, version: 3, ["private_remark": .null])]]))
        #expect(try store.fetch(Note.self, id: "note-1")?.privateRemark == nil)
        #expect(try store.fetch(Note.self, id: "note-1")?.format == .markdown)
    }

    @Test("a row the device does not hold at the base version is refused, and nothing of the page is stored")
    func storeRefuses() throws {
        let folder = try TemporaryDirectory()
        let store = try makeEngineDeviceStore(folder, device: "phone")
        try store.applyServerChanges(ServerChanges(upserts: ["Note": [Self.noteRow("note-1", version: 3)]]))
        func refusal(_ changes: ServerChanges) -> OfflineStoreError? {
            do {
                try store.applyServerChanges(changes)
                return nil
            } catch {
                return error
            }
        }
        // Not held at all.
        let missing = refusal(
            ServerChanges(
                upserts: [
                    "Note": [
                        Self.noteRow("note-2", version: 1), Self.partial("note-9", base: 1, version: 2, ["format": .string("markdown")]),
                    ]
                ]))
        #expect(missing == .partialRowNotHeld(contract: "Note", id: "note-9"))
        #expect(try store.fetch(Note.self, id: "note-2") == nil, "the page is stored whole or not at all")
        // Held at a version older than the one the changes apply to (it missed a change).
        #expect(
            refusal(ServerChanges(upserts: ["Note": [Self.partial("note-1", base: 4, version: 5, ["format": .string("markdown")])]]))
                == .partialRowNotHeld(contract: "Note", id: "note-1"))
        // Held at a version newer than the row sent (a stale page).
        #expect(
            refusal(ServerChanges(upserts: ["Note": [Self.partial("note-1", base: 1, version: 2, ["format": .string("markdown")])]]))
                == .partialRowNotHeld(contract: "Note", id: "note-1"))
        #expect(try store.fetch(Note.self, id: "note-1")?.format == .plain)
        // With a write of the row in the outbox: its fields hold the user's edit, not the server's values.
        try store.patch(Note.self, id: "note-1", [.isPinned(true)])
        #expect(
            refusal(ServerChanges(upserts: ["Note": [Self.partial("note-1", base: 3, version: 4, ["format": .string("markdown")])]]))
                == .partialRowNotHeld(contract: "Note", id: "note-1"))
        // Shaped for an older version: never merged.
        #expect(
            refusal(
                ServerChanges(
                    upserts: ["Note": [Self.partial("note-1", base: 3, version: 4, ["format": .string("markdown")])]],
                    schemaVersions: ["Note": 0])) != nil)
    }

    // MARK: The engine against the real server

    /// The real sync server on `kind` on loopback, `u-1` in `team-1`.
    struct Server: Sendable {
        let url: URL
        let signer: TokenSigner
        let clock: any ServerClock

        func transport(_ device: String) -> RecordingPulls {
            RecordingPulls(
                URLSessionTransport(baseURL: url, timeout: 120) { [self] in
                    signer.token(tenant: "acme", user: "u-1", device: device, teams: ["team-1"], now: clock.now().millisecondsSince1970 / 1000)
                })
        }

        static func run(_ kind: StorageKind, _ body: @Sendable (Server) async throws -> Void) async throws {
            try await LiveServer.engine(kind) { live in try await body(Server(url: live.url, signer: live.signer, clock: live.clock)) }
        }
    }

    /// Forwards to a real transport, recording each pull: whether it asked for changed fields,
    /// and the body it got.
    final class RecordingPulls: SyncTransport, @unchecked Sendable {
        struct Pull {
            var cursor: String?
            var changedFields: Bool
            var body: Data
        }

        let inner: URLSessionTransport
        private let lock = NSLock()
        private var recorded: [Pull] = []

        init(_ inner: URLSessionTransport) { self.inner = inner }

        var pulls: [Pull] { lock.withLock { recorded } }
        func clear() { lock.withLock { recorded.removeAll() } }

        func push(_ request: PushRequest) async throws(TransportError) -> PushResponse { try await inner.push(request) }

        func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError) -> Data {
            try await pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: nil, changedFields: false)
        }

        func pull(
            scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String, contracts: [String]?, changedFields: Bool
        ) async throws(TransportError) -> Data {
            let body = try await inner.pull(
                scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: contracts, changedFields: changedFields)
            lock.withLock { recorded.append(Pull(cursor: cursor, changedFields: changedFields, body: body)) }
            return body
        }

        func health() async -> Bool { await inner.health() }
    }

    struct Device {
        let folder: TemporaryDirectory
        let store: OfflineStore
        let transport: RecordingPulls
        let engine: SyncEngine

        init(_ server: Server, _ name: String) throws {
            folder = try TemporaryDirectory()
            store = try makeEngineDeviceStore(folder, device: name)
            transport = server.transport(name)
            engine = SyncEngine(
                store: store, transport: transport,
                configuration: SyncEngineConfiguration(scopes: ["team"], retriesAutomatically: false, usesLiveChannel: false))
        }

        func sync(sourceLocation: SourceLocation = #_sourceLocation) async {
            let result = await engine.syncNow()
            guard case .succeeded = result else {
                Issue.record("sync failed: \(result)", sourceLocation: sourceLocation)
                return
            }
        }

        /// The rows of `contract` the pulls since the last ``RecordingPulls/clear()`` received.
        func pulledRows(_ contract: String) throws -> [[String: JSONValue]] {
            try transport.pulls.flatMap { pull in
                try PullResponse(json: pull.body).upserts[contract, default: []].compactMap { row -> [String: JSONValue]? in
                    if case .object(let object) = row { return object }
                    return nil
                }
            }
        }
    }

    /// A field_merge board with a description no test edits.
    static func board(_ id: String) -> Board {
        var board = EngineSamples.board(id)
        board.description = "Plans of \(id)"
        return board
    }

    @Test("field_merge edits of two devices reach each other as changed fields, and both end with the server's row", arguments: StorageKind.allCases)
    func fieldMergeOnChangedFields(_ kind: StorageKind) async throws {
        try await Server.run(kind) { server in
            let a = try Device(server, "device-a")
            let b = try Device(server, "device-b")
            for index in 1...5 { try a.store.create(Self.board("board-\(index)")) }
            // A note, whose private remark is sealed on the device.
            try a.store.create(EngineSamples.note("note-1"))
            await a.sync()
            await b.sync()
            // A first download: whole rows, nothing asked otherwise.
            #expect(b.transport.pulls.allSatisfy { !$0.changedFields })
            #expect(try b.pulledRows("Board").count == 5)
            #expect(try b.pulledRows("Note").count == 1)

            // One field on one device: the other gets only it.
            b.transport.clear()
            try a.store.patch(Board.self, id: "board-1", [.color(.red)])
            try a.store.patch(Note.self, id: "note-1", [.isPinned(true)])
            await a.sync()
            await b.sync()
            #expect(b.transport.pulls.first?.changedFields == true)
            let pulled = try b.pulledRows("Board")
            #expect(pulled.count == 1)
            let row = try #require(pulled.first)
            #expect(row["_base_version"] != nil && row["color"] == .string("red"))
            #expect(row["name"] == nil && row["description"] == nil)
            let onB = try #require(try b.store.fetch(Board.self, id: "board-1"))
            #expect(onB == (try a.store.fetch(Board.self, id: "board-1")))
            #expect(onB.description == "Plans of board-1")
            let note = try #require(try b.pulledRows("Note").first)
            #expect(note["_base_version"] != nil && note["is_pinned"] == .bool(true))
            #expect(note["body"] == nil && note["private_remark"] == nil)
            #expect(
                try b.store.fetch(Note.self, id: "note-1")?.privateRemark == "private remark of note-1", "a sealed field not sent keeps its value")

            // Different fields on both devices at once: merged on the server, each device ends
            // with both, from rows carrying only the changed fields.
            try a.store.patch(Board.self, id: "board-2", [.status(.paused)])
            try b.store.patch(Board.self, id: "board-2", [.color(.blue)])
            await a.sync()
            b.transport.clear()
            await b.sync()
            a.transport.clear()
            await a.sync()
            // A row the device wrote itself is never merged onto: its copy holds what it sent.
            #expect(try a.pulledRows("Board").contains { $0["_base_version"] == nil && $0["name"] != nil })
            for device in [a, b] {
                let board = try #require(try device.store.fetch(Board.self, id: "board-2"))
                #expect(board.status == .paused && board.color == .blue)
                #expect(board.name == "Board board-2" && board.description == "Plans of board-2")
                #expect(try device.store.conflicts(includeResolved: true).isEmpty)
            }
            // The same field: the later write wins on the server; both devices agree.
            try a.store.patch(Board.self, id: "board-3", [.name("Board A")])
            try b.store.patch(Board.self, id: "board-3", [.name("Board B"), .ownerId("u-2")])
            await a.sync()
            await b.sync()
            await a.sync()
            let onA = try #require(try a.store.fetch(Board.self, id: "board-3"))
            #expect(onA == (try b.store.fetch(Board.self, id: "board-3")))
            #expect(onA.ownerId == "u-2")
            for index in 1...5 {
                #expect(try a.store.fetch(Board.self, id: "board-\(index)") == (try b.store.fetch(Board.self, id: "board-\(index)")))
            }
            try a.store.close()
            try b.store.close()
        }
    }

    @Test("a device that cannot merge a row (an unsynced write of it) pulls the page again whole", arguments: StorageKind.allCases)
    func fallbackToWholeRows(_ kind: StorageKind) async throws {
        try await Server.run(kind) { server in
            let a = try Device(server, "device-a")
            let b = try Device(server, "device-b")
            try a.store.create(Card(id: "card-1", teamId: "team-1", boardId: "board-1", title: "Original", description: "Notes", revision: 0))
            try a.store.create(Card(id: "card-2", teamId: "team-1", boardId: "board-1", title: "Other", revision: 0))
            await a.sync()
            await b.sync()

            // A changes the description; B, offline, the title of the same version_check card: B's
            // push conflicts and keeps its write, so the pulled row cannot be merged into B's.
            try a.store.patch(Card.self, id: "card-1", [.description("New notes")])
            try a.store.patch(Card.self, id: "card-2", [.title("Renamed")])
            await a.sync()
            try b.store.patch(Card.self, id: "card-1", [.title("From B")])
            b.transport.clear()
            await b.sync()
            let pulls = b.transport.pulls
            #expect(pulls.first?.changedFields == true)
            #expect(pulls.contains { !$0.changedFields && $0.cursor == pulls.first?.cursor }, "the same page asked again, whole")
            let card = try #require(try b.store.fetch(Card.self, id: "card-1"))
            #expect(card.title == "From B", "B's own edit stays until the conflict is settled")
            #expect(card.description == "New notes")
            #expect(try b.store.fetch(Card.self, id: "card-2")?.title == "Renamed")
            #expect(try b.store.conflicts().map(\.rowId) == ["card-1"])

            // The next sync asks for changed fields again.
            b.transport.clear()
            try a.store.patch(Card.self, id: "card-2", [.description("More")])
            await a.sync()
            await b.sync()
            #expect(b.transport.pulls.first?.changedFields == true)
            #expect(try b.store.fetch(Card.self, id: "card-2")?.description == "More")
            try a.store.close()
            try b.store.close()
        }
    }
}
