import Crypto
import Foundation

/// The store's sealing and signing, under keys derived from the tenant key.
///
/// - Sealed values are `0x01 ‖ AES-GCM combined box` (nonce, ciphertext, tag): the version
///   byte leaves room for key rotation. The associated data binds each sealed value to where
///   it belongs (table, column and row; or outbox entry), so a sealed value copied elsewhere
///   does not open.
/// - Outbox HMACs are HMAC-SHA256 over length-prefixed fields (``outboxMAC(_:)``).
struct StoreCrypto: Sendable {
    /// `SymmetricKey` is an immutable value that swift-crypto does not mark `Sendable` (CryptoKit does).
    private struct Key: @unchecked Sendable {
        let value: SymmetricKey
    }

    private let fieldKeyBox: Key
    private let outboxKeyBox: Key
    private let macKeyBox: Key
    private var fieldKey: SymmetricKey { fieldKeyBox.value }
    private var outboxKey: SymmetricKey { outboxKeyBox.value }
    private var macKey: SymmetricKey { macKeyBox.value }

    static let formatVersion: UInt8 = 1

    init(tenantKey: SymmetricKey) {
        func derive(_ label: String) -> SymmetricKey {
            HKDF<SHA256>.deriveKey(
                inputKeyMaterial: tenantKey, salt: Data("outpost.client.v1".utf8), info: Data(label.utf8), outputByteCount: 32
            )
        }
        fieldKeyBox = Key(value: derive("field-seal"))
        outboxKeyBox = Key(value: derive("outbox-seal"))
        macKeyBox = Key(value: derive("outbox-mac"))
    }

    struct OpenFailure: Error {}

    // MARK: Sealing

    private static func seal(_ plaintext: Data, key: SymmetricKey, context: String) throws -> Data {
        let box = try AES.GCM.seal(plaintext, using: key, authenticating: Data(context.utf8))
        guard let combined = box.combined else { throw OpenFailure() }
        return Data([formatVersion]) + combined
    }

    private static func open(_ sealed: Data, key: SymmetricKey, context: String) throws(OpenFailure) -> Data {
        guard sealed.first == formatVersion else { throw OpenFailure() }
        do {
            let box = try AES.GCM.SealedBox(combined: sealed.dropFirst())
            return try AES.GCM.open(box, using: key, authenticating: Data(context.utf8))
        } catch {
            throw OpenFailure()
        }
    }

    static func fieldContext(table: String, column: String, id: String) -> String {
        "field\u{0}\(table)\u{0}\(column)\u{0}\(id)"
    }

    /// Seals the value of an `encrypted` field for its column.
    func sealField(_ plaintext: Data, table: String, column: String, id: String) throws -> Data {
        try Self.seal(plaintext, key: fieldKey, context: Self.fieldContext(table: table, column: column, id: id))
    }

    func openField(_ sealed: Data, table: String, column: String, id: String) throws(OpenFailure) -> Data {
        try Self.open(sealed, key: fieldKey, context: Self.fieldContext(table: table, column: column, id: id))
    }

    /// Seals something kept with the outbox (an entry's payload, a conflict's rows) under the
    /// outbox key; `context` names what and where.
    func sealRecord(_ plaintext: Data, context: String) throws -> Data {
        try Self.seal(plaintext, key: outboxKey, context: context)
    }

    func openRecord(_ sealed: Data, context: String) throws(OpenFailure) -> Data {
        try Self.open(sealed, key: outboxKey, context: context)
    }

    // MARK: Signing

    /// HMAC-SHA256 over the fields, each written as its 8-byte big-endian length then its bytes.
    func mac(_ fields: [Data]) -> Data {
        var hmac = HMAC<SHA256>(key: macKey)
        for field in fields {
            hmac.update(data: withUnsafeBytes(of: UInt64(field.count).bigEndian) { Data($0) })
            hmac.update(data: field)
        }
        return Data(hmac.finalize())
    }

    func isValidMAC(_ code: Data, for fields: [Data]) -> Bool {
        let expected = mac(fields)
        // Constant time.
        guard code.count == expected.count else { return false }
        var difference: UInt8 = 0
        for (left, right) in zip(code, expected) { difference |= left ^ right }
        return difference == 0
    }

    /// A value that identifies the key without revealing it, kept in `metadata` to detect a
    /// lost or replaced key at open.
    var keyCheck: String {
        mac([Data("outpost.key-check".utf8)]).map { String(format: "%02x", $0) }.joined()
    }
}
