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
    /// The folder of the files `file` fields name (``OfflineStore/importFile(at:contentType:name:for:)``),
    /// content-addressed (`ab/<sha256>`), wiped by ``OfflineStore/signOut(force:forgetKey:)``.
    /// Default: `<database name>-files` next to the database.
    public var filesDirectory: URL

    /// Where builds before `file` fields kept downloaded asset files (`<database name>-assets`
    /// next to the database): nothing writes there now; opening the store deletes it.
    var legacyAssetsDirectory: URL {
        databaseURL.deletingLastPathComponent().appendingPathComponent(
            databaseURL.deletingPathExtension().lastPathComponent + "-assets", isDirectory: true)
    }
    /// Who the data belongs to: a database opened by another tenant or user is refused.
    public var tenantId: String
    /// The user the data belongs to; the store refuses a database of another user.
    public var userId: String
    /// The device id the server's token names. `nil`: the one stored in the database, or a new
    /// ULID on first open.
    public var deviceId: String?
    /// Where the per-tenant key comes from.
    public var keyProvider: any KeyProvider
    /// The device's key pair, which signs each write of a contract with `signed: true` when it
    /// is queued (``DeviceSigningKey``); `nil` by default, and then such a write is refused
    /// with ``OfflineStoreError/notWritable(contract:reason:)``.
    public var deviceSigningKey: (any DeviceSigningKey)?
    /// The wall clock (injectable for tests).
    public var clock: any DeviceClock
    /// The randomness of ULIDs (injectable for tests; keys and nonces never use it).
    public var random: any RandomSource
    /// When unsynced writes raise "sync needed" and when the store goes read-only.
    public var retention: RetentionPolicy
    /// How long an outbox entry the server acknowledged is kept (for the app's history of what
    /// it sent) before housekeeping prunes it; the server keeps its audit. 7 days by default.
    public var completedWriteRetention: TimeInterval
    /// What the device may hold per contract and the free space it keeps (``StorageLimits/standard``).
    public var storageLimits: StorageLimits
    /// Where free space is read (the volume's, by default).
    public var freeSpace: any FreeSpaceProvider
    /// Where the store and its engine count their syncing (``SyncTelemetry``); sent to the
    /// server only when the transport is given it too.
    public var telemetry = SyncTelemetry()
    /// The Data Protection class of the database files on iOS, tvOS, watchOS and visionOS
    /// (``StoreFileProtection/completeUntilFirstUserAuthentication`` by default, so that syncs
    /// run in the background while the device is locked); ignored on other platforms.
    public var fileProtection = StoreFileProtection.completeUntilFirstUserAuthentication
    /// A passphrase to encrypt the whole database with SQLCipher, or `nil` (the default).
    ///
    /// Only for an app that builds GRDB with SQLCipher and this library with the same
    /// `SQLITE_HAS_CODEC` compilation condition; any other build refuses to open with
    /// ``OfflineStoreError/databaseEncryptionUnavailable(reason:)`` rather than leave the
    /// database in the clear. Encrypted fields and the outbox are sealed either way.
    public var databasePassphrase: String?
    /// Test-only pauses: ``SyncProtocol/FaultPoint/pullApply`` inside each pulled page's
    /// transaction, set by sync-device for crash tests; none by default.
    package var faultPauses = FaultPauses.none

    /// A configuration of the store at `databaseURL` for the given tenant and user; the rest have defaults.
    public init(
        databaseURL: URL, tenantId: String, userId: String, deviceId: String? = nil, keyProvider: any KeyProvider,
        clock: any DeviceClock = SystemClock(), random: any RandomSource = SystemRandomSource(),
        retention: RetentionPolicy = .standard, completedWriteRetention: TimeInterval = 7 * 86_400,
        storageLimits: StorageLimits = .standard, freeSpace: any FreeSpaceProvider = VolumeFreeSpace(), filesDirectory: URL? = nil
    ) {
        self.databaseURL = databaseURL
        self.filesDirectory =
            filesDirectory
            ?? databaseURL.deletingLastPathComponent().appendingPathComponent(
                databaseURL.deletingPathExtension().lastPathComponent + "-files", isDirectory: true
            )
        self.tenantId = tenantId
        self.userId = userId
        self.deviceId = deviceId
        self.keyProvider = keyProvider
        self.clock = clock
        self.random = random
        self.retention = retention
        self.completedWriteRetention = completedWriteRetention
        self.storageLimits = storageLimits
        self.freeSpace = freeSpace
    }
}

/// The Data Protection class of the store's database files (``OfflineStoreConfiguration/fileProtection``).
public enum StoreFileProtection: String, Hashable, Sendable {
    /// No protection beyond the file system's.
    case none
    /// Readable only while the device is unlocked: no background sync while it is locked.
    case complete
    /// Files already open stay readable when the device locks; new ones cannot be created.
    case completeUnlessOpen
    /// Readable once the device was unlocked after it started: background syncs work.
    case completeUntilFirstUserAuthentication
}
