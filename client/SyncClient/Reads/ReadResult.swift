import ContractRuntime
import SyncProtocol

/// The outcome of a read that may go to the server when nothing is cached.
public enum ReadResult<Value: Sendable>: Sendable {
    /// From SQLite; no network involved.
    case cached(Value)
    /// Nothing was cached: fetched once from the server, stored, then read from SQLite.
    case fetched(Value)
    /// Nothing is cached and the device is offline: show "not available offline".
    case offline
    /// Nothing is cached and the server could not provide it (see the reason).
    case unavailable(RemoteFetchFailure)

    /// The value, cached or fetched.
    public var value: Value? {
        switch self {
        case .cached(let value), .fetched(let value): return value
        case .offline, .unavailable: return nil
        }
    }
}

extension ReadResult: Equatable where Value: Equatable {}

extension ReadResult: Hashable where Value: Hashable {}
