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

    @Test("low-power mode and the interval presets: set, shown, kept; low power holds the sync when the network returns; sync now runs")
    func lowPowerAndPresets() throws {
        let stage = try Stage()
        let phone = try stage.device("phone", user: "op-kim", teams: [Stage.team])
        let defaults = try phone.json(["preferences"])
        #expect(defaults["low_power_mode"].bool == false)
        #expect(defaults["low_power_interval_seconds"].int == 3_600)
        #expect(defaults["effective_interval_seconds"].int == 900)

        let set = try phone.json(["preferences", "--interval", "hourly", "--low-power", "on", "--low-power-interval", "daily"])
        #expect(set["interval_seconds"].int == 3_600)
        #expect(set["low_power_mode"].bool == true)
        #expect(set["low_power_interval_seconds"].int == 86_400)
        #expect(set["effective_interval_seconds"].int == 86_400, "in low-power mode the slower interval counts")
        // Kept in the store: a later process reads them back, and the text says so.
        let shown = try phone.ok(["preferences"]).stdout
        #expect(shown.contains("interval:     1h"), "\(shown)")
        #expect(shown.contains("low power:    on (automatic syncs wait for the timer, every 1d"), "\(shown)")

        // In low-power mode the network's return does not sync by itself: the change waits for the timer.
        try phone.ok(["offline", "on"])
        try phone.ok([
            "create", "service-asset", "--id", "low-1", "--field", "asset_tag=LOW-1", "--field", "display_name=Low 1", "--field", "category=tool",
        ])
        let held = try phone.json(["offline", "off"])
        #expect(held["result"].string == "deferred", "\(held)")
        #expect(held["error"]["code"].string == "low_power_mode")
        #expect(held["after"]["pending"].int == 1)
        // The user's own sync runs all the same.
        let synced = try phone.json(["sync"])
        #expect(synced["result"].string == "succeeded")
        #expect(synced["after"]["pending"].int == 0)

        // Off again: the interval is the user's own; presets and a week are taken, more is refused.
        let off = try phone.json(["preferences", "--low-power", "off", "--interval", "daily", "--low-power-interval", "1w"])
        #expect(off["low_power_mode"].bool == false)
        #expect(off["interval_seconds"].int == 86_400)
        #expect(off["low_power_interval_seconds"].int == 604_800)
        #expect(off["effective_interval_seconds"].int == 86_400)
        let tooLong = try phone.run(["preferences", "--interval", "2w"])
        #expect(tooLong.status != 0)
        #expect(tooLong.stderr.contains("--interval"))
        let never = try phone.run(["preferences", "--low-power-interval", "never"])
        #expect(never.status != 0)
        #expect(never.stderr.contains("--low-power-interval"))
        try phone.ok(["offline", "on"])
        try phone.ok([
            "create", "service-asset", "--id", "low-2", "--field", "asset_tag=LOW-2", "--field", "display_name=Low 2", "--field", "category=tool",
        ])
        #expect(try phone.json(["offline", "off"])["result"].string == "succeeded", "without low power the network's return syncs")
    }
}
