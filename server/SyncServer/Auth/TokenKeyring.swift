import Foundation
import JWTKit
import Logging
import NIOConcurrencyHelpers

/// The keys a ``TokenSigner`` accepts, and the sources that change them while the server runs:
/// the data folder's rotated keys (``TokenKey``) and identity providers' JWKS URLs.
///
/// Every change makes a new generation of key material; the jwt-kit collection that verifies
/// tokens is built from it once per generation, so a request reads the keys under a lock and
/// never waits for a rebuild another request already made.
final class TokenKeyring: Sendable {
    /// An identity provider's public key given as PEM, with the algorithm its kind signs with.
    struct PublicKey: Sendable {
        var pem: String
        var algorithm: String
    }

    /// Everything tokens may be signed with, before jwt-kit has it.
    struct Material: Sendable {
        var currentKeyID: String
        var currentSecret: Data
        /// The server's own HS256 keys by kid, the current one included.
        var secrets: [String: Data]
        var publicKeys: [String: PublicKey] = [:]
        /// JWKS documents by where they came from (a file, a URL), with their kids' algorithms.
        var documents: [String: JWKSDocument] = [:]
        var generation = 0
    }

    /// The keys of one generation, as jwt-kit verifies them.
    struct Verifier: Sendable {
        let generation: Int
        /// kid → algorithm, for every key accepted.
        let algorithms: [String: String]
        let ownKeyIDs: Set<String>
        let collection: JWTKeyCollection
    }

    private struct State: Sendable {
        var material: Material
        var verifier: Verifier?
        var folder: OwnKeyFolder?
        var endpoints: [JWKSEndpoint] = []
    }

    private let state: NIOLockedValueBox<State>

    init(currentKeyID: String, currentSecret: Data) {
        state = NIOLockedValueBox(
            State(material: Material(currentKeyID: currentKeyID, currentSecret: currentSecret, secrets: [currentKeyID: currentSecret])))
    }

    private init(copying state: State) {
        self.state = NIOLockedValueBox(state)
    }

    /// Another keyring with the same keys and sources, changed apart from this one from now on.
    func copy() -> TokenKeyring {
        let copy = TokenKeyring(
            copying: state.withLockedValue { state in
                var copy = state
                copy.verifier = nil
                copy.folder = state.folder.map { $0.copy() }
                return copy
            })
        for endpoint in copy.state.withLockedValue({ $0.endpoints }) { endpoint.addListener(copy) }
        return copy
    }

    var material: Material { state.withLockedValue { $0.material } }

    func change(_ body: (inout Material) -> Void) {
        state.withLockedValue { state in
            body(&state.material)
            state.material.generation += 1
        }
    }

    /// The keys of a JWKS from `source`, in place of those it gave before (a new generation
    /// only when they differ).
    func setDocument(_ document: JWKSDocument, from source: String) {
        state.withLockedValue { state in
            guard state.material.documents[source] != document else { return }
            state.material.documents[source] = document
            state.material.generation += 1
        }
    }

    /// Reads the own keys from `folder` again whenever it changes.
    func watch(_ folder: OwnKeyFolder) {
        state.withLockedValue { $0.folder = folder }
    }

    /// Fetches the JWKS at `endpoint` now and whenever its cache lifetime ends or a token names
    /// a kid no key has. Returns the first fetch's failure (the endpoint is kept all the same).
    func add(_ endpoint: JWKSEndpoint) async -> TokenKeyError? {
        endpoint.addListener(self)
        state.withLockedValue { $0.endpoints.append(endpoint) }
        guard let task = endpoint.fetch(when: { _ in true }) else { return nil }
        return await task.value
    }

    /// The keys to verify with now. Starts (without waiting for it) a fetch of every JWKS whose
    /// cache lifetime ended, and reads the key folder again when it changed.
    func verifier() async -> Verifier {
        let (folder, endpoints) = state.withLockedValue { ($0.folder, $0.endpoints) }
        for endpoint in endpoints { _ = endpoint.fetch(when: { $0.isExpired }) }
        if let folder, let keys = folder.changedKeys(urgent: false) { adopt(keys) }
        return await compiled()
    }

