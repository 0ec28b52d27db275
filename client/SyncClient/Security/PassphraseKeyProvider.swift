public import Crypto
public import Foundation
import _CryptoExtras

/// Tenant keys derived from the user's passphrase with PBKDF2-HMAC-SHA256, each key version
/// from its own random salt.
///
/// The salts are kept in a small JSON file, with each one's round count and a check value (an
/// HMAC under the derived key) that tells a wrong passphrase from the right one: the file is
/// not secret, but it is needed, and it belongs beside the store
/// (``saltFile(besideDatabase:)``). A wrong passphrase throws
/// ``PassphraseKeyProviderError/wrongPassphrase(tenantId:)``, which ``OfflineStore`` reports
/// as ``OfflineStoreError/keyMismatch(tenantId:)``; it never yields another key.
///
/// ```swift
/// let keys = PassphraseKeyProvider(passphrase: entered, saltFile: PassphraseKeyProvider.saltFile(besideDatabase: url))
/// ```
///
/// - Note: Nothing the passphrase derives is kept: the user types it at every launch. The check
///   value (like the store's own key check) lets someone holding the file test guesses, each at
///   the cost of the rounds: keep them high, and the passphrase long.
public struct PassphraseKeyProvider: KeyProvider {
    /// Where the salts are kept.
    public let saltFile: URL
    /// PBKDF2's rounds for a salt made from now on (salts already made keep theirs).
    public let rounds: Int
    private let passphrase: Data

    /// - Parameters:
    ///   - passphrase: what the user typed; kept in memory only, by this value.
    ///   - saltFile: where the salts are kept (``saltFile(besideDatabase:)``).
    ///   - rounds: PBKDF2-HMAC-SHA256 rounds: 600 000 by default (OWASP's advice in 2023); fewer
    ///     only in tests.
    public init(passphrase: String, saltFile: URL, rounds: Int = 600_000) {
        self.passphrase = Data(passphrase.utf8)
        self.saltFile = saltFile
        self.rounds = rounds
    }

    /// The salt file of the store whose database is `databaseURL`: `<database>.salt.json`
    /// beside it. Signing out leaves it (`forgetKey` removes the tenant's salts, and the file when none is left).
    public static func saltFile(besideDatabase databaseURL: URL) -> URL {
        URL(fileURLWithPath: databaseURL.path + ".salt.json")
    }

    private struct Salt: Codable {
        var salt: Data
        var rounds: Int
        var check: Data
    }

    /// The file: tenant id → key version → salt.
    private struct SaltFile: Codable {
        var format = 1
        var tenants: [String: [String: Salt]] = [:]
    }

    private func load() throws -> SaltFile {
        guard FileManager.default.fileExists(atPath: saltFile.path) else { return SaltFile() }
        do {
            return try JSONDecoder().decode(SaltFile.self, from: Data(contentsOf: saltFile))
        } catch {
            throw PassphraseKeyProviderError.unreadableSaltFile(path: saltFile.path, reason: error.localizedDescription)
        }
    }

    private func save(_ file: SaltFile) throws {
        do {
            try FileManager.default.createDirectory(at: saltFile.deletingLastPathComponent(), withIntermediateDirectories: true)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            try encoder.encode(file).write(to: saltFile, options: .atomic)
        } catch {
            throw KeyProviderError("cannot write the salt file \(saltFile.path): \(error.localizedDescription)")
        }
    }

    private func derive(salt: Data, rounds: Int) throws -> SymmetricKey {
        try KDF.Insecure.PBKDF2.deriveKey(from: passphrase, salt: salt, using: .sha256, outputByteCount: 32, unsafeUncheckedRounds: rounds)
    }

    private static func check(_ key: SymmetricKey) -> Data {
        Data(HMAC<SHA256>.authenticationCode(for: Data("outpost.passphrase-check".utf8), using: key))
    }

    /// The tenant's key (version 1), derived from the passphrase and the tenant's salt.
    public func key(forTenant tenantId: String) throws -> SymmetricKey {
        try key(forTenant: tenantId, version: 1)
    }

    /// Deletes the tenant's salt (version 1): the key cannot be derived again.
    public func deleteKey(forTenant tenantId: String) throws {
        try deleteKey(forTenant: tenantId, version: 1)
    }

    /// Version `version` of the tenant's key, derived from the passphrase and that version's salt.
    public func key(forTenant tenantId: String, version: Int) throws -> SymmetricKey {
        var file = try load()
        if let stored = file.tenants[tenantId]?[String(version)] {
            let key = try derive(salt: stored.salt, rounds: stored.rounds)
            guard Self.check(key) == stored.check else { throw PassphraseKeyProviderError.wrongPassphrase(tenantId: tenantId) }
            return key
        }
        let salt = SymmetricKey(size: .bits128).withUnsafeBytes { Data($0) }
        let key = try derive(salt: salt, rounds: rounds)
        file.tenants[tenantId, default: [:]][String(version)] = Salt(salt: salt, rounds: rounds, check: Self.check(key))
        try save(file)
        return key
    }

    /// Forgets the salt of that version: its key cannot be derived again.
    public func deleteKey(forTenant tenantId: String, version: Int) throws {
        var file = try load()
        guard file.tenants[tenantId]?.removeValue(forKey: String(version)) != nil else { return }
        if file.tenants[tenantId]?.isEmpty == true { file.tenants[tenantId] = nil }
        if file.tenants.isEmpty {
            try? FileManager.default.removeItem(at: saltFile)
            return
        }
        try save(file)
    }
}

/// Why a ``PassphraseKeyProvider`` could not give a key.
public enum PassphraseKeyProviderError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The passphrase is not the one the key was first derived from.
    case wrongPassphrase(tenantId: String)
    /// The salt file exists but cannot be read.
    case unreadableSaltFile(path: String, reason: String)

    /// What went wrong, naming the tenant or file.
    public var description: String {
        switch self {
        case .wrongPassphrase(let tenant): return "the passphrase is not the one of tenant '\(tenant)'"
        case .unreadableSaltFile(let path, let reason): return "cannot read the salt file \(path): \(reason)"
        }
    }
}
