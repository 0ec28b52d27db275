import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncClient
import SyncProtocol
import SyncServer
import Testing

/// The engines' own contracts with `Activity` signed, as `signed: true` generates them.
private enum SignedActivityContracts: ContractSchema {
    static var scopes: [ScopeDescriptor] { ContractRegistry.scopes }
    static var entities: [EntityDescriptor] {
        ContractRegistry.entities.map { entity in
            var entity = entity
            entity.isSigned = entity.name == "Activity"
            return entity
        }
    }
    static var events: [EventDescriptor] { ContractRegistry.events }
    static var entityTypes: [any ContractEntity.Type] { ContractRegistry.entityTypes }
    static var eventTypes: [any ContractEvent.Type] { ContractRegistry.eventTypes }
    static var clientMigrations: [ContractMigration] { ContractRegistry.clientMigrations }
    static var serverMigrations: [ContractMigration] { ContractRegistry.serverMigrations }
    static var serverPostgresMigrations: [ContractMigration] { ContractRegistry.serverPostgresMigrations }
}

/// The client's side of device signatures, against the real server on loopback: the outbox
/// signs a signed contract's write when it is queued, the signature survives a restart, the
/// engine registers the key before pushing, and the server applies and audits the write.
@Suite("Device signing (client)", .blockingWork)
struct DeviceSigningTests {
    private func openStore(_ directory: TemporaryDirectory, key: (any DeviceSigningKey)?) throws -> OfflineStore {
        var configuration = OfflineStoreConfiguration(
            databaseURL: directory.databaseURL, tenantId: "acme", userId: "u-1", deviceId: "phone-1",
            keyProvider: FileKeyProvider(directory: directory.keysURL))
        configuration.deviceSigningKey = key
        return try OfflineStore(configuration, contracts: SignedActivityContracts.self)
    }

    /// The activities the tests write, by name: `act-1`, `act-2`.
    private static let ids = [
        "act-1": UUID(uuidString: "6f1c2a8e-4b5d-4e7f-9a0b-1c2d3e4f5a6b")!, "act-2": UUID(uuidString: "0a9b8c7d-6e5f-4a3b-8c1d-2e3f4a5b6c7d")!,
    ]

    /// The row id of an activity: its UUID in lower case.
    private static func rowID(_ name: String) -> String { ids[name]!.uuidString.lowercased() }

    private static func activity(_ name: String) -> ActivityRecord {
        ActivityRecord(
            id: ids[name]!, verb: .viewed, subjectId: "card-1", happenedAt: Timestamp(millisecondsSince1970: 1_767_225_000_000),
            happenedOn: CalendarDate(year: 2025, month: 12, day: 31))
    }

    @Test("a signed write queued, the app restarted, then synced: the key is registered, the write applied and its signature audited")
    func signedWriteSurvivesRestartAndApplies() async throws {
        try await LiveServer.run(contracts: SignedActivityContracts.self, apps: []) { server in
            let directory = try TemporaryDirectory()
            let keyFile = directory.url.appendingPathComponent("device-signing.key")
            let key = try SoftwareDeviceSigningKey(loadingOrCreatingAt: keyFile)
            do {
                let store = try openStore(directory, key: key)
                try store.create(Self.activity("act-1"))
                try store.close()
            }
            // The key file gives the same key back after the restart.
            let reopenedKey = try SoftwareDeviceSigningKey(loadingOrCreatingAt: keyFile)
            #expect(reopenedKey.publicKeyX963 == key.publicKeyX963)
            let store = try openStore(directory, key: reopenedKey)
            let engine = SyncEngine(store: store, transport: server.transport("phone-1"), configuration: .init(scopes: ["user"]))
            let result = await engine.syncNow()
            guard case .succeeded = result else {
                Issue.record("sync: \(result)")
                return
            }
            #expect(try store.outboxCounts().unsent == 0)
            let row = try await server.storage.read { reader in
                try await reader.row(in: ContractTable(ActivityRecord.descriptor), tenant: "acme", id: Self.rowID("act-1"))
            }
            #expect(row != nil)
            let keys = try await server.storage.read { reader in
                try await reader.serverTableQuery(
                    "SELECT fingerprint FROM device_keys WHERE user_id = ? AND device_id = ?", [.text("u-1"), .text("phone-1")])
            }
            #expect(keys.first?.text("fingerprint") == key.fingerprint)
            let auditKey = server.storage.auditKey
            let details = try await server.storage.read { reader in
                let entries = try await reader.auditEntries(after: 0, limit: 1000)
                return try await AuditChain.readableDetails(of: entries, in: reader, key: auditKey).compactMap { $0 }
            }
            let push = try #require(details.first { $0.contains("\"changes\"") }, "\(details)")
            #expect(push.contains("\"key_fingerprint\":\"\(reopenedKey.fingerprint)\""), "\(push)")
            #expect(push.contains("\"signature\":\""), "\(push)")
        }
    }

