/// A generated entity: a row that syncs between devices and the server.
public protocol ContractEntity: Codable, Sendable, Hashable {
    /// The contract the type was generated from.
    static var descriptor: EntityDescriptor { get }
    /// The primary key as text (ids as they are, UUIDs lowercased, integers in decimal).
    var contractPrimaryKey: String { get }
}

/// A generated event: an immutable fact recorded on a device.
public protocol ContractEvent: Codable, Sendable, Hashable {
    /// The contract the type was generated from.
    static var descriptor: EventDescriptor { get }
}

/// Errors raised by the contract runtime.
public enum ContractError: Error, Hashable, Sendable {
    /// An envelope's `type` names another event than its payload's.
    case eventTypeMismatch(expected: String, found: String)
}
