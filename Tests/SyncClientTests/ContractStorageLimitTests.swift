import ContractRuntime
import Contracts
import Foundation
import LearningClient
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncClient

/// The storage limits a contract sets (`max_rows`, `max_row_bytes` in its sync block) are the
/// device's defaults; the app's limits override them field by field.
@Suite(.blockingWork) struct ContractStorageLimitTests {
    @Test func theDescriptorsLimitsAreTheDefaults() throws {
        let assessment = ContractStorageLimit(maxRows: ContractRegistry.assessment.maxRows, maxRowBytes: ContractRegistry.assessment.maxRowBytes)
        #expect(assessment == ContractStorageLimit(maxRows: 50, maxRowBytes: 10_000_000))
        let contracts = ContractCatalog(ContractRegistry.self)
        #expect(StorageLimits.contractDefaults(contracts) == ["Assessment": assessment])
        #expect(StorageLimits.standard.inForce(for: contracts) == ["Assessment": assessment])
        #expect(StorageLimits(minimumFreeBytes: 1_000).inForce(for: contracts) == ["Assessment": assessment])
        #expect(try TestStore().store.contractStorageLimits == ["Assessment": assessment])
    }

    @Test func theAppsLimitsOverrideTheContractsFieldByField() {
        let contracts = ContractCatalog(ContractRegistry.self)
        let limits = StorageLimits(contracts: [
            "Assessment": ContractStorageLimit(maxRows: 20),
            "Incident": ContractStorageLimit(maxRows: 1_000),
        ])
        #expect(limits.inForce(for: contracts)["Assessment"] == ContractStorageLimit(maxRows: 20, maxRowBytes: 10_000_000))
        #expect(limits.inForce(for: contracts)["Incident"] == ContractStorageLimit(maxRows: 1_000))

        var configured = StorageLimits.standard
        configured.contracts["Assessment"] = ContractStorageLimit(maxRowBytes: 2_000_000)
        #expect(configured.inForce(for: contracts)["Assessment"] == ContractStorageLimit(maxRows: 50, maxRowBytes: 2_000_000))
        configured.contracts["Assessment"] = .unlimited
        #expect(configured.inForce(for: contracts)["Assessment"] == .unlimited, "unlimited lifts the contract's limits")
    }

    private func assessment(_ id: String, prompt: Int = 10) -> JSONValue {
        Samples.wire(
            Assessment(
                id: id, title: "Quiz \(id)", questions: .array([.object(["prompt": .string(String(repeating: "x", count: prompt))])]),
                questionCount: 1, updatedAt: Samples.t0
            ))
    }

    @Test func housekeepingKeepsTheContractsFiftyAssessmentsByDefault() throws {
        let test = try TestStore()
        #expect(test.store.configuration.storageLimits == .standard)
        try test.store.applyServerChanges(ServerChanges(upserts: ["Assessment": (1...52).map { assessment("quiz-\($0)") }]))
        let report = try test.store.runHousekeeping()
        #expect(report.evictedRows["Assessment"] == 2)
        #expect(try test.store.all(Assessment.self).count == 50)
        #expect(try test.store.droppedRows(Assessment.self).values.allSatisfy { $0.reason == .evicted })
    }

    @Test func anAppsLargestRowReplacesTheContractsAndItsRowLimitStays() throws {
        let directory = try TemporaryDirectory()
        let clock = ManualClock(TestStore.start)
        var configuration = TestStore.configuration(directory: directory, clock: clock, keys: FileKeyProvider(directory: directory.keysURL))
        configuration.storageLimits = StorageLimits(contracts: ["Assessment": ContractStorageLimit(maxRowBytes: 2_000)])
        let store = try OfflineStore(configuration, contracts: ContractRegistry.self, extensions: [LearningStore()])
        var rows = (1...51).map { assessment("quiz-\($0)") }
        rows.append(assessment("quiz-big", prompt: 5_000))
        try store.applyServerChanges(ServerChanges(upserts: ["Assessment": rows]))
        let report = try store.runHousekeeping()
        #expect(report.oversizedRows["Assessment"] == 1)
        #expect(report.evictedRows["Assessment"] == 1, "the contract's 50 rows still hold")
        let kept = try store.all(Assessment.self).map(\.id)
        #expect(kept.count == 50 && !kept.contains("quiz-big"))
        #expect(try store.droppedRows(Assessment.self)["quiz-big"]?.reason == .tooLarge)
    }
}
