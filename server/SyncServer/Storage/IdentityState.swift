import ContractRuntime
import Contracts
import Foundation

/// What the server holds about an identity (``StorageReader/identityState(tenant:userID:deviceID:)``).
public struct IdentityState: Hashable, Sendable {
    /// Seconds since 1970 of the latest revocation of the device or the user; `nil` when none.
    public var revokedAt: Int64?
    /// The teams the user belongs to, sorted.
    public var teams: [String]

    public init(revokedAt: Int64?, teams: [String]) {
        self.revokedAt = revokedAt
        self.teams = teams
    }
}

/// What a revocation names.
public enum RevocationKind: String, Hashable, Sendable, CaseIterable {
    case device
    case user
}
