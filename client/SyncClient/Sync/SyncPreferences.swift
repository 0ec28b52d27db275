public import Foundation
import GRDB

/// The user's say over automatic syncing (a settings screen's "Wi-Fi only", "data budget" and
/// "sync every"), kept in the store so it outlives the app's process, and obeyed by
/// ``SyncEngine`` for every sync it starts by itself: on reconnect, on foreground, on its timer,
/// after a local write and on retry. ``SyncEngine/syncNow()`` is the user asking: it always runs.
public struct SyncPreferences: Codable, Hashable, Sendable {
    /// Whether automatic syncs may use an expensive path (cellular, hotspot, Low Data Mode, as
    /// the ``ConnectivityMonitor`` reports it). `false` is "Wi-Fi only". Default `true`.
    public var allowsExpensiveNetwork: Bool
    /// Bytes automatic syncs may move per day (UTC, by the store's clock): pulled page bodies
    /// and pushed requests. Once used up, automatic syncs wait for the next day. `nil`: no limit.
    public var dailyAutomaticDataBudget: Int?
    /// Seconds between timer syncs while online, from a minute to a week (``SyncInterval``
    /// names the usual choices: every 15 minutes, hourly, daily); `nil`: no timer (syncs still
    /// follow reconnects, the foreground and local writes). Default 15 minutes.
    public var syncInterval: TimeInterval?
    /// The user's battery saver, for platforms without a system low-power mode: while `true`
    /// the engine syncs as it does in Apple's Low Power Mode (which it follows by itself on
    /// Apple platforms, `ProcessInfo.isLowPowerModeEnabled`). Automatic syncs then wait for the
    /// timer, whose interval backs off to ``lowPowerSyncInterval``; only urgent changes are
    /// fetched when the server says a scope changed. Default `false`.
    public var lowPowerMode: Bool
    /// The timer's interval in low-power mode: the slower of this and ``syncInterval`` counts
    /// (from a minute to a week). Default hourly.
    public var lowPowerSyncInterval: TimeInterval

    /// Preferences with the given settings; by default every network, no budget, every 15 minutes.
    public init(
        allowsExpensiveNetwork: Bool = true, dailyAutomaticDataBudget: Int? = nil, syncInterval: TimeInterval? = SyncInterval.quarterHourly,
        lowPowerMode: Bool = false, lowPowerSyncInterval: TimeInterval = SyncInterval.hourly
    ) {
        self.allowsExpensiveNetwork = allowsExpensiveNetwork
        self.dailyAutomaticDataBudget = dailyAutomaticDataBudget
        self.syncInterval = syncInterval
        self.lowPowerMode = lowPowerMode
        self.lowPowerSyncInterval = lowPowerSyncInterval
    }

    /// Everything allowed, a sync every 15 minutes.
    public static let standard = SyncPreferences()

    /// The timer's interval when the device saves power (`lowPowerMode`): the slower of
    /// ``syncInterval`` and ``lowPowerSyncInterval``; `nil` when there is no timer at all.
    public func effectiveSyncInterval(lowPowerMode: Bool) -> TimeInterval? {
        guard let syncInterval else { return nil }
        return lowPowerMode ? max(syncInterval, lowPowerSyncInterval) : syncInterval
    }

    private enum CodingKeys: String, CodingKey {
        case allowsExpensiveNetwork, dailyAutomaticDataBudget, syncInterval, lowPowerMode, lowPowerSyncInterval
    }

    /// Reads preferences saved by any build: a key an older build did not write takes its default.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        allowsExpensiveNetwork = try container.decodeIfPresent(Bool.self, forKey: .allowsExpensiveNetwork) ?? true
        dailyAutomaticDataBudget = try container.decodeIfPresent(Int.self, forKey: .dailyAutomaticDataBudget)
        syncInterval = try container.decodeIfPresent(TimeInterval.self, forKey: .syncInterval)
        lowPowerMode = try container.decodeIfPresent(Bool.self, forKey: .lowPowerMode) ?? false
        lowPowerSyncInterval = try container.decodeIfPresent(TimeInterval.self, forKey: .lowPowerSyncInterval) ?? SyncInterval.hourly
    }
}

/// The intervals a settings screen usually offers for ``SyncPreferences/syncInterval``.
public enum SyncInterval {
    /// Every 15 minutes (the default).
    public static let quarterHourly: TimeInterval = 15 * 60
    /// Every hour.
    public static let hourly: TimeInterval = 3_600
    /// Every day.
    public static let daily: TimeInterval = 86_400
    /// The shortest interval the preferences take: a minute.
    public static let shortest: TimeInterval = 60
    /// The longest interval the preferences take: a week.
    public static let longest: TimeInterval = 7 * 86_400
}

