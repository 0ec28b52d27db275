public import ContractRuntime
public import Contracts

/// One field of a generated entity set to a new value: the generated `Change` enums
/// (`Incident.Change.state(.inProgress)`).
public protocol EntityFieldChange: Sendable, Hashable {
    /// The field's wire name.
    var fieldName: String { get }
    /// The new value in wire form.
    func wireValue() throws -> JSONValue
}

/// A generated entity with typed field changes, for ``OfflineStore/patch(_:id:_:)`` and typed
/// filters (``RowFilter/equals(_:)``).
public protocol PatchableEntity: ContractEntity {
    associatedtype Change: EntityFieldChange
}

/// A generated entity with client-only columns (`local:` in its contract), readable and
/// writable as its generated `LocalState`.
public protocol LocalStateEntity: ContractEntity {
    associatedtype LocalState: Codable, Sendable, Hashable
}

// The generated module declares `Change` and `LocalState` but no protocol that names them, so
// the conformances are listed here; a test fails when a contract is added without its line.
// (Proposed to the compiler: generate these conformances into Sources/Contracts.)

extension Assessment.Change: EntityFieldChange {}
extension AssessmentResponse.Change: EntityFieldChange {}
extension Asset.Change: EntityFieldChange {}
extension Attempt.Change: EntityFieldChange {}
extension CompletionRecord.Change: EntityFieldChange {}
extension FieldTask.Change: EntityFieldChange {}
extension Incident.Change: EntityFieldChange {}
extension Lesson.Change: EntityFieldChange {}
extension ServiceAsset.Change: EntityFieldChange {}
extension Statement.Change: EntityFieldChange {}
extension Unit.Change: EntityFieldChange {}

extension Assessment: PatchableEntity {}
extension AssessmentResponse: PatchableEntity {}
extension Asset: PatchableEntity {}
extension Attempt: PatchableEntity {}
extension CompletionRecord: PatchableEntity {}
extension FieldTask: PatchableEntity {}
extension Incident: PatchableEntity {}
extension Lesson: PatchableEntity {}
extension ServiceAsset: PatchableEntity {}
extension Statement: PatchableEntity {}
extension Unit: PatchableEntity {}

extension Assessment: LocalStateEntity {}
extension Incident: LocalStateEntity {}
extension Unit: LocalStateEntity {}
