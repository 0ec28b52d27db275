import ContractRuntime
import Contracts
import Foundation
import SyncProtocol
import Testing

/// `GET /sync/v1/pull`: the exact JSON of one page (docs/openapi.yaml).
@Suite("Pull wire shape")
struct PullShapeTests {
    static let cursor = SyncCursor(scopeKey: "progress:user:u-1", sequence: 42).encoded

    static let pageJSON = """
        {
          "cursor": "\(cursor)",
          "has_more": true,
          "upserts": {
            "Unit": [{"id": "u-1", "title": "Fractions", "position": 1}],
            "Lesson": [{"id": "l-1", "unit_id": "u-1", "duration": 12.5}, {"id": "l-2", "unit_id": "u-1", "duration": 8}]
          },
          "deletes": {"Lesson": ["l-9"], "Asset": ["a-1", "a-2"]},
          "last_seq": 17
        }
        """

    static let page = PullResponse(
        cursor: cursor, hasMore: true,
        upserts: [
            "Unit": [.object(["id": .string("u-1"), "title": .string("Fractions"), "position": .int(1)])],
            "Lesson": [
                .object(["id": .string("l-1"), "unit_id": .string("u-1"), "duration": .double(12.5)]),
                .object(["id": .string("l-2"), "unit_id": .string("u-1"), "duration": .int(8)]),
            ],
        ],
        deletes: ["Lesson": ["l-9"], "Asset": ["a-1", "a-2"]], lastSeq: 17
    )

    @Test("A page is cursor, has_more, upserts, deletes and last_seq")
    func page() throws {
        try expectWireShape(Self.page, is: Self.pageJSON)
        #expect(
            try WireJSON.keys(WireJSON.encoded(Self.page)) == ["cursor", "has_more", "upserts", "deletes", "last_seq"]
        )
    }

    @Test("An empty last page still carries every key, with empty objects")
    func emptyPage() throws {
        try expectWireShape(
            PullResponse(cursor: Self.cursor, hasMore: false, upserts: [:], deletes: [:], lastSeq: 0),
            is: #"{"cursor": "\#(Self.cursor)", "has_more": false, "upserts": {}, "deletes": {}, "last_seq": 0}"#
        )
    }

    @Test("A page without a required key is refused", arguments: ["cursor", "has_more", "upserts", "deletes", "last_seq"])
    func missingKey(_ key: String) throws {
        let literal = try WireJSON.removing(key, from: Self.pageJSON)
        #expect(throws: DecodingError.self) { try WireJSON.decode(PullResponse.self, from: literal) }
    }

    @Test(
        "Wrongly typed values are refused",
        arguments: [
            ("has_more", JSONValue.string("true")), ("has_more", .int(1)), ("last_seq", .string("17")),
            ("upserts", .array([])), ("deletes", .object(["Lesson": .array([.int(9)])])), ("cursor", .int(42)),
        ])
    func wronglyTypedValue(_ key: String, _ value: JSONValue) throws {
        let literal = try WireJSON.replacing(key, with: value, in: Self.pageJSON)
        #expect(throws: DecodingError.self) { try WireJSON.decode(PullResponse.self, from: literal) }
    }

    @Test("A device reads a page in one pass (PullResponse(json:)) into what JSONDecoder reads")
    func onePassReader() throws {
        let expected = try WireJSON.decode(PullResponse.self, from: Self.pageJSON)
        #expect(try PullResponse(json: Data(Self.pageJSON.utf8)) == expected)
        #expect(try PullResponse(json: JSONEncoder().encode(Self.page)) == expected)
        let empty = #"{"cursor": "c", "has_more": false, "upserts": {}, "deletes": {}, "last_seq": 0}"#
        #expect(try PullResponse(json: Data(empty.utf8)) == PullResponse(cursor: "c", hasMore: false, upserts: [:], deletes: [:], lastSeq: 0))
    }

    @Test(
        "The one-pass reader refuses what JSONDecoder refuses",
        arguments: [
            ("has_more", JSONValue.string("true")), ("has_more", .int(1)), ("last_seq", .string("17")), ("last_seq", .double(1.5)),
            ("upserts", .array([])), ("upserts", .object(["Unit": .object([:])])), ("deletes", .object(["Lesson": .array([.int(9)])])),
            ("cursor", .int(42)),
        ])
    func onePassReaderRefuses(_ key: String, _ value: JSONValue) throws {
        let literal = try WireJSON.replacing(key, with: value, in: Self.pageJSON)
        #expect(throws: DecodingError.self) { try WireJSON.decode(PullResponse.self, from: literal) }
        #expect(throws: PullResponse.JSONFailure.self) { try PullResponse(json: Data(literal.utf8)) }
    }

    @Test("The one-pass reader refuses a page without a required key, and what is not a page")
    func onePassReaderRefusesMissing() throws {
        for missing in ["cursor", "has_more", "upserts", "deletes", "last_seq"] {
            let without = try WireJSON.removing(missing, from: Self.pageJSON)
            #expect(throws: PullResponse.JSONFailure.self) { try PullResponse(json: Data(without.utf8)) }
        }
        #expect(throws: PullResponse.JSONFailure.self) { try PullResponse(json: Data("[]".utf8)) }
        #expect(throws: PullResponse.JSONFailure.self) { try PullResponse(json: Data(Self.pageJSON.dropLast().utf8)) }
    }

    @Test("The cursor in a page is the opaque text the server made, read back unchanged")
    func cursorIsOpaqueText() throws {
        let decoded = try WireJSON.decode(PullResponse.self, from: Self.pageJSON)
        #expect(try SyncCursor(encoded: decoded.cursor) == SyncCursor(scopeKey: "progress:user:u-1", sequence: 42))
    }
}
