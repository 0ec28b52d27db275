import Crypto
public import Foundation
import SyncProtocol

/// The device's P-256 key pair, which signs each write of a contract with `signed: true`
/// (ES256) so the server can tell which device made it; its public key is registered with the
/// server (`PUT /sync/v1/device-key`) before the first signed write is pushed.
///
/// Give one to ``OfflineStoreConfiguration/deviceSigningKey``: `SecureEnclaveDeviceSigningKey`
/// on Apple devices that have a Secure Enclave (the private key never leaves it), else
/// ``SoftwareDeviceSigningKey``. Keep it where the store's data key is kept (the keychain, or a
/// file beside the key file): a reinstalled app makes a new key, which replaces the old one on
/// the server.
public protocol DeviceSigningKey: Sendable {
    /// The public key, X9.63 form (65 bytes), as the server registers it.
    var publicKeyX963: Data { get }
    /// The ES256 signature of `message` (ECDSA P-256 over its SHA-256), in its 64-byte raw form.
    func signature(for message: Data) throws -> Data
}

extension DeviceSigningKey {
    /// Lowercase hex SHA-256 of ``publicKeyX963``: how the server's audit names this key.
    public var fingerprint: String {
        SHA256.hash(data: publicKeyX963).map { String(format: "%02x", $0) }.joined()
    }
}

/// A P-256 key held in the app's memory and kept in a file (`0600`) like ``FileKeyProvider``'s
/// keys: for platforms without a Secure Enclave (Linux, the simulator, older Macs).
public struct SoftwareDeviceSigningKey: DeviceSigningKey {
    private let privateKey: P256.Signing.PrivateKey

    /// A new random key, kept nowhere.
    public init() {
        privateKey = P256.Signing.PrivateKey()
    }

    /// A key from its raw 32-byte private scalar.
    public init(rawRepresentation: Data) throws {
        privateKey = try P256.Signing.PrivateKey(rawRepresentation: rawRepresentation)
    }

    /// The key kept in `file`, made and written there (readable by the owner only) when the
    /// file does not exist yet.
    public init(loadingOrCreatingAt file: URL) throws {
        if let data = FileManager.default.contents(atPath: file.path) {
            try self.init(rawRepresentation: data)
            return
        }
        self.init()
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        guard FileManager.default.createFile(atPath: file.path, contents: privateKey.rawRepresentation, attributes: [.posixPermissions: 0o600])
        else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: file.path])
        }
    }

    /// The raw private scalar, for the app to keep (in the keychain, say).
    public var rawRepresentation: Data { privateKey.rawRepresentation }

    /// The public key in X9.63 form, as the server registers it.
    public var publicKeyX963: Data { privateKey.publicKey.x963Representation }

    /// The raw ECDSA P-256 signature of `message` over its SHA-256.
    public func signature(for message: Data) throws -> Data {
        try privateKey.signature(for: message).rawRepresentation
    }
}

#if canImport(CryptoKit)
    import CryptoKit

    /// A P-256 key made in and kept by the Secure Enclave: its private key never leaves the chip,
    /// so a copy of the app's files or keychain cannot sign for the device. Apple platforms with a
    /// Secure Enclave only (``isAvailable``); compiled there only.
    public struct SecureEnclaveDeviceSigningKey: DeviceSigningKey {
        private let privateKey: SecureEnclave.P256.Signing.PrivateKey

        /// Whether this device has a Secure Enclave.
        public static var isAvailable: Bool { SecureEnclave.isAvailable }

        /// A new key in the Secure Enclave; keep its ``dataRepresentation`` (in the keychain) to use it again.
        public init() throws {
            privateKey = try SecureEnclave.P256.Signing.PrivateKey()
        }

        /// The key a ``dataRepresentation`` names (usable on this device only).
        public init(dataRepresentation: Data) throws {
            privateKey = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: dataRepresentation)
        }

        /// An opaque handle of the key, meaningful to this device's Secure Enclave only.
        public var dataRepresentation: Data { privateKey.dataRepresentation }

        /// The public key in X9.63 form, as the server registers it.
        public var publicKeyX963: Data { privateKey.publicKey.x963Representation }

        /// The raw ECDSA P-256 signature of `message` over its SHA-256, made in the Secure Enclave.
        public func signature(for message: Data) throws -> Data {
            try privateKey.signature(for: message).rawRepresentation
        }
    }
#endif
