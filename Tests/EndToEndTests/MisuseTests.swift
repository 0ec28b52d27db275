import Foundation
import OutpostTestSupport
import Testing

/// Every misuse of `sync-device` ends with a message saying what to do and its documented exit
/// code (0 ok, 2 state, 3 network, 5 read-only, 6 not found, 64 usage).
@Suite("sync-device misuse", .serialized, .blockingWork)
struct MisuseTests {
    @Test("no home, not logged in, another user's home")
    func homeAndLogin() async throws {
        let stage = try Stage()
        let device = try Device("misused", in: stage.folder)

        let noHome = try ChildProcess(device.binary, ["status"], removing: ["OUTPOST_HOME"]).wait()
        #expect(noHome.status == 64, "\(noHome)")
        #expect(noHome.stderr.contains("no device home"))

        let notLoggedIn = try device.run(["tasks"])
        #expect(notLoggedIn.status == 2, "\(notLoggedIn)")
        #expect(notLoggedIn.stderr.contains("not logged in") && notLoggedIn.stderr.contains("sync-device login"))

        let badServer = try device.run(["login", "--server", "not a url", "--token", "x.y"])
        #expect(badServer.status == 64, "\(badServer)")

        let opaque = try device.run(["login", "--server", try stage.server.url.absoluteString, "--token", "opaque"])
        #expect(opaque.status == 64, "\(opaque)")
        #expect(opaque.stderr.contains("--tenant, --user and --device"))

        try device.ok([
            "login", "--server", try stage.server.url.absoluteString, "--token",
            try stage.server.token(user: "u-1", device: "misused", teams: [Stage.team]),
        ])
        let otherUser = try device.run([
            "login", "--server", try stage.server.url.absoluteString, "--token", try stage.server.token(user: "u-2", device: "misused"),
        ])
        #expect(otherUser.status == 2, "\(otherUser)")
        #expect(otherUser.stderr.contains("logout"))
    }

    @Test("unknown rows, fields and values")
    func unknownsAndBadValues() async throws {
        let stage = try Stage()
        let device = try stage.device("misused", user: "u-1", teams: [Stage.team])

        for (arguments, status, message) in [
            (["open", "lesson-nowhere"], Int32(6), "no lesson or assessment 'lesson-nowhere'"),
            (["task", "complete", "task-nowhere"], 6, "no task 'task-nowhere'"),
            (["answer", StoryTests.assessment, "q9", "0"], 6, "has no question 'q9'"),
            (["answer", StoryTests.assessment, "q1", "7"], 64, "choices 0 to 2"),
            (["submit", StoryTests.assessment], 2, "no attempt"),
            (["resolve", "42", "mine"], 6, "no open conflict 42"),
            (["edit", "incident", StoryTests.incident, "--field", "colour=red"], 64, "Incident has no field 'colour'"),
            (["edit", "incident", StoryTests.incident, "--field", "priority=urgent"], 64, "expects one of critical, high"),
            (["edit", "incident", StoryTests.incident, "--field", "latitude=north"], 64, "expects a number"),
            (["edit", "incident", StoryTests.incident, "--field", "updated_at=now"], 64, "the server sets it"),
            (["edit", "unit", "unit-battery-basics", "--field", "title=Mine"], 64, "cannot be written on a device"),
            (["edit", "spaceship", "x", "--field", "a=b"], 64, "no entity contract is named 'spaceship'"),
            (["event", "task-started", "--field", "note=hi"], 64, "TaskStarted needs --field task_id=<ref<Task>>"),
            (["event", "issue-logged", "--field", "observed_on=yesterday"], 64, "expects a date"),
            (["event", "lesson-progressed", "--field", "progress=lots"], 64, "expects a number"),
            (["event", "nonsense"], 64, "no event contract is named 'nonsense'"),
        ] {
            let result = try device.run(arguments)
            #expect(result.status == status, "\(result)")
            #expect(result.stderr.contains(message), "\(result)")
        }

        // A well-formed generic event is recorded and queued.
        let recorded = try device.run([
            "event", "issue-logged", "--field", "service_asset_id=team-1-vehicle-017", "--field", "category=damage",
            "--field", "description=Cracked mirror", "--field", "observed_on=today", "--field", "tags=mirror,glass",
        ])
        #expect(recorded.status == 0, "\(recorded)")
        #expect(try device.json(["status"])["pending"].int == 1)

        // The server down: the change stays queued, the sync exits 3.
        try stage.server.stop()
        let unreachable = try device.run(["sync"])
        #expect(unreachable.status == 3, "\(unreachable)")
        #expect(try device.json(["status"])["connectivity"].string == "offline")
        let logout = try device.run(["logout"])
        #expect(logout.status == 2, "\(logout)")
        #expect(logout.stderr.contains("have not reached the server"))
    }
}
