import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import Testing

/// The stories of `make demo`, as assertions, with the real `sync-server` and `sync-device`
/// binaries talking over loopback HTTP.
@Suite("End-to-end stories", .serialized, .blockingWork)
struct StoryTests {
    static let assessment = "assessment-battery-basics"
    static let swapTask = "team-1-task-swap-017"
    static let inspectTask = "team-1-task-inspect-017"
    static let incident = "team-1-incident-0001"

    @Test("a learner answers an assessment offline, syncs, and sees the outcome the server computed")
    func learnerAnswersOffline() async throws {
        let stage = try Stage()
        let phone = try stage.device("phone", user: "learner-1")
        #expect(try phone.json(["units"])["units"].array.count == 2)

        try phone.ok(["offline", "on"])
        try phone.ok(["open", "lesson-battery-safety"])
        let quiz = try phone.json(["open", Self.assessment])
        #expect(quiz["questions"].array.map { $0["id"].string } == ["q1", "q2", "q3"])
        try phone.ok(["answer", Self.assessment, "q1", "0"])
        try phone.ok(["answer", Self.assessment, "q2", "Below 20 %"])
        try phone.ok(["answer", Self.assessment, "q3", "1"])  // wrong: 2 of 3 still passes
        try phone.ok(["submit", Self.assessment])
        #expect(try phone.json(["attempts"])["not_scored_yet"][0]["submitted"].bool == true)

        let offline = try phone.run(["sync", "--json"])
        #expect(offline.status == 3, "\(offline)")
        #expect(try offline.json()["result"].string == "offline")
        #expect(try phone.json(["status"])["pending"].int == 6)  // progress, attempted, 3 answers, submission

        let back = try phone.run(["offline", "off", "--json"])
        #expect(back.status == 0, "\(back)")
        let report = try back.json()
        #expect(report["pushed"]["applied"].int == 6)
        #expect(report["pulled"]["by_contract"]["Attempt"].int == 1)

        let attempts = try phone.json(["attempts"])
        let attempt = attempts["attempts"][0]
        #expect(attempt["outcome"].string == "passed", "\(attempts)")
        #expect(attempt["state"].string == "closed")
        #expect(attempt["score"].double == 2)
        #expect(attempt["max_score"].double == 3)
        #expect(attempt["answered_count"].int == 3)
        #expect(attempts["not_scored_yet"].array.isEmpty)

        try stage.server.stop()
        let attemptID = try #require(attempt["id"].string)
        let onServer = try #require(try await stage.serverRow(Attempt.descriptor, id: attemptID))
        #expect(onServer["outcome"] == .string("passed"))
        try await stage.expectEveryWriteOnceOnServer(phone)
        let audit = try stage.verifyAudit()
        #expect(audit.status == 0, "\(audit)")
    }

