import ContractRuntime
import Contracts
import Foundation
import LearningClient
import SyncClient
import SyncProtocol

/// One device: its own SQLite files, store and sync engine, reopened from disk after a crash.
final class SimDevice {
    /// The scopes a device syncs whole.
    static let scopes = ["user", "team", "content"]
    /// Those of a device that syncs no team scope: the team's rows it holds are those its
    /// subscriptions select (and those its unsynced writes keep).
    static let subscriberScopes = ["user", "content"]

    /// What the device subscribed to, as the simulator remembers it (the store must agree):
    /// each subscription's TTL and, once ended, when (the device's clock, in milliseconds).
    struct Subscribed {
        var request: SubscriptionRequest
        var ttlSeconds: Int64
        var endedAt: Int64?

        /// Whether its TTL has passed at `now` (the store deletes it then, at its next sync or housekeeping).
        func hasExpired(at now: Int64) -> Bool { endedAt.map { $0 + ttlSeconds * 1000 <= now } ?? false }

        /// The key the store tells subscriptions apart by: name, parameters, scope.
        static func key(_ request: SubscriptionRequest) -> String {
            let parameters = request.parameters.keys.sorted().map { "\($0)=\(request.parameters[$0]!)" }
            return ([request.name, request.scope ?? "-"] + parameters).joined(separator: " ")
        }
    }

    let index: Int
    let user: String
    let deviceID: String
    /// The scopes its engine syncs whole (``scopes``, or ``subscriberScopes``).
    let scopes: [String]
    let folder: URL
    let transport: SimTransport
    private let network: SimNetwork
    private let clock: SimClock.DeviceView
    private let randomSeed: UInt64
    /// What the device may keep (`nil`: the contracts' own limits).
    let limits: StorageLimits?
    private(set) var store: OfflineStore
    private(set) var engine: SyncEngine
    private(set) var restarts = 0
    /// The live channel open now, and the pokes the network holds back for later.
    var live: SimLiveChannel?
    var heldPokes: [LiveEvent] = []
    /// Whether the device is revoked and not enrolled again.
    var isRevoked = false

    /// What the invariants remember between steps: each queued write's last status, the writes
    /// the device was told are done, and the highest cursor position per scope.
    var lastStatus: [String: OutboxStatus] = [:]
    var toldDone: Set<String> = []
    var cursorSequences: [String: Int64] = [:]
    /// The subscriptions it made, by ``Subscribed/key(_:)``.
    var subscribed: [String: Subscribed] = [:]
    /// The rows (`entity id`) on the device whose writes were not on the server at the last check.
    var rowsHeldByWrites: Set<String> = []
    /// The team's rows (`entity id`) on a device that syncs no team scope at the last check.
    var teamRowsSeen: Set<String> = []

    /// Whether the device syncs no team scope (only subscriptions bring it the team's rows).
    var isSubscriber: Bool { !scopes.contains("team") }

    init(
        index: Int, user: String, deviceID: String, root: URL, network: SimNetwork, clock: SimClock.DeviceView, seed: UInt64,
        limits: StorageLimits? = nil, renewsErasedSessions: Bool = false, scopes: [String] = SimDevice.scopes
    ) throws {
        self.index = index
        self.user = user
        self.deviceID = deviceID
        self.scopes = scopes
        self.folder = root.appendingPathComponent(deviceID, isDirectory: true)
        self.network = network
        self.clock = clock
        self.randomSeed = seed
        self.limits = limits
        transport = SimTransport(network: network, device: index, user: user, deviceID: deviceID, renewsErasedSessions: renewsErasedSessions)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        (store, engine) = try Self.open(
            folder: folder, user: user, deviceID: deviceID, clock: clock, seed: seed, transport: transport, limits: limits, scopes: scopes
        )
        armCrash()
    }

    /// The database files a wipe must remove.
    var databaseFiles: [URL] {
        let database = folder.appendingPathComponent("outpost.sqlite")
        return ["", "-wal", "-shm"].map { URL(fileURLWithPath: database.path + $0) }
    }

    private static func open(
        folder: URL, user: String, deviceID: String, clock: SimClock.DeviceView, seed: UInt64, transport: SimTransport,
        limits: StorageLimits?, scopes: [String]
    ) throws -> (OfflineStore, SyncEngine) {
        var configuration = OfflineStoreConfiguration(
            databaseURL: folder.appendingPathComponent("outpost.sqlite"), tenantId: SimServer.tenant, userId: user, deviceId: deviceID,
            keyProvider: FileKeyProvider(directory: folder.appendingPathComponent("keys", isDirectory: true)), clock: clock,
            random: SeededRandomSource(seed: seed)
        )
        // The volume's real free space would differ between runs: a fixed, ample figure.
        configuration.freeSpace = SimFreeSpace()
        if let limits { configuration.storageLimits = limits }
        let store = try OfflineStore(configuration, contracts: ContractRegistry.self, extensions: [LearningStore()])
        // Small batches and pages, so a handful of writes already spans several requests.
        let engine = SyncEngine(
            store: store, transport: transport,
            configuration: SyncEngineConfiguration(
                scopes: scopes, pushBatchSize: 4, pullPageSize: 5, pullCommitRows: 8, retriesAutomatically: false
            )
        )
        return (store, engine)
    }

    /// Subscribes through the engine, and remembers it.
    func subscribe(_ request: SubscriptionRequest, ttlSeconds: Int) async throws {
        _ = try await engine.subscribe(request, ttl: .seconds(ttlSeconds))
        subscribed[Subscribed.key(request)] = Subscribed(request: request, ttlSeconds: Int64(ttlSeconds), endedAt: nil)
    }

    /// Ends one of its subscriptions (its rows stay for its TTL), and remembers when.
    func unsubscribe(_ status: SubscriptionStatus) throws {
        let now = store.now().millisecondsSince1970
        try store.unsubscribeSubscription(id: status.id)
        let key = Subscribed.key(status.request)
        var entry = subscribed[key] ?? Subscribed(request: status.request, ttlSeconds: Int64(status.ttl.components.seconds), endedAt: nil)
        entry.endedAt = entry.endedAt ?? now
        subscribed[key] = entry
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
            folder: folder, user: user, deviceID: deviceID, clock: clock, seed: randomSeed &+ UInt64(restarts), transport: transport,
            limits: limits, scopes: scopes
        )
        armCrash()
    }

    /// After its store was wiped (the user's data erased), the user signs in again: a new,
    /// empty store on the same files and a fresh token; what the invariants remembered of the
    /// old store goes with it.
    func signInAgain() throws {
        live?.close()
        live = nil
        heldPokes = []
        transport.enrol()
        transport.beginSession()
        lastStatus = [:]
        toldDone = []
        cursorSequences = [:]
        subscribed = [:]
        rowsHeldByWrites = []
        teamRowsSeen = []
        try restart()
    }

    func close() {
        live?.close()
        try? store.close()
    }
}

/// A volume with ample room, the same in every run.
struct SimFreeSpace: FreeSpaceProvider {
    func availableBytes(at url: URL) -> Int64? { 50_000_000_000 }
}
