import ContractRuntime
import Contracts
import Foundation
import LearningClient
import SyncClient
import SyncClientNIO
import SyncProtocol

/// A logged-in device: its login, its open store and its network.
struct DeviceSession {
    let home: DeviceHome
    let profile: DeviceProfile
    let clock: ShiftedClock
    let store: OfflineStore
    let network: DeviceNetwork

    init(home: DeviceHome, clock: ShiftedClock) throws(DeviceFailure) {
        self.home = home
        self.clock = clock
        profile = try home.profile()
        store = try Self.openStore(home: home, profile: profile, clock: clock)
        network = DeviceNetwork(
            server: URLSessionTransport(
                baseURL: profile.server, timeout: 20, tokenProvider: ProfileTokens(home: home, profile: profile), appVersion: profile.appVersion,
                telemetry: profile.sendsTelemetry == true ? store.telemetry : nil, exchange: try Self.pinnedExchange(profile.publicKeyPins)),
            home: home
        )
    }

    /// The pinned connections of a login with pins (`login --pin-sha256`), `nil` without.
    /// They trust the system's roots and the CA certificates of the PEM file
    /// `OUTPOST_CA_FILE` names, when set (a private CA).
    static func pinnedExchange(_ pins: [String]?, timeout: Duration = .seconds(20)) throws(DeviceFailure) -> PinnedHTTPSExchange? {
        guard let pins, !pins.isEmpty else { return nil }
        do {
            let extraRoots = ProcessInfo.processInfo.environment[certificateAuthorityVariable].map { [URL(fileURLWithPath: $0)] } ?? []
            return try PinnedHTTPSExchange(pins: PublicKeyPins(sha256: pins), additionalTrustRoots: extraRoots, timeout: timeout)
        } catch let error as PublicKeyPinsError {
            throw .badState("the login's pins are not usable: \(error.description)", hint: "log in again with --pin-sha256")
        } catch let error as TrustRootsError {
            throw .usage(error.description, hint: "check \(certificateAuthorityVariable)")
        } catch {
            throw .usage("\(error)")
        }
    }

    /// A PEM file of CA certificates pinned connections trust beside the system's roots.
    static let certificateAuthorityVariable = "OUTPOST_CA_FILE"

    /// Opens (creating or migrating) the device's store, with the crash tests' pauses of
    /// `OUTPOST_FAULT_DELAY_MS` when set (docs/sync-device.md).
    static func openStore(home: DeviceHome, profile: DeviceProfile, clock: ShiftedClock) throws(DeviceFailure) -> OfflineStore {
        var configuration = OfflineStoreConfiguration(
            databaseURL: home.databaseURL, tenantId: profile.tenant, userId: profile.user, deviceId: profile.device,
            keyProvider: FileKeyProvider(directory: home.keysURL), clock: clock
        )
        // Asset files an older build downloaded: the store's files folder holds them now.
        try? FileManager.default.removeItem(at: home.legacyAssetsURL)
        do {
            configuration.faultPauses = try FaultPauses.fromEnvironment()
        } catch {
            throw .usage(error.description)
        }
        configuration.deviceSigningKey = try signingKey(home: home)
        do {
            return try OfflineStore(configuration, contracts: ContractRegistry.self, extensions: [LearningStore()])
        } catch {
            throw DeviceFailure(error)
        }
    }

    /// The device's P-256 signing key, kept beside the tenant key in the home's key folder (made
    /// on first use): it signs the writes of `signed: true` contracts.
    static func signingKey(home: DeviceHome) throws(DeviceFailure) -> SoftwareDeviceSigningKey {
        let file = home.keysURL.appendingPathComponent("device-signing.key")
        do {
            return try SoftwareDeviceSigningKey(loadingOrCreatingAt: file)
        } catch {
            throw .badState("cannot read or make the device signing key \(file.path): \(error)", hint: "remove the file to make a new key")
        }
    }

    /// A sync engine over the device's network, pulling the login's scopes. It never retries on
    /// its own: a command runs once and says what happened.
    func engine(
        pushBatchSize: Int? = nil, pullPageSize: Int? = nil, pullCommitRows: Int? = nil, backgroundWindow: BackgroundWindowSettings? = nil
    ) -> SyncEngine {
        var configuration = SyncEngineConfiguration(scopes: profile.scopes, pullPageSize: pullPageSize, retriesAutomatically: false)
        if let pushBatchSize { configuration.pushBatchSize = pushBatchSize }
        if let backgroundWindow { configuration.backgroundWindow = backgroundWindow }
        if let pullCommitRows { configuration.pullCommitRows = pullCommitRows }
        if let chunk = Self.fileChunkBytes { configuration.fileChunkBytes = chunk }
        return SyncEngine(store: store, transport: network, configuration: configuration)
    }

    /// `OUTPOST_FILE_CHUNK_BYTES`: the bytes of a file sent in one upload request or asked for in
    /// one download range, instead of the engine's 4 MiB (tests and slow links; at least 1 KiB).
    static let fileChunkBytesVariable = "OUTPOST_FILE_CHUNK_BYTES"

    static var fileChunkBytes: Int? {
        ProcessInfo.processInfo.environment[fileChunkBytesVariable].flatMap(Int.init).map { max(1024, $0) }
    }

    /// Changes not yet on the server, by contract and row (`Task\u{0}task-1`).
    func unsyncedRows() throws(OfflineStoreError) -> [String: Int] {
        var rows: [String: Int] = [:]
        for entry in try store.outboxEntries(statuses: OutboxStatus.unsynced) {
            rows[entry.entity + "\u{0}" + entry.rowId, default: 0] += 1
        }
        return rows
    }

    /// "queued; 3 changes wait for a sync" — what a write tells the user.
    func queuedNote() throws(OfflineStoreError) -> String {
        let waiting = try store.outboxCounts().unsent
        let network = home.isOffline ? " (offline: sent when the network is back)" : ""
        return "queued; \(Wording.count(waiting, "change")) \(waiting == 1 ? "waits" : "wait") for a sync" + network
    }
}
