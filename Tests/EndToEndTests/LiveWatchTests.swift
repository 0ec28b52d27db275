import Foundation
import OutpostTestSupport
import Testing

/// `sync-device watch`: a device left online shows another device's change as it is made,
/// through the server's live channel, with no sync asked for (its timer would take 15 minutes).
@Suite("Live changes", .serialized, .blockingWork)
struct LiveWatchTests {
    @Test("a device watching sees the task another device starts, moments after that device syncs")
    func watchShowsAnotherDevicesChange() async throws {
        let stage = try Stage()
        let ana = try stage.device("tablet-a", user: "op-ana", teams: [Stage.team])
        let ben = try stage.device("tablet-b", user: "op-ben", teams: [Stage.team])
        let watching = try ben.start(["watch", "--changes", "1", "--seconds", "60"])
        #expect(try watching.poll(timeout: 30) { watching.stdout.contains("live: connected") }, "\(watching.stdout)\(watching.stderr)")

        try ana.ok(["task", "start", "team-1-task-inspect-017"])
        try ana.ok(["sync"])
        let result = try watching.wait(timeout: 30)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("pulled 1 Task"), "\(result.stdout)")
        let tasks = try ben.json(["tasks"])
        #expect("\(tasks)".contains("in_progress"), "ben's store holds the started task: \(tasks)")
    }

    @Test("watch on a device switched offline ends without the channel, exit 3")
    func offlineWatchFails() async throws {
        let stage = try Stage()
        let ben = try stage.device("tablet-b", user: "op-ben", teams: [Stage.team])
        try ben.ok(["offline", "on"])
        let result = try ben.run(["watch", "--seconds", "1"])
        #expect(result.status == 3, "\(result)")
    }
}
