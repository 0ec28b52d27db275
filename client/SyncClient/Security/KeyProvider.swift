public import Crypto
public import Foundation

/// Gives the store the 256-bit key of a tenant, creating it on first use.
///
/// The store never keeps the key on disk itself: it derives from it (HKDF-SHA256) one key to
/// seal `encrypted` fields, one to seal outbox payloads and one for the outbox HMACs.
///
/// Implementations: ``FileKeyProvider`` (a key file per tenant, anywhere), `KeychainKeyProvider`
/// (Apple platforms), ``InMemoryKeyProvider`` (tests).
public protocol KeyProvider: Sendable {
    /// The tenant's key; created and stored the first time it is asked for.
    func key(forTenant tenantId: String) throws -> SymmetricKey

    /// Forgets the tenant's key: everything sealed under it becomes unreadable.
    func deleteKey(forTenant tenantId: String) throws
}

/// Why a ``KeyProvider`` could not give a key.
public struct KeyProviderError: Error, Hashable, Sendable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}

/// Keys kept in memory only: for tests and previews. Every instance starts empty.
public final class InMemoryKeyProvider: KeyProvider {
    private let keys: Locked<[String: Data]>

    public init(keys: [String: SymmetricKey] = [:]) {
        self.keys = Locked(keys.mapValues { $0.withUnsafeBytes { Data($0) } })
    }

    public func key(forTenant tenantId: String) throws -> SymmetricKey {
        keys.withLock { keys in
            if let data = keys[tenantId] { return SymmetricKey(data: data) }
            let key = SymmetricKey(size: .bits256)
            keys[tenantId] = key.withUnsafeBytes { Data($0) }
            return key
        }
    }

    public func deleteKey(forTenant tenantId: String) throws {
        keys.withLock { $0[tenantId] = nil }
    }
}

/// One key file per tenant in a folder (`<sha256 of the tenant id>.key`, 32 bytes, mode 0600;
/// on Apple platforms also protected until the first unlock).
///
/// For platforms without a keychain, and for command-line devices. Keep the folder outside
/// anything that is backed up or synced.
public struct FileKeyProvider: KeyProvider {
    public let directory: URL

    public init(directory: URL) {
        self.directory = directory
    }

    func fileURL(forTenant tenantId: String) -> URL {
        let name = SHA256.hash(data: Data(tenantId.utf8)).map { String(format: "%02x", $0) }.joined()
        return directory.appendingPathComponent(name + ".key")
    }

    public func key(forTenant tenantId: String) throws -> SymmetricKey {
        let url = fileURL(forTenant: tenantId)
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

    public func deleteKey(forTenant tenantId: String) throws {
        let url = fileURL(forTenant: tenantId)
        guard FileManager.default.fileExists(atPath: url.path) else { return }
        do {
            try FileManager.default.removeItem(at: url)
        } catch {
            throw KeyProviderError("cannot delete the key file \(url.path): \(error.localizedDescription)")
        }
    }
}
