public import Foundation

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
        if try rotatedKeys(in: dataDirectory).isEmpty { try createIfMissing(file) }
        let keys = try ownKeys(in: dataDirectory)
        var signer = try TokenSigner(secret: keys.currentSecret, source: keys.currentSource, keyID: keys.currentKeyID)
        for (kid, secret) in keys.secrets.sorted(by: { $0.key < $1.key }) where kid != keys.currentKeyID { signer.addSecret(secret, keyID: kid) }
        // `keys rotate` and `keys retire` reach a running server without a restart.
        signer.watchKeyFolder(dataDirectory)
        return signer
    }

    /// The keys of a data folder: the rotated ones (the current one signs), and `token.key`
    /// while it is not retired (the current one when nothing was rotated).
    static func ownKeys(in dataDirectory: URL) throws(TokenKeyError) -> OwnKeyFolder.Keys {
        let rotated = try rotatedKeys(in: dataDirectory)
        let file = dataDirectory.appendingPathComponent(fileName)
        guard let current = rotated.first(where: \.isCurrent) ?? rotated.last else {
            let secret = try readSecret(file)
            guard secret.count >= TokenSigner.minimumSecretBytes else { throw .tooShort(source: file.path, bytes: secret.count) }
            let kid = TokenSigner.keyID(of: secret)
            return OwnKeyFolder.Keys(currentKeyID: kid, currentSecret: secret, currentSource: file.path, secrets: [kid: secret])
        }
        var secrets: [String: Data] = [:]
        for key in rotated { secrets[key.kid] = key.secret }
        if FileManager.default.fileExists(atPath: file.path) {
            let legacy = try readSecret(file)
            secrets[TokenSigner.keyID(of: legacy)] = legacy
        }
        return OwnKeyFolder.Keys(currentKeyID: current.kid, currentSecret: current.secret, currentSource: current.file.path, secrets: secrets)
    }

    /// What changes when `keys rotate` or `keys retire` changes a data folder's keys: the key
    /// files' names, the current kid, and `token.key`'s presence and modification time.
    static func fingerprint(of dataDirectory: URL) -> String {
        let folder = dataDirectory.appendingPathComponent(rotatedFolderName, isDirectory: true)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path))?.sorted() ?? []
        let current = (try? String(contentsOf: folder.appendingPathComponent("current"), encoding: .utf8)) ?? ""
        let legacy = try? FileManager.default.attributesOfItem(atPath: dataDirectory.appendingPathComponent(fileName).path)[.modificationDate]
        return names.joined(separator: "/") + "|" + current + "|" + String(describing: legacy)
    }

    /// The folder of rotated keys in a data folder: `KID.key` files and `current`, naming the
    /// key new tokens are signed with.
    public static let rotatedFolderName = "token-keys"

    struct RotatedKey {
        var kid: String
        var secret: Data
        var file: URL
        var isCurrent: Bool
    }

    /// The keys `keys rotate` made, oldest first.
    static func rotatedKeys(in dataDirectory: URL) throws(TokenKeyError) -> [RotatedKey] {
        let folder = dataDirectory.appendingPathComponent(rotatedFolderName, isDirectory: true)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path) else { return [] }
        let current = (try? String(contentsOf: folder.appendingPathComponent("current"), encoding: .utf8))?.trimmingCharacters(
            in: .whitespacesAndNewlines)
        var keys: [RotatedKey] = []
        for name in names.sorted() where name.hasSuffix(".key") {
            let file = folder.appendingPathComponent(name)
            let kid = String(name.dropLast(4))
            let secret = try readSecret(file)
            guard secret.count >= TokenSigner.minimumSecretBytes else { throw .tooShort(source: file.path, bytes: secret.count) }
            keys.append(RotatedKey(kid: kid, secret: secret, file: file, isCurrent: kid == current))
        }
        return keys
    }

    /// Adds a new signing key to the data folder and makes it current; earlier keys stay
    /// accepted until retired. Returns the new key's kid.
    public static func rotate(dataDirectory: URL, now: Date = Date()) throws(TokenKeyError) -> String {
        let folder = dataDirectory.appendingPathComponent(rotatedFolderName, isDirectory: true)
        // Keep the first key accepted: tokens signed with it go on working until it is retired.
        let legacy = dataDirectory.appendingPathComponent(fileName)
        if (try rotatedKeys(in: dataDirectory)).isEmpty { try createIfMissing(legacy) }
        let stamp = Int64(now.timeIntervalSince1970)
        var kid = "k-\(stamp)"
        var suffix = 1
        while FileManager.default.fileExists(atPath: folder.appendingPathComponent(kid + ".key").path) {
            suffix += 1
            kid = "k-\(stamp)-\(suffix)"
        }
        try createIfMissing(folder.appendingPathComponent(kid + ".key"))
        do {
            try Data((kid + "\n").utf8).write(to: folder.appendingPathComponent("current"), options: .atomic)
        } catch {
            throw .uncreatable(path: folder.appendingPathComponent("current").path, reason: "\(error)")
        }
        return kid
    }

    /// Stops accepting the key `kid`. The current key cannot be retired (rotate first).
    public static func retire(kid: String, dataDirectory: URL) throws(TokenKeyError) {
        let rotated = try rotatedKeys(in: dataDirectory)
        if let key = rotated.first(where: { $0.kid == kid }) {
            guard !key.isCurrent else { throw .rotation("key \(kid) signs new tokens; rotate to a new key before retiring it") }
            try? FileManager.default.removeItem(at: key.file)
            return
        }
        let legacy = dataDirectory.appendingPathComponent(fileName)
        if let secret = try? readSecret(legacy), TokenSigner.keyID(of: secret) == kid {
            guard !rotated.isEmpty else { throw .rotation("key \(kid) is the only key; rotate to a new key before retiring it") }
            try? FileManager.default.removeItem(at: dataDirectory.appendingPathComponent(fileName + ".retired"))
            try? FileManager.default.moveItem(at: legacy, to: dataDirectory.appendingPathComponent(fileName + ".retired"))
            return
        }
        throw .rotation("no key \(kid) in \(dataDirectory.path); `sync-server keys list` shows them")
    }

    /// The bytes of a key file; a trailing newline (a text key written by `echo`) is not part of it.
    static func readSecret(_ file: URL) throws(TokenKeyError) -> Data {
        do { return try SecretFile.read(file) } catch { throw .unreadable(path: file.path) }
    }

    /// Writes 32 random bytes (as hex) to `file` with mode 0600, unless it exists.
    static func createIfMissing(_ file: URL) throws(TokenKeyError) {
        do {
            try SecretFile.createIfMissing(file)
        } catch .uncreatable(let path, let reason) {
            throw .uncreatable(path: path, reason: reason)
        } catch {
            throw .unreadable(path: file.path)
        }
    }
}

