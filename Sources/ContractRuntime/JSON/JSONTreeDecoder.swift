import Foundation

/// Decodes a generated type straight from a `JSONValue` tree, without printing it as JSON text
/// and parsing it back (what `JSONDecoder` would need): every typed read goes through here, so
/// it is the difference between a read in microseconds and one in tens of them.
///
/// Numbers follow `JSONDecoder`: an integer decodes as a floating-point value too, a
/// floating-point value as an integer only when it is whole and in range.
package enum JSONTreeDecoder {
    package static func decode<Value: Decodable>(_ type: Value.Type, from value: JSONValue) throws -> Value {
        try TreeDecoder(value, codingPath: []).decode(Value.self)
    }
}

private struct TreeDecoder: Decoder, SingleValueDecodingContainer {
    let value: JSONValue
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(_ value: JSONValue, codingPath: [any CodingKey]) {
        self.value = value
        self.codingPath = codingPath
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let object) = value else { throw mismatch([String: JSONValue].self) }
        return KeyedDecodingContainer(KeyedTree<Key>(object: object, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = value else { throw mismatch([JSONValue].self) }
        return UnkeyedTree(elements: elements, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func mismatch(_ expected: Any.Type) -> DecodingError {
        if case .null = value {
            return .valueNotFound(expected, .init(codingPath: codingPath, debugDescription: "found null"))
        }
        return .typeMismatch(expected, .init(codingPath: codingPath, debugDescription: "found \(value)"))
    }

    func decodeNil() -> Bool { value == .null }

    func decode(_ type: Bool.Type) throws -> Bool {
        guard case .bool(let bool) = value else { throw mismatch(type) }
        return bool
    }

    func decode(_ type: String.Type) throws -> String {
        guard case .string(let string) = value else { throw mismatch(type) }
        return string
    }

    func decode(_ type: Double.Type) throws -> Double {
        switch value {
        case .double(let double): return double
        case .int(let int): return Double(int)
        default: throw mismatch(type)
        }
    }

    func decode(_ type: Float.Type) throws -> Float { Float(try decode(Double.self)) }

    func integer<Integer: FixedWidthInteger>(_ type: Integer.Type) throws -> Integer {
        switch value {
        case .int(let int):
            if let exact = Integer(exactly: int) { return exact }
        case .double(let double):
            if let exact = Integer(exactly: double) { return exact }
        default:
            break
        }
        throw mismatch(type)
    }

    func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        // A JSON field stays the tree it already is.
        if T.self == JSONValue.self { return value as! T }
        // As `JSONDecoder` does by default: bytes are base64 text, URLs are text.
        if T.self == Data.self {
            guard case .string(let text) = value, let data = Data(base64Encoded: text) else { throw mismatch(Data.self) }
            return data as! T
        }
        if T.self == URL.self {
            guard case .string(let text) = value, let url = URL(string: text) else { throw mismatch(URL.self) }
            return url as! T
        }
        return try T(from: self)
    }
}

private struct KeyedTree<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let object: [String: JSONValue]
    let codingPath: [any CodingKey]

    var allKeys: [Key] { object.keys.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { object[key.stringValue] != nil }

    func child(_ key: Key) throws -> TreeDecoder {
        guard let value = object[key.stringValue] else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no value for '\(key.stringValue)'"))
        }
        return TreeDecoder(value, codingPath: codingPath + [key])
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        guard let value = object[key.stringValue] else { return try child(key).decodeNil() }
        return value == .null
    }

    // The common field types are read in place; a child decoder (and its coding path) is made
    // only to report an error or for nested types.
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        if case .bool(let bool)? = object[key.stringValue] { return bool }
        return try child(key).decode(type)
    }

    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        if case .string(let string)? = object[key.stringValue] { return string }
        return try child(key).decode(type)
    }

    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        switch object[key.stringValue] {
        case .double(let double)?: return double
        case .int(let int)?: return Double(int)
        default: return try child(key).decode(type)
        }
    }

    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try child(key).decode(type) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try child(key).decode(type) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try child(key).decode(type) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try child(key).decode(type) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try child(key).decode(type) }

    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 {
        if case .int(let int)? = object[key.stringValue] { return int }
        return try child(key).decode(type)
    }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try child(key).decode(type) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try child(key).decode(type) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try child(key).decode(type) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try child(key).decode(type) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try child(key).decode(type) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try child(key).decode(type) }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try child(key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { try child(key).unkeyedContainer() }

    func superDecoder() throws -> any Decoder { TreeDecoder(.object(object), codingPath: codingPath) }

    func superDecoder(forKey key: Key) throws -> any Decoder { try child(key) }
}

private struct UnkeyedTree: UnkeyedDecodingContainer {
    let elements: [JSONValue]
    let codingPath: [any CodingKey]
    var currentIndex = 0

    init(elements: [JSONValue], codingPath: [any CodingKey]) {
        self.elements = elements
        self.codingPath = codingPath
    }

    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    mutating func next() throws -> TreeDecoder {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                JSONValue.self, .init(codingPath: codingPath, debugDescription: "no element at index \(currentIndex)")
            )
        }
        defer { currentIndex += 1 }
        return TreeDecoder(elements[currentIndex], codingPath: codingPath + [AnyKey(intValue: currentIndex)])
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, elements[currentIndex] == .null else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next().decode(type) }
    mutating func decode(_ type: String.Type) throws -> String { try next().decode(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try next().decode(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try next().decode(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try next().decode(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next().decode(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next().decode(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next().decode(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next().decode(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next().decode(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next().decode(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next().decode(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next().decode(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next().decode(type) }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next().decode(type) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next().container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try next().unkeyedContainer() }

    mutating func superDecoder() throws -> any Decoder { try next() }
}
