import Crypto
public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the token signing key comes from, strongest first: a file named on the command line,
/// the `OUTPOST_TOKEN_SECRET` environment variable, or `token.key` in the data folder (made of 32
/// random bytes, mode 0600, the first time it is needed).
///
/// `serve` and `token` resolve the key the same way, so a token printed by `sync-server token
/// --data DIR` is accepted by `sync-server serve --data DIR`.
public enum TokenKey {
    /// The environment variable holding the secret (at least 32 bytes of text).
    public static let environmentVariable = "OUTPOST_TOKEN_SECRET"
    /// The key file's name inside the data folder.
    public static let fileName = "token.key"

    /// The signer for a server: `secretFile` if given, else the environment variable, else
    /// `dataDirectory/token.key`, created when missing.
    public static func signer(
        secretFile: URL?, dataDirectory: URL?, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(TokenKeyError) -> TokenSigner {
        if let secretFile {
            return try TokenSigner(secret: readSecret(secretFile), source: secretFile.path)
        }
        if let text = environment[environmentVariable], !text.isEmpty {
            return try TokenSigner(secret: Data(text.utf8), source: environmentVariable)
        }
        guard let dataDirectory else { throw .noSource }
        let file = dataDirectory.appendingPathComponent(fileName)
        try createIfMissing(file)
        return try TokenSigner(secret: readSecret(file), source: file.path)
    }

    /// The bytes of a key file; a trailing newline (a text key written by `echo`) is not part of it.
    static func readSecret(_ file: URL) throws(TokenKeyError) -> Data {
        guard let data = try? Data(contentsOf: file) else { throw .unreadable(path: file.path) }
        var end = data.endIndex
        while end > data.startIndex, data[end - 1] == UInt8(ascii: "\n") || data[end - 1] == UInt8(ascii: "\r") {
            end -= 1
        }
        return data[data.startIndex..<end]
    }

    /// Writes 32 random bytes (as hex) to `file` with mode 0600, unless it exists. `O_EXCL` makes two
    /// processes starting together agree on one key.
    static func createIfMissing(_ file: URL) throws(TokenKeyError) {
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
        // Written as 64 hex characters and a newline: a raw key could end in a newline byte,
        // which `readSecret` (rightly, for keys written with `echo`) does not count.
        let random = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }
        let hex = Hex.string(random)
        let secret = Data((hex + "\n").utf8)
        let written = secret.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == secret.count else {
            unlink(file.path)
            throw .uncreatable(path: file.path, reason: "the key could not be written")
        }
    }
}

/// Why no token signer could be made.
public enum TokenKeyError: Error, Hashable, Sendable, CustomStringConvertible {
    case noSource
    case unreadable(path: String)
    case uncreatable(path: String, reason: String)
    case tooShort(source: String, bytes: Int)

    public var description: String {
        switch self {
        case .noSource:
            return "no token key: give --data DIR (its token.key), --secret-file FILE, or set \(TokenKey.environmentVariable)"
        case .unreadable(let path):
            return "cannot read the token key file \(path)"
        case .uncreatable(let path, let reason):
            return "cannot create the token key file \(path): \(reason)"
        case .tooShort(let source, let bytes):
            return "the token key from \(source) has \(bytes) bytes; it needs at least \(TokenSigner.minimumSecretBytes) (for example `openssl rand -hex 32`)"
        }
    }
}
