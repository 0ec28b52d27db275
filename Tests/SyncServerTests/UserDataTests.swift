import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// A user's rights over what the server holds about them: erasure and export, on both storages,
/// after a scripted history of two learners (alice and bob) and a team record alice filed.
@Suite("A user's data: erasure and export")
struct UserDataTests {
    static let tenant = PushHarness.tenant

    /// The scripted history: alice's two statements (the server folds them into her attempts and
    /// completions), lesson-progress events in her scope from two devices, a team task she
    /// created; bob's statement and event. Returns the ids of alice's statements and events.
    static func script(_ h: PushHarness) async throws -> (statements: [String], events: [String]) {
        try await h.push([
            h.mutation(1, "Statement", .create, "st-a1", h.statementPayload("st-a1", verb: "experienced", object: "lesson-1")),
            h.mutation(2, "Statement", .create, "st-a2", h.statementPayload("st-a2", verb: "passed", object: "quiz-1", attempt: "att-1", score: 0.8)),
            try h.eventMutation(3, id: "ev-alice-1", LessonProgressed(lessonId: "lesson-1", unitId: "unit-1", sessionId: UUID(), progress: 0.5)),
            h.mutation(4, "Task", .create, "task-1", h.taskPayload("task-1")),
        ])
        // A second device of alice's: its stream is hers too.
        try await h.push(
            [try h.eventMutation(1, id: "ev-alice-2", LessonProgressed(lessonId: "lesson-2", unitId: "unit-1", sessionId: UUID(), progress: 1))],
            as: PushHarness.aliceTablet
        )
        try await h.push(
            [
                h.mutation(1, "Statement", .create, "st-b1", h.statementPayload("st-b1")),
                try h.eventMutation(2, id: "ev-bob-1", LessonProgressed(lessonId: "lesson-1", unitId: "unit-1", sessionId: UUID(), progress: 0.2)),
            ],
            as: PushHarness.bob
        )
        return (["st-a1", "st-a2"], ["ev-alice-1", "ev-alice-2"])
    }

    /// The live rows of a scope, as "Entity/id", with their contract.
    static func liveRows(_ h: PushHarness, scopeKey: String) async throws -> [String: EntityDescriptor] {
        var live: [String: EntityDescriptor] = [:]
        for entity in ContractRegistry.entities where entity.scope == "user" {
            let rows = try await h.storage.read {
                try await $0.rows(
                    in: ContractTable(entity), tenant: tenant, where: ["_scope_key": .text(scopeKey), "_deleted": .integer(0)], limit: 100_000)
            }
            for row in rows { live["\(entity.name)/\(row.text(entity.primaryKey) ?? "")"] = entity }
        }
        return live
    }

    static func lines(_ export: Data) throws -> [[String: JSONValue]] {
        try String(decoding: export, as: UTF8.self).split(separator: "\n").map { line in
            guard case .object(let object) = try JSONDecoder().decode(JSONValue.self, from: Data(line.utf8)) else { throw CancellationError() }
            return object
        }
    }

    static func export(_ h: PushHarness, user: String) async throws -> [[String: JSONValue]] {
        var data = Data()
        try await UserExport(storage: h.storage, clock: PushFixedClock()).export(tenant: tenant, userID: user) { data.append($0) }
        return try lines(data)
    }

