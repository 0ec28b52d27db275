public import ContractRuntime
import Foundation

/// A table of a contract, as storage needs to address it.
public struct ContractTable: Hashable, Sendable {
    public var name: String
    /// The primary-key column of the contract (`id`, or `event_id` for events).
    public var primaryKey: String

    public init(name: String, primaryKey: String) {
        self.name = name
        self.primaryKey = primaryKey
    }

    public init(_ entity: EntityDescriptor) {
        self.init(name: entity.table, primaryKey: entity.primaryKey)
    }

    public init(_ event: EventDescriptor) {
        self.init(name: event.table, primaryKey: "event_id")
    }
}
