/// One field of a generated entity set to a new value: the generated `Change` enums
/// (`Incident.Change.state(.inProgress)`).
///
/// The contract compiler declares the conformance on every entity's `Change`, so an engine can
/// take a patch of any entity without a list of the contracts it was built with.
public protocol EntityFieldChange: Sendable, Hashable {
    /// The field's wire name.
    var fieldName: String { get }
    /// The new value in wire form.
    func wireValue() throws -> JSONValue
}

/// A generated entity with typed field changes: what a patch (the client's
/// `OfflineStore.patch(_:id:_:)`) and a typed filter (`RowFilter.equals(_:)`) are built from.
///
/// The contract compiler declares the conformance on every generated entity.
public protocol PatchableEntity: ContractEntity {
    /// One field set to a new value; the primary key is not a change.
    associatedtype Change: EntityFieldChange
}

/// A generated entity with client-only columns (`local:` in its contract), readable and
/// writable on the device as its generated `LocalState`.
///
/// The contract compiler declares the conformance on every entity whose contract has `local:`
/// fields, and on no other.
public protocol LocalStateEntity: ContractEntity {
    /// The client-only columns of one row: never on the wire, never on the server.
    associatedtype LocalState: Codable, Sendable, Hashable
}
