import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SampleServerApps
import SyncProtocol
import Testing

@testable import SyncServer

@Suite("Pull by scope and cursor")
struct PullServiceTests {
    let device = PullHarness.device()

    @Test("pages are bounded by limit; over many pages every row comes exactly once, in sequence order", arguments: StorageKind.allCases)
    func paging(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        for index in 0..<30 {
            try await harness.publish("Unit", PullHarness.unit(String(format: "u-%02d", index), sortIndex: Int64(index)))
            try await harness.publish("Lesson", PullHarness.lesson(String(format: "l-%02d", index), unit: String(format: "u-%02d", index), index: 0))
        }
        let pages = try await harness.pullAll("content", as: device, limit: 7)
        #expect(pages.map { $0.upserts.values.map(\.count).reduce(0, +) } == [7, 7, 7, 7, 7, 7, 7, 7, 4])
        #expect(pages.dropLast().allSatisfy { $0.hasMore })
        #expect(pages.last?.hasMore == false)
        let units = pages.flatMap { $0.upserts["Unit"] ?? [] }.compactMap { $0.pullMember("id")?.pullText }
        let lessons = pages.flatMap { $0.upserts["Lesson"] ?? [] }.compactMap { $0.pullMember("id")?.pullText }
        #expect(units == (0..<30).map { String(format: "u-%02d", $0) })
        #expect(lessons == (0..<30).map { String(format: "l-%02d", $0) })
        // The cursor is the last row's sequence: page n+1 starts right after page n.
        let sequences = try pages.map { try SyncCursor(encoded: $0.cursor).sequence }
        #expect(sequences == [7, 14, 21, 28, 35, 42, 49, 56, 60])

        // An empty page keeps the cursor.
        let empty = try await harness.pull.pull(scope: "content", cursor: pages.last!.cursor, limit: 7, schema: [:], clientID: nil, identity: device)
        #expect(empty.upserts.isEmpty && empty.deletes.isEmpty && !empty.hasMore)
        #expect(empty.cursor == pages.last!.cursor)
    }

    @Test("rows written while a device pages through are not skipped", arguments: StorageKind.allCases)
    func writesBetweenPages(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        for index in 0..<10 {
            try await harness.publish("Unit", PullHarness.unit("u-\(index)"))
        }
        var seen: [String] = []
        var cursor: String?
        var page: PullResponse
        var extra = 0
        repeat {
            page = try await harness.pull.pull(scope: "content", cursor: cursor, limit: 3, schema: [:], clientID: nil, identity: device)
            seen += (page.upserts["Unit"] ?? []).compactMap { $0.pullMember("id")?.pullText }
            cursor = page.cursor
            if extra < 2 {
                // A new row and an update of a row already pulled, between two pages.
                try await harness.publish("Unit", PullHarness.unit("new-\(extra)"))
                try await harness.publish("Unit", PullHarness.unit("u-0", title: "Renamed \(extra)"))
                extra += 1
            }
        } while page.hasMore
        #expect(Set(seen) == Set((0..<10).map { "u-\($0)" } + ["new-0", "new-1"]))
        // u-0 comes once more, in its latest state only: its first update was replaced by the
        // second before the device got there.
        #expect(seen.filter { $0 == "u-0" }.count == 2)
        #expect(seen.count == 13)
    }

