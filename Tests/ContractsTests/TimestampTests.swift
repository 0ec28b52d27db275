import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import Testing

@Suite("Timestamp", .blockingWork)
struct TimestampTests {
    /// Known instants, computed independently (Unix epoch milliseconds).
    static let known: [(text: String, milliseconds: Int64)] = [
        ("1970-01-01T00:00:00.000Z", 0),
        ("1970-01-01T00:00:00.001Z", 1),
        ("2000-01-01T00:00:00.000Z", 946_684_800_000),
        ("2026-01-31T08:00:00.123Z", 1_769_846_400_123),
        ("2024-02-29T12:00:00.000Z", 1_709_208_000_000),
        ("2000-02-29T23:59:59.999Z", 951_868_799_999),
        ("1969-12-31T23:59:59.999Z", -1),
        ("1969-12-31T23:59:59.000Z", -1000),
        ("1969-12-31T00:00:00.000Z", -86_400_000),
        ("1900-01-01T00:00:00.000Z", -2_208_988_800_000),
        ("1600-03-01T00:00:00.000Z", -11_670_912_000_000),
        ("9999-12-31T23:59:59.999Z", 253_402_300_799_999),
    ]

    @Test("Parses and formats known instants", arguments: known.indices)
    func knownInstants(_ index: Int) throws {
        let (text, milliseconds) = Self.known[index]
        let parsed = try #require(Timestamp(iso8601: text), "\(text) must parse")
        #expect(parsed.millisecondsSince1970 == milliseconds, "\(text)")
        #expect(Timestamp(millisecondsSince1970: milliseconds).iso8601 == text)
        #expect(parsed.description == text)
    }

    @Test("Agrees with Foundation's ISO-8601 parser")
    func agreesWithFoundation() throws {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        for text in ["2026-01-31T08:00:00.123Z", "2024-02-29T00:00:00.500Z", "1999-12-31T23:59:59.999Z", "1950-06-15T12:34:56.789Z"] {
            let date = try #require(formatter.date(from: text))
            let expected = Int64((date.timeIntervalSince1970 * 1000).rounded())
            #expect(Timestamp(iso8601: text)?.millisecondsSince1970 == expected, "\(text)")
        }
    }

    @Test("Offsets are applied and the output is always UTC")
    func offsets() throws {
        let utc = try #require(Timestamp(iso8601: "2026-01-31T08:00:00.123Z"))
        #expect(Timestamp(iso8601: "2026-01-31T10:00:00.123+02:00") == utc)
        #expect(Timestamp(iso8601: "2026-01-31T02:30:00.123-05:30") == utc)
        #expect(Timestamp(iso8601: "2026-01-31T08:00:00.123+00:00") == utc)
        #expect(Timestamp(iso8601: "2026-01-31T08:00:00.123-00:00") == utc)
        // Across a day, month and year boundary.
        #expect(Timestamp(iso8601: "2027-01-01T01:00:00.000+02:00")?.iso8601 == "2026-12-31T23:00:00.000Z")
        #expect(Timestamp(iso8601: "2024-02-28T22:00:00.000-03:00")?.iso8601 == "2024-02-29T01:00:00.000Z")
    }

    @Test("Fractions: optional, truncated beyond milliseconds, always three digits out")
    func fractions() {
        #expect(Timestamp(iso8601: "2026-01-31T08:00:00Z")?.iso8601 == "2026-01-31T08:00:00.000Z")
        #expect(Timestamp(iso8601: "2026-01-31T08:00:00.5Z")?.iso8601 == "2026-01-31T08:00:00.500Z")
        #expect(Timestamp(iso8601: "2026-01-31T08:00:00.12Z")?.iso8601 == "2026-01-31T08:00:00.120Z")
        #expect(Timestamp(iso8601: "2026-01-31T08:00:00.123999Z")?.iso8601 == "2026-01-31T08:00:00.123Z")
        #expect(Timestamp(iso8601: "1969-12-31T23:59:59.9999Z")?.millisecondsSince1970 == -1)
        #expect(Timestamp(iso8601: "2026-01-31t08:00:00.123z")?.millisecondsSince1970 == 1_769_846_400_123)
    }

