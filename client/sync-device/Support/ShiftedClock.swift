import ContractRuntime
import Contracts
import Foundation
import SyncClient

/// The device's clock: the system clock, shifted by `--now` or `OUTPOST_DEVICE_NOW` so that
/// end-to-end tests and demos can live through days of offline use in seconds.
///
/// The shift is relative (`+15d`, `-2h`, `+90m`, `+30s`) or an absolute ISO-8601 time
/// (`2026-03-01T09:00:00Z`) that becomes the offset from now; either way time keeps moving, so
/// ids made in one run stay in order.
struct ShiftedClock: DeviceClock {
    /// The environment variable that sets the shift when `--now` is not given.
    static let environmentVariable = "OUTPOST_DEVICE_NOW"

    let offset: TimeInterval

    func now() -> Date { Date().addingTimeInterval(offset) }

    /// The clock of `--now` (or else the environment variable); the system clock when neither is set.
    static func resolve(
        option: String?, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(DeviceFailure)
        -> ShiftedClock
    {
        guard let text = option ?? environment[environmentVariable], !text.isEmpty else { return ShiftedClock(offset: 0) }
        guard let clock = parse(text) else {
            throw .usage(
                "the device time '\(text)' is neither a shift like +15d, -2h, +90m, +30s nor an ISO-8601 time",
                hint: "set --now or \(environmentVariable) to, for example, +15d or 2026-03-01T09:00:00Z"
            )
        }
        return clock
    }

    static func parse(_ text: String) -> ShiftedClock? {
        if let first = text.first, first == "+" || first == "-", let unit = text.last, let amount = Double(text.dropFirst().dropLast()) {
            let seconds: Double
            switch unit {
            case "d": seconds = amount * 86_400
            case "h": seconds = amount * 3600
            case "m": seconds = amount * 60
            case "s": seconds = amount
            default: return nil
            }
            return ShiftedClock(offset: first == "-" ? -seconds : seconds)
        }
        guard let time = Timestamp(iso8601: text) else { return nil }
        return ShiftedClock(offset: time.date.timeIntervalSinceNow)
    }
}
