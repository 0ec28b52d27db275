import Crypto
import Foundation
import SyncClient

/// The asset files in the store's folder: one file per asset id, named so that any id is a
/// safe file name, and beside it, while a download is under way, `<name>.partial`, which holds
/// only bytes of the file whose `ETag` the asset's record names.
///
/// Files are read and written in pieces, never whole.
enum AssetFiles {
    /// Bytes read or copied at a time.
    static let pieceSize = 256 * 1024

    /// The file name of an asset: `asset-` and its id with anything but letters, digits and
    /// `-._~` percent-encoded (the prefix keeps `.` and `..` from naming folders); a long id
    /// is named by its SHA-256 instead, to stay within file-name limits.
    static func fileName(assetId id: String) -> String {
        var allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        allowed.insert(charactersIn: "-._~")
        let encoded = id.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
        guard !encoded.isEmpty, encoded.utf8.count <= 160 else { return "asset-" + hex(SHA256.hash(data: Data(id.utf8))) }
        return "asset-" + encoded
    }

    static func partialName(assetId id: String) -> String { fileName(assetId: id) + ".partial" }

    /// Both files an asset may have in `directory`.
    static func urls(assetId id: String, in directory: URL) -> (final: URL, partial: URL) {
        (directory.appendingPathComponent(fileName(assetId: id)), directory.appendingPathComponent(partialName(assetId: id)))
    }

    /// The size of a file, `nil` when there is none.
    static func size(of url: URL) -> Int64? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: url.path) else { return nil }
        return (attributes[.size] as? NSNumber)?.int64Value
    }

    /// Lowercase hex SHA-256 of a file, read in pieces.
    static func sha256(of url: URL) throws -> String {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        var hasher = SHA256()
        while let piece = try handle.read(upToCount: pieceSize), !piece.isEmpty {
            hasher.update(data: piece)
        }
        return hex(hasher.finalize())
    }

    /// Appends the bytes of `source` to `destination` (created when missing), in pieces.
    static func append(_ source: URL, to destination: URL) throws {
        if !FileManager.default.fileExists(atPath: destination.path) {
            guard FileManager.default.createFile(atPath: destination.path, contents: nil) else {
                throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: destination.path])
            }
        }
        let input = try FileHandle(forReadingFrom: source)
        defer { try? input.close() }
        let output = try FileHandle(forWritingTo: destination)
        defer { try? output.close() }
        try output.seekToEnd()
        while let piece = try input.read(upToCount: pieceSize), !piece.isEmpty {
            try output.write(contentsOf: piece)
        }
        try output.synchronize()
    }

    /// Cuts a file to its first `length` bytes.
    static func truncate(_ url: URL, to length: Int64) throws {
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        try handle.truncate(atOffset: UInt64(length))
    }

    /// Puts `source` at `destination`, replacing what was there.
    static func replace(_ destination: URL, with source: URL) throws {
        try removeIfPresent(destination)
        try FileManager.default.moveItem(at: source, to: destination)
    }

    static func removeIfPresent(_ url: URL) throws {
        guard FileManager.default.fileExists(atPath: url.path) else { return }
        try FileManager.default.removeItem(at: url)
    }

    /// Whether `text` is a lowercase hex SHA-256 (64 digits).
    static func isChecksum(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    private static func hex<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
