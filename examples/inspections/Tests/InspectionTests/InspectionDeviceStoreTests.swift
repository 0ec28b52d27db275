import ContractRuntime
import Foundation
import InspectionContracts
import SyncClient
import Testing

/// The device's store given the example's contracts alone: it holds no table of the sample
/// contracts (no `units`, `lessons`, `content_assets`), and nothing it does on its own when it
/// opens or keeps itself bounded may assume it does.
@Suite struct InspectionDeviceStoreTests {
    /// A volume with no room left: the store's emergency clean-up runs on every housekeeping pass.
    struct FullVolume: FreeSpaceProvider {
        func availableBytes(at url: URL) -> Int64? { 0 }
    }

    @Test func opensAndKeepsItselfBoundedWithoutTheSampleContracts() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("inspection-store-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let configuration = OfflineStoreConfiguration(
            databaseURL: folder.appendingPathComponent("store.sqlite"), tenantId: "acme", userId: "inspector-a", deviceId: "tablet-a",
            keyProvider: FileKeyProvider(directory: folder.appendingPathComponent("keys", isDirectory: true)), freeSpace: FullVolume()
        )
        // Opening runs housekeeping, the clean-up of a full volume included.
        let store = try OfflineStore(configuration, contracts: ContractRegistry.self)
        try store.create(Inspection(id: "insp-1", teamId: "crew-1", siteName: "Pump station 4", updatedAt: Timestamp(Date())))

        let report = try store.runHousekeeping()
        #expect(report.reclaimed.isEmpty, "no extension to free space: nothing of another app's is touched")
        #expect(try store.fetch(Inspection.self, id: "insp-1")?.siteName == "Pump station 4", "a write not yet on the server stays")
        try store.close()

        // And again, on a file it made before.
        let reopened = try OfflineStore(configuration, contracts: ContractRegistry.self)
        #expect(try reopened.count(Inspection.self) == 1)
        try reopened.close()
    }
}
