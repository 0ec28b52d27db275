import Crypto
public import Foundation

/// The key the audit log is sealed with (HMAC-SHA256). It never lives in the database: someone
/// who can write the database but not read this key cannot rewrite an entry, remove one or cut
/// the log's tail without `sync-server audit verify` saying where.
///
/// Where it comes from, strongest first: a file named on the command line (`--audit-key-file`),
/// `OUTPOST_AUDIT_KEY`, or `audit.key` in the data folder (made of 32 random bytes, mode 0600,
/// the first time it is needed). Every process writing one database needs the same key; the
/// database records the key's fingerprint, and a storage opened with another key refuses to start.
public struct AuditKey: Sendable {
    /// The environment variable holding the key (at least 32 bytes of text).
    public static let environmentVariable = "OUTPOST_AUDIT_KEY"
    /// The key file's name in the data folder.
    public static let fileName = "audit.key"
    /// Keys shorter than this are refused: HMAC-SHA256 wants at least 256 bits.
    public static let minimumBytes = 32

    let bytes: Data
    /// HMAC-SHA256 keyed with ``bytes``, before any message: every seal copies it instead of
    /// deriving the inner and outer pads again (one seal per audit entry).
    private let keyedMAC: HMAC<SHA256>
    /// The key users' data keys are wrapped under (``AuditDetails``), derived from this one with
    /// HKDF-SHA256: a dump of the database alone cannot unwrap them.
    let keyEncryptionKey: SymmetricKey
    /// The key sinks' secrets are sealed under in the database (``SinkStore``), derived the same
    /// way for another purpose.
    let sinkSecretKey: SymmetricKey

    /// - Throws: ``AuditKeyError/tooShort(source:bytes:)`` under ``minimumBytes``.
    public init(bytes: Data, source: String = "the audit key") throws(AuditKeyError) {
        guard bytes.count >= Self.minimumBytes else { throw .tooShort(source: source, bytes: bytes.count) }
        self.bytes = bytes
        keyedMAC = HMAC<SHA256>(key: SymmetricKey(data: bytes))
        keyEncryptionKey = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: bytes), salt: Data("outpost.audit.user-keys".utf8),
            info: Data("outpost audit key-encryption key v1".utf8), outputByteCount: 32
        )
        sinkSecretKey = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: bytes), salt: Data("outpost.sinks".utf8),
            info: Data("outpost sink secrets v1".utf8), outputByteCount: 32
        )
    }

    /// The key of a server: `file` if given, else the environment variable, else
    /// `dataDirectory/audit.key`, created when missing.
    public static func resolve(
        file: URL?, dataDirectory: URL?, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(AuditKeyError) -> AuditKey {
        do {
            if let file { return try AuditKey(bytes: SecretFile.read(file), source: file.path) }
            if let text = environment[environmentVariable], !text.isEmpty {
                return try AuditKey(bytes: Data(text.utf8), source: environmentVariable)
            }
            guard let dataDirectory else { throw AuditKeyError.noSource }
            let file = dataDirectory.appendingPathComponent(fileName)
            try SecretFile.createIfMissing(file)
            return try AuditKey(bytes: SecretFile.read(file), source: file.path)
        } catch let error as AuditKeyError {
            throw error
        } catch SecretFile.Failure.unreadable(let path) {
            throw .unreadable(path: path)
        } catch SecretFile.Failure.uncreatable(let path, let reason) {
            throw .uncreatable(path: path, reason: reason)
        } catch {
            throw .noSource
        }
    }

    /// HMAC-SHA256 of `data`, lowercase hex.
    func mac(_ data: some DataProtocol) -> String {
        var mac = keyedMAC
        mac.update(data: data)
        return Hex.string(mac.finalize())
    }

    /// Names the key without revealing it: what the database records, so a process with another
    /// key is caught at start instead of writing entries no one can verify.
    public var fingerprint: String {
        String(mac(Data("outpost audit key fingerprint".utf8)).prefix(16))
    }
}

/// Why no audit key could be had, or why it does not fit the database.
public enum AuditKeyError: Error, Hashable, Sendable, CustomStringConvertible {
    case noSource
    case unreadable(path: String)
    case uncreatable(path: String, reason: String)
    case tooShort(source: String, bytes: Int)
    /// The log is sealed with a key of another fingerprint.
    case mismatch(expected: String, actual: String)

    /// What is wrong with the key, without the key itself.
    public var description: String {
        switch self {
        case .noSource:
            return "no audit key: give --data DIR (its audit.key), --audit-key-file FILE, or set \(AuditKey.environmentVariable)"
        case .unreadable(let path): return "cannot read the audit key file \(path)"
        case .uncreatable(let path, let reason): return "cannot create the audit key file \(path): \(reason)"
        case .tooShort(let source, let bytes):
            return "the audit key from \(source) has \(bytes) bytes; it needs at least \(AuditKey.minimumBytes) (for example `openssl rand -hex 32`)"
        case .mismatch(let expected, let actual):
            return "the audit log is sealed with another key (fingerprint \(expected); this key's is \(actual)): "
                + "give every process the key the log was started with (audit.key, --audit-key-file or \(AuditKey.environmentVariable))"
        }
    }
}