    @Test("default limit, clamping above the maximum, and limits below 1 refused", arguments: StorageKind.allCases)
    func limits(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind, defaultLimit: 4, maximumLimit: 6)
        defer { harness.remove() }
        for index in 0..<10 {
            try await harness.publish("Unit", PullHarness.unit("u-\(index)"))
        }
        let byDefault = try await harness.pull.pull(scope: "content", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)
        #expect(byDefault.upserts["Unit"]?.count == 4 && byDefault.hasMore)
        let clamped = try await harness.pull.pull(scope: "content", cursor: nil, limit: 5000, schema: [:], clientID: nil, identity: device)
        #expect(clamped.upserts["Unit"]?.count == 6 && clamped.hasMore)
        let exact = try await harness.pull.pull(scope: "content", cursor: nil, limit: 10, schema: [:], clientID: nil, identity: device)
        #expect(exact.upserts["Unit"]?.count == 6)
        for limit in [0, -3] {
            let status = await pullErrorStatus {
                _ = try await harness.pull.pull(scope: "content", cursor: nil, limit: limit, schema: [:], clientID: nil, identity: device)
            }
            #expect(status == 400)
        }
    }

    @Test("a row written several times comes once, in its latest state", arguments: StorageKind.allCases)
    func latestStateOnly(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        for title in ["First", "Second", "Third"] {
            try await harness.publish("Unit", PullHarness.unit("u-1", title: title))
        }
        try await harness.publish("Unit", PullHarness.unit("u-2"))
        let page = try await harness.pull.pull(scope: "content", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)
        let units = page.upserts["Unit"] ?? []
        #expect(units.count == 2)
        #expect(units.first?.pullMember("title") == .string("Third"))
        #expect(try SyncCursor(encoded: page.cursor).sequence == 4)

        let stored = try await harness.storage.read { reader in
            try await reader.row(in: ContractTable(ContractRegistry.unit), tenant: PullHarness.tenant, id: "u-1")
        }
        #expect(stored?.integer("_version") == 3)
        #expect(stored?.integer("_seq") == 3)
    }

    @Test("deleted rows come as deletes, not upserts; a unit's lessons are deleted with it", arguments: StorageKind.allCases)
    func tombstones(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        try await harness.publish("Unit", PullHarness.unit("u-1"))
        try await harness.publish("Unit", PullHarness.unit("u-2"))
        try await harness.publish("Lesson", PullHarness.lesson("l-1", unit: "u-1", index: 0))
        try await harness.publish("Lesson", PullHarness.lesson("l-2", unit: "u-1", index: 1))
        let before = try await harness.pull.pull(scope: "content", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)

        try await harness.content.delete(entity: "Unit", id: "u-1", identity: PullHarness.admin)

        let fromStart = try await harness.pull.pull(scope: "content", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)
        #expect(fromStart.deletes == ["Unit": ["u-1"], "Lesson": ["l-1", "l-2"]])
        #expect(fromStart.upserts.keys.sorted() == ["Unit"])
        #expect(fromStart.upserts["Unit"]?.compactMap { $0.pullMember("id")?.pullText } == ["u-2"])

        let since = try await harness.pull.pull(scope: "content", cursor: before.cursor, limit: nil, schema: [:], clientID: nil, identity: device)
        #expect(since.upserts.isEmpty)
        #expect(since.deletes == ["Unit": ["u-1"], "Lesson": ["l-1", "l-2"]])

        // Publishing it again brings it back.
        try await harness.publish("Unit", PullHarness.unit("u-1", title: "Back"))
        let again = try await harness.pull.pull(scope: "content", cursor: since.cursor, limit: nil, schema: [:], clientID: nil, identity: device)
        #expect(again.upserts["Unit"]?.first?.pullMember("title") == .string("Back"))
        #expect(again.deletes.isEmpty)
    }

    @Test("each device reads only its own user scope, its own teams, its own tenant", arguments: StorageKind.allCases)
    func scopeIsolation(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        let attempt = ContractRegistry.attempt
        func attemptRow(_ id: String) -> [String: JSONValue] {
            [
                "id": .string(id), "assessment_id": .string("a-1"), "state": .string("open"), "started_at": .string("2026-01-31T08:00:00.000Z"),
                "updated_at": .string("2026-01-31T08:00:00.000Z"),
            ]
        }
        try await harness.storeDirectly(attempt, attemptRow("att-u1"), scopeKey: "progress:user:u-1")
        try await harness.storeDirectly(attempt, attemptRow("att-u2"), scopeKey: "progress:user:u-2")
        try await harness.storeDirectly(attempt, attemptRow("att-other-tenant"), scopeKey: "progress:user:u-1", tenant: "globex")
        _ = try await SampleContent.seed(
            storage: harness.storage, tenant: PullHarness.tenant, team: "t-1", clock: harness.clock)
        _ = try await SampleContent.seed(
            storage: harness.storage, tenant: PullHarness.tenant, team: "t-2", clock: harness.clock)

        let mine = try await harness.pull.pull(scope: "user", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)
        #expect(mine.upserts["Attempt"]?.compactMap { $0.pullMember("id")?.pullText } == ["att-u1"])

        let team = try await harness.pull.pull(scope: "team", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)
        let teamIDs = team.upserts.values.flatMap { $0 }.compactMap { $0.pullMember("team_id")?.pullText }
        #expect(!teamIDs.isEmpty && teamIDs.allSatisfy { $0 == "t-1" })
        #expect(team.upserts.keys.sorted() == ["Incident", "ServiceAsset", "Task"])

        let byKey = try await harness.pull.pull(scope: "ops:team:t-1", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)
        #expect(byKey.upserts == team.upserts)

        // Another tenant sees none of acme's rows, content included.
        let outsider = PullHarness.device("u-1", tenant: "globex", teams: ["t-1"])
        let theirs = try await harness.pull.pull(scope: "user", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: outsider)
        #expect(theirs.upserts["Attempt"]?.compactMap { $0.pullMember("id")?.pullText } == ["att-other-tenant"])
        let theirContent = try await harness.pull.pull(scope: "content", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: outsider)
        #expect(theirContent.upserts.isEmpty)
        let theirTeam = try await harness.pull.pull(scope: "team", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: outsider)
        #expect(theirTeam.upserts.isEmpty)
    }

    @Test("foreign scopes are forbidden; unknown scopes, bad cursors and ambiguous names are refused", arguments: StorageKind.allCases)
    func refusals(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        try await harness.publish("Unit", PullHarness.unit("u-1"))
        let pull = harness.pull
        func status(_ scope: String, cursor: String? = nil, as identity: DeviceIdentity? = nil) async -> Int? {
            await pullErrorStatus {
                _ = try await pull.pull(scope: scope, cursor: cursor, limit: nil, schema: [:], clientID: nil, identity: identity ?? device)
            }
        }
        #expect(await status("progress:user:u-2") == 403)
        #expect(await status("ops:team:t-2") == 403)
        #expect(await status("team", as: PullHarness.device(teams: [])) == 403)
        #expect(await status("team", as: PullHarness.device(teams: ["t-1", "t-2"])) == 400)
        #expect(await status("ops:team:t-2", as: PullHarness.device(teams: ["t-1", "t-2"])) == nil)
        #expect(await status("progress:user:u-1") == nil)
        #expect(await status("nowhere") == 404)
        #expect(await status("orders:team:t-1") == 404)

        let contentCursor = try await pull.pull(scope: "content", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device).cursor
        #expect(await status("user", cursor: contentCursor) == 400)
        #expect(await status("content", cursor: "not a cursor") == 400)
        #expect(await status("content", cursor: SyncCursor(scopeKey: "content:global", sequence: 0).encoded) == nil)
        let futureFormat = Data(#"{"k":"content:global","s":1,"v":9}"#.utf8).base64EncodedString()
        let error = await pullError {
            _ = try await pull.pull(scope: "content", cursor: futureFormat, limit: nil, schema: [:], clientID: nil, identity: device)
        }
        #expect(error?.status == 400)
        #expect(error?.detail.code == .malformedRequest)

        // An admin reads any scope by its key.
        #expect(await status("progress:user:u-2", as: PullHarness.admin) == nil)
    }

    @Test("rows are shaped for the device's schema version: Unit 2 gets position and no estimated_minutes", arguments: StorageKind.allCases)
    func shaping(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        try await harness.publish("Unit", PullHarness.unit("u-1", sortIndex: 4, minutes: 30))
        try await harness.publish("Lesson", PullHarness.lesson("l-1", unit: "u-1", index: 0, seconds: 90))

        let current = try await harness.pull.pull(scope: "content", cursor: nil, limit: nil, schema: ["Unit": 3], clientID: nil, identity: device)
        let v3 = try #require(current.upserts["Unit"]?.first)
        #expect(
            v3.pullKeys == [
                "id", "title", "description", "learner_level", "is_global", "sort_index", "estimated_minutes", "tags", "updated_at",
                "_server_version",
            ])
        #expect(v3.pullMember("_server_version") == .int(1), "a pulled row carries the server version a device sends back as base_version")
        #expect(v3.pullMember("sort_index") == .int(4))
        #expect(v3.pullMember("estimated_minutes") == .int(30))

        let old = try await harness.pull.pull(
            scope: "content", cursor: nil, limit: nil, schema: ["Unit": 2, "Lesson": 1], clientID: nil, identity: device)
        let v2 = try #require(old.upserts["Unit"]?.first)
        #expect(v2.pullKeys == ["id", "title", "description", "learner_level", "is_global", "position", "tags", "updated_at", "_server_version"])
        #expect(v2.pullMember("position") == .int(4))
        #expect(v2.pullMember("sort_index") == nil && v2.pullMember("estimated_minutes") == nil)
        let lessonV1 = try #require(old.upserts["Lesson"]?.first)
        #expect(lessonV1.pullMember("length_seconds") == .int(90))
        #expect(lessonV1.pullMember("duration_seconds") == nil)

        // Values are in wire form: timestamps as ISO-8601 text, lists as arrays, bools as bools.
        #expect(v3.pullMember("is_global") == .bool(false))
        #expect(v3.pullMember("tags") == .array([.string("sample")]))
        #expect(v3.pullMember("updated_at")?.pullText.flatMap(Timestamp.init(iso8601:)) != nil)

        // A device newer than the server gets the current shape.
        let newer = try await harness.pull.pull(scope: "content", cursor: nil, limit: nil, schema: ["Unit": 9], clientID: nil, identity: device)
        #expect(newer.upserts["Unit"]?.first == v3)
    }

    @Test("a schema version below the oldest supported is refused with 426 and the versions", arguments: StorageKind.allCases)
    func schemaTooOld(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        let error = await pullError {
            _ = try await harness.pull.pull(
                scope: "content", cursor: nil, limit: nil, schema: ["Unit": 1, "Lesson": 1], clientID: nil, identity: device)
        }
        #expect(error?.status == 426)
        #expect(error?.detail.code == .schemaTooOld)
        #expect(error?.detail.details == .object(["entity": .string("Unit"), "oldest_supported": .int(2), "current": .int(3)]))
        // Contracts the server does not know are ignored.
        let status = await pullErrorStatus {
            _ = try await harness.pull.pull(scope: "content", cursor: nil, limit: nil, schema: ["Future": 1], clientID: nil, identity: device)
        }
        #expect(status == nil)
    }

    @Test("events that travel both ways are pulled as envelope and payload; device-to-server contracts never are", arguments: StorageKind.allCases)
    func events(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        let scopeKey = "ops:team:t-1"
        let issue = ContractRegistry.issueLogged, started = ContractRegistry.taskStarted
        try await harness.storeEvent(
            issue, id: "01J0000000000000000000ISSU", scopeKey: scopeKey,
            payload: [
                "team_id": .text("t-1"), "service_asset_id": .text("sa-1"), "category": .text("damage"), "severity": .text("high"),
                "description": .text("Cracked mirror"), "tags": .text("[\"mirror\"]"), "observed_on": .text("2026-01-30"),
            ])
        try await harness.storeEvent(
            started, id: "01J0000000000000000000STRT", scopeKey: scopeKey,
            payload: [
                "team_id": .text("t-1"), "task_id": .text("task-1"),
            ])
        let statement = ContractRegistry.statement
        try await harness.storeDirectly(
            statement,
            [
                "id": .string("st-1"), "verb": .string("completed"), "object_id": .string("l-1"), "stated_at": .string("2026-01-31T08:00:00.000Z"),
            ], scopeKey: "progress:user:u-1")

        let team = try await harness.pull.pull(scope: "team", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)
        #expect(team.upserts.keys.sorted() == ["IssueLogged"])
        let event = try #require(team.upserts["IssueLogged"]?.first)
        #expect(event.pullKeys == ["event_id", "type", "schema_version", "user_id", "device_id", "occurred_at", "recorded_at", "hash", "payload"])
        #expect(event.pullMember("type") == .string("IssueLogged"))
        #expect(event.pullMember("occurred_at") == .string("2026-01-31T08:00:00.000Z"))
        let payload = try #require(event.pullMember("payload"))
        #expect(payload.pullMember("tags") == .array([.string("mirror")]))
        #expect(payload.pullMember("photo") == .null)
        // It decodes as the generated envelope.
        let data = try JSONEncoder().encode(event)
        let decoded = try JSONDecoder().decode(EventEnvelope<IssueLogged>.self, from: data)
        #expect(decoded.eventId == "01J0000000000000000000ISSU")
        #expect(decoded.payload.description == "Cracked mirror")
        // The cursor is the last pulled row's sequence.
        #expect(try SyncCursor(encoded: team.cursor).sequence == 1)

        let user = try await harness.pull.pull(scope: "user", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)
        #expect(user.upserts.isEmpty && user.deletes.isEmpty)
    }

    @Test("last_seq is the client's last push done, 0 without a client id", arguments: StorageKind.allCases)
    func lastSeq(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        try await harness.storage.write { transaction in
            try await transaction.recordPushResults(
                tenant: PullHarness.tenant, clientID: "c-1", PushResultRecord(firstSeq: 1, results: ["{}", "{}", "{}"]), recordedAt: 0
            )
        }
        let with = try await harness.pull.pull(scope: "user", cursor: nil, limit: nil, schema: [:], clientID: "c-1", identity: device)
        #expect(with.lastSeq == 3)
        let other = try await harness.pull.pull(scope: "user", cursor: nil, limit: nil, schema: [:], clientID: "c-2", identity: device)
        #expect(other.lastSeq == 0)
        let without = try await harness.pull.pull(scope: "user", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)
        #expect(without.lastSeq == 0)
        let elsewhere = try await harness.pull.pull(
            scope: "user", cursor: nil, limit: nil, schema: [:], clientID: "c-1", identity: PullHarness.device(tenant: "globex")
        )
        #expect(elsewhere.lastSeq == 0)
    }

    @Test("the response has the protocol's JSON shape", arguments: StorageKind.allCases)
    func wireShape(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        try await harness.publish("Unit", PullHarness.unit("u-1"))
        let page = try await harness.pull.pull(scope: "content", cursor: nil, limit: nil, schema: [:], clientID: nil, identity: device)
        let json = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(page))
        #expect(json.pullKeys == ["cursor", "has_more", "upserts", "deletes", "last_seq"])
        // A pulled row decodes as the generated DTO.
        let unit = try JSONDecoder().decode(Contracts.Unit.self, from: JSONEncoder().encode(page.upserts["Unit"]![0]))
        #expect(unit.id == "u-1")
    }
}
