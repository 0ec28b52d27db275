public import Foundation

/// A point in time with millisecond precision: ISO-8601 text on the wire
/// (`2026-01-31T08:00:00.000Z`), integer milliseconds since 1970 in SQLite.
public struct Timestamp: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    public var millisecondsSince1970: Int64

    /// A timestamp from milliseconds since 1970.
    public init(millisecondsSince1970: Int64) {
        self.millisecondsSince1970 = millisecondsSince1970
    }

    /// The timestamp of a `Date`, truncated to the millisecond.
    public init(_ date: Date) {
        self.millisecondsSince1970 = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
    }

    /// The current time of the device's clock.
    public static func now() -> Timestamp { Timestamp(Date()) }

    /// The timestamp as a Foundation `Date`.
    public var date: Date { Date(timeIntervalSince1970: Double(millisecondsSince1970) / 1000) }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; fractions beyond milliseconds are truncated.
    public init?(iso8601 text: String) {
        let bytes = Array(text.utf8)
        func digits(_ start: Int, _ count: Int) -> Int? {
            guard start + count <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[start..<(start + count)] {
                guard (48...57).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            return value
        }
        guard bytes.count >= 20, bytes[4] == 45, bytes[7] == 45, bytes[10] == 84 || bytes[10] == 116,
            bytes[13] == 58, bytes[16] == 58,
            let year = digits(0, 4), let month = digits(5, 2), let day = digits(8, 2),
            let hour = digits(11, 2), let minute = digits(14, 2), let second = digits(17, 2),
            CalendarDate.isValid(year: year, month: month, day: day), hour < 24, minute < 60, second < 61
        else { return nil }
        var index = 19
        var millis = 0
        if bytes[index] == 46 {
            index += 1
            var scale = 100
            let start = index
            while index < bytes.count, (48...57).contains(bytes[index]) {
                millis += Int(bytes[index] - 48) * scale
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }
        guard index < bytes.count else { return nil }
        var offsetSeconds = 0
        if bytes[index] == 90 || bytes[index] == 122 {
            index += 1
        } else if bytes[index] == 43 || bytes[index] == 45, let hours = digits(index + 1, 2),
            index + 3 < bytes.count, bytes[index + 3] == 58, let minutes = digits(index + 4, 2),
            hours < 24, minutes < 60
        {
            offsetSeconds = (hours * 3600 + minutes * 60) * (bytes[index] == 43 ? 1 : -1)
            index += 6
        } else {
            return nil
        }
        guard index == bytes.count else { return nil }
        let days = CalendarDate(year: year, month: month, day: day).daysSince1970
        let seconds = ((days * 24 + hour) * 60 + minute) * 60 + min(second, 59) - offsetSeconds
        self.millisecondsSince1970 = Int64(seconds) * 1000 + Int64(millis)
    }

    /// `2026-01-31T08:00:00.000Z`, always UTC with three fraction digits.
    public var iso8601: String {
        // Floor division that cannot overflow, so every Int64 formats (far dates included).
        func floorDivision(_ value: Int64, _ divisor: Int64) -> (quotient: Int64, remainder: Int64) {
            let (quotient, remainder) = value.quotientAndRemainder(dividingBy: divisor)
            return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
        }
        let (seconds, fraction64) = floorDivision(millisecondsSince1970, 1000)
        let (days, secondOfDay64) = floorDivision(seconds, 86_400)
        let fraction = Int(fraction64)
        let secondOfDay = Int(secondOfDay64)
        let date = CalendarDate(daysSince1970: Int(days))
        func pad(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return pad(date.year, 4) + "-" + pad(date.month, 2) + "-" + pad(date.day, 2) + "T"
            + pad(secondOfDay / 3600, 2) + ":" + pad(secondOfDay / 60 % 60, 2) + ":" + pad(secondOfDay % 60, 2)
            + "." + pad(fraction, 3) + "Z"
    }

    /// The timestamp in its ISO 8601 wire form.
    public var description: String { iso8601 }

    /// Orders timestamps chronologically.
    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        lhs.millisecondsSince1970 < rhs.millisecondsSince1970
    }

    /// Decodes a timestamp from its ISO 8601 string.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let value = Timestamp(iso8601: text) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "expected an ISO-8601 timestamp such as 2026-01-31T08:00:00.000Z"
            )
        }
        self = value
    }

    /// Encodes the timestamp as its ISO 8601 string with milliseconds.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(iso8601)
    }
}
