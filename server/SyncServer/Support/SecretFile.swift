import Crypto
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A secret kept in a file of its own (mode 0600), never in the database: made of 32 random bytes
/// written as 64 hex characters the first time it is needed, read back without a trailing newline.
enum SecretFile {
    enum Failure: Error, Hashable, Sendable {
        case unreadable(path: String)
        case uncreatable(path: String, reason: String)
    }

    /// The file's bytes; a trailing newline (a text key written by `echo`) is not part of it.
    static func read(_ file: URL) throws(Failure) -> Data {
        guard let data = try? Data(contentsOf: file) else { throw .unreadable(path: file.path) }
        var end = data.endIndex
        while end > data.startIndex, data[end - 1] == UInt8(ascii: "\n") || data[end - 1] == UInt8(ascii: "\r") {
            end -= 1
        }
        return data[data.startIndex..<end]
    }

    /// Writes a new random secret to `file` unless it exists. `O_EXCL` makes two processes
    /// starting together agree on one secret.
    static func createIfMissing(_ file: URL) throws(Failure) {
        if FileManager.default.fileExists(atPath: file.path) { return }
        do {
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        } catch {
            throw .uncreatable(path: file.path, reason: "its folder cannot be created")
        }
        let descriptor = open(file.path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        if descriptor < 0 {
            if errno == EEXIST { return }
            throw .uncreatable(path: file.path, reason: String(cString: strerror(errno)))
        }
        defer { close(descriptor) }
        // Hex and a newline: a raw secret could end in a newline byte, which `read` drops.
        let random = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }
        let secret = Data((Hex.string(random) + "\n").utf8)
        let written = secret.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == secret.count else {
            unlink(file.path)
            throw .uncreatable(path: file.path, reason: "the secret could not be written")
        }
    }
}
