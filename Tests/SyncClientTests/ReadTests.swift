import ContractRuntime
import Contracts
import FieldOpsClient
import Foundation
import LearningClient
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

@Suite("Reads, SQLite first", .blockingWork)
struct ReadTests {
    let test: TestStore
    var store: OfflineStore { test.store }

    init() throws {
        test = try TestStore()
        try test.store.applyServerChanges(Samples.everything)
    }

    @Test("generic reads: all with a filter and an order, fetch by id, count")
    func generic() throws {
        #expect(try store.fetch(Unit.self, id: "unit-1") == Samples.units[1])
        #expect(try store.fetch(Unit.self, id: "missing") == nil)
        #expect(try store.all(Unit.self).map(\.id) == ["unit-1", "unit-2"])
        #expect(
            try store.all(FieldTask.self, where: .equals(.teamId("team-1")), orderBy: [.descending("revision")]).map(\.id) == ["task-1", "task-2"])
        #expect(try store.all(FieldTask.self, where: .field("revision", .greaterThan, .int(2))).map(\.id) == ["task-1", "task-2"])
        #expect(try store.all(FieldTask.self, where: .isNull("assignee_id")).map(\.id) == ["task-3"])
        #expect(try store.all(FieldTask.self, where: !.equals(.teamId("team-1"))).map(\.id) == ["task-3"])
        #expect(try store.all(FieldTask.self, orderBy: [.ascending("sort_index")], limit: 2).map(\.id) == ["task-3", "task-1"])
        #expect(try store.count(Incident.self) == 4)
        #expect(try store.count(Incident.self, where: .oneOf([.priority(.high), .priority(.low)])) == 3)
        // A timestamp filter takes the wire form and compares stored milliseconds.
        #expect(try store.count(Incident.self, where: .field(.openedAt(Timestamp(millisecondsSince1970: 3_000)), .greaterThanOrEqual)) == 2)
    }

    @Test("filters are checked against the contract")
    func checkedFilters() throws {
        #expect(throws: OfflineStoreError.unknownField(contract: "Task", field: "colour")) {
            try store.all(FieldTask.self, where: .equals("colour", .string("red")))
        }
        #expect(throws: OfflineStoreError.fieldNotQueryable(contract: "Incident", field: "reporter_notes", reason: "it is encrypted on the device")) {
            try store.all(Incident.self, where: .equals(.reporterNotes("x")))
        }
        #expect(throws: OfflineStoreError.invalidValue(contract: "Task", field: "revision", reason: "must be a whole number")) {
            try store.all(FieldTask.self, where: .equals("revision", .string("seven")))
        }
    }

    @Test("the list of units, in catalogue order, with local state and lesson counts")
    func units() throws {
        #expect(try store.units().map(\.id) == ["unit-1", "unit-2"])
        let summaries = try store.unitSummaries()
        #expect(summaries.map(\.lessonCount) == [2, 1])
        #expect(summaries.map(\.local.downloadStatus) == [.none, .none])
    }

    @Test("a unit's detail: lessons in order with their assets; no local file for a file not downloaded")
    func unitDetail() throws {
        let detail = try #require(try store.unitDetail(id: "unit-1"))
        #expect(detail.unit == Samples.units[1])
        #expect(detail.lessons.map(\.lesson.id) == ["lesson-a", "lesson-b"])
        #expect(detail.lessons[0].assets.map(\.id) == ["asset-1", "asset-2"])
        #expect(detail.lessons[0].localFiles.isEmpty)
        #expect(detail.totalBytes == 1200)
        #expect(detail.downloadedBytes == 0)
        #expect(try store.unitDetail(id: "missing") == nil)
    }

    @Test("a learner's attempts, newest first")
    func attempts() throws {
        #expect(try store.attempts().map(\.id) == ["att-2", "att-3", "att-1"])
        #expect(try store.attempts(assessmentId: "quiz-1").map(\.id) == ["att-2", "att-1"])
    }

    @Test("a team's tasks in route order, by assignee and status")
    func tasks() throws {
        #expect(try store.tasks(teamId: "team-1").map(\.id) == ["task-1", "task-2"])
        #expect(try store.tasks(teamId: "team-1", assigneeId: "u-1").map(\.id) == ["task-2"])
        #expect(try store.tasks(teamId: "team-2", statuses: [.assigned]).isEmpty)
        #expect(try store.tasks(teamId: "team-2", statuses: [.completed, .cancelled]).map(\.id) == ["task-3"])
    }

    @Test("incidents by the contract's priority order, then newest first")
    func incidents() throws {
        #expect(try store.incidents(teamId: "team-1").map(\.id) == ["inc-crit", "inc-high-new", "inc-high-old", "inc-low"])
        #expect(try store.incidents(teamId: "team-1", states: [.resolved]).isEmpty)
        // Encrypted fields read back in clear.
        #expect(try store.fetch(Incident.self, id: "inc-low")?.reporterNotes == "secret notes of inc-low")
    }

    @Test("local state: read and written, never queued")
    func localState() throws {
        #expect(try store.localState(Unit.self, id: "unit-1") == Unit.LocalState())
        let state = Unit.LocalState(downloadStatus: .downloaded, downloadedAt: Samples.t0)
        try store.setLocalState(Unit.self, id: "unit-1", state)
        #expect(try store.localState(Unit.self, id: "unit-1") == state)
        try store.setLocalState(Incident.self, id: "inc-low", Incident.LocalState(draftNote: "call back"))
        #expect(try store.localState(Incident.self, id: "inc-low")?.draftNote == "call back")
        #expect(try store.outboxEntries().isEmpty)
        #expect(throws: OfflineStoreError.rowNotFound(contract: "Unit", id: "nope")) {
            try store.setLocalState(Unit.self, id: "nope", state)
        }
    }

    @Test("several reads in one snapshot")
    func snapshot() throws {
        let (units, tasks) = try store.read { reader throws(OfflineStoreError) in
            (try reader.units(), try reader.tasks(teamId: "team-1"))
        }
        #expect(units.count == 2)
        #expect(tasks.count == 2)
    }

    @Test("an observer gets the current value, then a new one after a change")
    func observation() async throws {
        let observation = store.observe { reader in try reader.tasks(teamId: "team-1").map(\.status) }
        var iterator = observation.makeAsyncIterator()
        #expect(try await iterator.next() == [.assigned, .assigned])
        try store.patch(FieldTask.self, id: "task-2", [.status(.enRoute)])
        #expect(try await iterator.next() == [.assigned, .enRoute])
        try store.applyServerChanges(ServerChanges(deletes: ["Task": ["task-1"]]))
        #expect(try await iterator.next() == [.enRoute])
    }

    @Test("observing all rows of an entity")
    func observeAll() async throws {
        var iterator = store.observeAll(Unit.self, orderBy: [.ascending("sort_index")]).makeAsyncIterator()
        #expect(try await iterator.next()?.map(\.id) == ["unit-1", "unit-2"])
        try store.applyServerChanges(
            ServerChanges(upserts: [
                "Unit": [Samples.wire(Unit(id: "unit-0", title: "Shapes", learnerLevel: .beginner, sortIndex: 0, updatedAt: Samples.t0))]
            ]))
        #expect(try await iterator.next()?.map(\.id) == ["unit-0", "unit-1", "unit-2"])
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
    @Test("cached rows are returned without the network")
    func cached() async throws {
        let test = try TestStore()
        try test.store.applyServerChanges(Samples.everything)
        let fetcher = FakeFetcher(.fail(.offline))
        let result = try await test.store.unitDetail(id: "unit-1", from: fetcher)
        #expect(result.value?.lessons.count == 2)
        guard case .cached = result else { Issue.record("expected .cached, got \(result)"); return }
        #expect(fetcher.calls.isEmpty)
    }

    @Test("nothing cached and online: fetched once, stored, returned")
    func fetched() async throws {
        let test = try TestStore()
        let page = ServerChanges(upserts: [
            "Unit": [Samples.wire(Samples.units[1])], "Lesson": Samples.lessons.prefix(2).map(Samples.wire),
            "Asset": Samples.assets.map(Samples.wire),
        ])
        let fetcher = FakeFetcher(.answer(page))
        let result = try await test.store.unitDetail(id: "unit-1", from: fetcher)
        guard case .fetched(let detail) = result else { Issue.record("expected .fetched, got \(result)"); return }
        #expect(detail.lessons.map(\.lesson.id) == ["lesson-a", "lesson-b"])
        #expect(fetcher.calls == [RemoteFetchRequest(contract: "Unit", id: "unit-1", including: ["lessons", "lessons.assets"])])
        // Stored: the next read is from the cache.
        let again = try await test.store.unitDetail(id: "unit-1", from: fetcher)
        guard case .cached = again else { Issue.record("expected .cached, got \(again)"); return }
        #expect(fetcher.calls.count == 1)
    }

    @Test("nothing cached and offline: a typed offline result")
    func offline() async throws {
        let test = try TestStore()
        #expect(try await test.store.fetch(Incident.self, id: "inc-1", from: FakeFetcher(.fail(.offline))) == .offline)
        #expect(try await test.store.units(from: FakeFetcher(.fail(.offline))) == .offline)
    }

    @Test("nothing cached and the server does not have it: unavailable")
    func unavailable() async throws {
        let test = try TestStore()
        #expect(try await test.store.fetch(Incident.self, id: "inc-1", from: FakeFetcher(.answer(ServerChanges()))) == .unavailable(.notFound))
        let refused = ErrorDetail(code: .forbidden, message: "no")
        #expect(try await test.store.units(from: FakeFetcher(.fail(.server(refused)))) == .unavailable(.server(refused)))
        let broken = ServerChanges(upserts: ["Unit": [.object(["id": .string("u")])]])
        let result = try await test.store.units(from: FakeFetcher(.answer(broken)))
        guard case .unavailable(.invalidResponse) = result else { Issue.record("expected invalidResponse, got \(result)"); return }
        #expect(try test.store.units().isEmpty)
    }
}
