import ContractRuntime
import Foundation

/// The identity a push stream (`client_id`) belongs to, within its tenant.
package struct ClientOwner: Hashable, Sendable {
    package var userID: String
    package var deviceID: String

    package init(userID: String, deviceID: String) {
        self.userID = userID
        self.deviceID = deviceID
    }
}

/// What locking a client's push stream found.
package enum ClientLock: Hashable, Sendable {
    /// The stream is the caller's; `lastSeq` is its last `seq` done (0 when new).
    case owned(lastSeq: Int64)
    /// Another identity pushed with this `client_id` first: the caller may neither read nor move it.
    case ownedByOther
}
