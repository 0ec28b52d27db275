import ArgumentParser
import Foundation
import SyncClient
import SyncProtocol

struct PreferencesCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "preferences",
        abstract: "Show or set what automatic syncs may do: Wi-Fi only, a daily data budget, the interval, low-power mode.",
        discussion: """
            The preferences are kept in the device's store and obeyed by every sync the engine starts by \
            itself (when the network returns with `offline off`, in an app also on foreground, on its timer \
            and after a local write); `sync-device sync` is the user asking and always runs. Without options, \
            shows them with today's automatic data use. --network says what this device's network is: an \
            app's path monitor tells on Apple platforms; here you do. --low-power on is the battery saver of \
            a platform without Apple's Low Power Mode: automatic syncs then wait for the timer, whose interval \
            backs off to --low-power-interval (hourly by default), except urgent changes; `sync` still runs. \
            Intervals take a duration (90s, 15m, 1h, 1d, 1w) or a preset: quarter-hourly, hourly, daily.
            """
    )

    enum Switch: String, ExpressibleByArgument, CaseIterable {
        case on, off
    }

    enum Network: String, ExpressibleByArgument, CaseIterable {
        case metered, unmetered
    }

    @Option(name: .customLong("wifi-only"), help: "on: automatic syncs never use a metered network.")
    var wifiOnly: Switch?

    @Option(name: .customLong("daily-budget"), help: "Bytes automatic syncs may move per day (`50MB`, `800kB`, `none`).")
    var dailyBudget: String?

    @Option(help: "Time between timer syncs while online (`15m`, `hourly`, `daily`, `never`; from 1m to a week).")
    var interval: String?

    @Option(name: .customLong("low-power"), help: "on: save power as in Apple's Low Power Mode (automatic syncs wait for the timer).")
    var lowPower: Switch?

    @Option(name: .customLong("low-power-interval"), help: "The timer's interval in low-power mode (`hourly`, `daily`, `6h`; from 1m to a week).")
    var lowPowerInterval: String?

    @Option(help: "What this device's network is now: metered or unmetered.")
    var network: Network?

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    func validate() throws {
        if let dailyBudget, Self.bytes(dailyBudget) == nil {
            throw ValidationError("--daily-budget takes a size like 50MB, 800kB or 1200, or `none`; not '\(dailyBudget)'")
        }
        if let interval, Self.seconds(interval) == nil {
            throw ValidationError("--interval takes a duration like 15m, 1h or 90s, a preset (hourly, daily), or `never`; not '\(interval)'")
        }
        if let lowPowerInterval, (Self.seconds(lowPowerInterval) ?? nil) == nil {
            throw ValidationError("--low-power-interval takes a duration like 1h or 6h, or a preset (hourly, daily); not '\(lowPowerInterval)'")
        }
    }

    func execute() async throws {
        let session = try device.session()
        let store = session.store
        var preferences = try store.syncPreferences()
        let changing = wifiOnly != nil || dailyBudget != nil || interval != nil || lowPower != nil || lowPowerInterval != nil
        if let wifiOnly { preferences.allowsExpensiveNetwork = wifiOnly == .off }
        if let dailyBudget { preferences.dailyAutomaticDataBudget = Self.bytes(dailyBudget) ?? nil }
        if let interval { preferences.syncInterval = Self.seconds(interval) ?? nil }
        if let lowPower { preferences.lowPowerMode = lowPower == .on }
        if let lowPowerInterval, let seconds = Self.seconds(lowPowerInterval) ?? nil { preferences.lowPowerSyncInterval = seconds }
        if changing {
            do {
                try store.saveSyncPreferences(preferences)
            } catch {
                throw DeviceFailure(error)
            }
        }
        if let network { try session.home.setMetered(network == .metered) }
        let usage = try store.automaticDataUsage()
        let metered = session.home.isMetered
        if output.json {
            Console.json(
                .object([
                    "wifi_only": .bool(!preferences.allowsExpensiveNetwork),
                    "daily_budget_bytes": preferences.dailyAutomaticDataBudget.map { .int(Int64($0)) } ?? .null,
                    "interval_seconds": preferences.syncInterval.map { .int(Int64($0)) } ?? .null,
                    "low_power_mode": .bool(preferences.lowPowerMode),
                    "low_power_interval_seconds": .int(Int64(preferences.lowPowerSyncInterval)),
                    "effective_interval_seconds": preferences.effectiveSyncInterval(lowPowerMode: preferences.lowPowerMode)
                        .map { .int(Int64($0)) } ?? .null,
                    "network": .string(metered ? "metered" : "unmetered"),
                    "today": .object(["day": .string(usage.day), "automatic_bytes": .int(Int64(usage.bytes))]),
                ]))
            return
        }
        Console.say(
            "wifi only:    "
                + (preferences.allowsExpensiveNetwork ? "off (automatic syncs use any network)" : "on (no automatic sync on a metered network)"))
        Console.say("daily budget: " + (preferences.dailyAutomaticDataBudget.map { Wording.bytes(Int64($0)) } ?? "none"))
        Console.say("interval:     " + (preferences.syncInterval.map(Self.durationText) ?? "never (no timer)"))
        Console.say(
            "low power:    "
                + (preferences.lowPowerMode
                    ? "on (automatic syncs wait for the timer, every "
                        + (preferences.effectiveSyncInterval(lowPowerMode: true).map(Self.durationText) ?? "never") + "; urgent changes still come)"
                    : "off (in low-power mode the timer backs off to \(Self.durationText(preferences.lowPowerSyncInterval)))"))
        Console.say("network:      " + (metered ? "metered" : "unmetered"))
        Console.say("today (\(usage.day)): automatic syncs moved \(Wording.bytes(Int64(usage.bytes)))")
    }

    /// `50MB`, `800kB`, `1.5GB`, `1200` (bytes), or `none` (`nil` inside the optional).
    static func bytes(_ text: String) -> Int?? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.lowercased() == "none" { return .some(nil) }
        let units: [(String, Double)] = [("GB", 1e9), ("MB", 1e6), ("kB", 1e3), ("KB", 1e3), ("B", 1)]
        for (suffix, factor) in units where trimmed.hasSuffix(suffix) {
            guard let number = Double(trimmed.dropLast(suffix.count)), number >= 0 else { return nil }
            return .some(Int(number * factor))
        }
        guard let plain = Int(trimmed), plain >= 0 else { return nil }
        return .some(plain)
    }

    /// `90s`, `15m`, `1h`, `1d`, `1w`, a preset (`quarter-hourly`, `hourly`, `daily`: ``SyncInterval``),
    /// or `never`, from a minute to a week (`nil` inside the optional: never).
    static func seconds(_ text: String) -> TimeInterval?? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        if trimmed == "never" { return .some(nil) }
        let presets = ["quarter-hourly": SyncInterval.quarterHourly, "hourly": SyncInterval.hourly, "daily": SyncInterval.daily]
        if let preset = presets[trimmed] { return .some(preset) }
        let factors: [Character: Double] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 7 * 86_400]
        guard let unit = trimmed.last, let factor = factors[unit], let number = Double(trimmed.dropLast()),
            number * factor >= SyncInterval.shortest, number * factor <= SyncInterval.longest
        else {
            return nil
        }
        return .some(number * factor)
    }

    static func durationText(_ seconds: TimeInterval) -> String {
        if seconds.truncatingRemainder(dividingBy: 86_400) == 0 { return "\(Int(seconds / 86_400))d" }
        if seconds.truncatingRemainder(dividingBy: 3_600) == 0 { return "\(Int(seconds / 3_600))h" }
        if seconds.truncatingRemainder(dividingBy: 60) == 0 { return "\(Int(seconds / 60))m" }
        return "\(Int(seconds))s"
    }

    static func describe(_ pause: AutomaticSyncPause) -> String {
        switch pause {
        case .expensiveNetwork: "the network is metered and the preferences say Wi-Fi only"
        case .dataBudgetUsed(let used, let budget):
            "today's automatic data budget is used (\(Wording.bytes(Int64(used))) of \(Wording.bytes(Int64(budget))))"
        }
    }

    static func code(_ pause: AutomaticSyncPause) -> String {
        switch pause {
        case .expensiveNetwork: "wifi_only"
        case .dataBudgetUsed: "data_budget_used"
        }
    }
}
