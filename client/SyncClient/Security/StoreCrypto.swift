import Crypto
import Foundation

/// The store's sealing and signing, under keys derived from the tenant key of each key version.
///
/// - Sealed values say which key version sealed them: `0x01 ‖ AES-GCM combined box` (nonce,
///   ciphertext, tag) for key version 1, the format of stores from before rotation; `0x02 ‖
///   version (UInt32, big-endian) ‖ box` for later versions. The associated data binds each
///   sealed value to where it belongs (table, column and row; or outbox entry), so a sealed
///   value copied elsewhere does not open.
/// - Outbox HMACs are HMAC-SHA256 over length-prefixed fields (``mac(_:)``), made with the
///   current version's key; while a rotation is under way a MAC made with the previous
///   version's key is valid too.
///
/// The keys live in a shared box, so that a rotation changes them for every copy (the row
/// codec's included) at once.
struct StoreCrypto: Sendable {
    /// `SymmetricKey` is an immutable value that swift-crypto does not mark `Sendable` (CryptoKit does).
    struct VersionKeys: @unchecked Sendable {
        let version: Int
        let field: SymmetricKey
        let outbox: SymmetricKey
        let mac: SymmetricKey

        init(version: Int, tenantKey: SymmetricKey) {
            func derive(_ label: String) -> SymmetricKey {
                HKDF<SHA256>.deriveKey(
                    inputKeyMaterial: tenantKey, salt: Data("outpost.client.v1".utf8), info: Data(label.utf8), outputByteCount: 32
                )
            }
            self.version = version
            field = derive("field-seal")
            outbox = derive("outbox-seal")
            mac = derive("outbox-mac")
        }

        /// A value that identifies the key without revealing it, kept in `metadata` to detect a
        /// lost or replaced key at open.
        var keyCheck: String {
            StoreCrypto.mac([Data("outpost.key-check".utf8)], key: mac).map { String(format: "%02x", $0) }.joined()
        }
    }

    /// The keys in use: `current` seals and signs; `previous` (during a rotation) still opens and verifies.
    struct KeyRing: Sendable {
        var current: VersionKeys
        var previous: VersionKeys?

        func keys(version: Int) -> VersionKeys? {
            if current.version == version { return current }
            if let previous, previous.version == version { return previous }
            return nil
        }
    }

    private let ring: Locked<KeyRing>

    init(tenantKey: SymmetricKey, version: Int = 1) {
        ring = Locked(KeyRing(current: VersionKeys(version: version, tenantKey: tenantKey)))
    }

    var keyRing: KeyRing {
        get { ring.withLock { $0 } }
        nonmutating set { ring.withLock { $0 = newValue } }
    }

    private var current: VersionKeys { keyRing.current }

    /// The key version new seals and MACs are made with.
    var currentVersion: Int { current.version }

    /// The check value of the current key version.
    var keyCheck: String { current.keyCheck }

    static let legacyFormat: UInt8 = 1
    static let versionedFormat: UInt8 = 2

    struct OpenFailure: Error {}

    // MARK: Sealing

    /// The bytes every value sealed under key `version` starts with.
    static func header(version: Int) -> Data {
        guard version != 1 else { return Data([legacyFormat]) }
        return Data([versionedFormat]) + withUnsafeBytes(of: UInt32(truncatingIfNeeded: version).bigEndian) { Data($0) }
    }

    /// The key version a sealed value names, and where its box starts.
    static func sealedVersion(_ sealed: Data) -> (version: Int, box: Data)? {
        switch sealed.first {
        case legacyFormat: return (1, sealed.dropFirst())
        case versionedFormat:
            guard sealed.count > 5 else { return nil }
            let version = sealed.dropFirst().prefix(4).reduce(0) { $0 << 8 | Int($1) }
            return (version, sealed.dropFirst(5))
        default: return nil
        }
    }

    private static func seal(_ plaintext: Data, keys: VersionKeys, key: KeyPath<VersionKeys, SymmetricKey>, context: String) throws -> Data {
        let box = try AES.GCM.seal(plaintext, using: keys[keyPath: key], authenticating: Data(context.utf8))
        guard let combined = box.combined else { throw OpenFailure() }
        return header(version: keys.version) + combined
    }

    private func open(_ sealed: Data, key: KeyPath<VersionKeys, SymmetricKey>, context: String) throws(OpenFailure) -> Data {
        guard let parsed = Self.sealedVersion(sealed), let keys = keyRing.keys(version: parsed.version) else { throw OpenFailure() }
        do {
            let box = try AES.GCM.SealedBox(combined: parsed.box)
            return try AES.GCM.open(box, using: keys[keyPath: key], authenticating: Data(context.utf8))
        } catch {
            throw OpenFailure()
        }
    }

    static func fieldContext(table: String, column: String, id: String) -> String {
        "field\u{0}\(table)\u{0}\(column)\u{0}\(id)"
    }

    /// Seals the value of an `encrypted` field for its column.
    func sealField(_ plaintext: Data, table: String, column: String, id: String) throws -> Data {
        try Self.seal(plaintext, keys: current, key: \.field, context: Self.fieldContext(table: table, column: column, id: id))
    }

    func openField(_ sealed: Data, table: String, column: String, id: String) throws(OpenFailure) -> Data {
        try open(sealed, key: \.field, context: Self.fieldContext(table: table, column: column, id: id))
    }

    /// Seals something kept with the outbox (an entry's payload, a conflict's rows) under the
    /// outbox key; `context` names what and where.
    func sealRecord(_ plaintext: Data, context: String) throws -> Data {
        try Self.seal(plaintext, keys: current, key: \.outbox, context: context)
    }

    func openRecord(_ sealed: Data, context: String) throws(OpenFailure) -> Data {
        try open(sealed, key: \.outbox, context: context)
    }

    // MARK: Signing

    /// HMAC-SHA256 over the fields, each written as its 8-byte big-endian length then its bytes.
    private static func mac(_ fields: [Data], key: SymmetricKey) -> Data {
        var hmac = HMAC<SHA256>(key: key)
        for field in fields {
            hmac.update(data: withUnsafeBytes(of: UInt64(field.count).bigEndian) { Data($0) })
            hmac.update(data: field)
        }
        return Data(hmac.finalize())
    }

    /// The MAC of `fields` under the current key version.
    func mac(_ fields: [Data]) -> Data {
        Self.mac(fields, key: current.mac)
    }

    /// Whether `code` is the MAC of `fields` under the current key version, or under the
    /// previous one while a rotation is under way.
    func isValidMAC(_ code: Data, for fields: [Data]) -> Bool {
        let ring = keyRing
        return ([ring.current] + (ring.previous.map { [$0] } ?? [])).contains { keys in
            Self.constantTimeEqual(code, Self.mac(fields, key: keys.mac))
        }
    }

    private static func constantTimeEqual(_ code: Data, _ expected: Data) -> Bool {
        guard code.count == expected.count else { return false }
        var difference: UInt8 = 0
        for (left, right) in zip(code, expected) { difference |= left ^ right }
        return difference == 0
    }
}