    @Test(
        "Rejects malformed or impossible text",
        arguments: [
            "", "2026", "2026-01-31", "2026-01-31T08:00:00", "2026-01-31T08:00:00.123", "2026-01-31T08:00Z",
            "2026-1-31T08:00:00Z", "26-01-31T08:00:00Z", "2026/01/31T08:00:00Z", "2026-01-31X08:00:00Z",
            "2026-02-30T08:00:00Z", "2025-02-29T08:00:00Z", "1900-02-29T00:00:00Z", "2026-13-01T08:00:00Z",
            "2026-00-10T08:00:00Z", "2026-01-00T08:00:00Z", "2026-01-31T24:00:00Z", "2026-01-31T08:60:00Z",
            "2026-01-31T08:00:61Z", "2026-01-31T08:00:00.Z", "2026-01-31T08:00:00.abcZ", "2026-01-31T08:00:00+0200",
            "2026-01-31T08:00:00+02", "2026-01-31T08:00:00 +02:00", "2026-01-31T08:00:00Zjunk", "2026-01-31T08:00:00ZZ",
            " 2026-01-31T08:00:00Z", "2026-01-31T08:00:00Z ", "abcd-01-31T08:00:00Z", "2026-01-31T0a:00:00Z",
            "+2026-01-31T08:00:00Z", "2026-01-31T08:00:00.123+02:00:00",
        ]
    )
    func rejectsInvalidText(_ text: String) {
        #expect(Timestamp(iso8601: text) == nil, "\(text) must be rejected")
    }

    @Test("Rejects offsets out of range")
    func rejectsOutOfRangeOffsets() {
        let invalid = ["2026-01-31T08:00:00+24:00", "2026-01-31T08:00:00+02:60", "2026-01-31T08:00:00-99:99"]
        let accepted = invalid.filter { Timestamp(iso8601: $0) != nil }
        #expect(accepted.isEmpty, "accepted: \(accepted)")
    }

    @Test("Every Int64 formats without overflow")
    func extremes() {
        #expect(Timestamp(millisecondsSince1970: .min).iso8601.hasSuffix("Z"))
        #expect(Timestamp(millisecondsSince1970: .max).iso8601.hasSuffix("Z"))
    }

    @Test("Formatting then parsing is the identity, before and after 1970")
    func formatParseIdentity() throws {
        var values: [Int64] = [0, 1, -1, 999, -999, 1000, -1000, 1001, -1001, 86_399_999, -86_400_001]
        // A deterministic spread over ±300 years with odd milliseconds.
        var value: Int64 = -9_467_020_800_000
        while value < 9_467_020_800_000 {
            values.append(value)
            value += 7_777_777_777_777 / 100 + 123
        }
        for milliseconds in values {
            let text = Timestamp(millisecondsSince1970: milliseconds).iso8601
            #expect(text.count == 24 && text.hasSuffix("Z"), "\(milliseconds) formats as \(text)")
            #expect(Timestamp(iso8601: text)?.millisecondsSince1970 == milliseconds, "\(milliseconds) via \(text)")
        }
    }

    @Test("Converts from and to Date, truncating to the millisecond")
    func dates() {
        #expect(Timestamp(Date(timeIntervalSince1970: 1.2345)).millisecondsSince1970 == 1234)
        #expect(Timestamp(Date(timeIntervalSince1970: 1_769_846_400.1239)).millisecondsSince1970 == 1_769_846_400_123)
        #expect(Timestamp(Date(timeIntervalSince1970: -0.0005)).millisecondsSince1970 == -1)
        #expect(Timestamp(millisecondsSince1970: 1_500).date == Date(timeIntervalSince1970: 1.5))
        #expect(Timestamp(millisecondsSince1970: -1_500).date == Date(timeIntervalSince1970: -1.5))
        let now = Timestamp.now()
        #expect(abs(now.millisecondsSince1970 - Int64(Date().timeIntervalSince1970 * 1000)) < 60_000)
    }

    @Test("Orders by instant, not by text")
    func ordering() throws {
        let earlier = try #require(Timestamp(iso8601: "2026-01-31T09:00:00.000+02:00"))
        let later = try #require(Timestamp(iso8601: "2026-01-31T08:00:00.000Z"))
        #expect(earlier < later)
        #expect(Timestamp(millisecondsSince1970: -1) < Timestamp(millisecondsSince1970: 0))
        #expect([later, earlier].sorted() == [earlier, later])
    }

    @Test("Codable: an ISO-8601 string on the wire")
    func codable() throws {
        let timestamp = Timestamp(millisecondsSince1970: 1_769_846_400_123)
        let data = try JSONEncoder().encode([timestamp])
        #expect(String(decoding: data, as: UTF8.self) == #"["2026-01-31T08:00:00.123Z"]"#)
        #expect(try JSONDecoder().decode([Timestamp].self, from: data) == [timestamp])
        #expect(try JSONDecoder().decode([Timestamp].self, from: Data(#"["2026-01-31T10:00:00.123+02:00"]"#.utf8)) == [timestamp])
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([Timestamp].self, from: Data(#"["2026-01-31"]"#.utf8)) }
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([Timestamp].self, from: Data("[1769846400123]".utf8)) }
    }
}
