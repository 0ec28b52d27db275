import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import Testing

@testable import SyncServer

/// The byte writer behind pull pages writes what the server's `JSONEncoder` writes, or the same
/// value where the two spell numbers differently.
@Suite("JSON written as bytes", .blockingWork)
struct JSONBytesTests {
    static func written(_ write: (inout JSONWriter) -> Void) -> String {
        var json = JSONWriter()
        write(&json)
        return String(decoding: json.bytes, as: UTF8.self)
    }

    @Test(
        "strings are escaped as JSONEncoder escapes them, slashes and non-ASCII left as they are",
        arguments: [
            "", "plain", "quote \" backslash \\ slash / ", "new\nline\rreturn\ttab", "control \u{01}\u{1F}\u{7F}",
            "ünïcødé — 日本語 — 🚲", "\u{08}\u{0C}",
        ])
    func strings(_ text: String) throws {
        let ours = Self.written { $0.string(text) }
        #expect(try JSONDecoder().decode(String.self, from: Data(ours.utf8)) == text)
        let theirs = String(decoding: try JSONCoding.encoder.encode(text), as: UTF8.self)
        if !text.contains("\u{08}"), !text.contains("\u{0C}") {
            #expect(ours == theirs)
        }
    }

    @Test(
        "timestamps are Timestamp.iso8601, whatever the date",
        arguments: [
            Int64(0), 1, -1, 999, -999, 1_769_846_400_000, 1_769_846_400_125, 951_782_400_000, -62_135_596_800_000,
            253_402_300_799_999, 253_402_300_800_000, -62_135_596_800_001, 4_102_444_800_000,
        ])
    func timestamps(_ millis: Int64) {
        #expect(Self.written { $0.timestamp(millis) } == "\"" + Timestamp(millisecondsSince1970: millis).iso8601 + "\"")
    }

    @Test("numbers read back to the same value", arguments: [0.0, -0.5, 0.1, 14.0, 1e-7, 1e300, -2.5e-300, 123_456_789.125])
    func doubles(_ number: Double) throws {
        let text = Self.written { $0.double(number) }
        #expect(try JSONDecoder().decode(Double.self, from: Data(text.utf8)) == number)
        #expect(Self.written { $0.double(.nan) } == "null" && Self.written { $0.double(.infinity) } == "null")
    }

    @Test("objects are written with sorted keys, nested values included")
    func objects() throws {
        let value = JSONValue.object([
            "b": .array([.int(1), .null, .bool(false), .object(["z": .int(0), "a": .string("x")])]), "a": .double(2.5), "_x": .int(-42),
        ])
        let text = Self.written { $0.value(value) }
        #expect(text == #"{"_x":-42,"a":2.5,"b":[1,null,false,{"a":"x","z":0}]}"#)
        #expect(text == String(decoding: try JSONCoding.encoder.encode(value), as: UTF8.self))
    }
}
