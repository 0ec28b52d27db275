import ContractRuntime
import Foundation
import GRDB
import SyncProtocol

/// What ``OfflineStore/markResults(_:)`` did.
package struct PushReport: Hashable, Sendable {
    /// Applied or duplicate: done.
    package var done = 0
    /// Left for the app to resolve.
    package var conflicted = 0
    /// Conflicts the policy settled at once (a last-writer-wins or field-merge loss).
    package var settledByServer = 0
    /// Refused for good.
    package var failed = 0
    /// Results naming no entry of this outbox.
    package var unknown: [String] = []

    package init() {}
}
