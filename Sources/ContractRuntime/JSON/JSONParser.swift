package import Foundation

/// Reads the JSON text of `json` and `list` columns (canonical JSON, see `CanonicalJSON`)
/// back into a ``JSONValue``: for every row a server pull sends and every typed read on a
/// device, and whole pull pages as a device receives them (``PullResponse/init(json:)``). It
/// reads what `JSONDecoder` reads, into the same values.
///
/// `JSONDecoder` through `JSONValue`'s `Decodable` conformance tries each type in turn and
/// pays for a thrown error at every miss, which made these columns the most expensive part of
/// a pull page and of a device's reads. This reads the bytes once. Whole numbers that fit in 64 bits are `.int`, other
/// numbers `.double`; anything that is not one whole JSON value is `nil`.
package enum JSONParser {
    package static func parse(_ text: String) -> JSONValue? {
        var text = text
        return text.withUTF8(parse)
    }

    /// The JSON value of UTF-8 bytes, such as a response body.
    package static func parse(_ data: Data) -> JSONValue? {
        data.withUnsafeBytes { raw in parse(raw.bindMemory(to: UInt8.self)) }
    }

    private static func parse(_ buffer: UnsafeBufferPointer<UInt8>) -> JSONValue? {
        var parser = Parser(bytes: buffer)
        guard let value = parser.value(depth: 0) else { return nil }
        parser.skipWhitespace()
        return parser.index == buffer.count ? value : nil
    }

    /// Reads JSON values one after another from UTF-8 bytes; also what a reader of a document it
    /// knows the shape of (a pull page) walks the document with, member by member.
    package struct Parser {
        package let bytes: UnsafeBufferPointer<UInt8>
        package var index = 0
        /// Containers nested deeper than this are not read (the value is `nil`, ``tooDeep`` set).
        package var maximumDepth = 512
        /// Whether reading stopped at a container nested deeper than ``maximumDepth``.
        package private(set) var tooDeep = false
        /// Whether a string read so far held U+0000 (`\u0000`), which SQLite cuts text at.
        package private(set) var sawNUL = false

        package init(bytes: UnsafeBufferPointer<UInt8>) {
            self.bytes = bytes
        }

        /// Steps over `byte` (after whitespace); false when something else comes.
        package mutating func consume(_ byte: UInt8) -> Bool {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        /// The bytes of a string without escapes, between its quotes, stepped over; `nil` (and
        /// nothing stepped over) when the next value is not such a string.
        package mutating func plainString() -> UnsafeBufferPointer<UInt8>? {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
            var end = index + 1
            while end < bytes.count, bytes[end] != UInt8(ascii: "\""), bytes[end] != UInt8(ascii: "\\"), bytes[end] >= 0x20 { end += 1 }
            guard end < bytes.count, bytes[end] == UInt8(ascii: "\"") else { return nil }
            defer { index = end + 1 }
            return UnsafeBufferPointer(rebasing: bytes[(index + 1)..<end])
        }

        /// Steps over one whole value without building it; false when it is not valid JSON.
        package mutating func skipValue(depth: Int = 0) -> Bool {
            skipWhitespace()
            guard index < bytes.count else { return false }
            guard depth < maximumDepth else {
                tooDeep = true
                return false
            }
            switch bytes[index] {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                let close = bytes[index] == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
                let isObject = close == UInt8(ascii: "}")
                index += 1
                if consume(close) { return true }
                while true {
                    if isObject {
                        skipWhitespace()
                        guard plainString() != nil || string() != nil, consume(UInt8(ascii: ":")) else { return false }
                    }
                    guard skipValue(depth: depth + 1) else { return false }
                    if consume(UInt8(ascii: ",")) { continue }
                    return consume(close)
                }
            case UInt8(ascii: "\""):
                return plainString() != nil || string() != nil
            default:
                return value(depth: depth) != nil
            }
        }

        package mutating func skipWhitespace() {
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 {
                index += 1
            }
        }

        mutating func literal(_ word: StaticString, _ value: JSONValue) -> JSONValue? {
            let count = word.utf8CodeUnitCount
            guard index + count <= bytes.count else { return nil }
            for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] {
                return nil
            }
            index += count
            return value
        }

        /// `capacity`: how many members an object is likely to have (its previous sibling's
        /// count: the rows of a page share their keys), so it is not grown again and again.
        package mutating func value(depth: Int, capacity: Int = 0) -> JSONValue? {
            skipWhitespace()
            guard index < bytes.count else { return nil }
            guard depth < maximumDepth else {
                tooDeep = true
                return nil
            }
            switch bytes[index] {
            case UInt8(ascii: "{"):
                index += 1
                var members: [String: JSONValue] = Dictionary(minimumCapacity: capacity)
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                    index += 1
                    return .object(members)
                }
                while true {
                    skipWhitespace()
                    guard let key = string() else { return nil }
                    skipWhitespace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
                    index += 1
                    guard let member = value(depth: depth + 1) else { return nil }
                    members[key] = member
                    skipWhitespace()
                    guard index < bytes.count else { return nil }
                    if bytes[index] == UInt8(ascii: ",") {
                        index += 1
                    } else if bytes[index] == UInt8(ascii: "}") {
                        index += 1
                        return .object(members)
                    } else {
                        return nil
                    }
                }
            case UInt8(ascii: "["):
                index += 1
                var items: [JSONValue] = []
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                    index += 1
                    return .array(items)
                }
                var capacity = 0
                while true {
                    guard let item = value(depth: depth + 1, capacity: capacity) else { return nil }
                    if case .object(let members) = item { capacity = members.count }
                    items.append(item)
                    skipWhitespace()
                    guard index < bytes.count else { return nil }
                    if bytes[index] == UInt8(ascii: ",") {
                        index += 1
                    } else if bytes[index] == UInt8(ascii: "]") {
                        index += 1
                        return .array(items)
                    } else {
                        return nil
                    }
                }
            case UInt8(ascii: "\""): return string().map(JSONValue.string)
            case UInt8(ascii: "t"): return literal("true", .bool(true))
            case UInt8(ascii: "f"): return literal("false", .bool(false))
            case UInt8(ascii: "n"): return literal("null", .null)
            default: return number()
            }
        }

        mutating func number() -> JSONValue? {
            let start = index
            var integral = true
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
            let digitsStart = index
            while index < bytes.count, (48...57).contains(bytes[index]) { index += 1 }
            guard index > digitsStart else { return nil }
            if bytes[digitsStart] == 48, index - digitsStart > 1 { return nil }  // no leading zeros
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                integral = false
                index += 1
                let fraction = index
                while index < bytes.count, (48...57).contains(bytes[index]) { index += 1 }
                guard index > fraction else { return nil }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                integral = false
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
                let exponent = index
                while index < bytes.count, (48...57).contains(bytes[index]) { index += 1 }
                guard index > exponent else { return nil }
            }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            if integral, let number = Int64(text) { return .int(number) }
            // A number past Double's range (`1e400`) is refused, as JSONDecoder refuses it: read as
            // infinity it could not be written back (CanonicalJSON writes a non-finite number as null).
            guard let number = Double(text), number.isFinite else { return nil }
            // Like JSONDecoder: a whole number written with a fraction or exponent (`1E3`, `0.0`) is an int.
            if number == number.rounded(), abs(number) < 9.2e18 { return .int(Int64(number)) }
            return .double(number)
        }

        package mutating func string() -> String? {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
            index += 1
            let start = index
            // The common case: no escapes, copied in one go.
            while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\"), bytes[index] >= 0x20 {
                index += 1
            }
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: "\"") {
                defer { index += 1 }
                return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            }
            var scalars = String.UnicodeScalarView()
            var utf8 = Array(bytes[start..<index])
            func flush() {
                scalars.append(contentsOf: String(decoding: utf8, as: UTF8.self).unicodeScalars)
                utf8.removeAll(keepingCapacity: true)
            }
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    index += 1
                    flush()
                    return String(scalars)
                }
                guard byte >= 0x20 else { return nil }
                if byte != UInt8(ascii: "\\") {
                    utf8.append(byte)
                    index += 1
                    continue
                }
                guard index + 1 < bytes.count else { return nil }
                let escape = bytes[index + 1]
                index += 2
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escape)
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0C)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "u"):
                    guard var code = hex4() else { return nil }
                    if (0xD800...0xDBFF).contains(code) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                            return nil
                        }
                        index += 2
                        guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let scalar = Unicode.Scalar(code) else { return nil }
                    if code == 0 { sawNUL = true }
                    flush()
                    scalars.append(scalar)
                default: return nil
                }
            }
            return nil
        }

        mutating func hex4() -> UInt32? {
            guard index + 4 <= bytes.count else { return nil }
            var code: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt32
                switch byte {
                case 48...57: digit = UInt32(byte - 48)
                case 65...70: digit = UInt32(byte - 55)
                case 97...102: digit = UInt32(byte - 87)
                default: return nil
                }
                code = code << 4 | digit
                index += 1
            }
            return code
        }
    }
}
