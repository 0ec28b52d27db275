import Foundation

/// Encodes an `Encodable` value straight into a ``JSONValue`` tree, the counterpart of
/// ``JSONTreeDecoder``: a generated type becomes the wire fields the codec and the reducers
/// work on without being printed as JSON text by `JSONEncoder` and parsed back.
///
/// The tree is the one `JSONEncoder` followed by ``JSONParser`` would give: `Data` is base64
/// text, a `URL` its absolute string, a whole double within 64 bits an `.int` (as the parser
/// reads `3.0`), a non-finite double an error, and a `nil` optional member left out.
package enum JSONTreeEncoder {
    package static func encode<Value: Encodable>(_ value: Value) throws -> JSONValue {
        let root = TreeEncoder.Node()
        try TreeEncoder(node: root, codingPath: []).encodeAny(value)
        return root.value
    }

    /// A double as JSON text holds it: whole values within 64 bits read back as integers.
    static func number(_ number: Double, codingPath: [any CodingKey]) throws -> JSONValue {
        guard number.isFinite else {
            throw EncodingError.invalidValue(
                number, EncodingError.Context(codingPath: codingPath, debugDescription: "JSON has no form for \(number)")
            )
        }
        if number == number.rounded(), abs(number) < 9.2e18 { return .int(Int64(number)) }
        return .double(number)
    }
}

/// A container under construction. Reference-typed so that nested containers handed out by
/// `nestedContainer` and `superEncoder` fill their parent in place.
private struct TreeEncoder: Encoder {
    final class Node {
        var scalar: JSONValue?
        var members: [String: Node]?
        var items: [Node]?

        var value: JSONValue {
            if let scalar { return scalar }
            if let items { return .array(items.map(\.value)) }
            return .object((members ?? [:]).mapValues(\.value))
        }

        func set(_ value: JSONValue) {
            scalar = value
            members = nil
            items = nil
        }

        /// Makes the node an object, unless it is one already (a container asked for twice).
        func becomeObject() {
            guard members == nil else { return }
            scalar = nil
            items = nil
            members = [:]
        }

        /// Makes the node an array, unless it is one already.
        func becomeArray() {
            guard items == nil else { return }
            scalar = nil
            members = nil
            items = []
        }

        func child(named name: String) -> Node {
            becomeObject()
            if let existing = members?[name] { return existing }
            let child = Node()
            members?[name] = child
            return child
        }

        func appendChild() -> Node {
            becomeArray()
            let child = Node()
            items?.append(child)
            return child
        }
    }

