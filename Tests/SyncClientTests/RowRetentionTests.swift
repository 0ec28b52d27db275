import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import SyncServer
import Testing

@testable import SyncClient

/// The contracts' `retention` on a device, against the real server: `ServiceAsset` keeps synced
/// rows 7 days, `Incident` 14 days, `Unit` forever. Rows with a write not yet on the server,
/// and pinned rows, are never dropped; dropped rows come back when the app asks.
@Suite(.blockingWork) struct RowRetentionTests {
    static let day: TimeInterval = 86_400

    func engine(_ store: OfflineStore, _ transport: any SyncTransport, scopes: [String] = ["team"]) -> SyncEngine {
        SyncEngine(
            store: store, transport: transport, configuration: SyncEngineConfiguration(scopes: scopes, retriesAutomatically: false)
        )
    }

    func asset(_ id: String) -> ServiceAsset {
        ServiceAsset(id: id, teamId: "team-1", assetTag: id.uppercased(), displayName: "Asset \(id)", category: .tool, updatedAt: Samples.t0)
    }

    @Test func syncedRowsPastTheirRetentionAreDroppedAfterASyncAndWhenTheStoreOpens() async throws {
        try await LiveServer.run { server in
            let directory = try TemporaryDirectory()
            let clock = ManualClock(Date())
            var store = try makeDeviceStore(directory, device: "d-1", clock: clock)
            let transport = server.transport("d-1")
            for id in ["sa-old", "sa-pinned", "sa-edited"] { try store.create(asset(id)) }
            try store.create(Samples.incident("inc-1", priority: .high, openedAt: 1_000))
            guard case .succeeded = await engine(store, transport).syncNow() else { Issue.record("first sync"); return }
            try store.pin(ServiceAsset.self, id: "sa-pinned")

            // Eight days on: a write waits for the server on sa-edited (no sync yet).
            clock.advance(by: 8 * Self.day)
            try store.patch(ServiceAsset.self, id: "sa-edited", [.displayName("Edited offline")])

            // Reopening (as after an app launch) drops what outlived its retention.
            try store.close()
            store = try makeDeviceStore(directory, device: "d-1", clock: clock)
            #expect(try store.fetch(ServiceAsset.self, id: "sa-old") == nil)
            #expect(try store.fetch(ServiceAsset.self, id: "sa-pinned") != nil)
            #expect(try store.fetch(ServiceAsset.self, id: "sa-edited")?.displayName == "Edited offline")
            #expect(try store.fetch(Incident.self, id: "inc-1") != nil, "14 days of retention: kept after 8")
            #expect(Set(try store.droppedRows(ServiceAsset.self).keys) == ["sa-old"])

            // The edit reaches the server; the next sync does not bring sa-old back (unchanged).
            guard case .succeeded = await engine(store, transport).syncNow() else { Issue.record("second sync"); return }
            #expect(try store.fetch(ServiceAsset.self, id: "sa-old") == nil)
            #expect(try store.fetch(ServiceAsset.self, id: "sa-edited") != nil, "just acknowledged: its age starts again")

            // Fifteen days after the first sync, a sync drops the incident too.
            clock.advance(by: 7 * Self.day)
            guard case .succeeded = await engine(store, transport).syncNow() else { Issue.record("third sync"); return }
            #expect(try store.fetch(Incident.self, id: "inc-1") == nil)
            #expect(try store.fetch(ServiceAsset.self, id: "sa-pinned") != nil, "pinned rows stay")

            // Unpinned, it goes at the next housekeeping.
            try store.unpin(ServiceAsset.self, id: "sa-pinned")
            let report = try store.runHousekeeping()
            #expect(report.expiredRows["ServiceAsset"] == 1)
            #expect(try store.fetch(ServiceAsset.self, id: "sa-pinned") == nil)
        }
    }

