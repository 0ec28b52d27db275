import ContractRuntime
import Contracts
import Testing

@testable import SyncServer

/// `json` and `list` columns reach the wire through the shared `JSONParser` parser.
@Suite struct RowCodecJSONColumnTests {
    @Test("list and json columns go through it to the wire")
    func columns() throws {
        let tags = try #require(ContractRegistry.unit.field(named: "tags"))
        #expect(RowCodec.wireValue(.text(#"["a","b"]"#), for: tags) == .array([.string("a"), .string("b")]))
        let body = try #require(ContractRegistry.lesson.field(named: "body"))
        #expect(RowCodec.wireValue(.text(#"{"k":[1,{"x":null}]}"#), for: body) == .object(["k": .array([.int(1), .object(["x": .null])])]))
        #expect(RowCodec.wireValue(.text("not json"), for: body) == .null)
    }
}
