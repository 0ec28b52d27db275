public import Foundation
package import SyncProtocol

/// Everything ``OfflineStore`` needs to open.
///
/// ```swift
/// let configuration = OfflineStoreConfiguration(
///     databaseURL: appSupport.appendingPathComponent("outpost.sqlite"),
///     tenantId: token.tenant, userId: token.user, deviceId: token.device,
///     keyProvider: KeychainKeyProvider()
/// )
/// let store = try OfflineStore(configuration)
/// ```
public struct OfflineStoreConfiguration: Sendable {
    /// The SQLite file (created with its folder when missing). WAL mode adds `-wal` and `-shm`
    /// files next to it.
    public var databaseURL: URL
    /// The folder of downloaded asset files the store manages (wiped by ``OfflineStore/signOut(force:)``).
    /// Default: `<database name>-assets` next to the database.
    public var assetsDirectory: URL
    /// Who the data belongs to: a database opened by another tenant or user is refused.
    public var tenantId: String
    public var userId: String
    /// The device id the server's token names. `nil`: the one stored in the database, or a new
    /// ULID on first open.
    public var deviceId: String?
    /// Where the per-tenant key comes from.
    public var keyProvider: any KeyProvider
    /// The wall clock (injectable for tests).
    public var clock: any DeviceClock
    /// The randomness of ULIDs (injectable for tests; keys and nonces never use it).
    public var random: any RandomSource
    /// When unsynced writes raise "sync needed" and when the store goes read-only.
    public var retention: RetentionPolicy
    /// Test-only pauses: ``SyncProtocol/FaultPoint/pullApply`` inside each pulled page's
    /// transaction, set by sync-device for crash tests; none by default.
    package var faultPauses = FaultPauses.none

    public init(
        databaseURL: URL, tenantId: String, userId: String, deviceId: String? = nil, keyProvider: any KeyProvider,
        assetsDirectory: URL? = nil, clock: any DeviceClock = SystemClock(), random: any RandomSource = SystemRandomSource(),
        retention: RetentionPolicy = .standard
    ) {
        self.databaseURL = databaseURL
        self.assetsDirectory = assetsDirectory
            ?? databaseURL.deletingLastPathComponent().appendingPathComponent(
                databaseURL.deletingPathExtension().lastPathComponent + "-assets", isDirectory: true
            )
        self.tenantId = tenantId
        self.userId = userId
        self.deviceId = deviceId
        self.keyProvider = keyProvider
        self.clock = clock
        self.random = random
        self.retention = retention
    }
}

/// How long writes may wait for the server (docs/client.md).
public struct RetentionPolicy: Hashable, Sendable {
    /// Unsynced writes older than this raise ``RetentionState/syncNeeded(since:)``.
    public var syncNeededAfter: TimeInterval
    /// Unsynced writes older than this make the store refuse new writes
    /// (``OfflineStoreError/readOnlyUntilSync(since:)``) until a sync succeeds.
    public var readOnlyAfter: TimeInterval

    public init(syncNeededAfter: TimeInterval, readOnlyAfter: TimeInterval) {
        self.syncNeededAfter = syncNeededAfter
        self.readOnlyAfter = readOnlyAfter
    }

    /// 7 days, then read-only after 14 days.
    public static let standard = RetentionPolicy(syncNeededAfter: 7 * 86_400, readOnlyAfter: 14 * 86_400)
}

/// Whether unsynced writes have waited too long.
public enum RetentionState: Hashable, Sendable {
    /// Nothing waits longer than ``RetentionPolicy/syncNeededAfter``.
    case ok
    /// Writes have waited since `since`, longer than ``RetentionPolicy/syncNeededAfter``: ask the
    /// user to get online.
    case syncNeeded(since: Date)
    /// Writes have waited since `since`, longer than ``RetentionPolicy/readOnlyAfter``: new writes
    /// are refused until a sync succeeds.
    case readOnly(since: Date)
}

/// Who a store belongs to and how it identifies itself to the server.
public struct StoreIdentity: Hashable, Sendable {
    public var tenantId: String
    public var userId: String
    /// The device, as the server's token names it.
    public var deviceId: String
    /// This installation's push identity (`client_id` of ``SyncProtocol/PushRequest``), made once
    /// when the database is created; `seq` numbers are per client id.
    public var clientId: String
}
