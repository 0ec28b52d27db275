import ContractRuntime
public import Contracts
import SyncClient

/// A unit as a list shows it.
public struct UnitSummary: Hashable, Sendable {
    public var unit: Unit
    public var local: Unit.LocalState
    public var lessonCount: Int

    public init(unit: Unit, local: Unit.LocalState, lessonCount: Int) {
        self.unit = unit
        self.local = local
        self.lessonCount = lessonCount
    }
}
