import ContractRuntime
import Contracts
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import OutpostTestSupport
import SampleServerApps
import SyncProtocol
import Testing

@testable import SyncServer

/// The sample contracts with `Statement` (an append-only entity) signed, as `signed: true`
/// generates them: the engines read the flag from the descriptors, generically.
enum SignedSampleContracts: ContractSchema {
    static let signedNames: Set<String> = ["Statement"]
    static var scopes: [ScopeDescriptor] { ContractRegistry.scopes }
    static var entities: [EntityDescriptor] {
        ContractRegistry.entities.map { entity in
            var entity = entity
            entity.isSigned = signedNames.contains(entity.name)
            return entity
        }
    }
    static var events: [EventDescriptor] { ContractRegistry.events }
    static var entityTypes: [any ContractEntity.Type] { ContractRegistry.entityTypes }
    static var eventTypes: [any ContractEvent.Type] { ContractRegistry.eventTypes }
    static var clientMigrations: [ContractMigration] { ContractRegistry.clientMigrations }
    static var serverMigrations: [ContractMigration] { ContractRegistry.serverMigrations }
    static var serverPostgresMigrations: [ContractMigration] { ContractRegistry.serverPostgresMigrations }
}

/// Device-signed writes against the real server on loopback, on both storages: a device's key
/// is registered for its token's identity only, a signed contract's writes need a signature
/// that holds under that key over exactly that write, and the audit keeps it (docs/security.md).
@Suite("Device signatures")
struct DeviceSignatureTests {
    static let tenant = HostileHarness.tenant
    static let secret = HostileHarness.secret

    /// A loopback server over a storage of the signed sample contracts.
    struct Harness {
        let directory: TemporaryDirectory
        let storage: any SyncStorage
        let signer: TokenSigner

        static func make(_ kind: StorageKind) async throws -> Harness {
            let directory = try TemporaryDirectory(prefix: "sync-signatures")
            let storage = try await kind.makeStorage(in: directory.url, contracts: SignedSampleContracts.self)
            return Harness(directory: directory, storage: storage, signer: try TokenSigner(secret: DeviceSignatureTests.secret))
        }

        func live<Value: Sendable>(_ body: @Sendable (any TestClientProtocol) async throws -> Value) async throws -> Value {
            let environment = ServerEnvironment(
                storage: storage, signer: signer,
                apps: SampleServerApps.all)
            return try await LoopbackServer.run(configuration: HostileHarness.defaultConfiguration, environment: environment) { server in
                try await body(server.client)
            }
        }

        func token(_ user: String, _ device: String) -> String {
            signer.token(tenant: DeviceSignatureTests.tenant, user: user, device: device, teams: ["team-1"])
        }

        func auditEntries() async throws -> [AuditEntry] {
            let key = storage.auditKey
            return try await storage.read { reader in
                var entries = try await reader.auditEntries(after: 0, limit: 100_000)
                for index in entries.indices {
                    entries[index].detail = try await AuditChain.readableDetail(of: entries[index], in: reader, key: key) ?? ""
                }
                return entries
            }
        }

        func statement(_ id: String) async throws -> StoredRow? {
            try await storage.read { reader in
                try await reader.row(in: ContractTable(Statement.descriptor), tenant: DeviceSignatureTests.tenant, id: id)
            }
        }
    }

    static func statement(_ seq: Int64, _ id: String, verb: String = "experienced") -> Mutation {
        Mutation(
            seq: seq, clientMutationId: "cm-\(id)-\(seq)", entity: "Statement", op: .create, id: id,
            payload: .object([
                "id": .string(id), "verb": .string(verb), "object_id": .string("lesson-1"),
                "stated_at": .string("2026-01-01T07:00:00.000Z"),
            ]))
    }

    /// `mutation` signed with `key` as device `device` of `user` on stream `client` would sign it.
    static func signed(
        _ mutation: Mutation, with key: P256.Signing.PrivateKey, user: String = "alice", device: String = "alice-phone",
        client: String = "alice-client"
    ) throws -> Mutation {
        var mutation = mutation
        mutation.signature = try key.signature(for: signedBytes(mutation, user: user, device: device, client: client)).rawRepresentation
            .base64EncodedString()
        return mutation
    }

