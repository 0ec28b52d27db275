import ContractRuntime
import Foundation
import GRDB
import SyncProtocol

/// What ``OfflineStore/applyServerChanges(_:)`` did.
package struct ServerChangesReport: Hashable, Sendable {
    /// Rows written, by contract name.
    package var upserted: [String: Int] = [:]
    /// Rows deleted, by contract name.
    package var deleted: [String: Int] = [:]
    /// Rows the device still has unsynced writes for: stored with those writes replayed on top,
    /// by contract name.
    package var rebased: [String: Int] = [:]
    /// Contract names this build does not know (a newer server); their rows were skipped.
    package var unknownContracts: [String] = []
    /// Rows of contracts held until the app is updated (a 426), skipped, by contract name;
    /// they are pulled again once the update lifts the hold.
    package var heldForUpdate: [String: Int] = [:]

    package init() {}
}
