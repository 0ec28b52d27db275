package import ContractRuntime
import Foundation

/// A table of a contract, as storage needs to address it.
package struct ContractTable: Hashable, Sendable {
    package var name: String
    /// The primary-key column of the contract (`id`, or `event_id` for events).
    package var primaryKey: String

    package init(name: String, primaryKey: String) {
        self.name = name
        self.primaryKey = primaryKey
    }

    package init(_ entity: EntityDescriptor) {
        self.init(name: entity.table, primaryKey: entity.primaryKey)
    }

    package init(_ event: EventDescriptor) {
        self.init(name: event.table, primaryKey: "event_id")
    }
}
