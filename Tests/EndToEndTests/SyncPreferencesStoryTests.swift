import Foundation
import OutpostTestSupport
import Testing

/// The user's sync preferences with the real binaries: Wi-Fi only holds the sync when the
/// network returns on a metered network, `sync` still runs, and the preferences outlive the
/// process (they are in the device's store).
@Suite("End-to-end: sync preferences", .serialized, .blockingWork)
struct SyncPreferencesStoryTests {
    @Test("Wi-Fi only holds the automatic sync on a metered network; sync now runs; a data budget is counted per day")
    func wifiOnlyAndDataBudget() async throws {
        let stage = try Stage()
        let phone = try stage.device("phone", user: "learner-1")
        let defaults = try phone.json(["preferences"])
        #expect(defaults["wifi_only"].bool == false)
        #expect(defaults["interval_seconds"].int == 900)

        let set = try phone.json(["preferences", "--wifi-only", "on", "--network", "metered", "--interval", "1h", "--daily-budget", "5MB"])
        #expect(set["wifi_only"].bool == true)
        #expect(set["network"].string == "metered")
        #expect(set["interval_seconds"].int == 3_600)
        #expect(set["daily_budget_bytes"].int == 5_000_000)

        try phone.ok(["offline", "on"])
        let held = try phone.json(["offline", "off"])
        #expect(held["result"].string == "paused")
        #expect(held["error"]["code"].string == "wifi_only")
        #expect(try phone.json(["preferences"])["today"]["automatic_bytes"].int == 0)

        // The user's own sync runs on the metered network, and is not counted in the budget.
        #expect(try phone.json(["sync"])["result"].string == "succeeded")
        #expect(try phone.json(["preferences"])["today"]["automatic_bytes"].int == 0)

        // On an unmetered network the engine syncs by itself when the network returns, and counts it.
        try phone.ok(["preferences", "--network", "unmetered"])
        try phone.ok(["offline", "on"])
        #expect(try phone.json(["offline", "off"])["result"].string == "succeeded")
        #expect((try phone.json(["preferences"])["today"]["automatic_bytes"].int ?? 0) > 0)

        let refused = try phone.run(["preferences", "--interval", "10s"])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("--interval"))
    }
}
