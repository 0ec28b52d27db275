import Contracts
import Foundation
import SyncProtocol
import Testing

@Suite("Cursor")
struct CursorTests {
    @Test("a cursor round-trips through its opaque text and refuses garbage")
    func roundTrip() throws {
        let cursor = SyncCursor(scopeKey: "progress:user:u-1", sequence: 42)
        #expect(try SyncCursor(encoded: cursor.encoded) == cursor)
        #expect(throws: SyncCursor.DecodingFailure.malformed) { try SyncCursor(encoded: "not a cursor") }
    }
}
