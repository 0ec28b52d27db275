import ContractRuntime
import Contracts
import Foundation
import SyncProtocol
import Testing

/// The pull cursor: opaque, versioned, URL-safe base64 text that the server must read back
/// exactly and refuse when it is anything else.
@Suite("SyncCursor")
struct SyncCursorTests {
    /// Base64url without padding, as the cursor is written.
    static func base64URL(_ text: String) -> String {
        Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static let examples: [SyncCursor] = [
        SyncCursor(scopeKey: "progress:user:u-1", sequence: 42),
        SyncCursor(scopeKey: "progress:user:u-1", sequence: 0),
        SyncCursor(scopeKey: "content:tenant:t-9", sequence: Int64.max),
        SyncCursor(scopeKey: "", sequence: 1),
        SyncCursor(scopeKey: "team:\"q\\uote\"/slash\n", sequence: 7),
        SyncCursor(scopeKey: "ops:team:équipe-東京-🚒", sequence: 123_456_789),
    ]

    @Test("A cursor round-trips through its text", arguments: examples)
    func roundTrip(_ cursor: SyncCursor) throws {
        #expect(try SyncCursor(encoded: cursor.encoded) == cursor)
    }

    @Test("The text is URL-safe: base64url letters only, no padding", arguments: examples)
    func textIsURLSafe(_ cursor: SyncCursor) {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        #expect(cursor.encoded.allSatisfy(allowed.contains), "\(cursor.encoded)")
    }

    /// Devices store cursors across app updates: the format of version 1 must not drift.
    @Test("Version 1 is base64url of canonical {k, s, v} JSON, pinned")
    func formatIsPinned() throws {
        let cursor = SyncCursor(scopeKey: "progress:user:u-1", sequence: 42)
        #expect(SyncCursor.formatVersion == 1)
        #expect(cursor.encoded == Self.base64URL(#"{"k":"progress:user:u-1","s":42,"v":1}"#))
        #expect(cursor.encoded == "eyJrIjoicHJvZ3Jlc3M6dXNlcjp1LTEiLCJzIjo0MiwidiI6MX0")
    }

    @Test("Padded base64url text is read too")
    func paddedTextIsRead() throws {
        let padded = Data(#"{"k":"ab","s":1,"v":1}"#.utf8).base64EncodedString()
        #expect(padded.hasSuffix("=="))
        #expect(try SyncCursor(encoded: padded) == SyncCursor(scopeKey: "ab", sequence: 1))
    }

    @Test("Key order and whitespace inside are not significant")
    func insideIsJSON() throws {
        let text = Self.base64URL(#"{ "v": 1, "s": 5, "k": "progress:user:u-2" }"#)
        #expect(try SyncCursor(encoded: text) == SyncCursor(scopeKey: "progress:user:u-2", sequence: 5))
    }

    struct Refusal: Sendable, CustomTestStringConvertible {
        var why: String
        var text: String
        var testDescription: String { why }
    }

    static let malformed: [Refusal] = [
        Refusal(why: "empty", text: ""),
        Refusal(why: "not base64", text: "not a cursor"),
        Refusal(why: "impossible base64 length", text: "eyJrI"),
        Refusal(why: "base64 of non-JSON", text: base64URL("k=progress:user:u-1;s=42")),
        Refusal(why: "a JSON array", text: base64URL(#"[1,"progress:user:u-1",42]"#)),
        Refusal(why: "a JSON string", text: base64URL(#""progress:user:u-1""#)),
        Refusal(why: "no version", text: base64URL(#"{"k":"a","s":1}"#)),
        Refusal(why: "version as text", text: base64URL(#"{"k":"a","s":1,"v":"1"}"#)),
        Refusal(why: "version as a fraction", text: base64URL(#"{"k":"a","s":1,"v":1.5}"#)),
        Refusal(why: "no scope key", text: base64URL(#"{"s":1,"v":1}"#)),
        Refusal(why: "scope key not text", text: base64URL(#"{"k":7,"s":1,"v":1}"#)),
        Refusal(why: "no sequence", text: base64URL(#"{"k":"a","v":1}"#)),
        Refusal(why: "sequence as text", text: base64URL(#"{"k":"a","s":"1","v":1}"#)),
        Refusal(why: "sequence as a fraction", text: base64URL(#"{"k":"a","s":1.5,"v":1}"#)),
        Refusal(why: "sequence beyond Int64", text: base64URL(#"{"k":"a","s":9223372036854775808,"v":1}"#)),
        Refusal(why: "negative sequence", text: base64URL(#"{"k":"a","s":-1,"v":1}"#)),
        Refusal(why: "most negative sequence", text: base64URL(#"{"k":"a","s":-9223372036854775808,"v":1}"#)),
        Refusal(why: "null sequence", text: base64URL(#"{"k":"a","s":null,"v":1}"#)),
    ]

    @Test("Malformed text is refused as malformed", arguments: malformed)
    func malformedIsRefused(_ refusal: Refusal) {
        #expect(throws: SyncCursor.DecodingFailure.malformed) { try SyncCursor(encoded: refusal.text) }
    }

    @Test("A cursor of another format version is refused by its version", arguments: [0, 2, 99, -1])
    func foreignVersionIsRefused(_ version: Int) {
        let text = Self.base64URL(#"{"k":"progress:user:u-1","s":42,"v":\#(version)}"#)
        #expect(throws: SyncCursor.DecodingFailure.unsupportedVersion(version)) { try SyncCursor(encoded: text) }
    }

    /// The inside is `{"k":"…","s":1,"v":1}`: 20 bytes around the key, so a 748-byte key makes
    /// 768 bytes, exactly 1024 base64 characters, and one more byte goes over.
    @Test("Text up to 1024 characters is read; longer text is refused before it is decoded")
    func oversizedIsRefused() throws {
        let largest = SyncCursor(scopeKey: String(repeating: "k", count: 748), sequence: 1)
        #expect(largest.encoded.count == 1024)
        #expect(try SyncCursor(encoded: largest.encoded) == largest)

        let tooLarge = SyncCursor(scopeKey: String(repeating: "k", count: 749), sequence: 1)
        #expect(tooLarge.encoded.count > 1024)
        #expect(throws: SyncCursor.DecodingFailure.malformed) { try SyncCursor(encoded: tooLarge.encoded) }

        let huge = String(repeating: "A", count: 1_000_000)
        #expect(throws: SyncCursor.DecodingFailure.malformed) { try SyncCursor(encoded: huge) }
    }

    @Test("Random cursors round-trip (seeded)")
    func randomRoundTrips() throws {
        var generator = SplitMix64(seed: 0x5EED_C0DE)
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789:-_/+=\"\\ é東🚒")
        for _ in 0..<500 {
            let length = Int.random(in: 0...60, using: &generator)
            let key = String((0..<length).map { _ in alphabet.randomElement(using: &generator)! })
            let cursor = SyncCursor(scopeKey: key, sequence: Int64.random(in: 0...Int64.max, using: &generator))
            #expect(try SyncCursor(encoded: cursor.encoded) == cursor)
        }
    }
}
