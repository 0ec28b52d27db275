import ContractRuntime
import Contracts
import Foundation
import SyncProtocol
import Testing

@Suite("Reading stored JSON columns (pull rows and device reads)")
struct StoredJSONTests {
    static let documents: [JSONValue] = [
        .null, .bool(true), .bool(false), .int(0), .int(-7), .int(Int64.max), .int(Int64.min), .double(0.7), .double(-1.5e-9),
        .double(1e+300), .string(""), .string("plain"), .string("quote \" backslash \\ slash / newline \n tab \t"),
        .string("control \u{01} and \u{1F}"), .string("ünïcødé — 日本語 — 🚲"), .array([]), .object([:]),
        .array([.string("a"), .int(1), .null, .array([.bool(false)])]),
        .object(["b": .int(2), "a": .object(["nested": .array([.double(2.25), .string("x")])]), "": .null]),
    ]

    @Test("reads back what CanonicalJSON writes, exactly")
    func roundTrip() {
        for document in Self.documents {
            #expect(JSONParser.parse(CanonicalJSON.text(document)) == document)
        }
    }

    @Test(
        "agrees with JSONDecoder on JSON written by others",
        arguments: [
            #" { "a" : [ 1 , 2.5 , -3e2 , true , null ] , "b" : "\u00e9\ud83d\udeb2\/" } "#,
            #"[1E3, 0.0, -0, 12345678901234567890]"#,
            #""\b\f\n\r\t""#,
        ])
    func agreesWithFoundation(_ text: String) throws {
        let expected = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        #expect(JSONParser.parse(text) == expected)
    }

    @Test(
        "refuses what is not one whole JSON value",
        arguments: [
            "", "tru", "[1,]", "{\"a\":1,}", "[1 2]", "01", "1.", "-", "\"open", "\"bad \\x escape\"", "\"\\ud83d alone\"",
            "{\"a\" 1}", "[1] [2]", "nul", "\"raw \n newline\"",
        ])
    func refuses(_ text: String) {
        #expect(JSONParser.parse(text) == nil)
    }

    /// Found by fuzzing (fuzz/regressions/json): `1e400` was read as infinity, which
    /// CanonicalJSON writes as `null`, so a stored value changed on the way back.
    @Test("refuses a number past Double's range, as JSONDecoder does", arguments: ["1e400", "-1e400", "[1, 11111111111111111111111e1111111]"])
    func refusesInfiniteNumbers(_ text: String) {
        #expect(JSONParser.parse(text) == nil)
        #expect((try? BoundedJSON.parse(Data(text.utf8))) == nil)
        #expect((try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))) == nil)
    }
}
