import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import Testing

@Suite("Typed field changes", .blockingWork)
struct ChangeTests {
    @Test("a change names its wire field and carries its value in wire form")
    func wireForm() throws {
        #expect(Incident.Change.priority(.high).fieldName == "priority")
        #expect(try Incident.Change.priority(.high).wireValue() == .string("high"))
        #expect(Incident.Change.shortDescription("Pump leaking").fieldName == "short_description")
        #expect(try Incident.Change.description(nil).wireValue() == .null)
        #expect(try Incident.Change.tags(["a", "b"]).wireValue() == .array([.string("a"), .string("b")]))
        let opened = Timestamp(millisecondsSince1970: 1_769_846_400_123)
        #expect(try Incident.Change.openedAt(opened).wireValue() == .string("2026-01-31T08:00:00.123Z"))
    }
}

/// The compiler writes the conformances into every generated file, so the engines' typed writes
/// and reads take every contract with no list kept by hand.
@Suite("Generated conformances", .blockingWork)
struct GeneratedConformanceTests {
    /// What a typed patch needs of an entity, as the client's `patch` asks for it.
    private func fieldNames<E: PatchableEntity>(_ type: E.Type, _ changes: [E.Change]) -> [String] {
        changes.map(\.fieldName)
    }

    /// What the client's local-state reads and writes need of an entity.
    private func localStateType<E: LocalStateEntity>(_ type: E.Type) -> ObjectIdentifier { ObjectIdentifier(E.LocalState.self) }

    @Test("every registered entity is patchable, and has a local state exactly when its contract has local fields")
    func everyEntity() {
        for type in ContractRegistry.entityTypes {
            #expect(type is any PatchableEntity.Type, "\(type) has no generated `PatchableEntity` conformance")
            #expect(
                (type is any LocalStateEntity.Type) == !type.descriptor.localFields.isEmpty,
                "\(type) declares `LocalStateEntity` iff its contract has local fields"
            )
        }
    }

    @Test("generated types satisfy the engines' generic constraints as they are")
    func genericConstraints() {
        #expect(fieldNames(Incident.self, [.state(.inProgress), .assigneeId("u-1")]) == ["state", "assignee_id"])
        #expect(localStateType(Unit.self) == ObjectIdentifier(Unit.LocalState.self))
    }
}
