import ContractRuntime
import EngineTestContracts
import Foundation
import GRDB
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncClient

/// ``PullPageDecoder`` reads a page's bytes straight into column values; what it stores must be
/// exactly what the parsed page (``PullResponse/init(json:)`` then ``OfflineStore/prepare(_:)``)
/// stores, and it must refuse what that refuses. On the engines' own contracts (`Profile` and
/// `Activity`, both of the user scope).
@Suite(.blockingWork) struct PullPageDecoderTests {
    /// Rows in every way a server (or a newer one) may write them: keys in another order, an
    /// escaped key, a key given twice, unknown keys, missing fields (defaults), explicit nulls,
    /// an upper-case UUID, a JSON answer, with and without `_server_version`; a contract this
    /// build does not know; deletes.
    static let page = #"""
        {"cursor":"c-7","deletes":{"Profile":["p-gone"],"Unknown":["x"]},"has_more":true,"last_seq":12,
         "upserts":{
          "Profile":[
            {"_server_version":3,"average_view_seconds":2.5,"display_name":"Ada","id":"p-1","member_since":"2026-01-30","notes_viewed":4,"preferences":{"choices":[1,2],"text":"a \"quoted\" answer"},"theme":"dark","updated_at":"2026-01-31T08:00:00.000Z"},
            {"updated_at":"2026-01-31T09:00:00.000Z","id":"p-2","th\u0065me":"light","display_name":"Bo","last_active_on":null,"future_field":{"a":[1,2]}},
            {"id":"p-3","display_name":"Cy","theme":"dark","theme":"system","updated_at":"2026-01-31T10:00:00.000Z","time_zone":"Europe/Berlin","last_active_on":"2026-01-30"}
          ],
          "FutureThing":[{"id":"f-1"}],
          "Activity":[
            {"_server_version":1,"board_id":"b-1","digest":"AQID","duration_ms":1234,"happened_at":"2026-01-31T08:00:00.125Z","happened_on":"2026-01-31","id":"6F1C7E0A-2B3C-4D5E-8F90-A1B2C3D4E5F6","subject_id":"c-1","succeeded":true,"verb":"viewed"}
          ]}}
        """#

    static let tables = ["profiles", "activities"]

    /// Every row of the tables, as text, in id order.
    static func contents(_ test: TestStore) throws -> [String] {
        try test.raw { db in
            try tables.flatMap { table in
                try Row.fetchAll(db, sql: "SELECT * FROM \(table) ORDER BY id").map { "\(table): \($0)" }
            }
        }
    }

    @Test func aPageReadFromItsBytesIsStoredAsTheParsedPageIs() async throws {
        let body = Data(Self.page.utf8)
        let (decodedStore, parsedStore) = (try TestStore.engine(), try TestStore.engine())
        for test in [decodedStore, parsedStore] {
            // A row the page deletes.
            _ = try test.store.applyServerChanges(
                ServerChanges(upserts: [
                    "Profile": [
                        .object([
                            "id": .string("p-gone"), "display_name": .string("Gone"), "updated_at": .string("2026-01-30T08:00:00.000Z"),
                        ])
                    ]
                ]))
        }

        let decoded = try PullPageDecoder.decode(body, scopeKey: "user", store: decodedStore.store)
        #expect(decoded.cursor == "c-7")
        #expect(decoded.hasMore)
        #expect(decoded.changes.rowCount == 7)
        let decodedReport = try decodedStore.store.applyServerChanges(pages: [decoded.changes])

        let parsed = try PullResponse(json: body)
        let parsedReport = try parsedStore.store.applyServerChanges(ServerChanges(pull: parsed, scopeKey: "user"))

        #expect(decodedReport == [parsedReport])
        #expect(parsedReport.upserted == ["Profile": 3, "Activity": 1])
        #expect(parsedReport.deleted == ["Profile": 1])
        #expect(parsedReport.unknownContracts.sorted() == ["FutureThing", "Unknown"])
        let stored = try Self.contents(decodedStore)
        #expect(stored == (try Self.contents(parsedStore)))
        #expect(stored.count == 4)
        #expect(try decodedStore.store.cursor(forScope: "user") == "c-7")
    }

    @Test func aRowThatDoesNotFitRefusesThePageAsTheParsedPageDoes() async throws {
        let body = Data(
            #"{"cursor":"c-1","deletes":{},"has_more":false,"last_seq":1,"upserts":{"Profile":[{"id":"p-1","display_name":"Ada","last_active_on":"yesterday","updated_at":"2026-01-31T08:00:00.000Z"},7]}}"#
                .utf8
        )
        let test = try TestStore.engine()
        let decoded = try PullPageDecoder.decode(body, scopeKey: "user", store: test.store)
        var decodedError: OfflineStoreError?
        do { _ = try test.store.applyServerChanges(pages: [decoded.changes]) } catch { decodedError = error }
        let parsed = try PullResponse(json: body)
        var parsedError: OfflineStoreError?
        do { _ = try test.store.applyServerChanges(ServerChanges(pull: parsed, scopeKey: "user")) } catch { parsedError = error }
        #expect(decodedError != nil)
        #expect(decodedError == parsedError)
        #expect(try test.store.cursor(forScope: "user") == nil)
        #expect(try Self.contents(test).isEmpty)
    }

    @Test func aBodyThatIsNotAPullPageIsRefused() throws {
        let test = try TestStore.engine()
        for text in [
            "", "[]", #"{"cursor":"c"}"#, #"{"cursor":"c","deletes":{},"has_more":true,"last_seq":1,"upserts":{"Profile":{}}}"#,
            #"{"cursor":"c","deletes":{},"has_more":true,"last_seq":1,"upserts":{"Profile":[{"id":"a"]}}"#,
            #"{"cursor":"c","deletes":{},"has_more":true,"last_seq":1,"upserts":{}} trailing"#,
        ] {
            #expect(throws: PullPageDecoder.FormatError.self, "\(text)") {
                try PullPageDecoder.decode(Data(text.utf8), scopeKey: "user", store: test.store)
            }
        }
        #expect(PullPageDecoder.peek(Data("not json".utf8)) == nil)
        let peeked = PullPageDecoder.peek(Data(Self.page.utf8))
        #expect(peeked?.cursor == "c-7")
        #expect(peeked?.hasMore == true)
    }
}
