import Contracts
import Foundation
import Testing

@testable import SyncServer

@Suite("Reading stored JSON columns for pull")
struct PullStoredJSONTests {
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
            #expect(StoredJSON.parse(CanonicalJSON.text(document)) == document)
        }
    }

    @Test("agrees with JSONDecoder on JSON written by others", arguments: [
        #" { "a" : [ 1 , 2.5 , -3e2 , true , null ] , "b" : "\u00e9\ud83d\udeb2\/" } "#,
        #"[1E3, 0.0, -0, 12345678901234567890]"#,
        #""\b\f\n\r\t""#,
    ])
    func agreesWithFoundation(_ text: String) throws {
        let expected = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        #expect(StoredJSON.parse(text) == expected)
    }

    @Test("refuses what is not one whole JSON value", arguments: [
        "", "tru", "[1,]", "{\"a\":1,}", "[1 2]", "01", "1.", "-", "\"open", "\"bad \\x escape\"", "\"\\ud83d alone\"",
        "{\"a\" 1}", "[1] [2]", "nul", "\"raw \n newline\"",
    ])
    func refuses(_ text: String) {
        #expect(StoredJSON.parse(text) == nil)
    }

    @Test("list and json columns go through it to the wire")
    func columns() throws {
        let tags = try #require(ContractRegistry.unit.field(named: "tags"))
        #expect(RowCodec.wireValue(.text(#"["a","b"]"#), for: tags) == .array([.string("a"), .string("b")]))
        let body = try #require(ContractRegistry.lesson.field(named: "body"))
        #expect(RowCodec.wireValue(.text(#"{"k":[1,{"x":null}]}"#), for: body) == .object(["k": .array([.int(1), .object(["x": .null])])]))
        #expect(RowCodec.wireValue(.text("not json"), for: body) == .null)
    }
}
