import ContractRuntime
import Foundation
import OutpostTestSupport
import Testing

/// A device's own telemetry reaching the server's fleet census, over real processes: the
/// `sync-device` CLI (a new process per command, as an app that is killed and launched again)
/// against a real `sync-server`.
@Suite("Device telemetry reaches the fleet census", .blockingWork)
struct TelemetryStoryTests {
    @Test("a device that opts in reports its app and its counts; a failed sync's counts come with the next one, across runs of the app")
    func telemetryReachesTheCensus() async throws {
        let stage = try Stage()
        let tablet = try Device("tablet-t", in: stage.folder)
        let token = try stage.server.token(user: "op-tess", device: "tablet-t", teams: [Stage.team])
        try tablet.ok([
            "login", "--server", try stage.server.url.absoluteString, "--token", token, "--app-version", "fieldops-cli/2.0", "--telemetry",
        ])
        try tablet.ok(["sync"])  // counted after its requests: saved for the next run
        try tablet.ok(["offline", "on"])
        try tablet.ok(["task", "start", StoryTests.swapTask])
        try tablet.ok(["offline", "off"])  // the device syncs by itself when the network comes back
        // The server is down: the request carrying the counts fails, and the device keeps them.
        try stage.server.stop()
        #expect(try tablet.run(["sync"]).status != 0, "the server is down: the sync fails")
        try stage.server.start()
        try tablet.ok(["sync"])

        let census = JSON(
            try await stage.client().adminGet("admin/v1/fleet/devices/op-tess/tablet-t", adminToken: try stage.adminToken()))
        #expect(census["app_version"].string == "fieldops-cli/2.0", "\(census)")
        let telemetry = census["telemetry"]
        // The first sync's success, and that of the one the device started when the network
        // came back (whose request to a stopped server gave it back); the last sync's own is
        // kept for the next run.
        #expect(telemetry["syncs_ok"].int == 2, "\(telemetry)")
        #expect(telemetry["syncs_failed"].int == 1, "the failed sync's failure came with the next one: \(telemetry)")
        #expect(telemetry["writes_queued"].int == 1 && telemetry["writes_delivered"].int == 1, "\(telemetry)")
        #expect(telemetry["outbox_pending"].int == 0 && telemetry["conflicts_open"].int == 0, "\(telemetry)")
        #expect(census["last_outcome"].string == "ok" && census["pushes"].int == 1 && census["failures"].int == 0, "\(census)")

        // A device that did not opt in sends no counts, and still shows in the census.
        let quiet = try stage.device("tablet-q", user: "op-quinn", teams: [Stage.team])
        try quiet.ok(["sync"])
        let other = JSON(try await stage.client().adminGet("admin/v1/fleet/devices/op-quinn/tablet-q", adminToken: try stage.adminToken()))
        #expect(other["app_version"].string == "sync-device/1.0" && other["telemetry"]["syncs_ok"].int == 0, "\(other)")
    }
}