    @Test("in a background window the key's registration is one of the window's requests: not started when it does not fit, counted when it does")
    func registrationKeepsTheWindowsDeadline() async throws {
        try await LiveServer.run(contracts: SignedActivityContracts.self, apps: []) { server in
            let directory = try TemporaryDirectory()
            let key = try SoftwareDeviceSigningKey(loadingOrCreatingAt: directory.url.appendingPathComponent("device-signing.key"))
            let store = try openStore(directory, key: key)
            try store.create(Self.activity("act-1"))
            let engine = SyncEngine(
                store: store, transport: server.transport("phone-1"),
                configuration: .init(scopes: [], retriesAutomatically: false, usesLiveChannel: false))
            func registered() async throws -> Bool {
                try await !server.storage.read { reader in
                    try await reader.serverTableQuery(
                        "SELECT fingerprint FROM device_keys WHERE user_id = ? AND device_id = ?", [.text("u-1"), .text("phone-1")])
                }.isEmpty
            }

            // A window shorter than the margin and a request's estimate: nothing starts, the key neither.
            let short = await engine.syncInBackgroundWindow(until: Date().addingTimeInterval(1))
            #expect(short.stoppedForDeadline && short.requests == 0)
            #expect(short.remainingWrites == 1)
            #expect(try await !registered(), "the registration waited for a window with time for it")

            // A long one: the registration, then the push.
            let long = await engine.syncInBackgroundWindow(until: Date().addingTimeInterval(600))
            #expect(long.finished, "\(long)")
            #expect(long.requests == 2 && long.pushed == 1)
            #expect(try await registered())
            #expect(try store.outboxCounts().unsent == 0)
        }
    }

    @Test("a signed contract's write without a device signing key is refused at once, and nothing is queued")
    func signedWriteNeedsAKey() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory, key: nil)
        #expect(throws: OfflineStoreError.self) { try store.create(Self.activity("act-1")) }
        #expect(try store.outboxCounts().unsent == 0)
        // Unsigned contracts are written as before.
        try store.create(Card(id: "card-1", teamId: "team-1", boardId: "board-1", title: "Plan the launch", revision: 0))
        #expect(try store.outboxCounts().unsent == 1)
    }

    @Test("a server that no longer holds the key answers signature_invalid: the engine registers it again and the push goes through")
    func engineRegistersAgainAfterSignatureInvalid() async throws {
        try await LiveServer.run(contracts: SignedActivityContracts.self, apps: []) { server in
            let directory = try TemporaryDirectory()
            let store = try openStore(directory, key: SoftwareDeviceSigningKey())
            let engine = SyncEngine(store: store, transport: server.transport("phone-1"), configuration: .init(scopes: ["user"]))
            try store.create(Self.activity("act-1"))
            guard case .succeeded = await engine.syncNow() else {
                Issue.record("first sync")
                return
            }
            // The server lost the key (restored from a backup older than the registration).
            _ = try await server.storage.write { transaction in
                try await transaction.serverTableQuery("DELETE FROM device_keys RETURNING device_id", [])
            }
            try store.create(Self.activity("act-2"))
            let result = await engine.syncNow()
            guard case .succeeded = result else {
                Issue.record("second sync: \(result)")
                return
            }
            #expect(try store.outboxCounts().unsent == 0)
            let rows = try await server.storage.read { reader in
                try await reader.row(in: ContractTable(ActivityRecord.descriptor), tenant: "acme", id: Self.rowID("act-2"))
            }
            #expect(rows != nil)
            let registrations = try await server.storage.read { reader in
                try await reader.auditEntries(after: 0, limit: 1000).filter { $0.entity == "device_key" }.count
            }
            #expect(registrations == 2)
        }
    }
}
