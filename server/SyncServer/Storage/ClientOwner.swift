import ContractRuntime
import Foundation

/// The identity a push stream (`client_id`) belongs to, within its tenant.
public struct ClientOwner: Hashable, Sendable {
    public var userID: String
    public var deviceID: String

    public init(userID: String, deviceID: String) {
        self.userID = userID
        self.deviceID = deviceID
    }
}

/// What locking a client's push stream found.
public enum ClientLock: Hashable, Sendable {
    /// The stream is the caller's; `lastSeq` is its last `seq` done (0 when new).
    case owned(lastSeq: Int64)
    /// Another identity pushed with this `client_id` first: the caller may neither read nor move it.
    case ownedByOther
}