    @Test("an export after a scripted history holds exactly that history: rows, events, devices, audit entries", arguments: StorageKind.allCases)
    func exportHoldsExactlyTheHistory(kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        let (statements, events) = try await Self.script(h)
        _ = try await h.storage.write { try await $0.setTeamMembership(tenant: Self.tenant, team: "red", userID: "alice", isMember: true) }

        let lines = try await Self.export(h, user: "alice")
        func of(_ type: String) -> [[String: JSONValue]] { lines.filter { $0["type"] == .string(type) } }

        #expect(lines.first?["type"] == .string("user"))
        #expect(lines.first?["user_id"] == .string("alice"))
        #expect(Set(of("device").compactMap { $0["device_id"] }) == [.string("alice-phone"), .string("alice-tablet")])
        #expect(of("team").map { $0["team_id"] } == [.string("red")])

        // Her rows: exactly the live rows of her scope (her statements and what the server
        // folded them into), each with what it holds.
        let live = try await Self.liveRows(h, scopeKey: "progress:user:alice")
        let rows = of("row")
        let exported = Set(
            rows.compactMap { row -> String? in
                guard case .string(let entity)? = row["entity"], case .object(let fields)? = row["row"],
                    let descriptor = ContractRegistry.entity(named: entity), case .string(let id)? = fields[descriptor.primaryKey]
                else { return nil }
                return "\(entity)/\(id)"
            })
        #expect(exported == Set(live.keys))
        #expect(rows.count == live.count)
        #expect(Set(statements.map { "Statement/\($0)" }).isSubset(of: exported))
        let verbs = rows.filter { $0["entity"] == .string("Statement") }.compactMap { row -> JSONValue? in
            guard case .object(let fields)? = row["row"] else { return nil }
            return fields["verb"]
        }
        #expect(verbs == [.string("experienced"), .string("passed")])
        #expect(rows.allSatisfy { $0["scope"] == .string("progress:user:alice") })

        // Her events, from both devices; not bob's.
        let exportedEvents = of("event").compactMap { line -> String? in
            guard case .object(let payload)? = line["payload"], case .string(let id)? = payload["event_id"] else { return nil }
            return id
        }
        #expect(exportedEvents.sorted() == events.sorted())

        // Her audit entries: exactly those her identity wrote, each with its detail in clear.
        let audit = try await h.audit().filter { $0.userID == "alice" }
        let exportedAudit = of("audit")
        #expect(exportedAudit.map { $0["id"] } == audit.map { JSONValue.int($0.id) })
        #expect(exportedAudit.allSatisfy { if case .object = $0["detail"] { true } else { false } })
        #expect(!lines.contains { $0["user_id"] == .string("bob") || $0["device_id"] == .string("bob-phone") })

        // Two exports of the same history are the same.
        #expect(try await Self.export(h, user: "alice") == lines)
    }

