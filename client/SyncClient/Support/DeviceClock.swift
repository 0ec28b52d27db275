public import ContractRuntime
public import Foundation

/// The device's wall clock, injectable so retention, retries and ids can be tested without
/// waiting.
///
/// The store reads it for `created_at` / `updated_at` of outbox entries, retention ages, event
/// `occurred_at`, hybrid logical clock ticks and the time part of ULIDs.
public protocol DeviceClock: Sendable {
    /// The current time.
    func now() -> Date
}

extension DeviceClock {
    /// The current time, truncated to the millisecond.
    public func timestamp() -> Timestamp { Timestamp(now()) }
}

/// The system clock (`Date()`).
public struct SystemClock: DeviceClock {
    /// The system clock.
    public init() {}

    /// The system's current date.
    public func now() -> Date { Date() }
}

/// A clock that moves only when told to: for tests and previews.
///
/// ```swift
/// let clock = ManualClock(Date(timeIntervalSince1970: 1_769_846_400))
/// clock.advance(by: 8 * 86_400)   // eight days later
/// ```
public final class ManualClock: DeviceClock {
    private let current: Locked<Date>

    /// A clock stopped at `start`.
    public init(_ start: Date = Date(timeIntervalSince1970: 1_769_846_400)) {
        current = Locked(start)
    }

    /// The date the clock was last set to.
    public func now() -> Date { current.withLock { $0 } }

    /// Moves the clock forward (or back, with a negative interval).
    public func advance(by seconds: TimeInterval) {
        current.withLock { $0 = $0.addingTimeInterval(seconds) }
    }

    /// Sets the clock.
    public func set(_ date: Date) {
        current.withLock { $0 = date }
    }
}