    @Test func aDroppedRowComesBackWhenTheServerChangesItOrTheAppAsks() async throws {
        try await LiveServer.run { server in
            let clock = ManualClock(Date())
            let device = try TemporaryDirectory(), other = try TemporaryDirectory()
            let store = try makeDeviceStore(device, device: "d-1", clock: clock)
            let otherStore = try makeDeviceStore(other, device: "d-2")
            try store.create(asset("sa-1"))
            try store.create(asset("sa-2"))
            guard case .succeeded = await engine(store, server.transport("d-1")).syncNow() else { Issue.record("sync"); return }
            clock.advance(by: 8 * Self.day)
            #expect(try store.runHousekeeping().expiredRows["ServiceAsset"] == 2)

            // Another device changes sa-1 on the server: the next pull brings it back.
            guard case .succeeded = await engine(otherStore, server.transport("d-2")).syncNow() else { Issue.record("d-2"); return }
            try otherStore.patch(ServiceAsset.self, id: "sa-1", [.displayName("Renamed")])
            guard case .succeeded = await engine(otherStore, server.transport("d-2")).syncNow() else { Issue.record("d-2"); return }
            guard case .succeeded = await engine(store, server.transport("d-1")).syncNow() else { Issue.record("d-1"); return }
            #expect(try store.fetch(ServiceAsset.self, id: "sa-1")?.displayName == "Renamed")
            #expect(try store.fetch(ServiceAsset.self, id: "sa-2") == nil)
            #expect(Set(try store.droppedRows(ServiceAsset.self).keys) == ["sa-2"])

            // The app asks for sa-2: a read-through fetches it from the server again.
            let fetcher = ScopeFetcher(store: store, transport: server.transport("d-1"), scope: "team")
            guard case .fetched(let again) = try await store.fetch(ServiceAsset.self, id: "sa-2", from: fetcher) else {
                Issue.record("read-through of a dropped row")
                return
            }
            #expect(again.id == "sa-2")
            #expect(try store.droppedRows(ServiceAsset.self).isEmpty)
        }
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

    @Test func aContractWithoutTombstonesRefusesADeleteOnTheDevice() throws {
        var entity = ServiceAsset.descriptor
        entity.tombstones = false
        #expect(
            throws: OfflineStoreError.notWritable(
                contract: "ServiceAsset", reason: "its rows are never deleted (tombstones: false): no deletion could reach other devices"
            )
        ) {
            try OfflineStore.requireWritable(entity, .delete)
        }
        try OfflineStore.requireWritable(entity, .update)
        try OfflineStore.requireWritable(ServiceAsset.descriptor, .delete)
    }

    @Test func rowsWithoutRetentionOrNeverAcknowledgedStay() throws {
        let test = try TestStore()
        try test.store.applyServerChanges(Samples.everything)
        try test.store.create(asset("sa-local"))
        test.clock.advance(by: 400 * Self.day)
        let report = try test.store.runHousekeeping()
        // Units (retention forever), attempts (none) stay; the unpushed asset stays; the synced
        // asset and the incidents (7 and 14 days) go.
        #expect(try test.store.all(Unit.self).count == Samples.units.count)
        #expect(try test.store.all(Attempt.self).count == Samples.attempts.count)
        #expect(try test.store.fetch(ServiceAsset.self, id: "sa-local") != nil)
        #expect(try test.store.fetch(ServiceAsset.self, id: Samples.serviceAsset.id) == nil)
        #expect(report.expiredRows == ["ServiceAsset": 1, "Incident": Samples.incidents.count])
    }

    @Test func acknowledgedOutboxEntriesArePrunedAfterTheirRetentionWhileOthersStay() async throws {
        try await LiveServer.run { server in
            let directory = try TemporaryDirectory()
            let clock = ManualClock(Date())
            let store = try makeDeviceStore(directory, device: "d-1", clock: clock)
            try store.create(asset("sa-1"))
            guard case .succeeded = await engine(store, server.transport("d-1")).syncNow() else { Issue.record("sync"); return }
            try store.patch(ServiceAsset.self, id: "sa-1", [.displayName("Not sent yet")])
            #expect(try store.outboxCounts()[.done] == 1)

            clock.advance(by: 6 * Self.day)
            #expect(try store.runHousekeeping().prunedOutboxEntries == 0, "7 days by default")
            clock.advance(by: 2 * Self.day)
            #expect(try store.runHousekeeping().prunedOutboxEntries == 1)
            #expect(try store.outboxCounts()[.done] == 0)
            #expect(try store.outboxCounts()[.pending] == 1, "a write not yet sent is never pruned")
            // The server's audit still holds the pruned write.
            let key = server.storage.auditKey
            let changes = try await server.storage.read { reader in
                let entries = try await reader.auditEntries(after: 0, limit: 100)
                return try await zip(entries, AuditChain.readableDetails(of: entries, in: reader, key: key)).flatMap { entry, text in
                    try AuditedChange.changes(of: entry, readableDetail: text ?? "{}")
                }
            }
            #expect(changes.contains { $0.rowID == "sa-1" })
        }
    }
}

/// A read-through fetcher over the real server: pulls a scope from the start and hands back
/// the page rows of the requested contract, as an app's own fetcher would.
struct ScopeFetcher: RemoteFetcher {
    let store: OfflineStore
    let transport: any SyncTransport
    let scope: String

    func fetch(_ request: RemoteFetchRequest) async throws -> ServerChanges {
        var cursor: String?
        // No scope key and no cursor: what a read-through stores must not move the scope's cursor.
        var found = ServerChanges()
        while true {
            let page: PullResponse
            do {
                page = try PullResponse(
                    json: try await transport.pull(
                        scope: scope, cursor: cursor, limit: nil, schema: store.schemaVersions, clientID: store.identity.clientId
                    ))
            } catch TransportError.network {
                throw RemoteFetchFailure.offline
            }
            let changes = ServerChanges(pull: page, scopeKey: scope)
            found.schemaVersions = changes.schemaVersions
            for row in changes.upserts[request.contract] ?? [] {
                guard case .object(let fields) = row, request.id == nil || fields["id"] == .string(request.id ?? "") else { continue }
                found.upserts[request.contract, default: []].append(row)
            }
            guard page.hasMore else { return found }
            cursor = page.cursor
        }
    }
}
