/// JSON text written straight into bytes: the one writer behind `CanonicalJSON` and the
/// responses the server sends most (pull pages), with no intermediate tree and no `JSONEncoder`.
/// Object keys come out sorted by their UTF-8 bytes; `/` and non-ASCII characters are not
/// escaped; whole doubles are written as integers and other doubles in Swift's shortest form
/// that reads back to the same value (`0.7`, `1e+300`); a non-finite double (which JSON cannot
/// hold, and no contract value can become) is `null`.
package struct JSONWriter {
    package private(set) var bytes: [UInt8] = []

    package init(capacity: Int = 0) {
        bytes.reserveCapacity(capacity)
    }

    package mutating func append(_ byte: UInt8) { bytes.append(byte) }

    package mutating func append(_ raw: [UInt8]) { bytes.append(contentsOf: raw) }

    package mutating func append(_ raw: UnsafeBufferPointer<UInt8>) { bytes.append(contentsOf: raw) }

    package mutating func null() { bytes.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C]) }

    package mutating func bool(_ flag: Bool) {
        bytes.append(contentsOf: flag ? [0x74, 0x72, 0x75, 0x65] : [0x66, 0x61, 0x6C, 0x73, 0x65])
    }

    package mutating func int(_ number: Int64) {
        if number >= 0, number < 10 {
            bytes.append(0x30 + UInt8(number))
            return
        }
        bytes.append(contentsOf: String(number).utf8)
    }

    package mutating func double(_ number: Double) {
        guard number.isFinite else { return null() }
        if number == number.rounded(), abs(number) < 9.0e15 {
            int(Int64(number))
        } else {
            bytes.append(contentsOf: number.description.utf8)
        }
    }

    /// `Timestamp(millisecondsSince1970: millis).iso8601` as a JSON string, written digit by
    /// digit instead of through the text (pull pages carry a few per row).
    package mutating func timestamp(_ millis: Int64) {
        let (seconds, fraction) = Self.floorDivision(millis, 1000)
        let (days, secondOfDay) = Self.floorDivision(seconds, 86_400)
        let date = CalendarDate(daysSince1970: Int(days))
        guard (0...9999).contains(date.year) else { return string(Timestamp(millisecondsSince1970: millis).iso8601) }
        bytes.append(0x22)
        digits(date.year, 4)
        bytes.append(0x2D)
        digits(date.month, 2)
        bytes.append(0x2D)
        digits(date.day, 2)
        bytes.append(0x54)
        digits(Int(secondOfDay) / 3600, 2)
        bytes.append(0x3A)
        digits(Int(secondOfDay) / 60 % 60, 2)
        bytes.append(0x3A)
        digits(Int(secondOfDay) % 60, 2)
        bytes.append(0x2E)
        digits(Int(fraction), 3)
        bytes.append(contentsOf: [0x5A, 0x22])
    }

    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (quotient: Int64, remainder: Int64) {
        let (quotient, remainder) = value.quotientAndRemainder(dividingBy: divisor)
        return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
    }

    /// `value` (0 or more) in `count` decimal digits, zero-padded.
    private mutating func digits(_ value: Int, _ count: Int) {
        var divisor = 1
        for _ in 1..<count { divisor *= 10 }
        var rest = value
        while divisor > 0 {
            bytes.append(0x30 + UInt8(rest / divisor % 10))
            rest %= divisor
            divisor /= 10
        }
    }

    /// A member's `"key":` (made by ``key(_:)``), after a comma unless it is the object's first.
    package mutating func member(_ key: [UInt8], first: inout Bool) {
        if !first { bytes.append(0x2C) }
        first = false
        bytes.append(contentsOf: key)
    }

    /// A quoted, escaped string.
    package mutating func string(_ text: String) {
        bytes.append(0x22)
        var text = text
        text.withUTF8 { utf8 in
            // Runs without anything to escape are copied at once.
            var start = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                guard byte < 0x20 || byte == 0x22 || byte == 0x5C else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index]))
                escape(byte)
                start = index + 1
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<utf8.count]))
        }
        bytes.append(0x22)
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    private mutating func escape(_ byte: UInt8) {
        switch byte {
        case 0x22: bytes.append(contentsOf: [0x5C, 0x22])
        case 0x5C: bytes.append(contentsOf: [0x5C, 0x5C])
        case 0x0A: bytes.append(contentsOf: [0x5C, 0x6E])
        case 0x0D: bytes.append(contentsOf: [0x5C, 0x72])
        case 0x09: bytes.append(contentsOf: [0x5C, 0x74])
        default:
            bytes.append(contentsOf: [0x5C, 0x75, 0x30, 0x30, Self.hexDigits[Int(byte >> 4)], Self.hexDigits[Int(byte & 0x0F)]])
        }
    }

    /// `"name":` as bytes, made once and appended before each value of that member.
    package static func key(_ name: String) -> [UInt8] {
        var writer = JSONWriter()
        writer.string(name)
        writer.append(0x3A)
        return writer.bytes
    }

    /// Names in the order an object's keys are written.
    package static func sorted(_ names: some Sequence<String>) -> [String] {
        names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// `{"name":…,…}`, the names sorted, each member's value written by `value`.
    package mutating func object(_ names: some Sequence<String>, _ value: (String, inout JSONWriter) -> Void) {
        bytes.append(0x7B)
        for (index, name) in Self.sorted(names).enumerated() {
            if index > 0 { bytes.append(0x2C) }
            string(name)
            bytes.append(0x3A)
            value(name, &self)
        }
        bytes.append(0x7D)
    }

    /// `[…]`, each element written by `element`.
    package mutating func array<Items: Sequence>(_ items: Items, _ element: (Items.Element, inout JSONWriter) -> Void) {
        bytes.append(0x5B)
        for (index, item) in items.enumerated() {
            if index > 0 { bytes.append(0x2C) }
            element(item, &self)
        }
        bytes.append(0x5D)
    }

    /// `["…",…]`: an array of strings, without the generic ``array(_:_:)``.
    package mutating func strings(_ items: [String]) {
        bytes.append(0x5B)
        for (index, item) in items.enumerated() {
            if index > 0 { bytes.append(0x2C) }
            string(item)
        }
        bytes.append(0x5D)
    }

    package mutating func value(_ value: JSONValue) {
        switch value {
        case .null: null()
        case .bool(let flag): bool(flag)
        case .int(let number): int(number)
        case .double(let number): double(number)
        case .string(let text): string(text)
        case .array(let items): array(items) { item, json in json.value(item) }
        case .object(let members):
            // The members sorted with their values: no lookup of each value by its key again.
            bytes.append(0x7B)
            for (index, member) in members.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }).enumerated() {
                if index > 0 { bytes.append(0x2C) }
                string(member.key)
                bytes.append(0x3A)
                self.value(member.value)
            }
            bytes.append(0x7D)
        }
    }
}
