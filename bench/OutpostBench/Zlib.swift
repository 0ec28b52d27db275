import CZlib
import Foundation
import SyncProtocol

/// The zlib facts the compression benchmark reports. Compression itself goes through the
/// server's own `Gzip` (Sources/SyncProtocol/Gzip.swift), so the baselines at other levels
/// run the exact code the server runs.
enum Zlib {
    /// The level the server compresses responses at (``Gzip/responseLevel``).
    static let serverLevel = Gzip.responseLevel

    static var version: String { String(cString: zlibVersion()) }
}
