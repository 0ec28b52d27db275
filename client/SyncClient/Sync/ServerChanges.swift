public import ContractRuntime
import Foundation
import GRDB
public import SyncProtocol

/// Rows from the server to apply in one transaction: a pull page (with its scope's cursor), or
/// the answer of a one-off fetch.
public struct ServerChanges: Sendable, Hashable {
    /// Rows in wire form by contract name: entity rows, or event envelopes for events that travel
    /// down (`type`, `event_id`, …, `payload`).
    public var upserts: [String: [JSONValue]]
    /// Primary keys of deleted rows by entity name.
    public var deletes: [String: [String]]
    /// The contract version each contract's rows are shaped for; the current version when absent.
    public var schemaVersions: [String: Int]
    /// The scope whose cursor advances with these changes, if any.
    public var scopeKey: String?
    /// The cursor to store for ``scopeKey`` in the same transaction.
    public var cursor: String?

    /// Changes from their parts; every part is empty by default.
    public init(
        upserts: [String: [JSONValue]] = [:], deletes: [String: [String]] = [:], schemaVersions: [String: Int] = [:],
        scopeKey: String? = nil, cursor: String? = nil
    ) {
        self.upserts = upserts
        self.deletes = deletes
        self.schemaVersions = schemaVersions
        self.scopeKey = scopeKey
        self.cursor = cursor
    }

    /// A pull page of a scope, with its cursor (rows shaped for this build's versions, as
    /// requested with ``OfflineStore/schemaVersions``).
    public init(pull page: PullResponse, scopeKey: String) {
        self.init(upserts: page.upserts, deletes: page.deletes, scopeKey: scopeKey, cursor: page.cursor)
    }
}