    static func signedBytes(_ mutation: Mutation, user: String, device: String, client: String) -> Data {
        DeviceSignature.signedBytes(
            of: mutation, schemaVersion: Statement.descriptor.currentVersion,
            signer: DeviceSignature.Signer(tenant: tenant, userID: user, deviceID: device, clientID: client))
    }

    static func push(_ mutations: [Mutation], client: String = "alice-client") -> PushRequest {
        PushRequest(clientId: client, schema: [:], mutations: mutations)
    }

    static func register(
        _ key: P256.Signing.PublicKey, token: String, extra: [String: String] = [:], on client: any TestClientProtocol
    ) async throws -> TestResponse {
        var body = ["public_key": key.x963Representation.base64EncodedString(), "algorithm": "ES256"]
        body.merge(extra) { _, new in new }
        return try await client.execute(
            uri: "/sync/v1/device-key", method: .put, headers: HostileHarness.headers(token),
            body: ByteBuffer(bytes: try JSONEncoder().encode(body)))
    }

    static func registered(_ response: TestResponse) throws -> DeviceKeyRegistered {
        try JSONDecoder().decode(DeviceKeyRegistered.self, from: Data(response.body.readableBytesView))
    }

    @Test(
        "a signed write of the registered device is applied; the audit keeps its signature and key, and the chain holds",
        arguments: StorageKind.allCases)
    func signedWriteApplied(_ kind: StorageKind) async throws {
        let h = try await Harness.make(kind)
        let key = P256.Signing.PrivateKey()
        let mutation = try Self.signed(Self.statement(1, "st-1"), with: key)
        try await h.live { client in
            let registration = try await Self.register(key.publicKey, token: h.token("alice", "alice-phone"), on: client)
            #expect(registration.status == .ok)
            #expect(try Self.registered(registration).outcome == "registered")
            #expect(try Self.registered(registration).fingerprint == Hex.sha256(key.publicKey.x963Representation))
            // Registering the same key again changes nothing and records nothing.
            let again = try await Self.register(key.publicKey, token: h.token("alice", "alice-phone"), on: client)
            #expect(try Self.registered(again).outcome == "unchanged")

            let response = try await client.push(Self.push([mutation]), token: h.token("alice", "alice-phone"))
            #expect(response.status == .ok, "\(response.bodyText)")
            #expect(try response.pushResults.map(\.status) == [.applied])
        }
        #expect(try await h.statement("st-1") != nil)
        let entries = try await h.auditEntries()
        #expect(entries.filter { $0.operation == DeviceKeyStore.registerOperation }.count == 1)
        let push = try #require(entries.first { $0.operation == .push })
        let detail = try #require(JSONParser.parse(push.detail))
        guard case .object(let members) = detail, case .array(let changes)? = members["changes"], case .object(let change)? = changes.first,
            case .object(let mutationDetail)? = change["detail"]
        else {
            Issue.record("unexpected audit detail \(push.detail)")
            return
        }
        #expect(mutationDetail["signature"] == .string(try #require(mutation.signature)))
        #expect(mutationDetail["key_fingerprint"] == .string(Hex.sha256(key.publicKey.x963Representation)))
        let verification = try await AuditChain.verify(h.storage)
        guard case .intact(let count, _) = verification else {
            Issue.record("the audit chain does not hold: \(verification)")
            return
        }
        #expect(count == entries.count)

        // `sync-server audit export` writes it as it is.
        var exported = Data()
        _ = try await AuditChain.export(h.storage) { exported.append($0) }
        #expect(String(decoding: exported, as: UTF8.self).contains(try #require(mutation.signature)))
    }

