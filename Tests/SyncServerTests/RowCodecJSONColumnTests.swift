import ContractRuntime
import EngineTestContracts
import OutpostTestSupport
import Testing

@testable import SyncServer

/// `json` and `list` columns reach the wire through the shared `JSONParser` parser (the engines'
/// own `Board`: `lane_names`, `settings`).
@Suite(.blockingWork) struct RowCodecJSONColumnTests {
    @Test("list and json columns go through it to the wire")
    func columns() throws {
        let laneNames = try #require(ContractRegistry.board.field(named: "lane_names"))
        #expect(RowCodec.wireValue(.text(#"["a","b"]"#), for: laneNames) == .array([.string("a"), .string("b")]))
        let settings = try #require(ContractRegistry.board.field(named: "settings"))
        #expect(RowCodec.wireValue(.text(#"{"k":[1,{"x":null}]}"#), for: settings) == .object(["k": .array([.int(1), .object(["x": .null])])]))
        #expect(RowCodec.wireValue(.text("not json"), for: settings) == .null)
    }

    /// What a pull page writes for a column without building its value is the same bytes as
    /// the value built and written, for every kind; a json column that is not one JSON value is
    /// `null` either way.
    @Test("writing a column's wire form directly gives the bytes of its wire value written")
    func directWrite() throws {
        let codec = FieldCodec(ContractRegistry.self)
        let columns: [(FieldKind, ColumnValue)] = [
            (.json, .text(CanonicalJSON.text(.object(["b": .array([.int(1), .double(2.5), .string("é\n\"x\"")]), "a": .bool(true), "c": .null])))),
            (.json, .text(#""plain""#)), (.json, .text("3")), (.json, .text("not json")), (.json, .text(#"{"a":1} trailing"#)),
            (.json, .text("")), (.json, .null),
            (.list(.string), .text(CanonicalJSON.text(.array([.string("a"), .string("b/c")])))), (.list(.int), .text("[1,")),
            (.timestamp, .integer(1_769_846_400_123)), (.timestamp, .integer(-1)), (.int, .integer(-42)), (.int, .real(3.0)),
            (.double, .real(0.1)), (.double, .integer(2)), (.bool, .integer(1)), (.bool, .integer(0)), (.string, .text("tab\there")),
            (.id, .text("u-1")), (.uuid, .text("9b2f3c1e-0000-4000-8000-000000000001")), (.date, .text("2026-01-31")),
            (.bytes, .blob(.init([0, 1, 2, 255]))), (.string, .integer(7)),
        ]
        for (kind, column) in columns {
            var direct = JSONWriter()
            codec.writeWire(column, kind: kind, into: &direct)
            var built = JSONWriter()
            built.value(codec.wireValue(column, kind: kind))
            #expect(direct.bytes == built.bytes, "\(kind) \(column): \(String(decoding: direct.bytes, as: UTF8.self))")
        }
    }
}
