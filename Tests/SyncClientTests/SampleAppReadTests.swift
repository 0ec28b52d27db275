import ContractRuntime
import Contracts
import FieldOpsClient
import Foundation
import LearningClient
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

/// The sample apps' own reads (LearningClient's units and attempts, FieldOpsClient's tasks and
/// incidents) on the sample's contracts. The engine's generic reads are `ReadTests`, on the
/// engines' own contracts.
@Suite("Reads of the sample apps", .blockingWork)
struct SampleAppReadTests {
    let test: TestStore
    var store: OfflineStore { test.store }

    init() throws {
        test = try TestStore()
        try test.store.applyServerChanges(Samples.everything)
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

    @Test("several reads in one snapshot")
    func snapshot() throws {
        let (units, tasks) = try store.read { reader throws(OfflineStoreError) in
            (try reader.units(), try reader.tasks(teamId: "team-1"))
        }
        #expect(units.count == 2)
        #expect(tasks.count == 2)
    }

    @Test("an observer of a team's tasks gets the current value, then a new one after a change")
    func observation() async throws {
        let observation = store.observe { reader in try reader.tasks(teamId: "team-1").map(\.status) }
        var iterator = observation.makeAsyncIterator()
        #expect(try await iterator.next() == [.assigned, .assigned])
        try store.patch(FieldTask.self, id: "task-2", [.status(.enRoute)])
        #expect(try await iterator.next() == [.assigned, .enRoute])
        try store.applyServerChanges(ServerChanges(deletes: ["Task": ["task-1"]]))
        #expect(try await iterator.next() == [.enRoute])
    }
}

@Suite("The learning app's read-through: one fetch when nothing is cached", .blockingWork)
struct LearningReadThroughTests {
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

    @Test("nothing cached: the unit list offline, refused, or broken is a typed result")
    func offlineAndUnavailable() async throws {
        let test = try TestStore()
        #expect(try await test.store.units(from: FakeFetcher(.fail(.offline))) == .offline)
        let refused = ErrorDetail(code: .forbidden, message: "no")
        #expect(try await test.store.units(from: FakeFetcher(.fail(.server(refused)))) == .unavailable(.server(refused)))
        let broken = ServerChanges(upserts: ["Unit": [.object(["id": .string("u")])]])
        let result = try await test.store.units(from: FakeFetcher(.answer(broken)))
        guard case .unavailable(.invalidResponse) = result else { Issue.record("expected invalidResponse, got \(result)"); return }
        #expect(try test.store.units().isEmpty)
    }
}