    @Test("a signature made with another key than the registered one: 403 signature_invalid, nothing applied", arguments: StorageKind.allCases)
    func forgedSignature(_ kind: StorageKind) async throws {
        let h = try await Harness.make(kind)
        let registered = P256.Signing.PrivateKey()
        let forger = P256.Signing.PrivateKey()
        try await h.live { client in
            _ = try await Self.register(registered.publicKey, token: h.token("alice", "alice-phone"), on: client)
            let auditBefore = try await h.auditEntries().count
            // An honest write first: the push is refused whole, so it is not applied either.
            let honest = try Self.signed(Self.statement(1, "st-0"), with: registered)
            let forged = try Self.signed(Self.statement(2, "st-1"), with: forger)
            let response = try await client.push(Self.push([honest, forged]), token: h.token("alice", "alice-phone"))
            #expect(response.status == .forbidden)
            #expect(try response.errorDetail.code == .signatureInvalid)
            #expect(try await h.auditEntries().count == auditBefore)
        }
        #expect(try await h.statement("st-0") == nil)
        #expect(try await h.statement("st-1") == nil)
    }

    @Test(
        "a valid signature replayed on another id, payload or mutation id, or a signed write without its signature: refused",
        arguments: StorageKind.allCases)
    func replayedOrMissingSignature(_ kind: StorageKind) async throws {
        let h = try await Harness.make(kind)
        let key = P256.Signing.PrivateKey()
        let original = try Self.signed(Self.statement(1, "st-1"), with: key)
        var otherID = Self.statement(1, "st-2")
        otherID.signature = original.signature
        var otherPayload = Self.statement(1, "st-1", verb: "completed")
        otherPayload.signature = original.signature
        var otherMutationID = original
        otherMutationID.clientMutationId = "cm-another"
        let unsigned = Self.statement(1, "st-1")
        let attempts = [otherID, otherPayload, otherMutationID, unsigned]
        try await h.live { client in
            _ = try await Self.register(key.publicKey, token: h.token("alice", "alice-phone"), on: client)
            for attempt in attempts {
                let response = try await client.push(Self.push([attempt]), token: h.token("alice", "alice-phone"))
                #expect(response.status == .forbidden, "\(attempt)")
                #expect(try response.errorDetail.code == .signatureInvalid)
            }
            // On another stream of the same device the signature names the wrong client_id too.
            let otherStream = try await client.push(Self.push([original], client: "alice-other"), token: h.token("alice", "alice-phone"))
            #expect(try otherStream.errorDetail.code == .signatureInvalid)
            // The original still applies: nothing moved the stream.
            let response = try await client.push(Self.push([original]), token: h.token("alice", "alice-phone"))
            #expect(try response.pushResults.map(\.status) == [.applied])
        }
        #expect(try await h.statement("st-2") == nil)
    }

    @Test(
        "re-attribution: another device pushing alice's signed write, or registering a key in alice's name, gets nothing",
        arguments: StorageKind.allCases)
    func reattributedSignature(_ kind: StorageKind) async throws {
        let h = try await Harness.make(kind)
        let alice = P256.Signing.PrivateKey()
        let mallory = P256.Signing.PrivateKey()
        let alicesWrite = try Self.signed(Self.statement(1, "st-1"), with: alice, client: "mallory-client")
        try await h.live { client in
            _ = try await Self.register(alice.publicKey, token: h.token("alice", "alice-phone"), on: client)
            // Mallory's body names alice: the key is filed under mallory's token all the same.
            let registration = try await Self.register(
                mallory.publicKey, token: h.token("mallory", "mallory-phone"), extra: ["user": "alice", "device": "alice-phone"], on: client)
            #expect(try Self.registered(registration).outcome == "registered")

            // Alice's signature pushed by mallory, on mallory's own stream.
            let stolen = try await client.push(Self.push([alicesWrite], client: "mallory-client"), token: h.token("mallory", "mallory-phone"))
            #expect(stolen.status == .forbidden)
            #expect(try stolen.errorDetail.code == .signatureInvalid)
            // The same user's other device cannot use the phone's signature either.
            let sibling = try await client.push(Self.push([alicesWrite], client: "mallory-client-2"), token: h.token("alice", "alice-tablet"))
            #expect(try sibling.errorDetail.code == .signatureInvalid)
            // Mallory re-signing alice's write as if mallory were alice: the key is not alice's.
            let impersonated = try Self.signed(Self.statement(1, "st-1"), with: mallory, client: "mallory-client")
            let response = try await client.push(Self.push([impersonated], client: "mallory-client"), token: h.token("alice", "alice-phone"))
            #expect(try response.errorDetail.code == .signatureInvalid)
        }
        let aliceIdentity = DeviceIdentity(tenant: Self.tenant, userID: "alice", deviceID: "alice-phone", expiresAt: .max)
        let stored = try await h.storage.read { try await DeviceKeyStore.key(of: aliceIdentity, in: $0) }
        #expect(stored?.fingerprint == Hex.sha256(alice.publicKey.x963Representation))
        #expect(try await h.statement("st-1") == nil)
    }

