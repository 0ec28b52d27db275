import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import SyncServer
import Testing

@testable import SyncClient

/// The one retention case still on the sample's contracts: a row kept past its retention while
/// an event that applies to it waits for the server. It needs a contract with a `retention` that
/// an event `applies_to` (`ServiceAsset`, 7 days, and `BatterySwapCompleted`); the engines' own
/// contracts have none (their events apply to `Card` and `Profile`, which keep rows for good).
/// The rest of the retention suite is `RowRetentionTests`, on the engines' own contracts.
@Suite(.blockingWork) struct RowRetentionEventTests {
    static let day: TimeInterval = 86_400

    func engine(_ store: OfflineStore, _ transport: any SyncTransport) -> SyncEngine {
        SyncEngine(store: store, transport: transport, configuration: SyncEngineConfiguration(scopes: ["team"], retriesAutomatically: false))
    }

    func asset(_ id: String) -> ServiceAsset {
        ServiceAsset(id: id, teamId: "team-1", assetTag: id.uppercased(), displayName: "Asset \(id)", category: .tool, updatedAt: Samples.t0)
    }

    @Test func aRowAnEventWaitsToApplyToIsKeptPastItsRetention() async throws {
        let clock = ManualClock(Date())
        // The days pass for the server too: it takes no event dated after its receipt.
        try await LiveServer.run(clock: DeviceFollowingClock(device: clock)) { server in
            // Held until the end: the folder is deleted when it is released, under the open store.
            let storeFolder = try TemporaryDirectory()
            defer { withExtendedLifetime(storeFolder) {} }
            let store = try makeDeviceStore(storeFolder, device: "d-1", clock: clock)
            try store.create(asset("sa-1"))
            try store.create(asset("sa-2"))
            guard case .succeeded = await engine(store, server.transport("d-1")).syncNow() else { Issue.record("sync"); return }
            clock.advance(by: 8 * Self.day)
            // BatterySwapCompleted applies_to ServiceAsset: while one waits for the server, the
            // asset it names stays.
            _ = try store.record(
                BatterySwapCompleted(
                    teamId: "team-1", serviceAssetId: "sa-1", removedBatterySerial: "B-1", installedBatterySerial: "B-2",
                    chargeBefore: 0.1, chargeAfter: 0.9, durationSeconds: 120
                )
            )
            #expect(try store.runHousekeeping().expiredRows == ["ServiceAsset": 1])
            #expect(try store.fetch(ServiceAsset.self, id: "sa-1") != nil)
            #expect(try store.fetch(ServiceAsset.self, id: "sa-2") == nil)
            // Once the server has it, the asset ages again from its last arrival.
            guard case .succeeded = await engine(store, server.transport("d-1")).syncNow() else { Issue.record("sync"); return }
            clock.advance(by: 8 * Self.day)
            #expect(try store.runHousekeeping().expiredRows == ["ServiceAsset": 1])
            #expect(try store.fetch(ServiceAsset.self, id: "sa-1") == nil)
        }
    }
}