    /// Looks again for a kid no key has: reads the key folder if it changed and fetches the
    /// JWKS URLs (each at most once per its policy's interval; requests that ask meanwhile share
    /// the fetch in flight). Returns whether anything new came of it.
    func lookAgain(for kid: String) async -> Bool {
        let (folder, endpoints, generation) = state.withLockedValue { ($0.folder, $0.endpoints, $0.material.generation) }
        if let folder, let keys = folder.changedKeys(urgent: true) { adopt(keys) }
        var fetches: [Task<TokenKeyError?, Never>] = []
        for endpoint in endpoints {
            if let task = endpoint.fetch(when: { $0.mayLookForUnknownKey }) { fetches.append(task) }
        }
        for fetch in fetches { _ = await fetch.value }
        return state.withLockedValue { $0.material.generation } != generation
    }

    private func adopt(_ keys: OwnKeyFolder.Keys) {
        change { material in
            material.currentKeyID = keys.currentKeyID
            material.currentSecret = keys.currentSecret
            material.secrets = keys.secrets
        }
    }

    /// The verifier of the current generation, built when there is none yet.
    private func compiled() async -> Verifier {
        let (material, verifier) = state.withLockedValue { ($0.material, $0.verifier) }
        if let verifier, verifier.generation == material.generation { return verifier }
        let built = await Self.build(material)
        state.withLockedValue { state in
            if state.verifier.map({ $0.generation < built.generation }) ?? true { state.verifier = built }
        }
        return built
    }

    private static func build(_ material: Material) async -> Verifier {
        let collection = JWTKeyCollection()
        var algorithms: [String: String] = [:]
        for (source, document) in material.documents.sorted(by: { $0.key < $1.key }) {
            do {
                try await collection.add(jwksJSON: document.json)
                algorithms.merge(document.algorithms) { _, new in new }
            } catch {
                // Checked when it was read: only a jwt-kit change could get here.
                Logger(label: "outpost.tokens").error("the JWKS of \(source) cannot be used: \(error)")
            }
        }
        for (kid, key) in material.publicKeys {
            let identifier = JWKIdentifier(string: kid)
            switch key.algorithm {
            case "ES256": if let key = try? ES256PublicKey(pem: key.pem) { await collection.add(ecdsa: key, kid: identifier) }
            case "EdDSA": if let key = try? EdDSA.PublicKey(pem: key.pem) { await collection.add(eddsa: key, kid: identifier) }
            default:
                if let key = try? Insecure.RSA.PublicKey(pem: key.pem) { await collection.add(rsa: key, digestAlgorithm: .sha256, kid: identifier) }
            }
            algorithms[kid] = key.algorithm
        }
        // The server's own keys last: no identity provider's key can shadow one of their kids.
        for (kid, secret) in material.secrets {
            await collection.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256, kid: JWKIdentifier(string: kid))
            algorithms[kid] = "HS256"
        }
        return Verifier(generation: material.generation, algorithms: algorithms, ownKeyIDs: Set(material.secrets.keys), collection: collection)
    }
}

/// The keys of a JWKS document that can verify tokens, as JSON jwt-kit reads, with each kid's
/// algorithm.
struct JWKSDocument: Sendable, Equatable {
    var json: String
    var algorithms: [String: String]

    static let algorithms: Set<String> = ["ES256", "RS256", "EdDSA"]

    /// A JWKS file's keys: each must have a kid and an alg of ``algorithms``.
    static func strict(_ json: String) throws(TokenKeyError) -> JWKSDocument {
        guard let keys = Self.keys(of: json) else {
            throw .unusableKey(kid: "?", reason: "the JWKS is not a JSON object with a `keys` list")
        }
        var algorithms: [String: String] = [:]
        for key in keys {
            guard let kid = key["kid"] as? String, let alg = key["alg"] as? String, Self.algorithms.contains(alg) else {
                throw .unusableKey(kid: key["kid"] as? String ?? "?", reason: "every JWKS key needs a kid and an alg of ES256, RS256 or EdDSA")
            }
            algorithms[kid] = alg
        }
        return JWKSDocument(json: json, algorithms: algorithms)
    }