    let node: Node
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        node.becomeObject()
        return KeyedEncodingContainer(KeyedTree<Key>(node: node, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        node.becomeArray()
        return UnkeyedTree(node: node, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleTree(node: node, codingPath: codingPath)
    }

    /// Encodes `value`, with the types `JSONEncoder` writes in its own way.
    func encodeAny(_ value: some Encodable) throws {
        switch value {
        case let data as Data: node.set(.string(data.base64EncodedString()))
        case let url as URL: node.set(.string(url.absoluteString))
        case let date as Date: node.set(try JSONTreeEncoder.number(date.timeIntervalSinceReferenceDate, codingPath: codingPath))
        case let json as JSONValue: node.set(json)
        default: try value.encode(to: self)
        }
    }
}

private struct SingleTree: SingleValueEncodingContainer {
    let node: TreeEncoder.Node
    let codingPath: [any CodingKey]

    func set(_ value: JSONValue) { node.set(value) }

    func encodeNil() { set(.null) }
    func encode(_ value: Bool) { set(.bool(value)) }
    func encode(_ value: String) { set(.string(value)) }
    func encode(_ value: Double) throws { set(try JSONTreeEncoder.number(value, codingPath: codingPath)) }
    func encode(_ value: Float) throws { set(try JSONTreeEncoder.number(Double(value), codingPath: codingPath)) }
    func encode(_ value: Int) { set(.int(Int64(value))) }
    func encode(_ value: Int8) { set(.int(Int64(value))) }
    func encode(_ value: Int16) { set(.int(Int64(value))) }
    func encode(_ value: Int32) { set(.int(Int64(value))) }
    func encode(_ value: Int64) { set(.int(value)) }
    func encode(_ value: UInt) throws { set(try unsigned(UInt64(value))) }
    func encode(_ value: UInt8) { set(.int(Int64(value))) }
    func encode(_ value: UInt16) { set(.int(Int64(value))) }
    func encode(_ value: UInt32) { set(.int(Int64(value))) }
    func encode(_ value: UInt64) throws { set(try unsigned(value)) }

    func encode<T: Encodable>(_ value: T) throws {
        try TreeEncoder(node: node, codingPath: codingPath).encodeAny(value)
    }

    /// Unsigned integers beyond `Int64` have no `JSONValue` case: refused rather than rounded.
    private func unsigned(_ value: UInt64) throws -> JSONValue {
        guard let number = Int64(exactly: value) else {
            throw EncodingError.invalidValue(
                value, EncodingError.Context(codingPath: codingPath, debugDescription: "\(value) does not fit a 64-bit signed integer")
            )
        }
        return .int(number)
    }
}

private struct KeyedTree<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: TreeEncoder.Node
    let codingPath: [any CodingKey]

    private func child(_ key: some CodingKey) -> TreeEncoder.Node {
        node.child(named: key.stringValue)
    }

    private func single(_ key: Key) -> SingleTree {
        SingleTree(node: child(key), codingPath: codingPath + [key])
    }

    mutating func encodeNil(forKey key: Key) { single(key).encodeNil() }
    mutating func encode(_ value: Bool, forKey key: Key) { single(key).encode(value) }
    mutating func encode(_ value: String, forKey key: Key) { single(key).encode(value) }
    mutating func encode(_ value: Double, forKey key: Key) throws { try single(key).encode(value) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try single(key).encode(value) }
    mutating func encode(_ value: Int, forKey key: Key) { single(key).encode(value) }
    mutating func encode(_ value: Int8, forKey key: Key) { single(key).encode(value) }
    mutating func encode(_ value: Int16, forKey key: Key) { single(key).encode(value) }
    mutating func encode(_ value: Int32, forKey key: Key) { single(key).encode(value) }
    mutating func encode(_ value: Int64, forKey key: Key) { single(key).encode(value) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try single(key).encode(value) }
    mutating func encode(_ value: UInt8, forKey key: Key) { single(key).encode(value) }
    mutating func encode(_ value: UInt16, forKey key: Key) { single(key).encode(value) }
    mutating func encode(_ value: UInt32, forKey key: Key) { single(key).encode(value) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try single(key).encode(value) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { try single(key).encode(value) }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        TreeEncoder(node: child(key), codingPath: codingPath + [key]).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        TreeEncoder(node: child(key), codingPath: codingPath + [key]).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        let key = AnyKey(stringValue: "super")
        return TreeEncoder(node: child(key), codingPath: codingPath + [key])
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        TreeEncoder(node: child(key), codingPath: codingPath + [key])
    }
}

private struct UnkeyedTree: UnkeyedEncodingContainer {
    let node: TreeEncoder.Node
    let codingPath: [any CodingKey]

    var count: Int { node.items?.count ?? 0 }

    private func next() -> (TreeEncoder.Node, [any CodingKey]) {
        let path = codingPath + [AnyKey(intValue: count)]
        return (node.appendChild(), path)
    }

    private func single() -> SingleTree {
        let (child, path) = next()
        return SingleTree(node: child, codingPath: path)
    }

    mutating func encodeNil() { single().encodeNil() }
    mutating func encode(_ value: Bool) { single().encode(value) }
    mutating func encode(_ value: String) { single().encode(value) }
    mutating func encode(_ value: Double) throws { try single().encode(value) }
    mutating func encode(_ value: Float) throws { try single().encode(value) }
    mutating func encode(_ value: Int) { single().encode(value) }
    mutating func encode(_ value: Int8) { single().encode(value) }
    mutating func encode(_ value: Int16) { single().encode(value) }
    mutating func encode(_ value: Int32) { single().encode(value) }
    mutating func encode(_ value: Int64) { single().encode(value) }
    mutating func encode(_ value: UInt) throws { try single().encode(value) }
    mutating func encode(_ value: UInt8) { single().encode(value) }
    mutating func encode(_ value: UInt16) { single().encode(value) }
    mutating func encode(_ value: UInt32) { single().encode(value) }
    mutating func encode(_ value: UInt64) throws { try single().encode(value) }
    mutating func encode<T: Encodable>(_ value: T) throws { try single().encode(value) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let (child, path) = next()
        return TreeEncoder(node: child, codingPath: path).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let (child, path) = next()
        return TreeEncoder(node: child, codingPath: path).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        let (child, path) = next()
        return TreeEncoder(node: child, codingPath: path)
    }
}
