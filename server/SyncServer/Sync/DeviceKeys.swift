import ContractRuntime
import Crypto
import Foundation
import SyncProtocol

/// A device's public key as the server holds it.
struct RegisteredDeviceKey: Hashable, Sendable {
    /// The X9.63 form (65 bytes), base64, as stored.
    var publicKey: String
    /// Lowercase hex SHA-256 of the X9.63 form.
    var fingerprint: String
    /// Seconds since 1970. A key registered at or before a revocation of its device or user is
    /// not used: the revocation covers it as it covers the tokens of that time.
    var registeredAt: Int64
}

/// The devices' public keys, in the server's `device_keys` table (SQL both storages speak,
/// ``StorageReader/serverTableQuery(_:_:)``).
///
/// A key is filed under the (tenant, user, device) of the token that registered it: the route
/// takes no identity from its body, so a device cannot register a key for another. Registering
/// another key for the same device replaces it (a reinstalled app has a new key); the old one
/// then verifies nothing. Each registration that changes something is audited.
enum DeviceKeyStore {
    /// How a registration went (``DeviceKeyRegistered/outcome``).
    enum Outcome: String, Sendable {
        case registered, unchanged, replaced
    }

    /// The audit entry's operation and the entity it names.
    static let auditEntity = "device_key"
    static let registerOperation = AuditOperation(rawValue: "register_key")

    /// The P-256 public key of a registration body (X9.63 or DER SubjectPublicKeyInfo, base64),
    /// or 400 when it is not one.
    static func publicKey(of registration: DeviceKeyRegistration) throws(ServiceError) -> P256.Signing.PublicKey {
        guard registration.algorithm == DeviceSignature.algorithm else {
            throw .malformed("algorithm must be \(DeviceSignature.algorithm); this server takes no other")
        }
        guard registration.publicKey.utf8.count <= 512, let bytes = Data(base64Encoded: registration.publicKey) else {
            throw .malformed("public_key must be base64 of a P-256 public key (X9.63 or DER)")
        }
        if let key = try? P256.Signing.PublicKey(x963Representation: bytes) { return key }
        if let key = try? P256.Signing.PublicKey(derRepresentation: bytes) { return key }
        throw .malformed("public_key is not a P-256 public key (X9.63 or DER SubjectPublicKeyInfo, base64)")
    }

    static func fingerprint(of key: P256.Signing.PublicKey) -> String {
        Hex.sha256(key.x963Representation)
    }

    /// Files `key` under `identity`, replacing the device's earlier key, and audits a change.
    static func register(
        _ key: P256.Signing.PublicKey, for identity: DeviceIdentity, at now: Timestamp, in transaction: any StorageTransaction
    ) async throws -> Outcome {
        let fingerprint = fingerprint(of: key)
        let previous = try await self.key(of: identity, in: transaction)
        let seconds = now.millisecondsSince1970 / 1000
        // Unchanged only when the stored key is still usable: after a revocation, the same key
        // registered again by a re-enrolled device counts from now.
        if let previous, previous.fingerprint == fingerprint, try await isUsable(previous, of: identity, in: transaction) {
            return .unchanged
        }
        _ = try await transaction.serverTableQuery(
            """
            INSERT INTO device_keys (tenant, user_id, device_id, algorithm, public_key, fingerprint, registered_at)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (tenant, user_id, device_id) DO UPDATE SET algorithm = excluded.algorithm, public_key = excluded.public_key,
                fingerprint = excluded.fingerprint, registered_at = excluded.registered_at
            RETURNING fingerprint
            """,
            [
                .text(identity.tenant), .text(identity.userID), .text(identity.deviceID), .text(DeviceSignature.algorithm),
                .text(key.x963Representation.base64EncodedString()), .text(fingerprint), .integer(seconds),
            ])
        let outcome: Outcome = previous == nil ? .registered : .replaced
        var detail: [String: JSONValue] = ["algorithm": .string(DeviceSignature.algorithm), "fingerprint": .string(fingerprint)]
        if let previous { detail["replaced_fingerprint"] = .string(previous.fingerprint) }
        try await transaction.appendAudit(
            AuditEntry(
                tenant: identity.tenant, recordedAt: now.millisecondsSince1970, userID: identity.userID, deviceID: identity.deviceID,
                entity: auditEntity, rowID: identity.deviceID, operation: registerOperation,
                outcome: AuditOutcome(rawValue: outcome.rawValue), detail: CanonicalJSON.text(.object(detail))
            ))
        return outcome
    }

