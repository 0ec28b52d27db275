public import Crypto
public import Foundation

/// Gives the store the 256-bit key of a tenant, creating it on first use.
///
/// The store never keeps the key on disk itself: it derives from it (HKDF-SHA256) one key to
/// seal `encrypted` fields, one to seal outbox payloads and one for the outbox HMACs.
///
/// Keys have versions, 1 first: ``OfflineStore/rotateDataKey(batchSize:)`` asks for the next
/// version with ``key(forTenant:version:)`` and seals everything again under it. Version 1 is
/// ``key(forTenant:)``, so a provider written before versions keeps working; it only cannot
/// rotate (the default ``key(forTenant:version:)`` refuses any other version).
///
/// Implementations: ``FileKeyProvider`` (a key file per tenant, anywhere), `KeychainKeyProvider`
/// (Apple platforms), ``PassphraseKeyProvider`` (derived from the user's passphrase),
/// ``InMemoryKeyProvider`` (tests). All of them rotate.
public protocol KeyProvider: Sendable {
    /// The tenant's key (version 1); created and stored the first time it is asked for.
    func key(forTenant tenantId: String) throws -> SymmetricKey

    /// Forgets the tenant's key (version 1): everything sealed under it becomes unreadable.
    func deleteKey(forTenant tenantId: String) throws

    /// Version `version` of the tenant's key (1 is ``key(forTenant:)``); created and stored the
    /// first time it is asked for.
    func key(forTenant tenantId: String, version: Int) throws -> SymmetricKey

    /// Forgets version `version` of the tenant's key (nothing happens when there is none).
    func deleteKey(forTenant tenantId: String, version: Int) throws
}

extension KeyProvider {
    /// Version 1 is ``key(forTenant:)``; a provider that does not implement versions refuses the others.
    public func key(forTenant tenantId: String, version: Int) throws -> SymmetricKey {
        guard version == 1 else {
            throw KeyProviderError("\(Self.self) keeps one key per tenant: it cannot give key version \(version)")
        }
        return try key(forTenant: tenantId)
    }

    /// Version 1 is ``deleteKey(forTenant:)``; a provider that does not implement versions has no other.
    public func deleteKey(forTenant tenantId: String, version: Int) throws {
        if version == 1 { try deleteKey(forTenant: tenantId) }
    }
}

/// Why a ``KeyProvider`` could not give a key.
public struct KeyProviderError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong.
    public var message: String

    /// An error with its message.
    public init(_ message: String) {
        self.message = message
    }

    /// The message.
    public var description: String { message }
}

/// Keys kept in memory only: for tests and previews. Every instance starts empty.
public final class InMemoryKeyProvider: KeyProvider {
    private let keys: Locked<[String: Data]>

    /// A provider holding the given keys (version 1) by tenant id; others are created when asked for.
    public init(keys: [String: SymmetricKey] = [:]) {
        self.keys = Locked(keys.mapValues { $0.withUnsafeBytes { Data($0) } })
    }

    /// Version 1 is kept under the tenant id (as `init(keys:)` gives it), later ones beside it.
    private static func name(_ tenantId: String, _ version: Int) -> String {
        version == 1 ? tenantId : "\(tenantId)\u{0}v\(version)"
    }

    /// The tenant's key (version 1), created the first time it is asked for.
    public func key(forTenant tenantId: String) throws -> SymmetricKey {
        try key(forTenant: tenantId, version: 1)
    }

    /// Forgets the tenant's key (version 1).
    public func deleteKey(forTenant tenantId: String) throws {
        try deleteKey(forTenant: tenantId, version: 1)
    }

    /// Version `version` of the tenant's key, created the first time it is asked for.
    public func key(forTenant tenantId: String, version: Int) throws -> SymmetricKey {
        keys.withLock { keys in
            let name = Self.name(tenantId, version)
            if let data = keys[name] { return SymmetricKey(data: data) }
            let key = SymmetricKey(size: .bits256)
            keys[name] = key.withUnsafeBytes { Data($0) }
            return key
        }
    }

