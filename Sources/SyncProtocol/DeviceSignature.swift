import ContractRuntime
public import Foundation

/// What a device signs of each write, and the wire shapes of registering its key.
///
/// A device holds a P-256 key pair (the Secure Enclave's where there is one) and registers its
/// public key with `PUT /sync/v1/device-key`; the server files it under the (tenant, user,
/// device) of the token, never of the body. Each write of a contract with `signed: true` (and any
/// write that carries a signature) is signed with ES256 — ECDSA P-256 over the SHA-256 of
/// ``signedBytes(of:schemaVersion:signer:)`` — and the server verifies it with the registered key.
///
/// The signed bytes are a domain tag then length-prefixed fields, so no two different writes
/// encode alike, whatever their text holds. They bind who signed (tenant, user, device), the
/// push stream and the write's idempotency key (`client_id`, `client_mutation_id`), the
/// contract and the schema version it was written with, the operation, the row or event id, and
/// everything the write says (the payload's and base's canonical JSON, the clocks, the event's
/// time and hash). A signature therefore cannot be replayed on another write, moved to another
/// payload, or claimed by another device or user (re-attribution). `seq` is left out on purpose:
/// the outbox signs a write when it is queued, before its `seq` is known, and the
/// `client_mutation_id` already names it once and for all.
public enum DeviceSignature {
    /// The only algorithm: ECDSA with P-256 and SHA-256 (JOSE `ES256`).
    public static let algorithm = "ES256"

    /// The version of the signed form; a new form gets a new tag, never a changed meaning.
    static let domain = "outpost.device-signature.v1"

    /// Who signs: the identity the token names, and the installation's push stream.
    public struct Signer: Hashable, Sendable {
        /// The tenant the token names.
        public var tenant: String
        /// The user the token names.
        public var userID: String
        /// The device the token names.
        public var deviceID: String
        /// The installation's push stream (``PushRequest/clientId``).
        public var clientID: String

        /// A signer from the token's identity and the push stream.
        public init(tenant: String, userID: String, deviceID: String, clientID: String) {
            self.tenant = tenant
            self.userID = userID
            self.deviceID = deviceID
            self.clientID = clientID
        }
    }

    /// The bytes a device signs for `mutation`, written with `schemaVersion` of its contract.
    public static func signedBytes(of mutation: Mutation, schemaVersion: Int, signer: Signer) -> Data {
        var bytes = Data()
        func text(_ value: String) {
            let utf8 = Array(value.utf8)
            withUnsafeBytes(of: UInt32(utf8.count).bigEndian) { bytes.append(contentsOf: $0) }
            bytes.append(contentsOf: utf8)
        }
        func optional(_ value: String?) {
            if let value {
                bytes.append(1)
                text(value)
            } else {
                bytes.append(0)
            }
        }
        text(domain)
        text(signer.tenant)
        text(signer.userID)
        text(signer.deviceID)
        text(signer.clientID)
        text(mutation.clientMutationId)
        text(mutation.entity)
        text(String(schemaVersion))
        text(mutation.op.rawValue)
        text(mutation.id)
        optional(mutation.payload.map(CanonicalJSON.text))
        optional(mutation.base.map { CanonicalJSON.text(.object($0)) })
        optional(mutation.baseVersion.map { String($0) })
        optional(mutation.hlc)
        optional(mutation.occurredAt.map { String($0.millisecondsSince1970) })
        optional(mutation.hash?.lowercased())
        return bytes
    }
}

/// `PUT /sync/v1/device-key`: the public key of the calling device, for the identity its token names.
public struct DeviceKeyRegistration: Codable, Sendable, Hashable {
    /// The P-256 public key, base64 of its X9.63 form (65 bytes, `04` then x and y) or of its
    /// DER SubjectPublicKeyInfo.
    public var publicKey: String
    /// ``DeviceSignature/algorithm``.
    public var algorithm: String

    /// A registration of a base64 public key; the algorithm is `ES256`.
    public init(publicKey: String, algorithm: String = DeviceSignature.algorithm) {
        self.publicKey = publicKey
        self.algorithm = algorithm
    }

    enum CodingKeys: String, CodingKey {
        case publicKey = "public_key"
        case algorithm
    }
}

/// The answer to a key registration.
public struct DeviceKeyRegistered: Codable, Sendable, Hashable {
    /// Lowercase hex SHA-256 of the key's X9.63 form: what the audit log names each signed write with.
    public var fingerprint: String
    /// `registered` (no key before), `unchanged` (the same key again) or `replaced` (another
    /// key before: the device was reinstalled).
    public var outcome: String

    /// An answer from the key's fingerprint and what the registration did.
    public init(fingerprint: String, outcome: String) {
        self.fingerprint = fingerprint
        self.outcome = outcome
    }
}