    /// The key registered for `identity`'s device, usable or not.
    static func key(of identity: DeviceIdentity, in reader: any StorageReader) async throws -> RegisteredDeviceKey? {
        try await reader.serverTableQuery(
            "SELECT public_key, fingerprint, registered_at FROM device_keys WHERE tenant = ? AND user_id = ? AND device_id = ?",
            [.text(identity.tenant), .text(identity.userID), .text(identity.deviceID)]
        ).first.flatMap { row in
            guard let key = row.text("public_key"), let fingerprint = row.text("fingerprint"), let at = row.integer("registered_at")
            else { return nil }
            return RegisteredDeviceKey(publicKey: key, fingerprint: fingerprint, registeredAt: at)
        }
    }

    /// Whether no revocation of the device or its user came at or after the key's registration.
    static func isUsable(_ key: RegisteredDeviceKey, of identity: DeviceIdentity, in reader: any StorageReader) async throws -> Bool {
        let state = try await reader.identityState(tenant: identity.tenant, userID: identity.userID, deviceID: identity.deviceID)
        return state.revokedAt.map { key.registeredAt > $0 } ?? true
    }

    /// The keys of a user's devices, for the user's export.
    static func keys(tenant: String, userID: String, in reader: any StorageReader) async throws -> [[String: JSONValue]] {
        try await reader.serverTableQuery(
            """
            SELECT device_id, algorithm, public_key, fingerprint, registered_at FROM device_keys
            WHERE tenant = ? AND user_id = ? ORDER BY device_id
            """,
            [.text(tenant), .text(userID)]
        ).map { row in
            [
                "device_id": .string(row.text("device_id") ?? ""), "algorithm": .string(row.text("algorithm") ?? ""),
                "public_key": .string(row.text("public_key") ?? ""), "fingerprint": .string(row.text("fingerprint") ?? ""),
                "registered_at": .int(row.integer("registered_at") ?? 0),
            ]
        }
    }

    /// Deletes a user's device keys (the user's erasure); returns how many there were.
    static func deleteKeys(tenant: String, userID: String, in transaction: any StorageTransaction) async throws -> Int {
        try await transaction.serverTableQuery(
            "DELETE FROM device_keys WHERE tenant = ? AND user_id = ? RETURNING device_id", [.text(tenant), .text(userID)]
        ).count
    }
}

/// Checks the device signatures of a push's new mutations before any of them is applied: a
/// mutation of a `signed: true` contract must carry one, and any signature carried must hold
/// under the key the pushing device registered (and not revoked since), over the bytes
/// ``DeviceSignature/signedBytes(of:schemaVersion:signer:)`` gives for this mutation, this
/// device, this user and this push stream. One that does not refuses the whole push with 403
/// `signature_invalid`: nothing of it is applied, and the device is not told more than which
/// mutation failed and why.
struct SignatureVerifier {
    let identity: DeviceIdentity
    let clientID: String
    let schema: [String: Int]
    let catalog: ContractCatalog

    /// What the audit keeps of a verified signature.
    struct Verified: Sendable {
        var signature: String
        var fingerprint: String
    }

    /// Whether the contract named by `mutation` requires a signature.
    func requiresSignature(_ mutation: Mutation) -> Bool {
        catalog.signedContracts.contains(mutation.entity)
    }

    /// Signatures checked before the push's write transaction, under the key the device had
    /// registered then (``preverify(_:in:)``).
    struct Preverified: Sendable {
        var fingerprint: String
        /// The outcome of each signed mutation, by `client_mutation_id`.
        var outcomes: [String: Result<Verified, ServiceError>]
    }

    /// The mutations whose signature is checked: those that carry one, and those of a contract
    /// that requires one.
    func signed(_ mutations: [Mutation]) -> [Mutation] {
        mutations.filter { $0.signature != nil || requiresSignature($0) }
    }

