public import Foundation

/// The asset files, stored by content: each file is named by the lower-case hex SHA-256 of its
/// bytes (in a folder named by the first two characters), so the checksum devices verify
/// against is also the file's address, the same bytes are stored once, and a file never
/// changes once written.
public struct AssetStore: Sendable {
    public let directory: URL

    /// A store in `directory` (created on the first write).
    public init(directory: URL) {
        self.directory = directory
    }

    /// Stores `data` (once: the same bytes again write nothing) and returns its checksum and size.
    public func write(_ data: Data) throws -> (checksum: String, size: Int64) {
        let checksum = Self.checksum(of: data)
        let url = location(checksum)
        if !FileManager.default.fileExists(atPath: url.path) {
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try data.write(to: url, options: .atomic)
        }
        return (checksum, Int64(data.count))
    }

    /// The file with this checksum, or `nil` when the store does not hold it (or the text is
    /// not a checksum).
    public func fileURL(checksum: String) -> URL? {
        guard Self.isChecksum(checksum) else { return nil }
        let url = location(checksum)
        return FileManager.default.fileExists(atPath: url.path) ? url : nil
    }

    /// Lower-case hex SHA-256 of `data`.
    public static func checksum(of data: Data) -> String {
        Hex.sha256(data)
    }

    /// Whether `text` is 64 lower-case hex digits (so it can never name a path elsewhere).
    static func isChecksum(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    private func location(_ checksum: String) -> URL {
        directory.appendingPathComponent(String(checksum.prefix(2)), isDirectory: true).appendingPathComponent(checksum)
    }
}

/// An asset file to serve: where it is, and what the response says about it.
public struct AssetFile: Sendable, Hashable {
    public var id: String
    public var fileURL: URL
    public var size: Int64
    /// Lower-case hex SHA-256 of the file; the `ETag`.
    public var checksum: String
    /// The MIME type.
    public var contentType: String

    public init(id: String, fileURL: URL, size: Int64, checksum: String, contentType: String) {
        self.id = id
        self.fileURL = fileURL
        self.size = size
        self.checksum = checksum
        self.contentType = contentType
    }
}
