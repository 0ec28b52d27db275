import ContractRuntime
import Contracts
import Foundation
import Testing

@Suite("Typed field changes")
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
