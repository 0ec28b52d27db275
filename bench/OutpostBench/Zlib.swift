import CZlib
import Foundation

/// The zlib facts the compression benchmark reports. Compression itself goes through the
/// server's own `Gzip` (server/SyncServer/HTTP/Gzip.swift), so the baselines at other levels
/// run the exact code the server runs.
enum Zlib {
    /// The server's level (`Z_DEFAULT_COMPRESSION`, which zlib maps to 6).
    static let defaultLevel = Z_DEFAULT_COMPRESSION

    static var version: String { String(cString: zlibVersion()) }
}