    @Test("an admin token registers no device key; a body that is not a P-256 key is 400 and stores nothing", arguments: StorageKind.allCases)
    func registrationRefusals(_ kind: StorageKind) async throws {
        let h = try await Harness.make(kind)
        try await h.live { client in
            let admin = h.signer.token(tenant: Self.tenant, user: "admin", device: "console", teams: [], isAdmin: true)
            #expect(try await Self.register(P256.Signing.PrivateKey().publicKey, token: admin, on: client).status == .forbidden)
            for body in [#"{"public_key": "not base64"}"#, #"{"public_key": "AAAA"}"#, #"{"public_key": 3}"#, "[]"] {
                let response = try await client.execute(
                    uri: "/sync/v1/device-key", method: .put, headers: HostileHarness.headers(h.token("alice", "alice-phone")),
                    body: ByteBuffer(string: body))
                #expect(response.status == .badRequest, "\(body)")
            }
            let p384 = P384.Signing.PrivateKey().publicKey.x963Representation.base64EncodedString()
            let wrongCurve = try await client.execute(
                uri: "/sync/v1/device-key", method: .put, headers: HostileHarness.headers(h.token("alice", "alice-phone")),
                body: ByteBuffer(string: #"{"public_key": "\#(p384)"}"#))
            #expect(wrongCurve.status == .badRequest)
            let otherAlgorithm = try await Self.register(
                P256.Signing.PrivateKey().publicKey, token: h.token("alice", "alice-phone"), extra: ["algorithm": "RS256"], on: client)
            #expect(otherAlgorithm.status == .badRequest)
        }
        #expect(try await h.storage.read { try await $0.serverTableQuery("SELECT device_id FROM device_keys", []) }.isEmpty)
    }

    @Test(
        "a reinstall replaces the key (audited; the old key verifies nothing); a revocation makes the key unusable until registered again",
        arguments: StorageKind.allCases)
    func replacementAndRevocation(_ kind: StorageKind) async throws {
        let h = try await Harness.make(kind)
        let service = PushService(storage: h.storage, clock: PushFixedClock(), reducers: SampleServerApps.reducers)
        let alice = DeviceIdentity(tenant: Self.tenant, userID: "alice", deviceID: "alice-phone", expiresAt: .max)
        let first = P256.Signing.PrivateKey()
        let reinstalled = P256.Signing.PrivateKey()
        let t0 = PushFixedClock().time
        func register(_ key: P256.Signing.PrivateKey, at seconds: Int64) async throws -> DeviceKeyStore.Outcome {
            let time = Timestamp(millisecondsSince1970: t0.millisecondsSince1970 + seconds * 1000)
            return try await h.storage.write { try await DeviceKeyStore.register(key.publicKey, for: alice, at: time, in: $0) }
        }
        func push(_ mutation: Mutation) async -> ServiceError? {
            do {
                _ = try await service.push(Self.push([mutation]), identity: alice)
                return nil
            } catch {
                return error
            }
        }
        #expect(try await register(first, at: 0) == .registered)
        #expect(try await register(reinstalled, at: 10) == .replaced)
        #expect(await push(try Self.signed(Self.statement(1, "st-1"), with: first))?.detail.code == .signatureInvalid)
        #expect(await push(try Self.signed(Self.statement(1, "st-1"), with: reinstalled)) == nil)
        let replacement = try #require(try await h.auditEntries().first { $0.outcome.rawValue == "replaced" })
        #expect(replacement.detail.contains(Hex.sha256(first.publicKey.x963Representation)))

        // Revoked after its registration: the key verifies nothing, until the re-enrolled
        // device registers (the same key) again.
        let revokedAt = t0.millisecondsSince1970 / 1000 + 20
        try await h.storage.write { try await $0.revoke(tenant: Self.tenant, kind: .device, subject: "alice-phone", at: revokedAt) }
        #expect(await push(try Self.signed(Self.statement(2, "st-2"), with: reinstalled))?.detail.code == .signatureInvalid)
        #expect(try await register(reinstalled, at: 30) == .replaced)
        #expect(await push(try Self.signed(Self.statement(2, "st-2"), with: reinstalled)) == nil)
    }

    @Test(
        "on a contract that does not require them, a signature sent is still checked: a bad one refuses the push, a good one is audited",
        arguments: StorageKind.allCases)
    func signatureOnAnUnsignedContract(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        let key = P256.Signing.PrivateKey()
        let valid = try Self.signed(Self.statement(1, "st-1"), with: key)
        var signedOther = try Self.signed(Self.statement(1, "st-2"), with: key)
        signedOther.payload = Self.statement(1, "st-2", verb: "completed").payload
        let tampered = signedOther
        let unsignedWrite = Self.statement(2, "st-3")
        try await h.live { client in
            let token = h.token(user: "alice", device: "alice-phone")
            _ = try await Self.register(key.publicKey, token: token, on: client)
            let refused = try await client.push(Self.push([tampered]), token: token)
            #expect(refused.status == .forbidden)
            #expect(try refused.errorDetail.code == .signatureInvalid)
            let applied = try await client.push(Self.push([valid, unsignedWrite]), token: token)
            #expect(try applied.pushResults.map(\.status) == [.applied, .applied], "\(applied.bodyText)")
        }
        let audit = try await h.storage.read { reader in
            let entries = try await reader.auditEntries(after: 0, limit: 1000)
            return try await AuditChain.readableDetails(of: entries, in: reader, key: h.storage.auditKey).compactMap { $0 }
        }
        let push = try #require(audit.first { $0.contains("\"changes\"") })
        #expect(push.contains(try #require(valid.signature)))
        // Only the signed mutation names a key.
        #expect(push.components(separatedBy: "\"key_fingerprint\"").count == 2, "\(push)")
    }

    @Test("a user's export lists their devices' keys; their erasure deletes them", arguments: StorageKind.allCases)
    func exportAndErasure(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        let key = P256.Signing.PrivateKey()
        let fingerprint = Hex.sha256(key.publicKey.x963Representation)
        try await h.live { client in
            let token = h.token(user: "alice", device: "alice-phone")
            _ = try await Self.register(key.publicKey, token: token, on: client)
            _ = try await client.push(Self.push([try Self.signed(Self.statement(1, "st-1"), with: key)]), token: token)
            let export = try await client.execute(uri: "/admin/v1/users/alice/export", method: .get, headers: HostileHarness.headers(h.adminToken))
            #expect(export.status == .ok)
            let keyLine = try #require(String(buffer: export.body).split(separator: "\n").first { $0.contains("\"device_key\"") })
            #expect(
                keyLine.contains(fingerprint) && keyLine.contains("alice-phone")
                    && keyLine.contains(key.publicKey.x963Representation.base64EncodedString()))

            let erased = try await client.execute(uri: "/admin/v1/users/alice", method: .delete, headers: HostileHarness.headers(h.adminToken))
            #expect(erased.status == .ok, "\(erased.bodyText)")
        }
        let left = try await h.storage.read { try await $0.serverTableQuery("SELECT device_id FROM device_keys WHERE user_id = ?", [.text("alice")]) }
        #expect(left.isEmpty)
    }
}
