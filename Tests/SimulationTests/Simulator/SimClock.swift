import ContractRuntime
import Foundation
import SyncClient
import SyncServer

/// The one clock of a simulation: the server reads it, every device reads it plus its own skew,
/// and only the simulator moves it. Retries, token expiry and retention all follow it.
final class SimClock: ServerClock, @unchecked Sendable {
    /// 2026-03-01T00:00:00Z: every run starts at the same instant.
    static let start = Date(timeIntervalSince1970: 1_772_323_200)
    private let current = Locked(SimClock.start)

    var date: Date { current.current }
    var seconds: Int64 { Int64(date.timeIntervalSince1970) }

    func now() -> Timestamp { Timestamp(date) }

    func advance(by seconds: TimeInterval) {
        current.withLock { $0 = $0.addingTimeInterval(seconds) }
    }

    /// Moves the clock on to `date`, unless it is there already.
    func advance(to date: Date) {
        current.withLock { $0 = max($0, date) }
    }

    /// A device's view of this clock, `skew` seconds off.
    func device(skew: TimeInterval) -> DeviceView { DeviceView(clock: self, skew: skew) }

    struct DeviceView: DeviceClock {
        let clock: SimClock
        let skew: TimeInterval
        func now() -> Date { clock.date.addingTimeInterval(skew) }
    }
}
