public import ContractRuntime
import Foundation

/// The server's clock, injectable so tests are deterministic.
public protocol ServerClock: Sendable {
    func now() -> Timestamp
}

/// The system clock.
public struct SystemClock: ServerClock {
    public init() {}
    public func now() -> Timestamp { Timestamp(Date()) }
}
