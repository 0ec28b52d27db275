import Foundation
import SyncProtocol
import Testing

@Suite struct LiveEventTests {
    static let events: [LiveEvent] = [
        .hello(heartbeatMilliseconds: 15_000), .change(scope: "ops:team:t-1", sequence: 42), .change(scope: "a \"quoted\" key\n", sequence: 0),
        .resync, .bye(reason: .replaced), .bye(reason: LiveCloseReason(rawValue: "a-newer-reason")),
    ]

    @Test("every event reads back from its wire form, whatever the cuts between the bytes")
    func roundTripInAnyCuts() throws {
        let bytes = Array((Self.events.map(\.serverSentEvent).joined() + LiveEvent.heartbeat).utf8)
        for cut in [1, 2, 3, 7, 64, bytes.count] {
            var parser = ServerSentEventParser()
            var read: [LiveEvent] = []
            var start = 0
            while start < bytes.count {
                let end = min(start + cut, bytes.count)
                read += try parser.feed(bytes[start..<end]).compactMap(LiveEvent.init)
                start = end
            }
            #expect(read == Self.events, "cut every \(cut) bytes")
        }
    }

    @Test("the parser follows the event-stream rules: CR, LF and CRLF, comments, multi-line data, unknown fields")
    func streamRules() throws {
        var parser = ServerSentEventParser()
        let text =
            ": comment\r\nevent: change\r\ndata: {\"scope\":\r\n"
            + "data:\"s\",\"seq\":1}\rid: 7\rretry: 10\r\r" + "data: no name\n\n" + "event: empty\n\n"
        let events = try parser.feed(Array(text.utf8))
        #expect(
            events == [ServerSentEvent(name: "change", data: "{\"scope\":\n\"s\",\"seq\":1}"), ServerSentEvent(name: "message", data: "no name")])
        // Data lines join with line feeds, which JSON reads as white space.
        #expect(events.compactMap(LiveEvent.init) == [.change(scope: "s", sequence: 1)])
    }

    @Test("events this version does not know, or with data that is not theirs, are ignored")
    func unknownEvents() {
        #expect(LiveEvent(ServerSentEvent(name: "future", data: "{}")) == nil)
        #expect(LiveEvent(ServerSentEvent(name: "change", data: "{\"scope\":1,\"seq\":1}")) == nil)
        #expect(LiveEvent(ServerSentEvent(name: "hello", data: "{\"heartbeat_ms\":0}")) == nil)
        #expect(LiveEvent(ServerSentEvent(name: "hello", data: "not json")) == nil)
    }

    @Test("a line longer than the limit fails the stream instead of growing without bound")
    func lineLimit() {
        var parser = ServerSentEventParser()
        #expect(throws: ServerSentEventParser.Failure.self) {
            _ = try parser.feed(Array(repeating: UInt8(ascii: "x"), count: ServerSentEventParser.maximumLineBytes + 1))
        }
    }
}
