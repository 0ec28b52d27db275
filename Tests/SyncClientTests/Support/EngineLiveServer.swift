import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncClient
import SyncProtocol
import SyncServer

/// The real sync server on the engines' own contracts (`EngineTestContracts`), with no apps: what
/// the engine suites sync against, so a change to the sample's contracts or apps never reaches
/// them. A file using it imports `EngineTestContracts`, never `Contracts`.
extension LiveServer {
    /// Starts a server on the engines' own contracts (SQLite, or a fresh PostgreSQL schema for
    /// `kind` `.postgres`), runs `body` and stops it; ``LiveServer/run(_:configuration:clock:contracts:apps:_:)``
    /// otherwise.
    static func engine(
        _ kind: StorageKind = .sqlite, configuration: ServerConfiguration = ServerConfiguration(port: 0, rateLimit: nil),
        clock: any ServerClock = SyncServer.SystemClock(), _ body: @Sendable (LiveServer) async throws -> Void
    ) async throws {
        try await run(kind, configuration: configuration, clock: clock, contracts: ContractRegistry.self, apps: [], body)
    }

    /// Publishes (creates or replaces) a row of a read-only scope (`Label`) as an admin, through the
    /// engine's own content service; returns the stored row in wire form.
    @discardableResult
    func publish(_ entity: String, _ row: [String: JSONValue], urgent: Bool = false) async throws -> JSONValue {
        try await ContentService(storage: storage, clock: clock).publish(entity: entity, row: .object(row), identity: Self.admin, urgent: urgent)
    }

    /// Deletes a row of a read-only scope as an admin: a tombstone devices receive.
    func unpublish(_ entity: String, id: String, urgent: Bool = false) async throws {
        try await ContentService(storage: storage, clock: clock).delete(entity: entity, id: id, identity: Self.admin, urgent: urgent)
    }
}

/// A device's store on a real SQLite file (user `u-1` of tenant `acme`) on the engines' own
/// contracts, with its own clock.
func makeEngineDeviceStore(_ directory: TemporaryDirectory, device: String, clock: any DeviceClock = SystemClock()) throws -> OfflineStore {
    try OfflineStore(
        OfflineStoreConfiguration(
            databaseURL: directory.databaseURL, tenantId: "acme", userId: "u-1", deviceId: device,
            keyProvider: FileKeyProvider(directory: directory.keysURL), clock: clock
        ), contracts: ContractRegistry.self
    )
}