    /// Checks every signature of `mutations` under the key the device registered, read from
    /// `storage` before the write transaction: the costly part of verification (about 40 µs of
    /// ES256 each) then runs beside other pushes instead of under SQLite's one writer. `nil`
    /// when nothing is signed or the device has no usable key (``verify(_:in:preverified:)``
    /// then decides inside the transaction, as it does for a key replaced meanwhile).
    func preverify(_ mutations: [Mutation], in storage: any SyncStorage) async throws -> Preverified? {
        let signed = signed(mutations)
        guard !signed.isEmpty, let key = try await storage.read({ reader in try await usableKey(in: reader) }) else { return nil }
        var outcomes: [String: Result<Verified, ServiceError>] = [:]
        for mutation in signed where mutation.signature != nil {
            outcomes[mutation.clientMutationId] = Result { () throws(ServiceError) in try check(mutation, under: key) }
        }
        return Preverified(fingerprint: key.fingerprint, outcomes: outcomes)
    }

    /// The verified signatures by `client_mutation_id`, or 403 for the first that does not hold.
    /// The key is read in the transaction (a revocation or a replacement since counts); a
    /// mutation `preverified` under that same key is not checked again.
    func verify(_ mutations: [Mutation], in reader: any StorageReader, preverified: Preverified? = nil) async throws -> [String: Verified] {
        let signed = signed(mutations)
        guard !signed.isEmpty else { return [:] }
        let key = try await usableKey(in: reader)
        let earlier = preverified.flatMap { $0.fingerprint == key?.fingerprint ? $0.outcomes : nil } ?? [:]
        var verified: [String: Verified] = [:]
        for mutation in signed {
            guard mutation.signature != nil else {
                throw refusal(mutation, "\(mutation.entity) requires a device signature (signed: true) and this mutation carries none")
            }
            guard let key else {
                throw refusal(mutation, "this device has no registered key; register it with PUT /sync/v1/device-key, then push again")
            }
            verified[mutation.clientMutationId] = try earlier[mutation.clientMutationId]?.get() ?? check(mutation, under: key)
        }
        return verified
    }

    /// The device's registered key, when it has one it may still use (not revoked since).
    private func usableKey(in reader: any StorageReader) async throws -> (public: P256.Signing.PublicKey, fingerprint: String)? {
        guard let registered = try await DeviceKeyStore.key(of: identity, in: reader),
            try await DeviceKeyStore.isUsable(registered, of: identity, in: reader),
            let bytes = Data(base64Encoded: registered.publicKey),
            let publicKey = try? P256.Signing.PublicKey(x963Representation: bytes)
        else { return nil }
        return (publicKey, registered.fingerprint)
    }

    /// The signature of `mutation` (which carries one) checked under `key`.
    private func check(_ mutation: Mutation, under key: (public: P256.Signing.PublicKey, fingerprint: String)) throws(ServiceError) -> Verified {
        guard let text = mutation.signature, text.utf8.count <= 128, let raw = Data(base64Encoded: text),
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: raw)
        else {
            throw refusal(mutation, "the signature is not base64 of a 64-byte ES256 signature")
        }
        let signer = DeviceSignature.Signer(tenant: identity.tenant, userID: identity.userID, deviceID: identity.deviceID, clientID: clientID)
        let version = schema[mutation.entity] ?? catalog.currentVersions[mutation.entity] ?? 0
        let bytes = DeviceSignature.signedBytes(of: mutation, schemaVersion: version, signer: signer)
        guard key.public.isValidSignature(signature, for: bytes) else {
            throw refusal(mutation, "the signature does not hold for this mutation under this device's registered key")
        }
        return Verified(signature: text, fingerprint: key.fingerprint)
    }

    private func refusal(_ mutation: Mutation, _ message: String) -> ServiceError {
        ServiceError(
            status: 403, .signatureInvalid, "mutation with seq \(mutation.seq): \(message); nothing of this push was applied",
            details: .object(["seq": .int(mutation.seq), "client_mutation_id": .string(mutation.clientMutationId)])
        )
    }
}
