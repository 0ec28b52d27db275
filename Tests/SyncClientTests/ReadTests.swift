import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

/// The engine's generic reads, on the engines' own contracts. The sample apps' own reads are
/// `SampleAppReadTests`.
@Suite("Reads, SQLite first", .blockingWork)
struct ReadTests {
    let test: TestStore
    var store: OfflineStore { test.store }

    init() throws {
        test = try TestStore.engine()
        try test.store.applyServerChanges(EngineSamples.everything)
    }

    @Test("generic reads: all with a filter and an order, fetch by id, count")
    func generic() throws {
        #expect(try store.fetch(Label.self, id: "label-1") == EngineSamples.labels[1])
        #expect(try store.fetch(Label.self, id: "missing") == nil)
        #expect(try store.all(Label.self).map(\.id) == ["label-1", "label-2"])
        #expect(try store.all(Card.self, where: .equals(.teamId("team-1")), orderBy: [.descending("revision")]).map(\.id) == ["card-1", "card-2"])
        #expect(try store.all(Card.self, where: .field("revision", .greaterThan, .int(2))).map(\.id) == ["card-1", "card-2"])
        #expect(try store.all(Card.self, where: .isNull("assignee_id")).map(\.id) == ["card-3"])
        #expect(try store.all(Card.self, where: !.equals(.teamId("team-1"))).map(\.id) == ["card-3"])
        #expect(try store.all(Card.self, orderBy: [.ascending("sort_index")], limit: 2).map(\.id) == ["card-3", "card-1"])
        #expect(try store.count(Board.self) == 4)
        #expect(try store.count(Board.self, where: .oneOf([.status(.active), .status(.paused)])) == 3)
        // A timestamp filter takes the wire form and compares stored milliseconds.
        #expect(try store.count(Board.self, where: .field(.createdAt(Timestamp(millisecondsSince1970: 3_000)), .greaterThanOrEqual)) == 2)
    }

    @Test("filters are checked against the contract")
    func checkedFilters() throws {
        #expect(throws: OfflineStoreError.unknownField(contract: "Card", field: "colour")) {
            try store.all(Card.self, where: .equals("colour", .string("red")))
        }
        #expect(throws: OfflineStoreError.fieldNotQueryable(contract: "Note", field: "private_remark", reason: "it is encrypted on the device")) {
            try store.all(Note.self, where: .equals(.privateRemark("x")))
        }
        #expect(throws: OfflineStoreError.invalidValue(contract: "Card", field: "revision", reason: "must be a whole number")) {
            try store.all(Card.self, where: .equals("revision", .string("seven")))
        }
    }

    @Test("local state: read and written, never queued")
    func localState() throws {
        #expect(try store.localState(Label.self, id: "label-1") == Label.LocalState())
        let state = Label.LocalState(lastAccessedAt: EngineSamples.t0)
        try store.setLocalState(Label.self, id: "label-1", state)
        #expect(try store.localState(Label.self, id: "label-1") == state)
        try store.setLocalState(Note.self, id: "note-1", Note.LocalState(draftBody: "call back", readingState: .reading))
        #expect(try store.localState(Note.self, id: "note-1")?.draftBody == "call back")
        #expect(try store.outboxEntries().isEmpty)
        #expect(throws: OfflineStoreError.rowNotFound(contract: "Label", id: "nope")) {
            try store.setLocalState(Label.self, id: "nope", state)
        }
    }

    @Test("several reads in one snapshot")
    func snapshot() throws {
        let (labels, cards) = try store.read { reader throws(OfflineStoreError) in
            (try reader.all(Label.self), try reader.all(Card.self, where: .equals(.teamId("team-1"))))
        }
        #expect(labels.count == 2)
        #expect(cards.count == 2)
    }

    @Test("an observer gets the current value, then a new one after a change")
    func observation() async throws {
        let observation = store.observe { reader in
            try reader.all(Card.self, where: .equals(.teamId("team-1")), orderBy: [.ascending("sort_index")]).map(\.lane)
        }
        var iterator = observation.makeAsyncIterator()
        #expect(try await iterator.next() == [.todo, .todo])
        try store.patch(Card.self, id: "card-2", [.lane(.doing)])
        #expect(try await iterator.next() == [.todo, .doing])
        try store.applyServerChanges(ServerChanges(deletes: ["Card": ["card-1"]]))
        #expect(try await iterator.next() == [.doing])
    }

    @Test("observing all rows of an entity")
    func observeAll() async throws {
        var iterator = store.observeAll(Label.self, orderBy: [.ascending("sort_index")]).makeAsyncIterator()
        #expect(try await iterator.next()?.map(\.id) == ["label-1", "label-2"])
        try store.applyServerChanges(
            ServerChanges(upserts: [
                "Label": [EngineSamples.wire(Label(id: "label-0", name: "First", sortIndex: 0, updatedAt: EngineSamples.t0))]
            ]))
        #expect(try await iterator.next()?.map(\.id) == ["label-0", "label-1", "label-2"])
    }
}