    @Test(
        "erasing a user leaves bare tombstones in their scopes, deletes their events and stored results, keeps the team's records and the chain",
        arguments: StorageKind.allCases)
    func erasureRemovesTheUsersData(kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        _ = try await Self.script(h)
        _ = try await h.storage.write { try await $0.setTeamMembership(tenant: Self.tenant, team: "red", userID: "alice", isMember: true) }
        let live = try await Self.liveRows(h, scopeKey: "progress:user:alice")
        let aliceEntries = try await h.audit().filter { $0.userID == "alice" }.count
        let scopeBefore = try await h.storage.read { try await $0.scopeSequence(tenant: Self.tenant, scopeKey: "progress:user:alice") }

        let report = try await UserErasure(storage: h.storage, clock: PushFixedClock()).erase(
            tenant: Self.tenant, userID: "alice", requestedBy: .commandLine
        )
        #expect(report.scopes == ["progress:user:alice"])
        #expect(report.rowsErased == live.count)
        #expect(report.eventsDeleted == 2)
        #expect(report.pushResultsDeleted == 2, "the records of her two pushes (five results)")
        #expect(report.auditDetailsErased == aliceEntries)

        // Her rows are tombstones with nothing of what she wrote, at new sequence numbers.
        for (key, entity) in live {
            let id = String(key.split(separator: "/")[1])
            let row = try #require(try await h.row(entity, id))
            #expect(row.integer("_deleted") == 1, "\(key)")
            #expect((row.integer("_seq") ?? 0) > scopeBefore, "\(key)")
        }
        for id in ["st-a1", "st-a2"] {
            let row = try #require(try await h.row(Statement.descriptor, id))
            #expect(row["verb"] == .text("experienced"))  // the enum's fallback: "passed" is gone
            #expect(row["object_id"] == .text("") && row["score"] == .null && row["attempt_id"] == .null)
        }
        // A device still reading her scope gets every deletion it can read.
        let page = try await PullService(storage: h.storage).pull(
            scope: "progress:user:alice", cursor: SyncCursor(scopeKey: "progress:user:alice", sequence: scopeBefore).encoded, limit: nil,
            schema: [:], clientID: nil, identity: PushHarness.admin
        )
        let pulledDown = Set(live.filter { $0.value.direction != .up }.keys)
        #expect(Set(page.deletes.flatMap { entity, ids in ids.map { "\(entity)/\($0)" } }) == pulledDown)
        #expect(!pulledDown.isEmpty)
        #expect(page.upserts.isEmpty)

        for id in ["ev-alice-1", "ev-alice-2"] { #expect(try await h.eventRow(LessonProgressed.descriptor, id) == nil) }
        #expect(try await h.storage.read { try await $0.pushResult(tenant: Self.tenant, clientID: "alice-phone", seq: 1) } == nil)

        // Bob's data and the team's task stay.
        #expect(try await h.row(Statement.descriptor, "st-b1")?.integer("_deleted") == 0)
        #expect(try await h.eventRow(LessonProgressed.descriptor, "ev-bob-1") != nil)
        #expect(try await h.row(FieldTask.descriptor, "task-1")?.integer("_deleted") == 0)
        #expect(try await h.storage.read { try await $0.pushResult(tenant: Self.tenant, clientID: "bob-phone", seq: 1) } != nil)

        // Her tokens are told, she is in no team, the erasure is audited and the chain holds.
        let state = try await h.storage.read { try await $0.identityState(tenant: Self.tenant, userID: "alice", deviceID: "alice-phone") }
        #expect(state.erasedAt == report.erasedAt)
        #expect(state.teams.isEmpty)
        let last = try #require(try await h.audit().last)
        #expect(last.operation == .erase && last.outcome == .erased && last.rowID == "alice" && last.userID == "operator")
        #expect(!last.detail.contains("experienced"))
        guard case .intact = try await AuditChain.verify(h.storage) else {
            Issue.record("the audit chain no longer verifies after an erasure")
            return
        }

        // An export after the erasure holds no row and no event of hers.
        let lines = try await Self.export(h, user: "alice")
        #expect(!lines.contains { $0["type"] == .string("row") || $0["type"] == .string("event") })
        // Her audit entries are still there, sealed, their details unreadable.
        let audit = lines.filter { $0["type"] == .string("audit") }
        #expect(audit.count == aliceEntries)
        #expect(audit.allSatisfy { $0["detail"] == .null && $0["detail_erased"] == .bool(true) })
        #expect(lines.first?["erased_at"] == .int(report.erasedAt))
    }

    @Test("a resend of a push whose stored results were erased applies nothing and is answered duplicate", arguments: StorageKind.allCases)
    func resendAfterErasureAppliesNothing(kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        let first = [h.mutation(1, "Statement", .create, "st-a1", h.statementPayload("st-a1"))]
        try await h.push(first)
        _ = try await UserErasure(storage: h.storage, clock: PushFixedClock()).erase(tenant: Self.tenant, userID: "alice", requestedBy: .commandLine)
        let auditBefore = try await h.audit().count

        let response = try await h.push(first)
        #expect(response.results.map(\.status) == [.duplicate])
        #expect(try await h.row(Statement.descriptor, "st-a1")?.integer("_deleted") == 1)
        #expect(try await h.audit().count == auditBefore)
    }

    @Test("an erasure that fails half way erases nothing", arguments: StorageKind.allCases)
    func aFailedErasureErasesNothing(kind: StorageKind) async throws {
        let h = try await PushHarness(kind)
        defer { h.remove() }
        _ = try await Self.script(h)
        let failing = PushFailingStorage(base: h.storage, failAfter: 3)
        await #expect(throws: ServiceError.self) {
            _ = try await UserErasure(storage: failing, clock: PushFixedClock()).erase(
                tenant: Self.tenant, userID: "alice", requestedBy: .commandLine)
        }
        #expect(try await h.row(Statement.descriptor, "st-a1")?.integer("_deleted") == 0)
        #expect(try await h.eventRow(LessonProgressed.descriptor, "ev-alice-1") != nil)
        let state = try await h.storage.read { try await $0.identityState(tenant: Self.tenant, userID: "alice", deviceID: "alice-phone") }
        #expect(state.erasedAt == nil)
    }
}