    /// Forgets version `version` of the tenant's key.
    public func deleteKey(forTenant tenantId: String, version: Int) throws {
        keys.withLock { $0[Self.name(tenantId, version)] = nil }
    }
}

/// One key file per tenant and key version in a folder (`<sha256 of the tenant id>.key` for
/// version 1, `<sha256 of the tenant id>.v<version>.key` for later ones; 32 bytes, mode 0600;
/// on Apple platforms also protected until the first unlock).
///
/// For platforms without a keychain, and for command-line devices. Keep the folder outside
/// anything that is backed up or synced.
public struct FileKeyProvider: KeyProvider {
    /// The folder holding the key files.
    public let directory: URL

    /// A provider keeping its key files in `directory`, which it creates when needed.
    public init(directory: URL) {
        self.directory = directory
    }

    package func fileURL(forTenant tenantId: String, version: Int = 1) -> URL {
        let name = SHA256.hash(data: Data(tenantId.utf8)).map { String(format: "%02x", $0) }.joined()
        return directory.appendingPathComponent(name + (version == 1 ? "" : ".v\(version)") + ".key")
    }

    /// The tenant's key (version 1), read from its file or created and written there.
    public func key(forTenant tenantId: String) throws -> SymmetricKey {
        try key(forTenant: tenantId, version: 1)
    }

    /// The versions of the tenant's key that have a file here, oldest first.
    package func versions(forTenant tenantId: String) -> [Int] {
        let first = fileURL(forTenant: tenantId).deletingPathExtension().lastPathComponent
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.compactMap { name -> Int? in
            guard name.hasPrefix(first), name.hasSuffix(".key") else { return nil }
            let middle = name.dropFirst(first.count).dropLast(".key".count)
            if middle.isEmpty { return 1 }
            guard middle.hasPrefix(".v") else { return nil }
            return Int(middle.dropFirst(2))
        }.sorted()
    }

    /// Deletes the tenant's key file (version 1).
    public func deleteKey(forTenant tenantId: String) throws {
        try deleteKey(forTenant: tenantId, version: 1)
    }

    /// Version `version` of the tenant's key, read from its file or created and written there.
    public func key(forTenant tenantId: String, version: Int) throws -> SymmetricKey {
        let url = fileURL(forTenant: tenantId, version: version)
        if let data = try? Data(contentsOf: url) {
            guard data.count == 32 else { throw KeyProviderError("the key file \(url.path) is not 32 bytes long") }
            return SymmetricKey(data: data)
        }
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700]
            )
        } catch {
            throw KeyProviderError("cannot create the key folder \(directory.path): \(error.localizedDescription)")
        }
        let key = SymmetricKey(size: .bits256)
        let data = key.withUnsafeBytes { Data($0) }
        // Written to a temporary file first, then linked into place: two processes creating the
        // key at once both end up with the one that was linked first.
        let temporary = directory.appendingPathComponent(".\(UUID().uuidString).tmp")
        var options: Data.WritingOptions = [.atomic]
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
            options.insert(.completeFileProtectionUntilFirstUserAuthentication)
        #endif
        do {
            try data.write(to: temporary, options: options)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: temporary.path)
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw KeyProviderError("cannot write the key file in \(directory.path): \(error.localizedDescription)")
        }
        defer { try? FileManager.default.removeItem(at: temporary) }
        do {
            try FileManager.default.linkItem(at: temporary, to: url)
        } catch {
            // Someone else created it in the meantime: use theirs.
            guard let existing = try? Data(contentsOf: url), existing.count == 32 else {
                throw KeyProviderError("cannot create the key file \(url.path): \(error.localizedDescription)")
            }
            return SymmetricKey(data: existing)
        }
        return key
    }

    /// Deletes the file of version `version` of the tenant's key.
    public func deleteKey(forTenant tenantId: String, version: Int) throws {
        let url = fileURL(forTenant: tenantId, version: version)
        guard FileManager.default.fileExists(atPath: url.path) else { return }
        do {
            try FileManager.default.removeItem(at: url)
        } catch {
            throw KeyProviderError("cannot delete the key file \(url.path): \(error.localizedDescription)")
        }
    }
}