/// Why no token signer could be made.
public enum TokenKeyError: Error, Hashable, Sendable, CustomStringConvertible {
    case noSource
    case unreadable(path: String)
    case uncreatable(path: String, reason: String)
    case tooShort(source: String, bytes: Int)
    /// A configured key that cannot verify tokens.
    case unusableKey(kid: String, reason: String)
    /// A rotation or retirement that cannot be done.
    case rotation(String)
    /// An identity provider's JWKS URL that could not be fetched or used.
    case jwksUnavailable(url: String, reason: String)

    /// What is wrong, naming the key file or URL concerned.
    public var description: String {
        switch self {
        case .noSource:
            return "no token key: give --data DIR (its token.key), --secret-file FILE, or set \(TokenKey.environmentVariable)"
        case .unreadable(let path):
            return "cannot read the token key file \(path)"
        case .uncreatable(let path, let reason):
            return "cannot create the token key file \(path): \(reason)"
        case .tooShort(let source, let bytes):
            return
                "the token key from \(source) has \(bytes) bytes; it needs at least \(TokenSigner.minimumSecretBytes) (for example `openssl rand -hex 32`)"
        case .unusableKey(let kid, let reason): return "token key \(kid): \(reason)"
        case .rotation(let message): return message
        case .jwksUnavailable(let url, let reason): return "the JWKS at \(url) \(reason)"
        }
    }
}
