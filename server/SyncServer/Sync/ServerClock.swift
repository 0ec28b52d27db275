public import ContractRuntime
import Foundation

/// The server's clock, injectable so tests are deterministic.
public protocol ServerClock: Sendable {
    func now() -> Timestamp
}

/// The system clock.
public struct SystemClock: ServerClock {
    /// The system clock.
    public init() {}
    /// The system's current time.
    public func now() -> Timestamp { Timestamp(Date()) }
}
