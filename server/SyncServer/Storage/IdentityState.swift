import ContractRuntime
import Foundation
import SyncProtocol

/// What the server holds about an identity (``StorageReader/identityState(tenant:userID:deviceID:)``).
package struct IdentityState: Hashable, Sendable {
    /// Seconds since 1970 of the latest revocation of the device or the user; `nil` when none.
    package var revokedAt: Int64?
    /// The teams the user belongs to, sorted.
    package var teams: [String]
    /// Seconds since 1970 of the erasure of the user's data; `nil` when never erased.
    package var erasedAt: Int64?

    package init(revokedAt: Int64?, teams: [String], erasedAt: Int64? = nil) {
        self.revokedAt = revokedAt
        self.teams = teams
        self.erasedAt = erasedAt
    }

    /// Why a token issued at `issuedAt` (seconds since 1970; `nil` counts as the epoch) no
    /// longer holds, or `nil` when it does: the user's data was erased, or the device or user
    /// revoked, at or after its issue. Requests and open live channels judge by this one rule,
    /// on either storage (both only read the times; the rule is this one).
    ///
    /// A token may say it was issued up to ``TokenSigner/issuedAtLeeway`` ahead of the server's
    /// clock (issuers' clocks differ a little), so an erasure and a revocation each cover every
    /// token issued up to that far after them: otherwise a token dated 50 s ahead would outlive
    /// an erasure or a revocation made now until it expired, pulling and pushing into what the
    /// erasure removed. A user signing in again, or a device re-enrolled, within that minute
    /// needs a token dated past it. A store from before an erasure is also told by its push
    /// stream, whatever token it comes back with (``PushSession/refuseErasedStream(_:identity:in:)``).
    func refusal(ofTokenIssuedAt issuedAt: Int64?) -> ServiceError? {
        let issuedAt = issuedAt ?? 0
        if let erasedAt, issuedAt - TokenSigner.issuedAtLeeway <= erasedAt {
            return ServiceError(status: 410, .userErased, "this user's data was erased on the server; wipe the device's store and sign in again")
        }
        if let revokedAt, issuedAt - TokenSigner.issuedAtLeeway <= revokedAt {
            return ServiceError(status: 401, .tokenRevoked, "this device's access was revoked; sign in again")
        }
        return nil
    }
}

/// A revocation the server holds.
package struct Revocation: Hashable, Sendable {
    package var kind: RevocationKind
    package var subject: String
    /// Seconds since 1970.
    package var revokedAt: Int64

    package init(kind: RevocationKind, subject: String, revokedAt: Int64) {
        self.kind = kind
        self.subject = subject
        self.revokedAt = revokedAt
    }
}

/// A push stream and what the server holds of it.
package struct ClientRecord: Hashable, Sendable {
    package var clientID: String
    package var owner: ClientOwner?
    /// The last `seq` done.
    package var lastSeq: Int64
    /// When it last moved, milliseconds since 1970.
    package var updatedAt: Int64

    package init(clientID: String, owner: ClientOwner?, lastSeq: Int64, updatedAt: Int64) {
        self.clientID = clientID
        self.owner = owner
        self.lastSeq = lastSeq
        self.updatedAt = updatedAt
    }
}

/// A row whose change an operator marked urgent (a withdrawn unit): the contract table and the
/// row's primary key, and the scope sequence of the change marked.
package struct UrgentChange: Hashable, Sendable {
    package var table: String
    package var rowID: String
    package var sequence: Int64

    package init(table: String, rowID: String, sequence: Int64) {
        self.table = table
        self.rowID = rowID
        self.sequence = sequence
    }
}

/// What a revocation names.
package enum RevocationKind: String, Hashable, Sendable, CaseIterable {
    case device
    case user
}