    @Test("two field operatives edit the same task and incident offline; each conflict is resolved per its policy")
    func fieldOperativesConflicts() async throws {
        let stage = try Stage()
        let ana = try stage.device("tablet-a", user: "op-ana", teams: [Stage.team])
        let ben = try stage.device("tablet-b", user: "op-ben", teams: [Stage.team])
        #expect(try ana.json(["tasks"])["tasks"].array.count == 3)

        try ana.ok(["offline", "on"])
        try ben.ok(["offline", "on"])
        try ana.ok(["task", "complete", Self.swapTask])
        try ana.ok(["task", "start", Self.inspectTask])
        try ana.ok(["edit", "incident", Self.incident, "--field", "state=in_progress", "--field", "description=Pack swapped"])
        try ben.ok(["edit", "task", Self.swapTask, "--field", "notes=Bring a spare latch"])
        try ben.ok(["task", "start", Self.inspectTask])
        try ben.ok(["edit", "incident", Self.incident, "--field", "priority=high", "--field", "state=on_hold"])

        let benBack = try ben.run(["offline", "off", "--json"])
        #expect(benBack.status == 0, "\(benBack)")
        #expect(try benBack.json()["pushed"]["applied"].int == 3)

        // Ana comes back second: her task edits are based on revisions Ben moved on (version_check),
        // her incident edit merges with Ben's (field_merge: her description, his later state).
        let anaBack = try ana.run(["offline", "off", "--json"])
        #expect(anaBack.status == 4, "\(anaBack)")
        let report = try anaBack.json()
        #expect(report["pushed"]["merged"].int == 1)
        #expect(report["pushed"]["conflicted"].int == 2)
        let merged = try #require(report["outcomes"].array.first { $0["resolution"].string == "merged" })
        #expect(merged["id"].string == Self.incident)
        #expect(merged["kept_fields"].array.map(\.string) == ["state"])
        let conflicts = report["conflicts"].array
        #expect(Set(conflicts.compactMap { $0["row_id"].string }) == [Self.swapTask, Self.inspectTask])
        let swapConflict = try #require(conflicts.first { $0["row_id"].string == Self.swapTask })
        #expect(swapConflict["differences"]["notes"]["theirs"].string == "Bring a spare latch")
        #expect(swapConflict["differences"]["status"]["mine"].string == "completed")

        let swapID = try #require(swapConflict["id"].int)
        let inspectID = try #require(conflicts.first { $0["row_id"].string == Self.inspectTask }?["id"].int)
        try ana.ok(["resolve", String(swapID), "mine"])
        try ana.ok(["resolve", String(inspectID), "theirs"])
        #expect(try ana.json(["conflicts"])["conflicts"].array.isEmpty)
        let resent = try ana.run(["sync", "--json"])
        #expect(resent.status == 0, "\(resent)")
        #expect(try resent.json()["pushed"]["applied"].int == 1)
        try ben.ok(["sync"])

        // Both devices and the server agree.
        for device in [ana, ben] {
            let tasks = try device.json(["tasks"])["tasks"].array.map { $0["task"] }
            let swap = try #require(tasks.first { $0["id"].string == Self.swapTask })
            #expect(swap["status"].string == "completed", "\(device.name)")
            #expect(swap["notes"].string == "Bring a spare latch", "\(device.name)")
            let incident = try device.json(["incidents"])["incidents"][0]["incident"]
            #expect(incident["state"].string == "on_hold", "\(device.name)")
            #expect(incident["priority"].string == "high", "\(device.name)")
            #expect(incident["description"].string == "Pack swapped", "\(device.name)")
        }
        try stage.server.stop()
        let swap = try #require(try await stage.serverRow(FieldTask.descriptor, id: Self.swapTask))
        #expect(swap["status"] == .string("completed"))
        #expect(swap["notes"] == .string("Bring a spare latch"))
        try await stage.expectEveryWriteOnceOnServer(ana)
        try await stage.expectEveryWriteOnceOnServer(ben)
        let audit = try stage.verifyAudit()
        #expect(audit.status == 0, "\(audit)")
    }

    @Test("a device offline for 15 days refuses writes until a sync succeeds, then loses nothing")
    func fifteenDaysOffline() async throws {
        let stage = try Stage()
        let tablet = try stage.device("tablet", user: "op-cat", teams: [Stage.team])
        try tablet.ok(["offline", "on"])
        try tablet.ok(["task", "start", Self.swapTask])

        #expect(try tablet.json(["status"], now: "+8d")["retention"]["state"].string == "sync_needed")
        let refused = try tablet.run(["task", "complete", Self.swapTask], now: "+15d")
        #expect(refused.status == 5, "\(refused)")
        #expect(refused.stderr.contains("writes are paused"), "\(refused)")
        #expect(try tablet.json(["status"], now: "+15d")["retention"]["state"].string == "read_only")
        let stillOffline = try tablet.run(["sync"], now: "+15d")
        #expect(stillOffline.status == 3, "\(stillOffline)")

        let back = try tablet.run(["offline", "off"], now: "+15d")
        #expect(back.status == 0, "\(back)")
        #expect(try tablet.json(["status"], now: "+15d")["retention"]["state"].string == "ok")
        try tablet.ok(["task", "complete", Self.swapTask], now: "+15d")
        try tablet.ok(["sync"], now: "+15d")

        try stage.server.stop()
        let swap = try #require(try await stage.serverRow(FieldTask.descriptor, id: Self.swapTask))
        #expect(swap["status"] == .string("completed"))
        try await stage.expectEveryWriteOnceOnServer(tablet)
    }
}