/// Why the engine is not syncing by itself right now (``SyncStatus/automaticSyncsPaused``).
public enum AutomaticSyncPause: Hashable, Sendable {
    /// The path is expensive and the preferences say Wi-Fi only.
    case expensiveNetwork
    /// Today's data budget for automatic syncs is used up (`used` of `budget` bytes).
    case dataBudgetUsed(used: Int, budget: Int)
}

/// Bytes automatic syncs moved on one day (``OfflineStore/automaticDataUsage()``).
public struct DataUsage: Hashable, Sendable {
    /// The day, as `yyyy-MM-dd` (UTC).
    public var day: String
    /// The bytes moved that day.
    public var bytes: Int

    /// Usage of `bytes` on `day`.
    public init(day: String, bytes: Int) {
        self.day = day
        self.bytes = bytes
    }
}

extension OfflineStore {
    /// The preferences saved with ``saveSyncPreferences(_:)``, or ``SyncPreferences/standard``.
    public func syncPreferences() throws(OfflineStoreError) -> SyncPreferences {
        try storedSyncPreferences() ?? .standard
    }

    /// The preferences saved with ``saveSyncPreferences(_:)``, or `nil` when none were.
    func storedSyncPreferences() throws(OfflineStoreError) -> SyncPreferences? {
        try read { db in
            guard let text = try Metadata.get(db, .syncPreferences) else { return nil }
            return try? JSONDecoder().decode(SyncPreferences.self, from: Data(text.utf8))
        }
    }

    /// Saves the preferences (a running engine takes them with ``SyncEngine/setPreferences(_:)``).
    ///
    /// - Throws: ``OfflineStoreError/invalidPreference(_:)`` for a negative budget or an
    ///   interval under a minute or over a week.
    public func saveSyncPreferences(_ preferences: SyncPreferences) throws(OfflineStoreError) {
        if let budget = preferences.dailyAutomaticDataBudget, budget < 0 {
            throw .invalidPreference("the daily data budget is negative (\(budget) bytes)")
        }
        if let interval = preferences.syncInterval, !(interval >= SyncInterval.shortest && interval <= SyncInterval.longest) {
            throw .invalidPreference("the sync interval must be from 60 seconds to a week (got \(interval))")
        }
        let lowPower = preferences.lowPowerSyncInterval
        if !(lowPower >= SyncInterval.shortest && lowPower <= SyncInterval.longest) {
            throw .invalidPreference("the low-power sync interval must be from 60 seconds to a week (got \(lowPower))")
        }
        let text: String
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            text = String(decoding: try encoder.encode(preferences), as: UTF8.self)
        } catch {
            throw .invalidPreference(String(describing: error))
        }
        try write { db in try Metadata.set(db, .syncPreferences, text) }
    }

    /// What automatic syncs moved today (UTC, by the store's clock).
    public func automaticDataUsage() throws(OfflineStoreError) -> DataUsage {
        let today = Self.utcDay(now().date)
        return try read { db in
            guard try Metadata.get(db, .automaticDataDay) == today else { return DataUsage(day: today, bytes: 0) }
            return DataUsage(day: today, bytes: Int(try Metadata.integer(db, .automaticDataBytes) ?? 0))
        }
    }

    /// Adds `bytes` to today's automatic data usage (a new day starts from zero).
    package func recordAutomaticData(bytes: Int) throws(OfflineStoreError) {
        guard bytes > 0 else { return }
        let today = Self.utcDay(now().date)
        try write { db in
            let sameDay = try Metadata.get(db, .automaticDataDay) == today
            let used = sameDay ? (try Metadata.integer(db, .automaticDataBytes) ?? 0) : 0
            try Metadata.set(db, .automaticDataDay, today)
            try Metadata.set(db, .automaticDataBytes, String(used + Int64(bytes)))
        }
    }

    /// Whether the server refused a compressed push in this launch or an earlier one
    /// (``recordPushCompressionRefused()``).
    package func pushCompressionRefused() throws(OfflineStoreError) -> Bool {
        try read { db in try Metadata.get(db, .pushCompressionRefusedAt) != nil }
    }

    /// Remembers that the server refused a compressed push (415), so that the engine of a later
    /// launch sends its pushes as they are from the first; the first refusal's time is kept.
    package func recordPushCompressionRefused() throws(OfflineStoreError) {
        let at = now().millisecondsSince1970
        try write { db in
            if try Metadata.get(db, .pushCompressionRefusedAt) == nil { try Metadata.set(db, .pushCompressionRefusedAt, String(at)) }
        }
    }

    static func utcDay(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(secondsFromGMT: 0) ?? calendar.timeZone
        let parts = calendar.dateComponents([.year, .month, .day], from: date)
        return String(format: "%04d-%02d-%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
    }
}