/// A fetcher that answers from a fixed page, or fails, and counts its calls.
final class FakeFetcher: RemoteFetcher {
    enum Mode: Sendable {
        case answer(ServerChanges)
        case fail(RemoteFetchFailure)
    }

    let mode: Mode
    private let requests = LockedBox<[RemoteFetchRequest]>([])

    init(_ mode: Mode) {
        self.mode = mode
    }

    var calls: [RemoteFetchRequest] { requests.value }

    func fetch(_ request: RemoteFetchRequest) async throws -> ServerChanges {
        requests.mutate { $0.append(request) }
        switch mode {
        case .answer(let changes): return changes
        case .fail(let failure): throw failure
        }
    }
}

final class LockedBox<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value

    init(_ value: Value) { stored = value }

    var value: Value {
        lock.lock()
        defer { lock.unlock() }
        return stored
    }

    func mutate(_ body: (inout Value) -> Void) {
        lock.lock()
        defer { lock.unlock() }
        body(&stored)
    }
}

@Suite("Read-through: one fetch when nothing is cached", .blockingWork)
struct ReadThroughTests {
    /// A board's cards, or nil when the board is not on the device.
    static func boardCards(_ id: String) -> (StoreReader) throws(OfflineStoreError) -> [Card]? {
        { reader throws(OfflineStoreError) in
            guard try reader.fetch(Board.self, id: id) != nil else { return nil }
            return try reader.all(Card.self, where: .equals(.boardId(id)), orderBy: [.ascending("id")])
        }
    }

    @Test("cached rows are returned without the network")
    func cached() async throws {
        let test = try TestStore.engine()
        try test.store.applyServerChanges(EngineSamples.everything)
        let fetcher = FakeFetcher(.fail(.offline))
        let result = try await test.store.fetch(
            Board.self, id: "board-launch", withChildrenDepth: 2, from: fetcher, read: Self.boardCards("board-launch"))
        #expect(result.value?.count == 2)
        guard case .cached = result else { Issue.record("expected .cached, got \(result)"); return }
        #expect(fetcher.calls.isEmpty)
    }

    @Test("nothing cached and online: fetched once, stored, returned")
    func fetched() async throws {
        let test = try TestStore.engine()
        let page = ServerChanges(upserts: [
            "Board": [EngineSamples.wire(EngineSamples.boards[1])], "Card": EngineSamples.cards.prefix(2).map(EngineSamples.wire),
            "Note": EngineSamples.notes.map(EngineSamples.wire),
        ])
        let fetcher = FakeFetcher(.answer(page))
        let result = try await test.store.fetch(
            Board.self, id: "board-launch", withChildrenDepth: 2, from: fetcher, read: Self.boardCards("board-launch"))
        guard case .fetched(let cards) = result else { Issue.record("expected .fetched, got \(result)"); return }
        #expect(cards.map(\.id) == ["card-1", "card-2"])
        #expect(
            fetcher.calls == [RemoteFetchRequest(contract: "Board", id: "board-launch", including: ["cards", "cards.notes", "cards.attachments"])])
        // Stored: the next read is from the cache.
        let again = try await test.store.fetch(
            Board.self, id: "board-launch", withChildrenDepth: 2, from: fetcher, read: Self.boardCards("board-launch"))
        guard case .cached = again else { Issue.record("expected .cached, got \(again)"); return }
        #expect(fetcher.calls.count == 1)
    }

    /// All the catalog's labels, from SQLite or else fetched once.
    static func labels(_ store: OfflineStore, from fetcher: any RemoteFetcher) async throws -> ReadResult<[Label]> {
        try await store.readThrough(
            .all(Label.self), from: fetcher, read: { reader throws(OfflineStoreError) in try reader.all(Label.self) }, isCached: { !$0.isEmpty })
    }

    @Test("nothing cached and offline: a typed offline result")
    func offline() async throws {
        let test = try TestStore.engine()
        #expect(try await test.store.fetch(Note.self, id: "note-1", from: FakeFetcher(.fail(.offline))) == .offline)
        #expect(try await Self.labels(test.store, from: FakeFetcher(.fail(.offline))) == .offline)
    }

    @Test("nothing cached and the server does not have it: unavailable")
    func unavailable() async throws {
        let test = try TestStore.engine()
        #expect(try await test.store.fetch(Note.self, id: "note-1", from: FakeFetcher(.answer(ServerChanges()))) == .unavailable(.notFound))
        let refused = ErrorDetail(code: .forbidden, message: "no")
        #expect(try await Self.labels(test.store, from: FakeFetcher(.fail(.server(refused)))) == .unavailable(.server(refused)))
        let broken = ServerChanges(upserts: ["Label": [.object(["id": .string("l")])]])
        let result = try await Self.labels(test.store, from: FakeFetcher(.answer(broken)))
        guard case .unavailable(.invalidResponse) = result else { Issue.record("expected invalidResponse, got \(result)"); return }
        #expect(try test.store.all(Label.self).isEmpty)
    }
}
