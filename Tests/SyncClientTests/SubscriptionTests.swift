import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

@testable import SyncServer

/// Subscriptions on a device against the real server on loopback, on real SQLite files: a
/// device that does not sync the team scope subscribes to one incident, gets it with the asset
/// it names, follows its changes and its leaving, is refused another team's row, and lets rows
/// go only when their TTL passed and nothing else holds them.
@Suite("Subscriptions on a device", .blockingWork)
struct SubscriptionTests {
    /// The engine of a device that syncs only the user scope: team rows reach it through subscriptions alone.
    static func engine(_ store: OfflineStore, _ transport: any SyncTransport) -> SyncEngine {
        SyncEngine(
            store: store, transport: transport,
            configuration: SyncEngineConfiguration(scopes: ["user"], pullPageSize: 3, retriesAutomatically: false))
    }

    static func succeeded(_ result: SyncResult) -> Bool {
        if case .succeeded = result { return true }
        Issue.record("the sync failed: \(result)")
        return false
    }

    /// Writes an incident straight into the server's storage, as a push would.
    static func incident(
        _ server: LiveServer, _ id: String, team: String = "team-1", assignee: String? = nil, asset: String? = nil, title: String = "Broken"
    ) async throws {
        var fields: [String: JSONValue] = [
            "id": .string(id), "team_id": .string(team), "number": .string("INC-\(id)"), "short_description": .string(title),
            "state": .string("new"), "opened_at": .string("2026-01-31T08:00:00.000Z"), "updated_at": .string("2026-01-31T08:00:00.000Z"),
        ]
        if let assignee { fields["assignee_id"] = .string(assignee) }
        if let asset { fields["service_asset_id"] = .string(asset) }
        try await store(server, Contracts.Incident.descriptor, fields, scopeKey: "ops:team:\(team)")
    }

    static func serviceAsset(_ server: LiveServer, _ id: String, team: String = "team-1") async throws {
        try await store(
            server, ServiceAsset.descriptor,
            [
                "id": .string(id), "team_id": .string(team), "asset_tag": .string("TAG-\(id)"), "display_name": .string("Scooter \(id)"),
                "category": .string("vehicle"), "updated_at": .string("2026-01-31T08:00:00.000Z"),
            ], scopeKey: "ops:team:\(team)")
    }

    static func store(_ server: LiveServer, _ entity: EntityDescriptor, _ fields: [String: JSONValue], scopeKey: String) async throws {
        try await server.storage.write { transaction in
            var row = StoredRow()
            for field in entity.fields {
                row[field.name] = try RowCodec.columnValue(fields[field.name] ?? field.defaultValue ?? .null, for: field)
            }
            guard case .string(let id)? = fields[entity.primaryKey] else { return }
            let existing = try await transaction.row(in: ContractTable(entity), tenant: "acme", id: id)
            row["_tenant_id"] = .text("acme")
            row["_scope_key"] = .text(scopeKey)
            row["_seq"] = .integer(try await transaction.nextScopeSequence(tenant: "acme", scopeKey: scopeKey))
            row["_version"] = .integer((existing?.integer("_version") ?? 0) + 1)
            row["_schema_version"] = .integer(Int64(entity.currentVersion))
            row["_deleted"] = .integer(0)
            row["_updated_at"] = .integer(1_769_846_400_000)
            row["_updated_by"] = .text("test")
            try await transaction.upsert(row, in: ContractTable(entity))
        }
    }

    @Test("subscribing to one incident brings it and its asset, nothing else of the team; its changes and its leaving follow")
    func oneIncident() async throws {
        try await LiveServer.run { server in
            try await Self.serviceAsset(server, "sa-1")
            try await Self.incident(server, "i-1", asset: "sa-1")
            try await Self.incident(server, "i-2")
            let directory = try TemporaryDirectory()
            let store = try makeDeviceStore(directory, device: "d-1")
            let engine = Self.engine(store, server.transport("d-1"))

            let incident = try await engine.subscribe(Subscriptions.incident(id: "i-1"))
            try await incident.waitForFirstSync()
            #expect(try store.fetch(Contracts.Incident.self, id: "i-1")?.shortDescription == "Broken")
            #expect(try store.fetch(ServiceAsset.self, id: "sa-1") != nil)
            #expect(try store.fetch(Contracts.Incident.self, id: "i-2") == nil)
            let status = try #require(try incident.status)
            #expect(status.hasSynced && status.isActive && status.rowCount == 2 && status.lastSyncedAt != nil)
            #expect(status.priority == .high)

            // A change on the server comes with the next sync.
            try await Self.incident(server, "i-1", asset: "sa-1", title: "Brake lever loose")
            #expect(Self.succeeded(await engine.syncNow()))
            #expect(try store.fetch(Contracts.Incident.self, id: "i-1")?.shortDescription == "Brake lever loose")

            // Subscriptions survive a restart.
            let reopened = try makeDeviceStore(directory, device: "d-1")
            let again = try Self.engine(reopened, server.transport("d-1")).subscriptions()
            #expect(again.map(\.request) == [Subscriptions.incident(id: "i-1")])
            #expect(try again.first?.status?.hasSynced == true)
        }
    }

