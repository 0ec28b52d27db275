import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncClient

/// The storage limits a contract sets (`max_rows`, `max_row_bytes` in its sync block) are the
/// device's defaults; the app's limits override them field by field. On the engines' own
/// contracts: `Label` keeps at most 500 rows of 64 kB, `Note` 1 000 of 1 MB.
@Suite(.blockingWork) struct ContractStorageLimitTests {
    @Test func theDescriptorsLimitsAreTheDefaults() throws {
        let label = ContractStorageLimit(maxRows: ContractRegistry.label.maxRows, maxRowBytes: ContractRegistry.label.maxRowBytes)
        #expect(label == ContractStorageLimit(maxRows: 500, maxRowBytes: 64_000))
        let note = ContractStorageLimit(maxRows: ContractRegistry.note.maxRows, maxRowBytes: ContractRegistry.note.maxRowBytes)
        #expect(note == ContractStorageLimit(maxRows: 1_000, maxRowBytes: 1_000_000))
        let contracts = ContractCatalog(ContractRegistry.self)
        #expect(StorageLimits.contractDefaults(contracts) == ["Label": label, "Note": note])
        #expect(StorageLimits.standard.inForce(for: contracts) == ["Label": label, "Note": note])
        #expect(StorageLimits(minimumFreeBytes: 1_000).inForce(for: contracts) == ["Label": label, "Note": note])
        #expect(try TestStore.engine().store.contractStorageLimits == ["Label": label, "Note": note])
    }

    @Test func theAppsLimitsOverrideTheContractsFieldByField() {
        let contracts = ContractCatalog(ContractRegistry.self)
        let limits = StorageLimits(contracts: [
            "Label": ContractStorageLimit(maxRows: 20),
            "Card": ContractStorageLimit(maxRows: 1_000),
        ])
        #expect(limits.inForce(for: contracts)["Label"] == ContractStorageLimit(maxRows: 20, maxRowBytes: 64_000))
        #expect(limits.inForce(for: contracts)["Card"] == ContractStorageLimit(maxRows: 1_000))

        var configured = StorageLimits.standard
        configured.contracts["Label"] = ContractStorageLimit(maxRowBytes: 2_000_000)
        #expect(configured.inForce(for: contracts)["Label"] == ContractStorageLimit(maxRows: 500, maxRowBytes: 2_000_000))
        configured.contracts["Label"] = .unlimited
        #expect(configured.inForce(for: contracts)["Label"] == .unlimited, "unlimited lifts the contract's limits")
    }

    private func label(_ id: String) -> JSONValue {
        EngineSamples.wire(Label(id: id, name: "Label \(id)", updatedAt: EngineSamples.t0))
    }

    private func note(_ id: String, body: Int = 10) -> JSONValue {
        EngineSamples.wire(
            Note(id: id, teamId: "team-1", cardId: "card-1", authorId: "u-1", body: String(repeating: "x", count: body), updatedAt: EngineSamples.t0))
    }

    @Test func housekeepingKeepsTheContractsFiveHundredLabelsByDefault() throws {
        let test = try TestStore.engine()
        #expect(test.store.configuration.storageLimits == .standard)
        try test.store.applyServerChanges(ServerChanges(upserts: ["Label": (1...502).map { label("label-\($0)") }]))
        let report = try test.store.runHousekeeping()
        #expect(report.evictedRows["Label"] == 2)
        #expect(try test.store.all(Label.self).count == 500)
        #expect(try test.store.droppedRows(Label.self).values.allSatisfy { $0.reason == .evicted })
    }

    @Test func anAppsLargestRowReplacesTheContractsAndItsRowLimitStays() throws {
        let directory = try TemporaryDirectory()
        let clock = ManualClock(TestStore.start)
        var configuration = TestStore.configuration(directory: directory, clock: clock, keys: FileKeyProvider(directory: directory.keysURL))
        configuration.storageLimits = StorageLimits(contracts: ["Note": ContractStorageLimit(maxRowBytes: 2_000)])
        let store = try OfflineStore(configuration, contracts: ContractRegistry.self)
        var rows = (1...1_001).map { note("note-\($0)") }
        rows.append(note("note-big", body: 5_000))
        try store.applyServerChanges(ServerChanges(upserts: ["Note": rows]))
        let report = try store.runHousekeeping()
        #expect(report.oversizedRows["Note"] == 1)
        #expect(report.evictedRows["Note"] == 1, "the contract's 1 000 rows still hold")
        let kept = try store.all(Note.self).map(\.id)
        #expect(kept.count == 1_000 && !kept.contains("note-big"))
        #expect(try store.droppedRows(Note.self)["note-big"]?.reason == .tooLarge)
    }
}
