import ContractRuntime
import Foundation
import GRDB
import SyncClient

/// Where an asset file is.
public enum AssetStatus: String, Hashable, Sendable, CaseIterable {
    /// Known, not on the device.
    case remote
    /// Waiting to be downloaded.
    case queued
    /// Partly on the device (see ``AssetRecord/downloadedBytes``).
    case downloading
    /// On the device, checksum verified.
    case downloaded
    /// The last download failed (see ``AssetRecord/lastError``).
    case failed
}