    @Test("a row that stops matching leaves the device, unless something else holds it")
    func leaves() async throws {
        try await LiveServer.run { server in
            try await Self.incident(server, "i-3", assignee: "u-1")
            try await Self.incident(server, "i-4", assignee: "u-1")
            let directory = try TemporaryDirectory()
            let store = try makeDeviceStore(directory, device: "d-1")
            let engine = Self.engine(store, server.transport("d-1"))
            let mine = try await engine.subscribe(Subscriptions.assignedIncidents())
            let pinned = try await engine.subscribe(Subscriptions.incident(id: "i-4"))
            try await mine.waitForFirstSync()
            try await pinned.waitForFirstSync()
            #expect(try store.count(Contracts.Incident.self) == 2)
            #expect(try mine.status?.priority == .critical)

            try await Self.incident(server, "i-3", assignee: "u-9")
            try await Self.incident(server, "i-4", assignee: "u-9")
            #expect(Self.succeeded(await engine.syncNow()))
            #expect(try store.fetch(Contracts.Incident.self, id: "i-3") == nil, "left the subscription, held by nothing")
            #expect(try store.fetch(Contracts.Incident.self, id: "i-4")?.assigneeId == "u-9", "still held by its own subscription")
            #expect(try mine.status?.rowCount == 0)
        }
    }

    @Test("another team's incident is refused with a typed error, and nothing of it is kept")
    func forbidden() async throws {
        try await LiveServer.run { server in
            try await Self.incident(server, "i-9", team: "team-2")
            let directory = try TemporaryDirectory()
            let store = try makeDeviceStore(directory, device: "d-1")
            let engine = Self.engine(store, server.transport("d-1"))
            let stolen = try await engine.subscribe(Subscriptions.incident(id: "i-9"))
            await #expect(throws: SubscriptionError.self) { try await stolen.waitForFirstSync() }
            do {
                try await stolen.waitForFirstSync()
            } catch let error as SubscriptionError {
                #expect(error == .notFound(id: stolen.id), "the refused subscription is gone once read")
            }
            #expect(try store.fetch(Contracts.Incident.self, id: "i-9") == nil)
            #expect(try store.subscriptions().isEmpty)
            // Checked before anything is stored: an unknown subscription, a missing parameter.
            await #expect(throws: SubscriptionError.self) { _ = try await engine.subscribe(SubscriptionRequest(name: "everything")) }
            await #expect(throws: SubscriptionError.self) { _ = try await engine.subscribe(SubscriptionRequest(name: "incident")) }
            #expect(try store.subscriptions().isEmpty)
        }
    }

    @Test("after unsubscribing, rows stay until the TTL passes, then go unless a queued write or another subscription holds them")
    func eviction() async throws {
        let clock = ManualClock()
        try await LiveServer.run(clock: DeviceFollowingClock(device: clock)) { server in
            for id in ["i-1", "i-2", "i-3"] { try await Self.incident(server, id, assignee: id == "i-3" ? "u-1" : nil) }
            let directory = try TemporaryDirectory()
            let store = try makeDeviceStore(directory, device: "d-1", clock: clock)
            let engine = Self.engine(store, server.transport("d-1"))
            let one = try await engine.subscribe(Subscriptions.incident(id: "i-1"), ttl: .seconds(60))
            let two = try await engine.subscribe(Subscriptions.incident(id: "i-2"), ttl: .seconds(60))
            let three = try await engine.subscribe(Subscriptions.incident(id: "i-3"), ttl: .seconds(60))
            let mine = try await engine.subscribe(Subscriptions.assignedIncidents())
            for handle in [one, two, three, mine] { try await handle.waitForFirstSync() }
            for handle in [one, two, three] { try await handle.unsubscribe() }
            // A write of i-2 waits in the outbox (the engine does not push it here).
            var edited = try #require(try store.fetch(Contracts.Incident.self, id: "i-2"))
            edited.shortDescription = "Edited offline"
            _ = try store.update(edited)

            // Within the TTL everything stays readable.
            clock.advance(by: 30)
            #expect(try store.expireSubscriptions(wholeScopes: []) == 0)
            #expect(try store.count(Contracts.Incident.self) == 3)
            #expect(try one.status?.isActive == false)

            clock.advance(by: 31)
            #expect(try store.expireSubscriptions(wholeScopes: []) == 1)
            #expect(try store.fetch(Contracts.Incident.self, id: "i-1") == nil, "expired, held by nothing")
            #expect(try store.fetch(Contracts.Incident.self, id: "i-2")?.shortDescription == "Edited offline", "a queued write keeps it")
            #expect(try store.fetch(Contracts.Incident.self, id: "i-3") != nil, "assigned_incidents still holds it")
            #expect(try store.subscriptions().map(\.request) == [Subscriptions.assignedIncidents()])

            // Subscribing again to an ended one makes it active again rather than a second one.
            let back = try await engine.subscribe(Subscriptions.assignedIncidents())
            #expect(back.id == mine.id)
        }
    }

    @Test("more subscriptions than one request carries are pulled in several")
    func manySubscriptions() async throws {
        try await LiveServer.run { server in
            for index in 0..<70 { try await Self.incident(server, "i-\(index)") }
            let directory = try TemporaryDirectory()
            let store = try makeDeviceStore(directory, device: "d-1")
            let engine = Self.engine(store, server.transport("d-1"))
            var handles: [SubscriptionHandle] = []
            for index in 0..<70 { handles.append(try await engine.subscribe(Subscriptions.incident(id: "i-\(index)"))) }
            #expect(Self.succeeded(await engine.syncNow()))
            #expect(try store.count(Contracts.Incident.self) == 70)
            #expect(try handles.allSatisfy { try $0.status?.hasSynced == true })
        }
    }
}
