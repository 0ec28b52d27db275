import Foundation
import SyncClient

/// One device: its own SQLite files, store and sync engine, reopened from disk after a crash.
final class SimDevice {
    static let scopes = ["user", "team", "content"]

    let index: Int
    let user: String
    let deviceID: String
    let folder: URL
    let transport: SimTransport
    private let network: SimNetwork
    private let clock: SimClock.DeviceView
    private let randomSeed: UInt64
    private(set) var store: OfflineStore
    private(set) var engine: SyncEngine
    private(set) var restarts = 0

    /// What the invariants remember between steps: each queued write's last status, the writes
    /// the device was told are done, and the highest cursor position per scope.
    var lastStatus: [String: OutboxStatus] = [:]
    var toldDone: Set<String> = []
    var cursorSequences: [String: Int64] = [:]

    init(index: Int, user: String, deviceID: String, root: URL, network: SimNetwork, clock: SimClock.DeviceView, seed: UInt64) throws {
        self.index = index
        self.user = user
        self.deviceID = deviceID
        self.folder = root.appendingPathComponent(deviceID, isDirectory: true)
        self.network = network
        self.clock = clock
        self.randomSeed = seed
        transport = SimTransport(network: network, device: index, user: user, deviceID: deviceID)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        (store, engine) = try Self.open(folder: folder, user: user, deviceID: deviceID, clock: clock, seed: seed, transport: transport)
        armCrash()
    }

    private static func open(
        folder: URL, user: String, deviceID: String, clock: SimClock.DeviceView, seed: UInt64, transport: SimTransport
    ) throws -> (OfflineStore, SyncEngine) {
        let store = try OfflineStore(
            OfflineStoreConfiguration(
                databaseURL: folder.appendingPathComponent("outpost.sqlite"), tenantId: SimServer.tenant, userId: user, deviceId: deviceID,
                keyProvider: FileKeyProvider(directory: folder.appendingPathComponent("keys", isDirectory: true)), clock: clock,
                random: SeededRandomSource(seed: seed)
            )
        )
        // Small batches and pages, so a handful of writes already spans several requests.
        let engine = SyncEngine(
            store: store, transport: transport,
            configuration: SyncEngineConfiguration(
                scopes: scopes, pushBatchSize: 4, pullPageSize: 5, pullCommitRows: 8, retriesAutomatically: false
            )
        )
        return (store, engine)
    }

    /// A crash closes the database where the process stood: nothing more is written.
    private func armCrash() {
        let store = store
        network.onCrash(index) { try? store.close() }
    }

    /// The process dies and starts again: everything in memory is gone, the files stay.
    func restart() throws {
        try? store.close()
        restarts += 1
        (store, engine) = try Self.open(
            folder: folder, user: user, deviceID: deviceID, clock: clock, seed: randomSeed &+ UInt64(restarts), transport: transport
        )
        armCrash()
    }

    func close() { try? store.close() }
}