    /// An identity provider's keys: those without an `alg` get their kind's (RSA: RS256, EC
    /// P-256: ES256, OKP Ed25519: EdDSA), and keys for encryption or of other kinds are left out,
    /// as identity providers publish them beside their signing keys.
    static func lenient(_ json: String) throws(TokenKeyError) -> JWKSDocument {
        guard let keys = Self.keys(of: json) else {
            throw .unusableKey(kid: "?", reason: "the JWKS is not a JSON object with a `keys` list")
        }
        var usable: [[String: Any]] = []
        var algorithms: [String: String] = [:]
        for var key in keys where (key["use"] as? String ?? "sig") == "sig" {
            guard let kid = key["kid"] as? String, let alg = key["alg"] as? String ?? Self.algorithm(ofKind: key), Self.algorithms.contains(alg)
            else { continue }
            key["alg"] = alg
            usable.append(key)
            algorithms[kid] = alg
        }
        guard !usable.isEmpty, let data = try? JSONSerialization.data(withJSONObject: ["keys": usable], options: [.sortedKeys]) else {
            throw .unusableKey(kid: "?", reason: "the JWKS has no signing key with a kid of ES256, RS256 or EdDSA")
        }
        return JWKSDocument(json: String(decoding: data, as: UTF8.self), algorithms: algorithms)
    }

    private static func keys(of json: String) -> [[String: Any]]? {
        (try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])?["keys"] as? [[String: Any]]
    }

    private static func algorithm(ofKind key: [String: Any]) -> String? {
        switch (key["kty"] as? String, key["crv"] as? String) {
        case ("RSA", _): "RS256"
        case ("EC", "P-256"): "ES256"
        case ("OKP", "Ed25519"): "EdDSA"
        default: nil
        }
    }
}

/// The data folder's own keys (``TokenKey``), read again when `keys rotate` or `keys retire`
/// changed them, so a running server needs no restart.
final class OwnKeyFolder: Sendable {
    struct Keys: Sendable {
        var currentKeyID: String
        var currentSecret: Data
        /// Where the current key was read, for messages.
        var currentSource: String
        /// Every key accepted, the current one included.
        var secrets: [String: Data]
    }

    /// How often a request looks whether the folder changed, and how often a token naming an
    /// unknown kid may make it look (a look lists one folder and reads one small file).
    static let checkInterval: Duration = .seconds(2)
    static let unknownKeyInterval: Duration = .seconds(1)

    private struct State: Sendable {
        var fingerprint: String
        var lastCheck: ContinuousClock.Instant
        var lastUrgentCheck: ContinuousClock.Instant?
    }

    let directory: URL
    private let state: NIOLockedValueBox<State>

    init(directory: URL) {
        self.directory = directory
        state = NIOLockedValueBox(State(fingerprint: TokenKey.fingerprint(of: directory), lastCheck: .now))
    }

    private init(directory: URL, state: State) {
        self.directory = directory
        self.state = NIOLockedValueBox(state)
    }

    /// A watcher of the same folder that has seen what this one has, for a keyring's copy.
    func copy() -> OwnKeyFolder {
        OwnKeyFolder(directory: directory, state: state.withLockedValue { $0 })
    }

    /// The folder's keys when they changed since last read and the interval allows a look
    /// (`urgent`: a token names an unknown kid); nil otherwise, or when they cannot be read
    /// (logged: the keys already read stay).
    func changedKeys(urgent: Bool) -> Keys? {
        let now = ContinuousClock.now
        let due = state.withLockedValue { state in
            let due =
                urgent
                ? state.lastUrgentCheck.map { now - $0 >= Self.unknownKeyInterval } ?? true
                : now - state.lastCheck >= Self.checkInterval
            if due {
                state.lastCheck = now
                if urgent { state.lastUrgentCheck = now }
            }
            return due
        }
        guard due else { return nil }
        let fingerprint = TokenKey.fingerprint(of: directory)
        guard state.withLockedValue({ $0.fingerprint }) != fingerprint else { return nil }
        do {
            let keys = try TokenKey.ownKeys(in: directory)
            state.withLockedValue { $0.fingerprint = fingerprint }
            Logger(label: "outpost.tokens").notice(
                "token keys read again from \(directory.path): current \(keys.currentKeyID), \(keys.secrets.count) accepted")
            return keys
        } catch {
            Logger(label: "outpost.tokens").error("the token keys in \(directory.path) changed but cannot be read (the earlier keys stay): \(error)")
            return nil
        }
    }
}
