import ContractRuntime
import Contracts
import Foundation
import LearningClient
import OutpostTestSupport
import SampleServerApps
import SyncClient
import SyncProtocol
import SyncServer
import Testing

/// The real sync server on a loopback port, for the duration of `body`.
struct LiveServer: Sendable {
    static let secret = Data(repeating: 7, count: 32)

    let url: URL
    let signer: TokenSigner
    let storage: any SyncStorage
    /// What an admin publishes with (see `LiveServer+Content.swift`).
    let content: SampleContentService
    /// The server's clock: the system's, or one that follows a device's manual clock.
    let clock: any ServerClock

    /// A device token for `device` of user `user` in tenant `acme`, member of `team-1`, issued
    /// now by the server's clock.
    func token(_ device: String, user: String = "u-1") -> String {
        signer.token(tenant: "acme", user: user, device: device, teams: ["team-1"], now: clock.now().millisecondsSince1970 / 1000)
    }

    /// A transport for `device` talking to this server; each request gets a token of the
    /// server's time, so a server clock moved days ahead does not expire it.
    func transport(_ device: String, user: String = "u-1") -> URLSessionTransport {
        // Generous: in the full parallel run, synchronous suites can hold the few cooperative threads
        // this process's server answers on for a minute.
        URLSessionTransport(baseURL: url, timeout: 120) { [self] in token(device, user: user) }
    }

    /// Starts a server on a fresh folder (SQLite, or a fresh PostgreSQL schema for `kind`
    /// `.postgres`), runs `body`, stops it and removes the folder.
    /// - Parameters:
    ///   - kind: the server's storage.
    ///   - clock: the server's clock; a test that moves a device's clock by hours or
    ///     days moves the server's with it (``DeviceFollowingClock``), as time passes for both.
    ///   - contracts: the server's contracts (the sample's, or a test's variant of them).
    ///   - apps: the apps the server runs (the sample's; none for the engines' own contracts,
    ///     see ``LiveServer/engine(_:configuration:clock:_:)``).
    static func run(
        _ kind: StorageKind = .sqlite, configuration: ServerConfiguration = ServerConfiguration(port: 0, rateLimit: nil),
        clock: any ServerClock = SyncServer.SystemClock(),
        contracts: any ContractSchema.Type = ContractRegistry.self, apps: [any ServerApp] = SampleServerApps.all,
        _ body: @Sendable (LiveServer) async throws -> Void
    ) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("live-server-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = try await kind.makeStorage(in: folder, contracts: contracts)
        // The server authorizes team scopes by the memberships it holds: u-1 is in team-1.
        _ = try await storage.write { try await $0.setTeamMembership(tenant: "acme", team: "team-1", userID: "u-1", isMember: true) }
        let signer = try TokenSigner(secret: secret)
        let environment = ServerEnvironment(storage: storage, signer: signer, clock: clock, apps: apps)
        try await LoopbackServer.run(configuration: configuration, environment: environment) { server in
            try await body(
                LiveServer(
                    url: server.url, signer: signer, storage: storage, content: SampleContentService(storage: storage, clock: clock),
                    clock: clock
                )
            )
        }
    }
}

/// A server clock that reads a device's manual clock: the server and the device agree on the
/// time, and a test moving the device's clock moves the server's too.
struct DeviceFollowingClock: ServerClock {
    let device: ManualClock

    func now() -> Timestamp { Timestamp(millisecondsSince1970: Int64((device.now().timeIntervalSince1970 * 1000).rounded())) }
}

/// A device's store on a real SQLite file (user `u-1` of tenant `acme`), with its own clock.
func makeDeviceStore(_ directory: TemporaryDirectory, device: String, clock: any DeviceClock = SystemClock()) throws -> OfflineStore {
    try OfflineStore(
        OfflineStoreConfiguration(
            databaseURL: directory.databaseURL, tenantId: "acme", userId: "u-1", deviceId: device,
            keyProvider: FileKeyProvider(directory: directory.keysURL), clock: clock
        ), contracts: ContractRegistry.self, extensions: [LearningStore()]
    )
}
